"""The software-stack report (the paper's section 6): XLA, precision and TensorFlow versions, side by side."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from paradnn.analysis.results import Results
from paradnn.sections import common
from paradnn.sections.common import caption, ensure_measured, is_local, load, look_again, show, table
from paradnn.vocabulary import OK

if TYPE_CHECKING:
    from paradnn.analysis.observations import Verdict
    from paradnn.analysis.roofline import Ceilings
    from paradnn.analysis.speedup import SpeedupResult


@dataclass
class Parameters(common.Parameters):
    """The software stack report's parameters, as its notebook declares them (see the notebook for each one's help)."""

    platform: str
    families: list
    preset: str
    overrides: dict
    low_precision: str
    stacks: list
    stack_overrides: dict


def speedup_maps(result, what: str, platform: str, families: list[str]) -> None:
    """One speedup heatmap per family for a software-stack comparison (red faster, blue slower)."""
    from paradnn import families as registry
    from paradnn.analysis import plots

    for family in families:
        pairs = result.table[result.table["family"] == family].assign(state=OK)
        if len(pairs):
            show(
                plots.heatmaps(
                    pairs,
                    family,
                    "speedup",
                    f"{registry.get(family).title}: speedup from {what} on {platform}",
                    "speedup (x; red: faster, blue: slower)",
                    fmt="{:.2f}",
                    center=1.0,
                    cmap="RdBu_r",
                )
            )


def stack_summary(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """n, median and geometric-mean speedup of each software-stack comparison."""

    rows = [
        {
            "comparison": k,
            "n": len(t),
            "median": t["speedup"].median() if len(t) else np.nan,
            "geomean": float(np.exp(np.log(t["speedup"]).mean())) if len(t) else np.nan,
        }
        for k, t in tables.items()
    ]
    return pd.DataFrame(rows)


def stack_differences(rows: pd.DataFrame, older: str, newer: str) -> str:
    """What else differed between the stacks of TensorFlow ``older`` and ``newer``, from their rows'
    package versions (each stack resolved as of its own release, paradnn.sweeps.stacks)."""
    from paradnn.identity import SOFTWARE

    versions = {}
    for tf_version in (older, newer):
        on = rows[rows["sw_tensorflow"] == tf_version]
        versions[tf_version] = {
            k: ", ".join(sorted(on[f"sw_{k}"].dropna().astype(str).unique()))
            for k in SOFTWARE
            if k not in ("tensorflow", "git", "paradnn") and f"sw_{k}" in on
        }
    differ = [
        f"{k} {versions[older][k] or 'unknown'} against {versions[newer][k] or 'unknown'}"
        for k in versions[older]
        if versions[older][k] != versions[newer].get(k)
    ]
    same = [f"{k} {v}" for k, v in versions[older].items() if v and v == versions[newer].get(k)]
    also = f" (the same: {', '.join(same)})" if same else ""
    return (
        f"TensorFlow {older} against {newer}: besides TensorFlow, the stacks differ in "
        f"{'; '.join(differ) if differ else 'nothing else recorded'}{also}."
    )


def measure(p: Parameters) -> list[str]:
    """Measure what the store lacks: the families under XLA on and off, in float32 and
    ``p.low_precision``, in one sweep; then, with ``p.stacks``, every stack side by side (XLA
    on). Returns the sweeps' lines."""
    started = time.monotonic()
    runs = [{"dtype": d, "xla": x} for x in (True, False) for d in ["float32"] + ([p.low_precision] if p.low_precision else [])]
    lines = ensure_measured(
        p.store,
        p.families,
        preset=p.preset,
        overrides=p.overrides,
        variants=runs,
        platform=p.platform,
        measure_missing=p.measure_missing,
        budget_minutes=p.budget_minutes,
        max_seconds=p.max_seconds,
        lanes=p.lanes,
    )
    if p.stacks and p.measure_missing:
        lines += ensure_measured(
            p.store,
            p.families,
            preset=p.preset,
            overrides=p.stack_overrides,
            xla=True,
            platform=p.platform,
            stacks=p.stacks,
            budget_minutes=p.budget_minutes / 2,
            max_seconds=p.max_seconds,
            lanes=p.lanes,
        )
    if p.measure_missing and is_local(p.platform):
        lines += look_again(
            p.store,
            comparisons(p),
            started=started,
            budget_minutes=p.budget_minutes,
            max_seconds=p.max_seconds,
            platform=p.platform,
            lanes=p.lanes,
        )
    return lines


