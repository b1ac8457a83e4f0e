"""The Python API: what the command line does, as functions returning dicts and DataFrames.

Usable from a plain script (no ``if __name__ == "__main__":`` guard needed: sweeps run
their worker as a fresh interpreter) and from a notebook::

    import paradnn

    paradnn.describe("fc", "layer_4-node_512-input_2000-output_1000-bs_256")["flops_model"]
    paradnn.measure("fc", "layer_2-node_256-input_2000-output_1000-bs_64", max_seconds=2)["examples_per_sec"]
    df = paradnn.sweep("fc", preset="smoke", store="outputs/mine.sqlite")
    paradnn.load("outputs/mine.sqlite", family="fc")

Bad input raises :class:`paradnn.config.ConfigError` naming the field and what is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path


def describe(family: str, label: str, dtype: str = "float32") -> dict:
    """Parameters, FLOPs and bytes of one training step (whole batch); nothing is allocated."""
    from paradnn.families import parse_label
    from paradnn.platform import Target
    from paradnn.record import describe_config
    from paradnn.sweeps import default_memory_budget

    return describe_config(parse_label(family, label), dtype, memory_budget=default_memory_budget(Target()))


def measure(family: str, label: str, *, dtype: str = "float32", xla: object = "auto", platform: str = "cpu",
            max_seconds: float = 10.0, framework: str = "tensorflow", input: str = "device",
            devices: int = 1) -> dict:  # fmt: skip
    """Time one configuration's training step in this process; the full record (as ``paradnn measure --json``).

    Keras runs one backend per process: ``framework="jax"`` works in a process that has
    not used TensorFlow's Keras yet (else ConfigError; :func:`sweep` runs any framework).
    """
    from paradnn import ceilings as ceil
    from paradnn import frameworks
    from paradnn import platform as plat
    from paradnn.families import parse_label
    from paradnn.harness import RunSettings
    from paradnn.notebook import xla_setting
    from paradnn.record import measure_config
    from paradnn.sweeps import SweepOptions, check_settings

    config = parse_label(family, label)
    target = plat.parse_target(platform)
    settings = RunSettings(dtype=dtype, xla=xla_setting(xla), framework=framework, input=input, devices=devices,
                           device=target.tf_device, max_seconds=max_seconds)  # fmt: skip
    check_settings([config], SweepOptions(settings=settings, target=target))
    frameworks.activate(framework)
    info = plat.describe(target)
    return measure_config(config, settings, target, info, ceil.ceilings(target, info))


def sweep(family: str, *, preset: str = "smoke", store: str | Path = "outputs/results.sqlite",
          overrides: Mapping[str, Iterable] | None = None, dtype: str = "float32", xla: object = "auto",
          platform: str = "cpu", max_minutes: float | None = None, max_seconds: float = 3.0,
          progress: bool = True, framework: str = "tensorflow", input: str = "device", devices: int = 1):  # fmt: skip
    """Measure a preset's grid (with ``overrides``) that the store lacks; returns the grid's rows as a DataFrame."""
    from paradnn.harness import RunSettings
    from paradnn.notebook import xla_setting
    from paradnn.platform import parse_target
    from paradnn.space import expand
    from paradnn.store import Store
    from paradnn.sweeps import SilentProgress, SweepOptions, run_sweep

    configs = expand(family, preset, overrides)
    target = parse_target(platform)
    settings = RunSettings(dtype=dtype, xla=xla_setting(xla), framework=framework, input=input, devices=devices,
                           device=target.tf_device, max_seconds=max_seconds)  # fmt: skip
    options = SweepOptions(settings=settings, target=target, max_minutes=max_minutes)
    with Store(store) as s:
        run_sweep(configs, s, options, progress=None if progress else SilentProgress)
        df = s.results(family=family, platform=target.id)
    labels = {c.label for c in configs}
    mine = df["label"].isin(labels) & (df["dtype"] == dtype) & (df["framework"] == framework)
    mine &= (df["input_mode"] == input) & (df["devices"] == devices)
    return df[mine].reset_index(drop=True)


def load(store: str | Path, family: str | None = None, platform: str | None = None, state: str | None = None):
    """Every result in a store as a DataFrame (JSON columns decoded), optionally filtered."""
    from paradnn.store import Store

    with Store(store, create=False, readonly=True) as s:
        return s.results(family=family, platform=platform, state=state)
