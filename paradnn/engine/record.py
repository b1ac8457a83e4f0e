"""One flat record per configuration: what it is (``describe``) and how it ran (``measure``).

These dicts are what the CLI prints as JSON and what the store keeps, so their keys are
a stable contract (see the README's command-line section).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from paradnn import counting
from paradnn.config import compute_dtype, gigabytes
from paradnn.engine import ceilings as ceil
from paradnn.engine.frameworks import check_framework
from paradnn.engine.protocol import Measurement, RunSettings
from paradnn.families import Config, family_of
from paradnn.platform import Target, peak
from paradnn.settings import ENGINE_DEFAULTS, STEP_FIELDS, columns
from paradnn.vocabulary import OK


def describe_config(
    config: Config, policy: str = ENGINE_DEFAULTS["dtype"], graph=None, trace: bool = True, memory_budget: float | None = None
) -> dict:
    """Sizes and FLOP counts of one training step (whole batch) of ``config``.

    Everything but ``flops_graph`` is analytic: nothing is built or allocated. ``graph``
    is a :class:`paradnn.engine.graphcount.GraphCount`; when it is omitted and ``trace`` is set, the
    model is built and its step traced with symbolic data (the batch is never allocated),
    unless its weights and optimizer slots alone would exceed ``memory_budget`` bytes (or
    TensorFlow cannot trace it, e.g. a whole-batch tensor past int32 shapes), in which case
    ``flops_graph`` is None and ``flops_graph_note`` says why.
    """
    family = family_of(config)
    params = counting.count_params(config)
    note = ""
    if graph is None and trace:
        weights = counting.BYTES_PER_PARAM * params
        if memory_budget is not None and weights > memory_budget:
            note = f"not traced: weights and optimizer slots need {gigabytes(weights)} > budget {gigabytes(memory_budget)}"
        else:
            from paradnn.engine.graphcount import count_graph_flops
            from paradnn.engine.training import Trainer

            try:
                graph = count_graph_flops(Trainer(config, policy, xla=False).trace().graph)
            except ValueError as exc:  # e.g. a whole-batch tensor past TensorFlow's int32 shapes (a huge RNN batch)
                note = f"not traced: TensorFlow cannot trace this step ({str(exc).strip().splitlines()[-1][:200]})"
    record = {
        "family": family.name,
        "family_version": family.version,
        "label": config.label,
        **config.hyperparameters(),
        "params": params,
        "flops_model": counting.flops_model(config),
        "flops_graph": graph.flops if graph else None,
        "uncounted_ops": graph.uncounted_ops if graph else [],
        "bytes_estimate": counting.bytes_estimate(config, policy),
        "memory_estimate_bytes": counting.memory_estimate(config, policy),
    }
    if note:
        record["flops_graph_note"] = note
    return record


def derived(record: dict, peak_flops: float) -> dict:
    """Throughput and utilisation from the median step time and ``flops_model``."""
    step = record.get("step_time_s")
    if not step or record.get("state") != OK:
        return {"examples_per_sec": None, "flops_per_sec": None, "utilization": None, "examples_per_joule": None}
    flops_per_sec = record["flops_model"] / step
    energy = record.get("energy_per_step_j")
    return {
        "examples_per_sec": record["batch"] / step,
        "flops_per_sec": flops_per_sec,
        "utilization": flops_per_sec / peak_flops if peak_flops and math.isfinite(peak_flops) else None,
        "examples_per_joule": record["batch"] / energy if energy else None,
    }


def settings_fields(settings: RunSettings, config: Config) -> dict:
    """The run settings every record of ``config`` carries (part of its identity, see :mod:`paradnn.identity`),
    and each replica's share of the batch."""
    declared = columns({name: getattr(settings, name) for name in STEP_FIELDS})  # by store column
    return {
        **declared,
        "compute_dtype": compute_dtype(settings.dtype),
        "replica_batch": config.batch // settings.devices,
        "max_seconds": settings.max_seconds,
    }


