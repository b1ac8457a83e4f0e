"""The platform-comparison report (the paper's section 5): speedups between platforms, the original
study's platforms beside this machine, Fig. 7, Table 3 and projection onto hardware not at hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from paradnn.analysis.registry import BY_ID
from paradnn.analysis.results import Results, Rows, results_of
from paradnn.config import ConfigError
from paradnn.sections import common
from paradnn.sections.common import caption, held_words, is_local, load, show, table
from paradnn.store import Store
from paradnn.vocabulary import OK

if TYPE_CHECKING:
    from paradnn.analysis.observations import Verdict


@dataclass
class Parameters(common.Parameters):
    """The platform comparison report's parameters, as its notebook declares them (see the notebook for each one's help)."""

    baseline: str
    target: str
    families: list
    preset: str
    overrides: dict
    overlap_count: int
    low_precision: str
    dtype: str
    xla: str | bool
    fig7_nodes: list
    fig7_batch: list
    projection_count: int
    project_to: str
    reference_dir: str


def projection_section(store: str | Path, source: str = "tpu-v2-8", target: str = "tpu-v3-8") -> list:
    """Fig. 6b projected: the original study's TPU v2 FC steps, op category by op category,
    onto a TPU v3 datasheet, at each configuration's batch and at twice it. Shows the figure,
    its caption and a table of the bounds; returns observation 5's projected verdict and the
    package's check that no same-batch projection exceeds the datasheets' larger ratio."""

    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.projection import dominant_bound, generation_verdict, projection

    same, summary = projection(str(store), source, target, "fc")
    doubled, _ = projection(str(store), source, target, "fc", batch_scale=2)
    show(plots.projected_speedups(same, doubled, summary, f"FC speedup of {target} over {source}, projected (Fig. 6b)"))
    verdict = generation_verdict(same, doubled, summary)
    caption(
        f"{verdict.sentence} Projected from the {summary['profiles']} TPU v2 op traces: every operation keeps its "
        "FLOPs and bytes, infeed and untraced time are kept as measured; Fig. 6a (the real workloads) and 6c (CNNs and "
        "RNNs) need TPU traces of those models, which the original data does not have."
    )
    bounds = same.assign(bound=dominant_bound(same)).groupby("bound")["speedup"].describe()[["count", "min", "50%", "max"]]
    table(bounds.rename(columns={"50%": "median"}), 2)
    limit = max(summary["peak_ratio"], summary["bandwidth_ratio"])
    beyond = int((same["speedup"] > limit * (1 + 1e-9)).sum())
    part = obs.exact_part("beyond", beyond, len(same), obs.Rule(f"projections above {limit:.2f}x", 0.5, "<", min_n=1))
    check = obs.judged(
        "projected speedups stay within the datasheets",
        f"no projected speedup exceeds {limit:.2f}x",
        part,
        f"largest {same['speedup'].max():.2f}x over {len(same)} configurations at their own batch",
        platform=f"{source} -> {target}",
    )
    return [verdict, check]


PROJECTION_TOLERANCE = 0.25  # the validation's median error that counts as reproducing a platform (issue 26)


def projection_picks(store: str | Path, platforms: tuple[str, str], count: int, dtype: str, xla: object) -> list[str]:
    """Up to ``count`` FC configurations measured on both ``platforms`` at these settings, spread
    evenly by model FLOPs from the smallest to the largest."""
    ok = [load(store, platform=p, families=["fc"], dtype=dtype, xla=xla).ok().frame for p in platforms]
    common = ok[0][ok[0]["label"].isin(set(ok[1]["label"]))].drop_duplicates("label").sort_values("flops_model")
    if common.empty or count < 1:
        return []
    index = sorted({round(i) for i in np.linspace(0, len(common) - 1, min(count, len(common)))})
    return list(common["label"].iloc[index])


def profile_here(store: str | Path, platform: str, labels: list[str], dtype: str) -> str:
    """Profile FC ``labels`` op by op on the local ``platform`` (with its threads) into the store's
    traces table, for projection; returns a summary line."""
    from paradnn.engine.protocol import RunSettings
    from paradnn.families import parse_label
    from paradnn.platform import parse_target
    from paradnn.sweeps.plan import SilentProgress, SweepOptions
    from paradnn.sweeps.profiles import profile_local

    configs = [parse_label("fc", label) for label in labels]
    with Store(store) as s:
        done = profile_local(
            configs, s, SweepOptions(settings=RunSettings(dtype=dtype), target=parse_target(platform)), progress=SilentProgress
        )
    failed = "".join(f"; {label} failed: {error}" for label, error in done["failed"].items())
    return f"profiles on {platform}: {done['profiled']} taken, {done['already']} already in the store{failed}"


def measure_like_source(store: str | Path, source: str, target: str, labels: list[str], max_seconds: float) -> str:
    """Measure FC ``labels`` on the local ``target`` at the run settings a projection from
    ``source`` takes its steps at (its dtype policy and XLA setting), where the store lacks
    them: ``--xla auto`` may have chosen differently on the two platforms, and a projection is
    checked only against a measurement at the same settings. Returns a summary line."""
    from paradnn.analysis.projection import local_settings
    from paradnn.families import parse_label
    from paradnn.sweeps import request as req
    from paradnn.sweeps.plan import SilentProgress

    held = local_settings(str(store), source, "fc")
    if not labels or not held or not is_local(target):
        return f"{target}: nothing to measure for the projection check"
    asked = req.SweepRequest(
        family="fc",
        configs=[parse_label("fc", label) for label in labels],
        run={"dtype": held["dtype"], "xla": held["xla"], "platform": target},
        max_seconds=max_seconds,
    )
    prepared = req.prepare(asked, echo=lambda line: None)
    with Store(store) as s:
        (summary,) = req.measure_runs(prepared, s, progress=SilentProgress)
    return f"{target} at {source}'s settings ({held_words(held)}): {summary.line()}"


def projection_check_section(store: str | Path, baseline: str, target: str, labels: list[str]) -> Verdict | None:
    """Projection checked where the truth is here: ``baseline``'s profiled FC steps projected onto
    ``target``'s measured ceilings, against what ``target`` measured at the same settings. Shows
    the figure, its caption and the table; returns the package's check (median error within
    :data:`PROJECTION_TOLERANCE`), or None without configurations to check."""

    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.projection import dominant_bound, projection

    if not labels:
        print(f"No FC configuration measured on both {baseline} and {target}: projection not checked.")
        return None
    try:
        rows, summary = projection(str(store), baseline, target, "fc", labels=labels)
    except ConfigError as exc:  # no profiles of an imported baseline, say
        print(f"Projection from {baseline} onto {target} not checked: {exc}")
        return None
    rows = rows.dropna(subset=["measured_step_time_s"])
    if rows.empty:
        print(f"No profiled configuration of {baseline} was measured on {target} at the same settings: not checked.")
        return None
    error = rows["projected_step_time_s"] / rows["measured_step_time_s"] - 1
    bound = dominant_bound(rows)
    median = float(error.abs().median())
    by_bound = error.abs().groupby(bound).median()
    pair = f"{baseline} -> {target}"
    frame = pd.DataFrame(
        {
            "platform": pair,
            "predicted_s": rows["projected_step_time_s"],
            "low_s": rows["interval_s"].str[0],
            "high_s": rows["interval_s"].str[1],
            "measured_s": rows["measured_step_time_s"],
        }
    )
    show(
        plots.predicted_vs_measured(
            frame, f"FC step on {target} projected from {baseline}, against its measurement", what="projected"
        )
    )
    evidence = f"median absolute error {median:.0%} over {len(rows)} FC configurations; by dominant bound: " + ", ".join(
        f"{b} {v:.0%} (n={int((bound == b).sum())})" for b, v in by_bound.items()
    )
    part = obs.median_part("error", error.abs(), obs.Rule("median absolute error", PROJECTION_TOLERANCE, "<", min_n=2))
    verdict = obs.judged(
        "projection reproduces a platform measured here",
        f"projecting a profiled step op by op onto another platform's ceilings lands within "
        f"{PROJECTION_TOLERANCE:.0%} of its measured step (median; Habitat: 11.8% across six GPUs)",
        part,
        evidence,
        {"median_abs_error": median, "by_bound": by_bound.to_dict(), "n": int(len(rows))},
        platform=pair,
        held_fixed=summary["held_fixed"],
    )
    caption(
        f"{verdict.sentence} Ceilings: {target} {summary['to']['flops'] / 1e9:.0f} GFLOP/s and "
        f"{summary['to']['bandwidth'] / 1e9:.0f} GB/s over {baseline} {summary['from']['flops'] / 1e9:.0f} GFLOP/s and "
        f"{summary['from']['bandwidth'] / 1e9:.0f} GB/s; bars: every scaled category at the smaller and at the "
        f"larger ratio. Held fixed: {held_words(summary['held_fixed'])} (the profiles themselves run XLA off)."
    )
    shown = rows.assign(bound=bound, error=error)[
        ["label", "bound", "source_step_time_s", "projected_step_time_s", "measured_step_time_s", "error"]
    ]
    table(shown, 4)
    return verdict


def validation_section(store: str | Path, source: str) -> Verdict:
    """The projection scored against the 2019 chips (issue 66): ``source``'s profiled FC steps
    projected onto the V100's and TPU v2-8's datasheets, each against the study's own step where
    that chip was the bound; figure, table, caption and paradnn's check of the method."""
    from paradnn.analysis import plots
    from paradnn.analysis.projection import original_validation, validation_verdict

    rows, summary = original_validation(str(store), source)
    verdict = validation_verdict(rows, source)
    if len(rows):
        frame = pd.DataFrame(
            {
                "platform": rows["target"],
                "predicted_s": rows["projected_step_time_s"],
                "low_s": rows["interval_s"].str[0],
                "high_s": rows["interval_s"].str[1],
                "measured_s": rows["measured_step_time_s"],
            }
        )
        show(
            plots.predicted_vs_measured(
                frame, f"FC step projected from {source} onto the 2019 chips, against the study's measurement", what="projected"
            )
        )
        table(rows[["label", "target", "source_step_time_s", "projected_step_time_s", "measured_step_time_s", "error"]], 4)
    ratio = summary["ratio"]
    ratio_words = (
        f"; the TPU-over-V100 step ratio on the {ratio['n']} configurations projected onto both is off by a "
        f"median {ratio['median_abs_error']:.0%}"
        if ratio["n"]
        else ""
    )
    caption(
        f"The projection method, scored before it draws what the 2019 study never measured: {source}'s profiled steps "
        f"projected onto each 2019 chip's datasheet at the precision the study ran it, against the study's step on the "
        f"configurations where that chip, not its input pipeline, was the bound; nothing fitted{ratio_words}. " + verdict.sentence
    )
    return verdict


