"""The workloads report: the paper's six real workloads among the parameterized models.

Throughput and what did not fit, how large the workloads are (Fig. 1), where they sit on
the roofline and where their time goes (Fig. 3), 16-bit arithmetic (Fig. 5 top), every
family on every platform (Fig. 11, O10) and their input pipelines (Fig. 5 bottom).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from paradnn.analysis.results import Results
from paradnn.sections import common
from paradnn.sections.common import NOT_PROFILED, caption, ensure_measured, is_local, load, show, table

if TYPE_CHECKING:
    from paradnn.analysis.observations import Verdict
    from paradnn.analysis.roofline import Ceilings


@dataclass
class Parameters(common.Parameters):
    """The workloads report's parameters, as its notebook declares them (see the notebook for each one's help)."""

    platform: str
    workloads: list
    preset: str
    overrides: dict
    dtype: str
    low_precision: str
    xla: bool
    profile_workloads: list
    infeed_workloads: list
    infeed_inputs: list
    infeed_overrides: dict
    parameter_preset: str


def measure(p: Parameters) -> list[str]:
    """Measure what the store lacks of ``p.workloads`` in ``p.dtype`` and ``p.low_precision``, in one
    sweep at ``p.xla``; returns the sweep's lines."""
    runs = [{"dtype": d} for d in [p.dtype] + ([p.low_precision] if p.low_precision else [])]
    return ensure_measured(
        p.store,
        p.workloads,
        preset=p.preset,
        overrides=p.overrides,
        variants=runs,
        xla=p.xla,
        platform=p.platform,
        measure_missing=p.measure_missing,
        budget_minutes=p.budget_minutes,
        max_seconds=p.max_seconds,
        lanes=p.lanes,
    )


def rows(p: Parameters) -> tuple[Results, Results, pd.DataFrame]:
    """The workloads' rows on the platform (every dtype), those in ``p.dtype``, and the store's
    platforms; prints what finished."""
    from paradnn.store import Store

    every = load(p.store, platform=p.platform, families=p.workloads, xla=p.xla)
    main = every.for_settings(dtype=p.dtype)
    with Store(p.store) as s:
        platforms = s.platforms()
    states = ", ".join(f"{n} {s}" for s, n in main.frame["state"].value_counts().items())
    print(f"{len(main)} workload configurations of {p.platform} in {p.dtype}, XLA {'on' if p.xla else 'off'}: {states}")
    return every, main, platforms


def throughput_section(main: Results, p: Parameters) -> None:
    """A throughput heatmap per workload with more than one configuration, and every row's outcome."""
    from paradnn.analysis import plots
    from paradnn.families import get as family

    for name in p.workloads:
        if len(main.where(family=name)) > 1:
            show(
                plots.heatmaps(
                    main,
                    name,
                    "examples_per_sec",
                    f"{family(name).title} throughput on {p.platform}, {p.dtype}",
                    "throughput (examples/s, log colour)",
                    log_color=True,
                    fmt="{:.3g}",
                )
            )
    table(main.frame[["family", "label", "state", "examples_per_sec", "utilization", "compile_time_s", "error"]], 4)


def sizes_section(preset: str) -> None:
    """Fig. 1: the trainable parameters of every grid of ``preset`` and of the real workloads."""
    from paradnn.analysis import plots
    from paradnn.analysis import workloads as wl

    sizes = wl.parameter_ranges(preset)
    show(plots.parameter_ranges(sizes, f"Trainable parameters of every workload ({preset} grids)"))
    ranges, models = sizes[sizes["kind"] == "range"], sizes[sizes["kind"] == "model"]
    caption(
        "The paper found ParaDnn's models span from about 10k to nearly a billion parameters, a wider range than the "
        f"real workloads; here the {preset} grids span {ranges['min'].min():.2g} to {ranges['max'].max():.3g} "
        f"parameters and the real models {models['max'].min():.2g} ({models.loc[models['max'].idxmin(), 'title']}) to "
        f"{models['max'].max():.3g} ({models.loc[models['max'].idxmax(), 'title']}). The ends differ from the paper's for "
        "two reasons: the grids here are Table 2 as printed, whose largest FC model (128 layers of 8,192 nodes, 8.6e9 "
        "parameters) fits no platform the paper measured, while its figure shows the models it ran; and the RNN "
        "vocabulary is read in thousands (the original scripts pass 1, 5, 9), so the smallest model here is an FC model, "
        "not a 10k-parameter RNN."
    )
    table(sizes, 0)


