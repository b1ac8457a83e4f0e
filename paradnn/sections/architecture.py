"""The architecture report (the paper's section 4): utilisation, regression, roofline, op breakdown,
precision, the original TPU's traces, replicas and input pipelines.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from paradnn.analysis.results import Results
from paradnn.config import compute_dtype
from paradnn.platform import theoretical_sentence
from paradnn.sections import common
from paradnn.sections.common import NOT_PROFILED, canonical, caption, ensure_measured, held_words, is_local, load, show, table
from paradnn.store import Store
from paradnn.vocabulary import MEASURED

if TYPE_CHECKING:
    from paradnn.analysis.observations import Verdict
    from paradnn.analysis.roofline import Ceilings


@dataclass
class Parameters(common.Parameters):
    """The architecture report's parameters, as its notebook declares them (see the notebook for each one's help)."""

    platform: str
    families: list
    preset: str
    overrides: dict
    dtype: str
    xla: str | bool
    low_precision: str
    low_precision_families: list
    precision_overrides: dict
    regression_form: str
    profile_count: int
    infeed_inputs: list
    infeed_families: list
    infeed_overrides: dict
    parallel_devices: int
    parallel_families: list
    parallel_overrides: dict
    reference_dir: str


WEIGHT_LABEL = "weight (Δ utilisation per s.d. of the hyperparameter;\nin s.d. of utilisation for the paper form)"


def table2_section(families: list[str], preset: str, overrides: dict) -> pd.DataFrame:
    """Table 2: the paper's grids as printed, as the ``paper`` preset runs them and as this
    report ran them (``preset`` with ``overrides``), departures of the preset marked."""
    from paradnn.analysis.table2 import table2

    grids = table2(families, preset, overrides)
    if grids.empty:
        print("None of these families is in Table 2 (fc, cnn, rnn).")
        return grids
    table(grids.set_index(["family", "axis"]))
    departures = grids[grids["departure from the print"] != ""]
    caption(
        f"The paper's Table 2 prints the grids in the first column; the paper preset runs them with "
        f"{len(departures)} departure(s) ({', '.join(departures['family'] + ' ' + departures['axis']) or 'none'}), "
        f"and this report ran the {preset} grids, a slice small enough for this platform."
    )
    return grids


def utilisation_section(results: Results, families: list[str], platform: str, dtype: str) -> list[Verdict]:
    """Fig. 2a-c: a FLOPS utilisation heatmap per family with rows in ``results``, each captioned with
    its O1 trends (utilisation rises with batch and width); returns those trend verdicts."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.roofline import peak_used
    from paradnn.families import get as family

    verdicts: list = []
    for name in families:
        if len(results.where(family=name)):
            show(
                plots.heatmaps(
                    results,
                    name,
                    "utilization",
                    f"{family(name).title} FLOPS utilisation on {platform}, {dtype}",
                    "FLOPS utilisation (% of peak)",
                    scale=100,
                )
            )
            trends = obs.family_trends(results, name, platform)
            verdicts += trends
            caption(f"Utilisation against the {peak_used(results.ok().frame)}. " + " ".join(v.sentence for v in trends))
    return verdicts