def what_if_section(store: str | Path, platform: str, onto: str, labels: list[str], check: Verdict | None) -> None:
    """This machine's profiled FC configurations projected onto a datasheet platform ``onto``:
    table and caption, marked as projections, with the validation error of ``check`` beside them."""

    from paradnn.analysis.projection import dominant_bound, projection

    if not labels:
        return
    try:
        rows, summary = projection(str(store), platform, onto, "fc", labels=labels)
    except ConfigError as exc:
        print(f"Projection from {platform} onto {onto} not shown: {exc}")
        return
    shown = rows.assign(bound=dominant_bound(rows))[
        ["label", "bound", "source_step_time_s", "projected_step_time_s", "speedup", "floored", "extrapolated"]
    ]
    checked = "the method was not checked on this machine"
    if check is not None:
        error = check.numbers["median_abs_error"]
        checked = f"the same method's median error projecting {check.platform} on this machine was {error:.0%}"
    to = summary["to"]
    low, high = summary["speedup_interval"]
    beyond = (
        f"Extrapolated: the peak ratio {summary['peak_ratio']:.0f}x lies far beyond the "
        f"{summary['validated_ratio'][1]:.0f}x the method was validated on ({summary['validated_on']}), so read these "
        "as an order of magnitude. "
        if summary["extrapolated"]
        else ""
    )
    floor = (
        f"{summary['floored']} of the projected steps were held at the floor of {summary['floor_s'] * 1e3:.2f} ms "
        f"({summary['floor_source']}): a step's fixed cost is not divided by a peak ratio. "
        if summary["floored"]
        else ""
    )
    how = (
        f"Projected, not measured: {len(rows)} FC configurations of {platform} onto {onto}'s datasheet "
        f"({to['flops'] / 1e12:.1f} TFLOP/s {to['dtype']}, {to['bandwidth'] / 1e12:.2f} TB/s), each operation "
        f"category scaled by the ratio of peaks and the time its profile did not cover kept as on {platform}; "
    )
    if summary["n"] and summary["floored"] == summary["n"]:
        caption(
            how + f"not projectable from this source: every projected step fell below the floor of "
            f"{summary['floor_s'] * 1e3:.2f} ms ({summary['floor_source']}), so the table shows the floor, not "
            f"{platform}'s steps scaled. {checked[0].upper() + checked[1:]}."
        )
    else:
        caption(
            how + f"median projected speedup {summary['median_speedup']:.3g}x (bracket {low:.3g}-{high:.3g}x, every "
            f"scaled category at the smaller and at the larger ratio). {beyond}{floor}"
            f"{checked[0].upper() + checked[1:]}."
        )
    table(shown, 6)


