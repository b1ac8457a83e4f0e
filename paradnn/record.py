"""One flat record per configuration: what it is (``describe``) and how it ran (``measure``).

These dicts are what the CLI prints as JSON and what the store keeps, so their keys are
a stable contract (see the README's command-line section).
"""

from __future__ import annotations

import math

from paradnn import counting
from paradnn.config import Config
from paradnn.harness import Measurement, RunSettings, measure
from paradnn.platform import Target, compute_dtype, peak

# Bytes per element of activations / of weights under each dtype policy.
_BYTES = {"float32": (4, 4), "bfloat16": (2, 2), "mixed_bfloat16": (2, 4), "mixed_float16": (2, 4)}


def describe_config(config: Config, policy: str = "float32", graph=None, trace: bool = True) -> dict:
    """Sizes and FLOP counts of one training step (whole batch) of ``config``.

    ``graph`` is a :class:`paradnn.training.GraphCount`; when it is omitted and ``trace``
    is set, the model is built and its step traced (no step is executed).
    """
    if graph is None and trace:
        from paradnn.training import Trainer, count_graph_flops

        graph = count_graph_flops(Trainer(config, policy, xla=False))
    compute_bytes, param_bytes = _BYTES[policy]
    return {
        "family": config.family,
        "label": config.label,
        **config.hyperparameters(),
        "params": counting.count_params(config),
        "flops_model": counting.flops_model(config),
        "flops_graph": graph.flops if graph else None,
        "uncounted_ops": graph.uncounted_ops if graph else [],
        "bytes_estimate": counting.bytes_estimate(config, compute_bytes, param_bytes),
    }


def derived(record: dict, peak_flops: float) -> dict:
    """Throughput and utilisation from the median step time and ``flops_model``."""
    step = record.get("step_time_s")
    if not step or record.get("state") != "ok":
        return {"examples_per_sec": None, "flops_per_sec": None, "utilization": None}
    flops_per_sec = record["flops_model"] / step
    return {
        "examples_per_sec": record["batch"] / step,
        "flops_per_sec": flops_per_sec,
        "utilization": flops_per_sec / peak_flops if peak_flops and math.isfinite(peak_flops) else None,
    }


def measure_config(config: Config, settings: RunSettings, target: Target, info: dict, ceilings: dict) -> dict:
    """Measure ``config`` on ``target`` and return the full record."""
    m: Measurement = measure(config, settings)
    record = describe_config(config, settings.dtype, graph=m.graph, trace=False)
    peak_flops, peak_source = peak(info, ceilings, settings.dtype)
    record.update(
        {
            "dtype": settings.dtype,
            "compute_dtype": compute_dtype(settings.dtype),
            "xla": settings.xla,
            "platform": target.id,
            "device_name": info["name"],
            **m.as_dict(),
            "peak_flops": peak_flops,
            "peak_source": peak_source,
        }
    )
    record.update(derived(record, peak_flops))
    return record