def regression_section(results: Results, families: list[str], platform: str, form: str) -> Verdict:
    """Fig. 2d-f: OLS weights of the hyperparameters on utilisation, one panel per family with
    finished rows; returns O1's verdict on the weights (batch or width first, depth last)."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.regression import regress

    ok = results.ok()
    regressions = {
        f: regress(ok.where(family=f).frame, "utilization", family=f, form=form) for f in families if len(ok.where(family=f))
    }
    show(
        plots.coefficients(
            regressions, f"Regression of FLOPS utilisation on hyperparameters ({platform}, {form} form)", WEIGHT_LABEL
        )
    )
    verdict = obs.weights_verdict(regressions, platform)
    caption(verdict.sentence)
    return verdict


def roofline_caption(points: pd.DataFrame, ceilings: Ceilings) -> str:
    """Fig. 3's sentence: the paper's finding, and the share of ``points`` left of the ridge and
    the best fraction of the compute roof reached."""
    memory_bound = (points["intensity"] < ceilings.ridge).mean()
    return (
        "The paper found FC and CNN models span the memory- and compute-bound regions while RNNs sit low on the roofline; "
        f"here {memory_bound:.0%} of the {len(points)} models lie left of the ridge point ({ceilings.ridge:.0f} FLOPs/byte), "
        f"reaching up to {points['achieved_flops'].max() / ceilings.peak_flops:.0%} of the compute roof."
    )


def roofline_section(store: str | Path, results: Results, platform: str, dtype: str) -> tuple[Ceilings | None, pd.DataFrame]:
    """Fig. 3: every measured model of ``results`` on ``platform``'s roofline (its ceilings from the
    store). Returns ``(ceilings, points)`` for the sections that judge against the ridge;
    ceilings is None for a platform without measured or datasheet ceilings."""
    from paradnn.analysis import plots
    from paradnn.analysis.roofline import ceilings_for, model_points

    with Store(store, create=False, readonly=True) as s:
        ceilings = ceilings_for(s.platforms(), platform, dtype)
        infos = s.platform_infos(platform)
    points = model_points(results)
    if ceilings is not None and len(points):
        show(plots.roofline(points, ceilings, f"Roofline of every measured model on {platform} ({dtype})"))
        theoretical = infos[0].get("theoretical") if infos and ceilings.source == MEASURED else None
        beside = theoretical_sentence(theoretical, ceilings.peak_flops, compute_dtype(dtype))
        caption(roofline_caption(points, ceilings) + (" " + beside if beside else ""))
    else:
        print("No ceilings or no measured models for this platform: roofline skipped.")
    return ceilings, points


def profile_picks(results: Results, count: int) -> pd.DataFrame:
    """The finished FC configurations to profile op by op: the smallest and the largest by
    ``flops_model`` (``count`` 2 or more), the largest alone (``count`` 1), none (0)."""
    fc = results.where(family="fc").ok().frame.sort_values("flops_model")
    if not count or fc.empty:
        return fc.iloc[0:0]
    return fc.iloc[[0, -1]] if count > 1 and len(fc) > 1 else fc.iloc[[-1]]


def op_breakdown_section(
    results: Results,
    ceilings: Ceilings | None,
    points: pd.DataFrame,
    platform: str,
    dtype: str,
    profile_count: int,
    measure: bool = True,
) -> Verdict:
    """Fig. 3's per-op breakdown: TensorFlow's profiler on :func:`profile_picks` (on a local
    platform only), figure and table; returns O2's verdict (compute-bound models still spend
    time in memory-bound ops). The profile is a measurement the store does not keep: with
    ``measure`` off (``measure_missing``) nothing is profiled, so a report of a store renders the
    same every time."""

    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.engine.profiler import op_breakdown
    from paradnn.families import parse_label

    breakdown = pd.DataFrame()
    picks = profile_picks(results, profile_count if is_local(platform) and measure else 0)
    if profile_count and is_local(platform) and not measure:
        print(NOT_PROFILED)
    if len(picks):
        breakdown = pd.concat([op_breakdown(parse_label("fc", label), dtype) for label in picks["label"]], ignore_index=True)
        show(plots.op_breakdown(breakdown, ceilings, f"Per-op breakdown of FC training steps on {platform}"))
        table(breakdown, 4)
    verdict = obs.compute_bound_memory_time(breakdown, ceilings.ridge if ceilings else float("inf"), points, platform=platform)
    caption(verdict.sentence)
    return verdict


def measure_precision(
    store: str | Path, families: list[str], dtype: str, low_precision: str, xla: object, **sweep: object
) -> list[str]:
    """Measure ``families`` in ``dtype`` and ``low_precision`` side by side (interleaved rounds, so
    the comparison's two sides meet the same machine) at the XLA setting ``dtype`` ran with, so the
    precision comparison changes one thing: with ``xla`` auto, per family the setting
    ``--xla auto`` chose for ``dtype`` on this platform (the low precision's own choice may
    differ). Returns the sweeps' summary lines. ``sweep``: :func:`ensure_measured`'s keywords."""
    from paradnn.settings import on_off_auto

    platform = str(sweep.get("platform", "cpu"))
    with Store(store, create=False, readonly=True) as s:
        choices = s.xla_choices(canonical(platform)) if is_local(platform) else {}
    lines = []
    for family in families:
        held = on_off_auto(xla)
        held = choices.get(f"{family}|{dtype}", held) if held is None else held
        lines += ensure_measured(
            store, [family], xla="auto" if held is None else held, variants=[{"dtype": dtype}, {"dtype": low_precision}], **sweep
        )
    return lines


def precision_section(
    store: str | Path, platform: str, families: list[str], dtype: str, low_precision: str, ceilings: Ceilings | None
) -> list[Verdict]:
    """``dtype`` against a lower-precision policy on the same configurations at the same XLA
    setting (the results object pairs nothing else): paired utilisation scatter (each against
    its own dtype's peak); returns O13's verdict on the speedup in examples/s of models right
    of the ridge at each XLA setting measured both ways, with what it held fixed, judged as the
    software-stack report judges it (:func:`paradnn.analysis.observations.precision_speedups`)."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots

    both = load(store, platform=platform, families=families)  # every XLA setting; pairs hold it
    util = both.matched("dtype", dtype, low_precision, metric="utilization")
    if util.n:
        show(
            plots.paired_scatter(
                util.table,
                f"{dtype} utilisation (% of float32 peak)",
                f"{low_precision} utilisation (% of bfloat16 peak)",
                f"Utilisation in {dtype} and {low_precision} on {platform}",
            )
        )
    judged = obs.precision_speedups(both, platform, dtype, low_precision, ceilings.ridge if ceilings else None)
    shown = [(result, verdict) for _, result, verdict in judged if result.n] or [judged[0][1:]]
    for result, verdict in shown:
        caption(verdict.sentence + f" Held fixed: {held_words(result.held_fixed)}.")
    return [verdict for _, verdict in shown]


def reference_utilisation_section(tpu: Results, form: str) -> list[Verdict]:
    """Fig. 2 on the original study's TPU v2-8 FC sweep (``tpu``): heatmap, O1 trends and the
    regression weights; returns those verdicts (none, with a note, when the sweep is absent)."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.regression import regress

    if tpu.empty:
        print("The original study's TPU v2 sweep is not in the store.")
        return []
    show(
        plots.heatmaps(
            tpu,
            "fc",
            "utilization",
            "FC FLOPS utilisation on the TPU v2-8 (original study, bfloat16)",
            "FLOPS utilisation (% of peak)",
            scale=100,
        )
    )
    verdicts = obs.family_trends(tpu, "fc", "tpu-v2-8")
    regression = {"fc": regress(tpu.ok().frame, "utilization", family="fc", form=form)}
    show(
        plots.coefficients(
            regression, f"Regression of TPU v2 FLOPS utilisation on FC hyperparameters ({form} form)", WEIGHT_LABEL
        )
    )
    verdicts.append(obs.weights_verdict(regression, "tpu-v2-8"))
    caption(" ".join(v.sentence for v in verdicts))
    return verdicts


def reference_roofline_section(tpu: Results, traces: pd.DataFrame | None = None) -> None:
    """Fig. 3a on the paper's platform: every FC model of the original TPU v2-8 sweep on that
    board's datasheet roofline, at the operational intensity of paradnn's own count of its FLOPs
    and bytes (one replica's, as the traces see a core), cross-checked against the ``traces``."""
    from paradnn.analysis import plots
    from paradnn.analysis.roofline import Ceilings, reference_points, ridge_agreement
    from paradnn.platform import DATASHEETS

    points = reference_points(tpu)
    if points.empty:
        print("No original TPU v2 rows in the store: its roofline is skipped.")
        return
    sheet = DATASHEETS["tpu-v2-8"]
    ceilings = Ceilings(sheet.peak_flops["bfloat16"], sheet.memory_bandwidth, f"datasheet:{sheet.name}")
    show(plots.roofline(points, ceilings, "Roofline of the original study's FC models on the TPU v2-8 (Fig. 3a)", hue="batch"))
    agree, traced = ridge_agreement(points, traces if traces is not None else pd.DataFrame(), ceilings.ridge)
    check = (
        f" Intensity is paradnn's count of one replica's FLOPs over its bytes (the sweep files' own 'intensity' is "
        f"FLOPs per weight byte, not a roofline intensity); on the {traced} configurations the study traced, it puts "
        f"{agree:.0%} on the same side of the ridge as the profiler's intensity."
        if traced
        else ""
    )
    caption(roofline_caption(points, ceilings) + check)


def load_traces(store: str | Path) -> pd.DataFrame:
    """The original study's TPU v2 profiler traces in the store (empty if none were imported);
    this machine's own profiles, kept there for projection, are left out."""
    from paradnn.identity import PROFILE_SOURCE

    with Store(store, create=False, readonly=True) as s:
        traces = s.traces()
    return traces[~traces["source"].astype(str).str.startswith(PROFILE_SOURCE + ":")].reset_index(drop=True)


def trace_section(traces: pd.DataFrame, tpu: Results) -> list[Verdict]:
    """The TPU v2 traces: FLOPS against memory-bandwidth utilisation and the op categories on the
    TPU v2 roofline; returns O2's verdicts on them (memory-bound share, bandwidth wall)."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.platform import DATASHEETS

    if traces.empty:
        print("No TPU traces in the store.")
        return []
    sheet = DATASHEETS["tpu-v2-8"]
    show(
        plots.trace_figures(
            traces, sheet.peak_flops["bfloat16"], sheet.memory_bandwidth, "TPU v2 profiler traces (original study)"
        )
    )
    verdicts = [obs.trace_memory_bound_share(traces), obs.bandwidth_wall(tpu, traces)]
    caption(" ".join(v.sentence for v in verdicts))
    return verdicts


def traced_communication_section(traces: pd.DataFrame) -> Verdict:
    """Fig. 4 from the TPU v2 traces: the all-reduce (``cross-replica-sum``) share of step time by
    batch; returns O3's verdict on it (inconclusive without traces)."""
    from paradnn.analysis import observations as obs

    return _traced_share(
        traces,
        obs.communication_share(traces),
        "cross-replica-sum",
        "time_perc",
        "TPU v2-8: all-reduce (cross-replica-sum) share of step time (original traces)",
    )


def _traced_share(traces: pd.DataFrame, verdict: Verdict, category: str, column: str, title: str) -> Verdict:
    """A share of step time by batch from the TPU v2 traces' ``category`` rows, with its verdict's sentence."""
    from paradnn.analysis import plots

    if len(traces):
        show(plots.share_by_batch(traces[traces["category"] == category], column, title, "share of step time (%)"))
        caption(verdict.sentence)
    return verdict


def measure_replicas(
    store: str | Path,
    families: list[str],
    devices: int,
    *,
    preset: str,
    overrides: dict,
    platform: str,
    measure_missing: bool,
    budget_minutes: float,
    max_seconds: float,
    lanes: common.Lanes = common.LOCAL,
) -> list[str]:
    """Measure ``families`` data-parallel on ``devices`` replicas of a local platform (nothing,
    and no line, for fewer than 2 devices, an imported platform or ``measure_missing`` off)."""
    if devices < 2 or not measure_missing or not is_local(platform):
        return []
    return ensure_measured(
        store,
        families,
        preset=preset,
        overrides=overrides,
        devices=devices,
        platform=platform,
        budget_minutes=budget_minutes,
        max_seconds=max_seconds,
        lanes=lanes,
    )


def replicated_rows(results: Results) -> pd.DataFrame:
    """The data-parallel rows of ``results`` (loaded with any number of devices): those with a measured communication share."""
    return results.with_value("comm_share").frame


COMMUNICATION_COLUMNS = [
    "family",
    "label",
    "devices",
    "replica_batch",
    "step_time_s",
    "replica_step_time_s",
    "comm_share",
    "allreduce_share",
    "scaling_efficiency",
]


def communication_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The data-parallel rows as the report shows them: step times of the parallel step and of
    one replica alone, communication and all-reduce shares, scaling efficiency (4 decimals)."""
    return rows[COMMUNICATION_COLUMNS].round(4)


def replica_section(rows: pd.DataFrame, platform: str) -> Verdict:
    """Fig. 4 on this machine: the communication share of the data-parallel step by batch and
    family, and its table; returns O3's verdict on the measured rows."""

    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots

    verdict = obs.measured_communication(rows, platform)
    if len(rows):
        show(
            plots.share_by_batch(
                rows.assign(comm_percent=100 * rows["comm_share"]),
                "comm_percent",
                f"{platform}: communication share of the data-parallel step (all-reduce and waiting)",
                "share of step time (%)",
                hue="family",
            )
        )
        table(communication_table(rows))
    caption(verdict.sentence)
    return verdict


def traced_infeed_section(traces: pd.DataFrame) -> Verdict:
    """Fig. 5 (bottom) from the TPU v2 traces: the share of each FC step spent waiting for infeed,
    by batch; returns O4's verdict on it (inconclusive without traces)."""
    from paradnn.analysis import observations as obs

    return _traced_share(
        traces, obs.infeed_share(traces), "all", "infeed", "TPU v2-8: share of step time waiting for infeed, FC (original traces)"
    )


def low_precision_part(p: Parameters, ceilings: Ceilings | None) -> list[Verdict] | None:
    """float32 against ``p.low_precision`` on ``p.low_precision_families``, measured first where the
    store lacks it (with each family's XLA setting of the main run); None when ``low_precision`` is ""."""
    if not p.low_precision:
        return None
    for line in measure_precision(
        p.store,
        p.low_precision_families,
        p.dtype,
        p.low_precision,
        p.xla,
        preset=p.preset,
        overrides=p.precision_overrides,
        platform=p.platform,
        measure_missing=p.measure_missing,
        budget_minutes=p.budget_minutes / 2,
        max_seconds=p.max_seconds,
        lanes=p.lanes,
    ):
        print(line)
    return precision_section(p.store, p.platform, p.low_precision_families, p.dtype, p.low_precision, ceilings)