def platform_section(results: Results, baseline: str, target: str, families: list[str], paper_pair: bool = False) -> list:
    """Throughput maps, speedup maps, scatter, regression and summary of one platform pair.

    Shows the figures and captions in the report; returns the verdicts. With
    ``paper_pair`` (a GPU baseline and a TPU target, as in the paper) the FC speedup is
    judged against observations 7 and 8 (its direction with batch and with width) and
    Fig. 7's throughput trends against observation 6; any other pair (one CPU against
    itself with fewer threads, say) only gets the package's check that the speedup
    depends on the model's shape, labelled as such.
    """
    import numpy as np

    from paradnn import families as registry
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.regression import regress

    verdicts: list = []
    summaries = []
    for family in families:
        title = registry.get(family).title
        for name in (baseline, target):
            sub = results.where(platform=name, family=family)
            if len(sub):
                show(
                    plots.heatmaps(
                        sub,
                        family,
                        "examples_per_sec",
                        f"{title} throughput on {name}",
                        "throughput (examples/s, log colour)",
                        log_color=True,
                        fmt="{:.3g}",
                    )
                )
        failed = results.where(family=family).failed().frame.groupby(["platform", "state"]).size()
        shown = ", ".join(f"{p} {n} {s}" for (p, s), n in failed.items()) or "none"
        caption(
            "The paper found large models run out of memory first on the platform with less memory; "
            f"here the failed configurations per platform are: {shown}."
        )
        if paper_pair and family == "fc":
            verdicts.append(obs.out_of_memory_first(results, family))
            for name in (baseline, target):
                on = results.where(platform=name)
                # Fig. 7's side trends, checked apart from O6's capacity claim (the package's own checks)
                verdicts += [
                    obs.trend(on, "nodes", family, "examples_per_sec", rising=False, id="", platform=name),
                    obs.trend(on, "batch", family, "examples_per_sec", id="", platform=name),
                ]
        # Each platform at its own precision and XLA setting where the two share none (as the paper ran
        # its TPU and V100), held like with like where they share one; the caption says which.
        result = results.matched("platform", baseline, target, family=family)
        fed = int(result.input_bound().sum())
        result = result.chips_only()  # a claim about chips rests on pairs where neither waited on its input
        summaries.append({"family": family, **{k: v for k, v in result.summary().items() if k != "sides"}})
        if not result.n:
            print(f"{title}: nothing pairs {target} with {baseline}: {result.why or f'all {fed} pairs had an input-bound side'}.")
            continue
        pairs = result.table.assign(state=OK, log2_speedup=np.log2(result.table["speedup"]))
        show(
            plots.heatmaps(
                with_failed_sides(pairs, results, family, baseline, target),
                family,
                "speedup",
                f"{title} speedup of {target} over {baseline}",
                "speedup (x; red: target faster, blue: baseline faster)",
                fmt="{:.2f}",
                center=1.0,
                cmap="RdBu_r",
            )
        )
        pair = f"{target} vs {baseline}"
        if paper_pair and family == "fc":
            paper7, paper8 = BY_ID["O7"].claim, BY_ID["O8"].claim
            held = {**result.held_fixed, "free": list(result.free)}  # each platform at the precision the study ran it
            found = [
                obs.speedup_direction(pairs, family, "batch", True, "O7", pair, paper7, held),
                obs.speedup_direction(pairs, family, "nodes", False, "O8", pair, paper8, held),
            ]
        else:
            found = [obs.speedup_depends_on(pairs, family, platform=f"{pair} (a local pair, not the paper's TPU and GPU)")]
        where_base_wins = int((pairs["speedup"] < 1).sum())
        caption(
            f"{target} over {baseline}: median speedup {result.median:.2f}x (geometric mean {result.geomean:.2f}x, "
            f"{result.min:.2f}x to {result.max:.2f}x over {result.n} configurations; {sides_words(result)}); "
            f"{baseline} wins on {where_base_wins}"
            + (f"; {fed} pair(s) where a side was input-bound are left out" if fed else "")
            + ". "
            + " ".join(v.sentence for v in found)
        )
        show(plots.speedup_scatter(pairs, f"{title}: speedup against model size", baseline, target))
        reg = regress(pairs, "log2_speedup", family=family)
        show(
            plots.coefficients(
                {family: reg}, f"{title}: regression of log2 speedup on hyperparameters", "Δ log2 speedup per s.d. of log2 value"
            )
        )
        top = reg.coefficients["coef"].abs().idxmax() if not reg.coefficients.empty else "none"
        caption(
            f"The paper found the speedup depends mostly on batch size and layer width; here the largest weight is "
            f"{top} (R² {reg.r_squared:.2f})."
        )
        verdicts += found
    table(pd.DataFrame(summaries), 3)
    return verdicts