def measure(config: Config, settings: RunSettings, count_graph: bool = True) -> Measurement:
    """Time ``config`` under ``settings`` with the backend they call for.

    JAX runs go to :mod:`paradnn.engine.jaxstep`, PyTorch runs to :mod:`paradnn.engine.torchstep`,
    data-parallel runs (``devices`` above 1) to :mod:`paradnn.engine.replicas`, everything else to
    TensorFlow's single-device step
    (:mod:`paradnn.engine.training`). The timing protocol itself knows none of them.
    """
    if settings.framework == "jax":
        from paradnn.engine import jaxstep as backend
    elif settings.framework == "torch":
        from paradnn.engine import torchstep as backend
    elif settings.devices > 1:
        from paradnn.engine import replicas as backend
    else:
        from paradnn.engine import training as backend
    return backend.measure(config, settings, count_graph)


def measure_config(config: Config, settings: RunSettings, target: Target, info: dict, ceilings: dict) -> dict:
    """Measure ``config`` on ``target`` and return the full record.

    ``settings.xla`` None is ``--xla auto``: the family's XLA choice for this platform
    (probed once, cached with the ceilings) is used, and the record says so (``xla_auto``).
    """
    check_framework(config.family, settings.framework)
    auto = settings.xla is None
    if auto:
        from dataclasses import replace

        settings = replace(settings, xla=ceil.xla_choice(target, info, config.family, settings.dtype)["xla"])
    m: Measurement = measure(config, settings)
    record = describe_config(config, settings.dtype, graph=m.graph, trace=False)
    peak_flops, peak_source = peak(info, ceilings, settings.dtype)
    record.update(
        {
            **settings_fields(settings, config),
            "xla_auto": auto,
            **target.fields(),
            "device_name": info["name"],
            **m.as_dict(),
            "peak_flops": peak_flops,
            "peak_source": peak_source,
        }
    )
    record.update(derived(record, peak_flops))
    return settle_peak(record, info, ceilings, settings.dtype, lambda dtype: ceil.remeasure(target, info, ceilings, dtype))


def executed_flops_per_sec(record: dict) -> float | None:
    """FLOP/s of the operations the traced step executed (``flops_graph`` per step time), or None uncounted."""
    graph, step = record.get("flops_graph"), record.get("step_time_s")
    return graph / step if graph and step else None


def settle_peak(record: dict, info: dict, ceilings: dict, policy: str, remeasure: Callable[[str], dict]) -> dict:
    """A record whose model FLOP/s beat its measured ceiling: ``remeasure(dtype)`` the ceiling at
    once; if the record still wins, its own rate becomes the peak (``achieved:<label>``). A
    ceiling is a maximum, so no utilisation is above 100%. Datasheet peaks are left alone.

    The ceiling is measured again only when the FLOPs the step really executed (the traced
    graph's count, where there is one) beat it too. Model FLOPs follow the paper's convention
    (forward x 3), which counts work a step never does, such as the first layer's input
    gradient: a narrow FC step at a large batch "beats" the matmul ceiling through its count
    alone, and measuring the ceiling again cost 6-9 s a time without raising it (twice in
    every main job on an EPYC Zen 4). Such a row becomes its own peak at once."""
    rate = record.get("flops_per_sec") or 0.0
    if record.get("peak_source") != "measured" or not rate > (record.get("peak_flops") or 0.0):
        return record
    executed = executed_flops_per_sec(record)
    if executed is None or executed > record["peak_flops"]:
        peak_flops, source = peak(info, remeasure(compute_dtype(policy)), policy)
    else:
        peak_flops, source = record["peak_flops"], record["peak_source"]
    if rate > peak_flops:
        peak_flops, source = rate, f"achieved:{record['label']}"
    record.update(peak_flops=peak_flops, peak_source=source)
    record.update(derived(record, peak_flops))
    return record