def comparisons(p: Parameters) -> list[tuple[SpeedupResult, Verdict, list[dict]]]:
    """The report's comparisons on this machine as the store holds them now, each with its verdict and
    the two runs that measure it (for :func:`paradnn.sections.common.look_again`)."""
    from paradnn.analysis import observations as obs

    results = load(p.store, platform=p.platform, families=p.families)
    result, verdict = obs.xla_speedup(results, p.platform)
    out = [(result, verdict, [{"dtype": "float32", "xla": False}, {"dtype": "float32", "xla": True}])]
    if p.low_precision:
        ridge = getattr(_ceilings(p), "ridge", None)
        for words, result, verdict in obs.precision_speedups(results, p.platform, "float32", p.low_precision, ridge):
            xla = words == "XLA on"
            out.append((result, verdict, [{"dtype": "float32", "xla": xla}, {"dtype": p.low_precision, "xla": xla}]))
    return out


def _ceilings(p: Parameters) -> Ceilings | None:
    """The platform's float32 ceilings as the store holds them."""
    from paradnn.analysis.roofline import ceilings_for
    from paradnn.store import Store

    with Store(p.store) as s:
        return ceilings_for(s.platforms(), p.platform, "float32")


def rows(p: Parameters) -> tuple[Results, Results, Ceilings | None]:
    """The platform's rows (the newest TensorFlow only), its rows of every TensorFlow version, and
    its float32 ceilings; prints how many rows and which versions."""

    newest = load(p.store, platform=p.platform, families=p.families)
    versions = load(p.store, platform=p.platform, families=p.families, all_versions=True)
    print(
        f"{len(newest)} rows of {p.platform}; TensorFlow versions in the store: "
        f"{sorted(versions.frame['sw_tensorflow'].dropna().unique())}"
    )
    return newest, versions, _ceilings(p)


def xla_part(results: Results, p: Parameters) -> tuple[SpeedupResult, Verdict]:
    """XLA on against off in float32: a speedup map per family, and the package's own check."""
    from paradnn.analysis import observations as obs

    result, verdict = obs.xla_speedup(results, p.platform)
    speedup_maps(result, "XLA", p.platform, p.families)
    caption(verdict.sentence)
    return result, verdict


def precision_part(
    rows: Results,
    p: Parameters,
    ceilings: Ceilings | None,
) -> tuple[dict[str, SpeedupResult], list[Verdict]]:
    """float32 against ``p.low_precision`` under XLA on and off (O13 each): maps and verdicts by XLA setting."""
    from paradnn.analysis import observations as obs

    results, verdicts = {}, []
    if not p.low_precision:
        return results, verdicts
    ridge = ceilings.ridge if ceilings else None
    for words, result, verdict in obs.precision_speedups(rows, p.platform, "float32", p.low_precision, ridge):
        results[words] = result
        speedup_maps(result, f"{p.low_precision} ({words})", p.platform, p.families)
        verdicts.append(verdict)
        caption(verdict.sentence)
    return results, verdicts


def versions_part(
    xla_result: SpeedupResult, precision_results: dict[str, SpeedupResult], versions: Results, p: Parameters
) -> Verdict:
    """Fig. 12: every software-stack speedup's distribution, the TensorFlow version chain (O12)
    with a map per version step, and each version's speedup with its interval."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.speedup import version_speedups

    tables = {"XLA on / off": xla_result.table}
    for words, result in precision_results.items():
        tables[f"{p.low_precision} / float32, {words}"] = result.table
    verdict, chain = obs.version_chain(versions, p.platform)
    for result in chain:
        tables[f"TF {result.target} / {result.baseline}"] = result.table
        speedup_maps(result, f"TensorFlow {result.target} over {result.baseline}", p.platform, p.families)
        caption(stack_differences(versions.frame, result.baseline, result.target))
    show(plots.speedup_distributions(tables, f"Software-stack speedups on {p.platform} (Fig. 12)"))
    caption(verdict.sentence)
    table(stack_summary(tables), 3)
    by_version = version_speedups(versions.frame)
    if by_version.empty:
        print("No configuration was measured under two TensorFlow versions with the same settings.")
        return verdict
    show(plots.version_speedups(by_version, f"Speedup of each TensorFlow version on {p.platform} (Fig. 12a)"))
    table(by_version, 3)
    caption(
        "The paper found each TensorFlow release sped up the TPU by large factors; here "
        + "; ".join(
            f"{r.target} runs {r.family} at {r.geomean:.2f}x {r.baseline} (95% interval {r.low:.2f}-{r.high:.2f}"
            f"{', within the noise' if r.within_noise else ''}, n = {r.n})"
            for r in by_version.itertuples()
        )
        + "."
    )
    return verdict