def pair_speedup_section(results) -> None:
    """Fig. 11's speedups: every pair of platforms per family on one common set of configurations
    (bars chain), the pairs outside the chain in the table only; figure, table and caption."""
    from paradnn.analysis import plots
    from paradnn.analysis import workloads as wl

    pairs = wl.pair_speedups(results)
    show(plots.pair_speedup_bars(pairs, "Speedup of each pair of platforms per family on a common set (examples/s)"))
    table(pairs, 3)
    chained = pairs[pairs["chained"]]
    outside = pairs[~pairs["chained"]]
    shown = "; ".join(f"{r.target} over {r.baseline} {r.geomean:.2f}x ({r.family}, n {r.n})" for r in chained.itertuples())
    caption(
        "The paper found the TPU's advantage differs by workload (Fig. 11); here each family's pairs are taken over "
        f"the configurations every platform of its chain measured, so their geometric means chain: {shown or 'none'}"
        + (f"; {len(outside)} pair(s) share no configuration with the chain and are listed, not drawn" if len(outside) else "")
        + "."
    )


def original_beside_section(store: str | Path, target: str) -> list:
    """This machine beside the original study on the study's own FC grid (Fig. 8 and 9, three ways):
    the V100 over ``target`` (Fig. 9), the TPU v2-8 over ``target``, and the TPU v2-8 over the V100,
    each platform at its own precision where they share none (said), as heatmaps, scatter plots and
    Fig. 8's regression weights; the three platforms' geometric means on their common set; the
    same pairs at float32 where both sides have it. Returns the checks: examples/s rises with batch
    and falls with width on every platform of the common set, O6 with this machine among them,
    and how much each pair's speedup depends on the model's shape."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis import workloads as wl
    from paradnn.analysis.regression import regress

    if target in REFERENCE_PAIR:
        print(
            f"The target, {target}, is one of the original study's platforms: this section sets a machine beside the "
            "study, so it is skipped (the study's own TPU v2-8 against its V100 has a section of its own)."
        )
        return []
    here = load(store, platform=target, families=["fc"], dtype=None, xla=None)
    theirs = load(store, families=["fc"]).where(platform=list(REFERENCE_PAIR))
    if here.ok().empty or theirs.frame["platform"].nunique() < 2:
        print(
            f"This machine beside the original study needs {target}'s FC rows on the study's grid (overlap_count) and "
            "the original sweeps in the store: skipped."
        )
        return []
    chips, fed = split_by_bound(here.ok().frame, theirs.frame)
    if len(fed):
        table(fed, 3)
        caption(
            f"{fed['label'].nunique()} configuration(s) measured here were input-bound on a 2019 platform (its step "
            "waited on the host's input pipeline, not on the chip): listed, not compared."
        )
    if not chips:
        print(
            "No configuration measured here was compute-bound on both 2019 platforms: the comparison of chips is skipped "
            "(measure the overlap preset, which picks such configurations)."
        )
        return []
    results = Results.concat([here, theirs]).where(label=sorted(chips))
    chained = wl.pair_speedups(results)
    common = set.intersection(*(set(results.where(platform=p).ok().frame["label"]) for p in (target, *REFERENCE_PAIR)))
    table(chained, 3)
    caption(
        f"{len(common)} FC configurations were measured here and by both of the original study's platforms, and "
        f"neither 2019 platform was input-bound on them. {chain_words(chained, target)}"
    )
    verdicts: list = []
    pairs = (
        (target, "v100", "the V100 over this machine (Fig. 9)"),
        (target, "tpu-v2-8", "the TPU v2-8 over this machine"),
        ("v100", "tpu-v2-8", "the TPU v2-8 over the V100 (Fig. 8)"),
    )
    for baseline, other, what in pairs:
        result = results.matched("platform", baseline, other, family="fc")
        if not result.n:
            print(f"{what}: nothing pairs: {result.why}.")
            continue
        found = result.table.assign(state=OK, log2_speedup=np.log2(result.table["speedup"]))
        if baseline not in REFERENCE_PAIR:  # the 2019 pair's own maps are Fig. 8's, drawn above once
            show(
                plots.heatmaps(
                    found,
                    "fc",
                    "speedup",
                    f"FC speedup of {other} over {baseline}",
                    "speedup (x; red: target faster, blue: baseline faster)",
                    fmt="{:.2f}",
                    center=1.0,
                    cmap="RdBu_r",
                )
            )
            show(plots.speedup_scatter(found, f"FC: {what}, against model size", baseline, other))
            reg = regress(found, "log2_speedup", family="fc")
            show(
                plots.coefficients(
                    {"fc": reg},
                    f"FC: regression of log2 speedup of {other} over {baseline}",
                    "Δ log2 speedup per s.d. of log2 value",
                )
            )
        shape = obs.speedup_depends_on(found, "fc", platform=f"{other} vs {baseline}")
        verdicts.append(shape)
        at_float32 = results.matched("platform", baseline, other, family="fc", hold=("dtype",))
        float32 = (
            f"At one precision: {at_float32.n} configurations, median {at_float32.median:.2f}x."
            if at_float32.n
            else f"At one precision nothing pairs ({at_float32.why})."
        )
        caption(
            f"{what[0].upper() + what[1:]}: median speedup {result.median:.2f}x (geometric mean {result.geomean:.2f}x, "
            f"{result.min:.2f}x to {result.max:.2f}x over {result.n} configurations; {sides_words(result)}). {float32} "
            + shape.sentence
        )
        table(pair_bounds(result), 3)
    three = results.where(label=sorted(common))
    for platform in (target, *REFERENCE_PAIR):
        on = three.where(platform=platform)
        verdicts += [
            obs.trend(on, "batch", "fc", "examples_per_sec", id="", platform=platform),
            obs.trend(on, "nodes", "fc", "examples_per_sec", rising=False, id="", platform=platform),
        ]
    verdicts.append(obs.out_of_memory_first(results, "fc"))
    caption(
        "The paper found FC examples/s rises with batch and falls with width on every platform (Fig. 7-9); on the "
        "configurations all three measured: " + " ".join(v.sentence for v in verdicts[-7:])
    )
    return verdicts


def pair_bounds(result) -> pd.DataFrame:
    """Each pair of a comparison with what bound each side's step (paradnn.store.bounds)."""
    shown = ["label", "baseline", "target", "speedup", "baseline_bound", "target_bound"]
    return result.table[[c for c in shown if c in result.table]].rename(
        columns={
            "baseline": f"{result.baseline} (examples/s)",
            "target": f"{result.target} (examples/s)",
            "baseline_bound": f"{result.baseline} bound",
            "target_bound": f"{result.target} bound",
        }
    )