def roofline_part(main: Results, platforms: pd.DataFrame, p: Parameters) -> tuple[Ceilings | None, pd.DataFrame]:
    """Fig. 3: the measured workloads on the platform's roofline; its ceilings and the points."""
    from paradnn.analysis import plots
    from paradnn.analysis.roofline import ceilings_for, model_points

    ceilings = ceilings_for(platforms, p.platform, p.dtype)
    points = model_points(main)
    if ceilings is None or not len(points):
        print("No ceilings or no measured workloads for this platform: roofline skipped.")
        return ceilings, points
    show(plots.roofline(points, ceilings, f"Real workloads on the roofline of {p.platform} ({p.dtype})"))
    right = points[points["intensity"] >= ceilings.ridge]
    caption(
        "The paper found Transformer and ResNet-50 close to compute-bound on the TPU; here "
        f"{len(right)} of {len(points)} workloads lie right of the ridge ({ceilings.ridge:.0f} FLOPs/byte), reaching up "
        f"to {points['achieved_flops'].max() / ceilings.peak_flops:.0%} of the compute roof."
    )
    return ceilings, points


def op_breakdown_part(main: Results, ceilings: Ceilings | None, points: pd.DataFrame, p: Parameters) -> Verdict:
    """Fig. 3d: ``p.profile_workloads`` profiled op by op on this machine (their first finished
    configuration), and whether compute-bound models spend their time on memory-bound ops; nothing
    is profiled with ``p.measure_missing`` off (see :func:`paradnn.sections.architecture.op_breakdown_section`)."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.engine.profiler import op_breakdown
    from paradnn.families import parse_label

    breakdown = pd.DataFrame()
    ok = main.ok().frame
    picks = [ok[ok["family"] == w].iloc[0] for w in p.profile_workloads if (ok["family"] == w).any()]
    if picks and is_local(p.platform) and not p.measure_missing:
        print(NOT_PROFILED)
    elif picks and is_local(p.platform):
        breakdown = pd.concat([op_breakdown(parse_label(x["family"], x["label"]), p.dtype) for x in picks], ignore_index=True)
        show(plots.op_breakdown(breakdown, ceilings, f"Per-op breakdown of real workloads on {p.platform}"))
        table(breakdown, 4)
    verdict = obs.compute_bound_memory_time(breakdown, ceilings.ridge if ceilings else float("inf"), points, platform=p.platform)
    caption(verdict.sentence)
    return verdict


def precision_part(every: Results, ceilings: Ceilings | None, p: Parameters) -> Verdict | None:
    """Fig. 5 top: the workloads' utilisation in ``p.dtype`` and ``p.low_precision`` and O13 on
    their speedup; None when ``low_precision`` is ""."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis import workloads as wl

    if not p.low_precision:
        return None
    precision = wl.precision_table(every, p.low_precision, p.dtype)
    show(
        plots.grouped_bars(
            precision.set_index("family"),
            [p.dtype, p.low_precision],
            f"FLOPS utilisation of the real workloads in {p.dtype} and {p.low_precision} on {p.platform}",
            "FLOPS utilisation (% of the dtype's peak)",
        )
    )
    table(precision, 3)
    verdict = obs.stack_speedup(
        every.matched("dtype", p.dtype, p.low_precision),
        f"{p.low_precision} speeds up the real workloads right of the ridge",
        "16-bit arithmetic speeds up compute-bound models",
        ridge=ceilings.ridge if ceilings else None,
        id="O13",
        platform=p.platform,
    )
    caption(verdict.sentence)
    return verdict


def platforms_part(store: str, dtype: str) -> Verdict:
    """Every family's utilisation on every platform of the store, the speedup of each pair of
    platforms (Fig. 11), and O10 on the configurations both of the original study's platforms
    ran, each at the precision it was run in (the TPU over the GPU)."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis import workloads as wl
    from paradnn.sections.platform_comparison import REFERENCE_PAIR, pair_speedup_section

    everything = load(store)
    utilisation = wl.platform_table(everything, dtype)
    if len(utilisation):
        show(
            plots.grouped_bars(
                utilisation,
                list(utilisation.columns),
                "FLOPS utilisation of every family on every platform",
                "median FLOPS utilisation (% of peak)",
                log=True,
            )
        )
        counts = ", ".join(f"{family} {n}" for family, n in utilisation.attrs.get("n", {}).items())
        caption(
            "Each family's medians are over the configurations every platform drawn for it measured (a platform that "
            f"shares none with the others is left out of that family), so the bars compare like with like: {counts}."
        )
    pair_speedup_section(everything)
    # A claim about the chips: on the pairs where neither waited on its input (paradnn.store.bounds)
    verdict = obs.utilisation_ratio(
        everything.matched("platform", *REFERENCE_PAIR, metric="utilization", free=("dtype", "xla")).chips_only()
    )
    caption(verdict.sentence)
    return verdict
