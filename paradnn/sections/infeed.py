"""Input pipelines (the paper's Fig. 5): measured on host pipelines and shown beside the device-resident step.
Shared by the architecture and workloads reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from paradnn.analysis.results import Rows, results_of
from paradnn.sections.common import caption, ensure_measured, is_local, show

if TYPE_CHECKING:
    from paradnn.analysis.observations import Verdict


def measure_inputs(
    store: str | Path,
    families: list[str],
    inputs: list[str],
    *,
    preset: str,
    overrides: dict,
    platform: str,
    measure_missing: bool,
    budget_minutes: float,
    max_seconds: float,
    **run: object,
) -> list[str]:
    """Measure ``families`` fed by each host input pipeline in ``inputs`` on a local platform, the
    pipelines' runs in one sweep within ``budget_minutes`` (nothing, and no line, for an imported
    platform or ``measure_missing`` off); ``run`` holds further run settings (``xla``, ``dtype``).
    One round: each host-fed measurement already times its device-resident reference call by
    call beside it (the infeed share is their ratio), finer than rounds could."""
    if not measure_missing or not is_local(platform) or not families or not inputs:
        return []
    return ensure_measured(
        store,
        families,
        preset=preset,
        overrides=overrides,
        platform=platform,
        variants=[{"input": mode} for mode in inputs],
        budget_minutes=budget_minutes,
        rounds=1,
        max_seconds=max_seconds,
        **run,
    )


def fed_rows(results: Rows, inputs: list[str]) -> pd.DataFrame:
    """The host-fed rows of ``results`` (loaded with every input mode) that the infeed figure groups:
    those of a pipeline in ``inputs`` with a measured infeed share."""
    return results_of(results).with_value("infeed_share").where(input_mode=list(inputs)).frame


def infeed_plot_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Host-fed rows with the infeed share in percent and the box each falls in ("fc, host-prep")."""
    return rows.assign(infeed_percent=100 * rows["infeed_share"], pipeline=rows["family"] + ", " + rows["input_mode"])


def infeed_section(rows: pd.DataFrame, platform: str) -> Verdict:
    """Fig. 5 on this machine: the share of step time waiting for the input pipeline, by batch,
    family and pipeline; returns O4's verdict on the measured rows."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots

    verdict = obs.measured_infeed(rows, platform)
    if len(rows):
        show(
            plots.share_by_batch(
                infeed_plot_rows(rows),
                "infeed_percent",
                f"{platform}: share of step time waiting for the input pipeline, by family and pipeline",
                "share of step time (%)",
                hue="pipeline",
            )
        )
    caption(verdict.sentence)
    return verdict
