"""The scorecard report: platforms and frameworks on Dai & Berleant's qualitative metrics, measured where they can be.

The seven principles as an audit of this store, the twelve hardware metrics per platform,
the paper's Table I as printed, and the seven framework metrics with a measured speed of
JAX and PyTorch through Keras 3 against TensorFlow on identical models, compiled and uncompiled.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from paradnn.analysis.results import Results
from paradnn.sections import common
from paradnn.sections.common import caption, ensure_measured, ensure_reference, rerun_sample, show, table
from paradnn.store import Store


@dataclass
class Parameters(common.Parameters):
    """The scorecard report's parameters, as its notebook declares them (see the notebook for each one's help)."""

    platform: str
    framework_families: list
    preset: str
    framework_overrides: dict
    rerun_count: int
    reference_dir: str


def measure(p: Parameters) -> list[str]:
    """The original study's data imported where missing; ``p.framework_families`` measured under every
    installed framework, compiled and uncompiled (:func:`framework_runs`), in one sweep of interleaved
    rounds (the framework row); ``p.rerun_count`` configurations measured once more (the
    repeatability principle). Returns the lines of each step."""
    lines = [ensure_reference(p.store, p.reference_dir)]
    if p.measure_missing:
        runs, missing = framework_runs()
        lines += missing
        lines += ensure_measured(
            p.store,
            p.framework_families,
            preset=p.preset,
            overrides=p.framework_overrides,
            platform=p.platform,
            variants=runs,
            budget_minutes=p.budget_minutes,
            max_seconds=p.max_seconds,
            lanes=p.lanes,
        )
    return lines + rerun_sample(p.store, p.platform, p.rerun_count, measure_missing=p.measure_missing, max_seconds=p.max_seconds)


def framework_runs() -> tuple[list[dict], list[str]]:
    """The runs of the framework comparison: each installed framework compiled (XLA, JAX's jit,
    torch.compile) and uncompiled where it can run so (JAX always compiles); and a line for each
    framework that is not installed, with how to install it."""
    from paradnn.engine import frameworks

    runs, missing = [], []
    for framework in frameworks.FRAMEWORKS:
        if not frameworks.installed(framework):
            missing.append(f"{frameworks.TITLES[framework]} not measured: not installed ({frameworks.INSTALL[framework]})")
            continue
        runs += [{"framework": framework, "xla": True}]
        runs += [] if framework in frameworks.ALWAYS_COMPILED else [{"framework": framework, "xla": False}]
    return runs, missing


def rows(p: Parameters) -> tuple[Results, pd.DataFrame]:
    """Every row of the store (with what bound each step, paradnn.store.bounds) and its platforms;
    prints how many rows per platform and framework."""
    with Store(p.store, readonly=True) as db:
        platforms = db.platforms()
    results = Results.load(p.store)
    print(f"{len(results)} rows: {results.frame.groupby(['platform', 'framework'], dropna=False).size().to_dict()}")
    return results, platforms


def principles_section(results: Results) -> None:
    """The seven principles as an audit of this store: a checklist and its sentence."""
    from paradnn.analysis import scorecard

    audit = scorecard.principles_audit(results)
    table(scorecard.checklist(audit))
    caption(scorecard.audit_sentence(audit))


def hardware_section(results: Results, platforms: pd.DataFrame) -> None:
    """The twelve hardware metrics per platform: values and where each comes from."""
    from paradnn.analysis import plots, scorecard

    cells = scorecard.hardware_metrics(results, platforms)
    show(plots.scorecard_matrix(cells, "Dai & Berleant's 12 hardware metrics per platform, and where each value comes from"))
    counts = cells["evidence"].value_counts()
    caption(
        f"The paper found ASICs ahead of GPUs in computing performance (High against Moderate), rating classes in words; "
        f"here {counts.get('measured', 0)} of {len(cells)} cells are measured, {counts.get('datasheet', 0)} come from a "
        f"datasheet, {counts.get('not measurable here', 0)} cannot be measured here (no power reading, single-device "
        "runs) and the rest are the paper's class ratings."
    )
    table(cells.pivot(index="metric", columns="platform", values="value"))
    table(cells[["metric", "platform", "source"]].pivot(index="metric", columns="platform", values="source"))


def paper_table_section() -> None:
    """The paper's Table I as printed, and where it contradicts itself."""
    from paradnn.analysis import scorecard

    table(scorecard.hardware_table())
    for note in scorecard.paper()["inconsistencies"]:
        print("-", note)


def framework_section(results: Results) -> None:
    """The seven framework metrics with what was measured, and each framework's speed against TensorFlow's."""
    from IPython.display import display

    from paradnn.analysis import plots, scorecard

    display(scorecard.highlight_measured(scorecard.framework_table_with_measured(results)))
    speeds = scorecard.framework_speed(results)
    if speeds.empty:
        print("No configuration was measured under TensorFlow and another framework at one setting.")
        return
    show(plots.framework_speed_bars(speeds, "JAX and PyTorch through Keras 3 against TensorFlow on identical models"))
    table(speeds.drop(columns="held"), 3)
    caption(speed_sentence(speeds))


def speed_sentence(speeds: pd.DataFrame) -> str:
    """The framework comparison in a sentence computed from its rows."""
    from paradnn.analysis.scorecard import TITLES

    parts = [
        f"{TITLES.get(s.target, s.target)} {s.mode} {s.geomean:.2f}x ({s.low:.2f}-{s.high:.2f}; {s.family} on "
        f"{s.platform}, n = {s.n})"
        for s in speeds.itertuples()
    ]
    return (
        "The paper found frameworks differ in licence, languages, devices and tested networks, and compared no "
        "speeds; here the same Keras 3 models train under each framework (so each framework's number includes "
        "what Keras costs on it; docs/performance.md measures that cost against plain PyTorch), each "
        "configuration's frameworks timed one after another in shuffled rounds of one sweep. Throughput over "
        "TensorFlow's at the same setting: " + "; ".join(parts) + "."
    )