def with_failed_sides(pairs: pd.DataFrame, rows: Rows, family: str, baseline: str, target: str) -> pd.DataFrame:
    """A speedup map's rows: the pairs, and each configuration that failed on either side (out of
    memory, timeout, error) with that side's state, so its cell is marked as failed, not as never
    measured."""
    failed = results_of(rows).where(family=family, platform=[baseline, target]).failed().frame
    failed = failed[~failed["label"].isin(set(pairs["label"]))].drop_duplicates("label")
    return pd.concat([pairs, failed[[c for c in pairs.columns if c in failed.columns]]], ignore_index=True)


def split_by_bound(here: pd.DataFrame, theirs: pd.DataFrame) -> tuple[set[str], pd.DataFrame]:
    """The labels measured ``here`` on which neither 2019 platform was input-bound, and a table of
    the others: each 2019 platform's bound and its evidence (:mod:`paradnn.store.bounds`)."""
    measured = set(here["label"])
    old = theirs[theirs["label"].isin(measured) & theirs["bound"].notna()]
    per_label = old.groupby("label")["bound"].agg(lambda b: "input" if (b == "input").any() else "chip")
    both = old.groupby("label")["platform"].nunique() == len(REFERENCE_PAIR)
    chips = {label for label, bound in per_label.items() if bound == "chip" and both[label]}
    fed = old[old["label"].isin(set(per_label.index) - chips)]
    return chips, fed[["label", "platform", "bound", "bound_why"]].sort_values(["label", "platform"]).reset_index(drop=True)


