"""Helpers the notebooks call, so that notebooks stay narrative plus one-line calls.

``ensure_measured`` makes sure the store has the data a notebook needs (measuring what is
missing through the sweep runner, within a time budget); ``load`` reads it back as one
row per configuration and run setting; ``show`` and ``caption`` put a figure and its
sentence into the report.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from paradnn.config import ConfigError
from paradnn.store import Store


def setup() -> None:
    """Plot style and display options shared by every notebook."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    plt.rcParams.update({"figure.dpi": 90, "savefig.bbox": "tight"})
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.width", 160)
    pd.set_option("display.max_colwidth", None)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="seaborn")


def is_local(platform: str) -> bool:
    """True for a platform this machine can measure (``cpu``, ``cpu[threads=1]``, ``gpu:0``)."""
    from paradnn.platform import parse_target

    try:
        parse_target(platform)
        return True
    except ConfigError:
        return False


def canonical(platform: str) -> str:
    """The stored id of a platform (``cpu[threads:1]`` -> ``cpu[threads=1]``); others as given."""
    from paradnn.platform import parse_target

    return parse_target(platform).id if is_local(platform) else platform


def ensure_measured(
    store: str | Path,
    families: list[str],
    preset: str = "smoke",
    overrides: dict | None = None,
    dtype: str = "float32",
    xla: bool = True,
    platform: str = "cpu",
    measure_missing: bool = True,
    budget_minutes: float = 10.0,
    max_seconds: float = 2.0,
) -> list[str]:
    """Measure what the store lacks for ``families`` on a local ``platform``; returns a summary line.

    All families run in one sweep (one worker process), in the sweep's mixed order, so a
    budget that runs out leaves every family partly covered; the rest is measured on the
    next run (sweeps resume).
    """
    from paradnn.harness import RunSettings
    from paradnn.platform import parse_target
    from paradnn.space import expand
    from paradnn.sweep import SweepOptions, run_sweep

    if not measure_missing or not is_local(platform):
        return [f"{platform}: using the data in the store (measure_missing={measure_missing})"]
    target = parse_target(platform)
    configs = [c for family in families for c in expand(family, preset, (overrides or {}).get(family))]
    options = SweepOptions(
        settings=RunSettings(dtype=dtype, xla=xla, device=target.tf_device, max_seconds=max_seconds),
        target=target,
        max_minutes=budget_minutes,
    )
    with Store(store) as s:
        summary = run_sweep(configs, s, options, progress=_quiet_bar)
    return [f"{', '.join(families)} on {target.id}, {dtype}, XLA {'on' if xla else 'off'}: {summary.line()}"]


class _quiet_bar:  # noqa: N801 - stands in for tqdm
    """A progress bar that prints nothing (reports show a summary line instead)."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def load(
    store: str | Path,
    platform: str | None = None,
    families: list[str] | None = None,
    dtype: str | None = None,
    xla: bool | None = None,
) -> pd.DataFrame:
    """Results as one row per (platform, configuration, dtype, XLA): the latest attempt."""
    with Store(store) as s:
        df = s.results(platform=canonical(platform) if platform else None)
    if families:
        df = df[df["family"].isin(families)]
    if dtype:
        df = df[df["dtype"] == dtype]
    if xla is not None:
        df = df[df["xla"] == xla]
    keys = ["platform", "family", "label", "dtype", "xla"]
    return df.sort_values("id").drop_duplicates(keys, keep="last").reset_index(drop=True)


def show(fig) -> None:
    """Display a figure in the report and free it."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    display(fig)
    plt.close(fig)


def caption(text: str) -> None:
    """The sentence under a figure: what the paper found and what this data shows."""
    from IPython.display import Markdown, display

    display(Markdown(f"*{text}*"))