def chain_words(chained: pd.DataFrame, target: str) -> str:
    """Whether the chained geometric means multiply, computed: V100 over ``target`` times TPU v2-8
    over V100 against TPU v2-8 over ``target`` (each pair on the one common set, or said)."""
    rows = {(r.baseline, r.target): r for r in chained.itertuples() if r.chained}
    legs = [rows.get((target, "v100")), rows.get(("v100", "tpu-v2-8")), rows.get((target, "tpu-v2-8"))]
    if any(leg is None for leg in legs) or len({leg.n for leg in legs}) != 1:
        return "The three pairs are not over one common set: their geometric means do not chain."
    product, direct = legs[0].geomean * legs[1].geomean, legs[2].geomean
    verb = "multiply" if math.isclose(product, direct, rel_tol=1e-3) else "do not multiply (a side's settings differ by pair)"
    return (
        f"Over those {legs[0].n} the geometric means {verb}: V100 over {target} {legs[0].geomean:.3g}x times TPU v2-8 "
        f"over V100 {legs[1].geomean:.3g}x is {product:.3g}x; TPU v2-8 over {target} {direct:.3g}x."
    )


def platforms_section(store: str | Path) -> None:
    """Table 3: every platform of the store beside the paper's, datasheet and measured ceilings side by side."""
    from paradnn.analysis.table3 import table3

    with Store(store, create=False, readonly=True) as s:
        platforms, results = s.platforms(), s.results()
    rows = table3(platforms, results)
    table(rows, 3)
    caption(
        "The paper's Table 3 lists its platforms' peaks, memory and bandwidth from their datasheets; here every platform "
        f"in the store ({len(rows)} rows) stands beside them, with what this machine measured (its matmul ceiling per "
        "precision and its copy bandwidth) next to what a datasheet states. The paper's Skylake CPU has no row: "
        "paradnn holds no cited datasheet for it."
    )


def sides_words(result) -> str:
    """What a comparison did with the settings that belong to a side, in words: "dtype held
    (float32); xla free (cpu False, cpu[threads=1] True: each platform at its automatically
    chosen XLA setting)"."""
    words = []
    for column, side in result.sides.items():
        if side["held"]:
            words.append(f"{column} held ({', '.join(side['values'])})")
        else:
            words.append(
                f"{column} free ({result.baseline} {', '.join(side['baseline'])}, {result.target} "
                f"{', '.join(side['target'])}: {side['why']})"
            )
    return "; ".join(words) or "every run setting held"


FIG7_LAYERS = 64  # the depth of the paper's Fig. 7 panels


REFERENCE_PAIR = ("v100", "tpu-v2-8")  # the original study's platforms, as imported


def fig7_section(store: str | Path, platform: str, dtype: str, xla: object) -> list:
    """Fig. 7: FC throughput at 64 layers, one panel per platform: ``platform`` as measured here
    beside the original study's V100 and TPU v2-8. Returns the package's checks of the figure's
    side trends on ``platform`` (examples/s rises with batch, falls with width)."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots

    here = load(store, platform=platform, families=["fc"], dtype=dtype, xla=xla)
    theirs = load(store, families=["fc"]).where(platform=list(REFERENCE_PAIR))
    rows = Results.concat([here, theirs]).where(layers=FIG7_LAYERS)
    deep = rows.where(platform=platform)
    if rows.empty:
        print(f"No {FIG7_LAYERS}-layer FC configuration in the store: Fig. 7 skipped.")
        return []
    shown = sorted(rows.frame["platform"].unique())
    show(
        plots.heatmaps(
            rows,
            "fc",
            "examples_per_sec",
            f"FC throughput at {FIG7_LAYERS} layers on {', '.join(shown)} (Fig. 7)",
            "throughput (examples/s, log colour)",
            log_color=True,
            panels_by="platform",
        )
    )
    checks = [
        obs.trend(deep, "batch", "fc", "examples_per_sec", id="", platform=platform),
        obs.trend(deep, "nodes", "fc", "examples_per_sec", rising=False, id="", platform=platform),
    ]
    precisions = ", ".join(f"{p} {d}" for p, d in rows.frame.groupby("platform")["dtype"].first().items())
    caption(
        f"The paper found FC examples/s rises with batch and falls with width on the CPU, GPU and TPU alike (Fig. 7; "
        f"each panel at its own precision: {precisions}); here {len(deep)} {FIG7_LAYERS}-layer configurations "
        f"were measured on {platform}. " + " ".join(c.sentence for c in checks)
    )
    return checks


def measure_both(p: Parameters) -> list[str]:
    """Measure what the store lacks on ``p.baseline`` and ``p.target``: the original study's own FC
    grid, cheapest first (``p.overlap_count`` configurations; else the preset's grids of
    ``p.families``), in ``p.dtype`` on both and also in ``p.low_precision`` on the target (each
    platform at its own precision, as the paper compares them). Returns the sweeps' lines."""
    from paradnn.sections.common import ensure_measured
    from paradnn.store.legacy import overlap_configs

    original_grid = overlap_configs(p.overlap_count) if p.overlap_count else None
    lines = []
    for platform in (p.baseline, p.target):
        precisions = [p.dtype] + ([p.low_precision] if p.low_precision and original_grid and platform == p.target else [])
        lines += ensure_measured(
            p.store,
            p.families,
            preset=p.preset,
            overrides=p.overrides,
            configs=original_grid,
            xla=p.xla,
            variants=[{"dtype": d} for d in precisions],
            platform=platform,
            measure_missing=p.measure_missing,
            budget_minutes=p.budget_minutes / 2,
            max_seconds=p.max_seconds,
            lanes=p.lanes,
        )
    return lines


def local_rows(p: Parameters) -> Results:
    """The rows of both local platforms at the report's dtype and XLA setting, one per configuration."""
    return Results.concat(
        [load(p.store, platform=x, families=p.families, dtype=p.dtype, xla=p.xla) for x in (p.baseline, p.target)]
    )


def projection_part(p: Parameters) -> list[Verdict]:
    """Projection checked where the truth is here (the baseline's profiled FC steps projected onto
    the target and compared with what the target measured at the same settings), then, with
    ``p.project_to``, the target projected onto that datasheet. Profiles and measures what the
    store lacks first. Returns the check's verdict, if any."""
    from paradnn.store.legacy import overlap_configs

    picked = projection_picks(p.store, (p.baseline, p.target), p.projection_count, p.dtype, p.xla)
    # The target's profiles of the original grid's configurations score the method against the 2019 chips.
    original = [c.label for c in overlap_configs(p.overlap_count)] if p.overlap_count and picked else []
    for platform in (p.baseline, p.target) if p.project_to else (p.baseline,):
        labels = sorted(set(picked) | (set(original) if platform == p.target else set()))
        if p.measure_missing and is_local(platform) and labels:
            print(profile_here(p.store, platform, labels, p.dtype))
    if p.measure_missing:
        print(measure_like_source(p.store, p.baseline, p.target, picked, p.max_seconds))
    check = projection_check_section(p.store, p.baseline, p.target, picked)
    if p.project_to:
        what_if_section(p.store, p.target, p.project_to, picked, check)
    return ([check] if check else []) + [validation_section(p.store, p.target)]


def fig7_part(p: Parameters) -> list[Verdict]:
    """Fig. 7: the target's FC throughput at 64 layers over ``p.fig7_nodes`` x ``p.fig7_batch``
    (measured first where the store lacks it) beside the original study's platforms."""
    from paradnn.sections.common import ensure_measured

    if p.fig7_nodes and p.fig7_batch:
        slice_ = {"fc": {"layers": [FIG7_LAYERS], "nodes": p.fig7_nodes, "batch": p.fig7_batch}}
        for line in ensure_measured(
            p.store,
            ["fc"],
            preset=p.preset,
            overrides=slice_,
            dtype=p.dtype,
            xla=p.xla,
            platform=p.target,
            measure_missing=p.measure_missing,
            budget_minutes=p.budget_minutes / 4,
            max_seconds=p.max_seconds,
            lanes=p.lanes,
        ):
            print(line)
    return fig7_section(p.store, p.target, p.dtype, p.xla)


def original_pair_section(store: str | Path) -> list[Verdict]:
    """The original study's TPU v2-8 against its V100 (Fig. 8-10 on the paper's own platforms),
    each at the precision it was run in; nothing when the store lacks either sweep."""
    legacy = load(store, families=["fc"]).where(platform=list(REFERENCE_PAIR))
    if legacy.frame["platform"].nunique() < 2:
        print("The original study's sweeps are not in the store.")
        return []
    return platform_section(legacy, *REFERENCE_PAIR, ["fc"], paper_pair=True)
