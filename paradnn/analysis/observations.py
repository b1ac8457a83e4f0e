"""The paper's observations as checks against the data at hand.

Each check returns a :class:`Verdict`: ``holds``, ``does not hold`` or ``not enough
data``, with the numbers behind it and one sentence that pairs what the paper found with
what this data shows (used as figure captions in the notebooks).

Trends ("utilisation rises with batch size") are judged on *matched pairs*: groups of
configurations that differ only in the one hyperparameter, comparing its largest value
with its smallest. The trend holds when at least two thirds of the groups agree and the
median ratio is above 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from paradnn import families
from paradnn.analysis.regression import RegressionResult, regress
from paradnn.analysis.speedup import SpeedupResult, compare

HOLDS, FAILS, UNKNOWN = "holds", "does not hold", "not enough data"
AGREEMENT = 2 / 3


@dataclass(frozen=True)
class Verdict:
    observation: str
    paper: str  # what the paper found
    verdict: str
    evidence: str  # the numbers behind the verdict, in words
    numbers: dict = field(default_factory=dict)

    @property
    def sentence(self) -> str:
        here = {HOLDS: "it holds", FAILS: "it does not hold"}.get(self.verdict, "there is not enough data to tell")
        return f"The paper found that {self.paper}; here {here} ({self.evidence})."

    def row(self) -> dict:
        return {"observation": self.observation, "verdict": self.verdict, "evidence": self.evidence}


def table(verdicts: list[Verdict]) -> pd.DataFrame:
    """Verdicts as a DataFrame (the last cell of every notebook)."""
    return pd.DataFrame([v.row() for v in verdicts], columns=["observation", "verdict", "evidence"])


def matched_ratios(df: pd.DataFrame, axis: str, metric: str, family: str) -> pd.Series:
    """metric(largest axis value) / metric(smallest) within groups equal in every other axis."""
    others = [a.name for a in families.get(family).axes if a.name != axis and a.name in df]
    ok = df[(df["family"] == family) & (df["state"] == "ok") & df[metric].notna()]
    if ok.empty or ok[axis].nunique() < 2:
        return pd.Series(dtype=float)
    keys = [c for c in others if c in ok and ok[c].notna().any()]
    ratios = []
    for _, group in ok.groupby(keys, dropna=False) if keys else [(None, ok)]:
        per_value = group.groupby(axis)[metric].median()
        if len(per_value) >= 2 and per_value.iloc[0] > 0:
            ratios.append(per_value.iloc[-1] / per_value.iloc[0])
    return pd.Series(ratios, dtype=float)


def trend(df: pd.DataFrame, axis: str, family: str, metric: str = "utilization", paper: str = "") -> Verdict:
    """Does ``metric`` rise with ``axis`` for ``family``? (matched pairs, see module doc)."""
    fam = families.get(family)
    name = f"{fam.title}: {metric.replace('_', ' ')} rises with {axis}"
    what = "utilisation" if metric == "utilization" else metric.replace("_", " ")
    paper = paper or f"{fam.title} {what} rises with the {fam.axis(axis).title}"
    ratios = matched_ratios(df, axis, metric, family)
    if ratios.empty:
        return Verdict(name, paper, UNKNOWN, f"no {fam.title} configurations that differ only in {axis}")
    share = float((ratios > 1).mean())
    median = float(ratios.median())
    evidence = f"{(ratios > 1).sum()} of {len(ratios)} matched groups rise; median ratio largest/smallest {axis} {median:.2f}x"
    verdict = HOLDS if share >= AGREEMENT and median > 1 else FAILS
    return Verdict(name, paper, verdict, evidence, {"groups": len(ratios), "share_rising": share, "median_ratio": median})


def family_trends(df: pd.DataFrame, family: str) -> list[Verdict]:
    """The paper's Fig. 2 trends for one family: utilisation rises with batch and with width."""
    width = families.get(family).width
    return [trend(df, "batch", family)] + ([trend(df, width, family)] if width else [])


def largest_weights(regressions: dict[str, RegressionResult]) -> Verdict:
    """Batch size or the width axis carries the largest regression weight, in every family."""
    name = "Batch size and layer width drive utilisation most"
    paper = "batch size and the width of the layers (nodes, filters, embedding) carry the largest weights"
    strongest = {f: r.coefficients["coef"].abs().idxmax() for f, r in regressions.items() if not r.coefficients.empty}
    if not strongest:
        return Verdict(name, paper, UNKNOWN, "no family has enough varied configurations for a regression")
    evidence = "largest weight: " + ", ".join(f"{k} for {families.get(f).title}" for f, k in strongest.items())
    agrees = all(k in ("batch", families.get(f).width) for f, k in strongest.items())
    return Verdict(name, paper, HOLDS if agrees else FAILS, evidence, {"strongest": strongest})


def memory_bound_share(breakdown: pd.DataFrame, ridge: float, threshold: float = 0.10) -> Verdict:
    """Even the most compute-bound profiled model spends a noticeable time share in
    memory-bound op categories (intensity below the ridge point)."""
    name = "Compute-bound models spend noticeable time in memory-bound ops"
    paper = "even compute-bound models spend a noticeable share of time in memory-bound ops"
    if breakdown is None or breakdown.empty:
        return Verdict(name, paper, UNKNOWN, "no per-op profile")
    per_config = []
    for label, g in breakdown.groupby("label"):
        total_flops = g["flops"].sum()
        intensity = total_flops / g["bytes"].sum() if g["bytes"].sum() else np.nan
        memory_share = g.loc[g["intensity"].fillna(0) < ridge, "time_share"].sum()
        per_config.append((label, intensity, memory_share))
    label, intensity, share = max(per_config, key=lambda t: t[1])
    evidence = f"the most compute-intensive profiled model ({label}) spends {share:.0%} of its time in ops below the ridge"
    verdict = HOLDS if share >= threshold else FAILS
    return Verdict(name, paper, verdict, evidence, {"label": label, "memory_bound_share": float(share)})


def speedup_depends_on(table_: pd.DataFrame, family: str, axes: tuple[str, ...] = ("nodes", "batch")) -> Verdict:
    """Platform speedup varies with model shape: log2(speedup) regressed on log2 features."""
    name = f"{families.get(family).title}: speedup depends on {' and '.join(axes)}"
    paper = (
        "small FC models with large batches favour the platform with the larger matrix units, "
        "large FC models with small batches the other: speedup depends on nodes and batch"
    )
    sub = table_[table_["family"] == family] if "family" in table_ else table_
    if len(sub) < 6:
        return Verdict(name, paper, UNKNOWN, f"{len(sub)} configurations on both platforms (need 6)")
    data = sub.assign(log2_speedup=np.log2(sub["speedup"]))
    reg = regress(data, "log2_speedup", family=family)
    coef = reg.coefficients
    significant = [a for a in axes if a in coef.index and np.sign(coef.loc[a, "ci_low"]) == np.sign(coef.loc[a, "ci_high"])]
    coefs = ", ".join(f"{a} {reg.coefficients.loc[a, 'coef']:+.2f}" for a in axes if a in reg.coefficients.index)
    spread = f"speedup {sub['speedup'].min():.2f}x to {sub['speedup'].max():.2f}x"
    evidence = f"{spread}; log2-speedup weights {coefs} (R^2 {reg.r_squared:.2f}, n {reg.n})"
    verdict = HOLDS if significant and reg.r_squared >= 0.3 else FAILS
    return Verdict(name, paper, verdict, evidence, {"significant": significant, "r_squared": reg.r_squared})


def stack_speedup(result, name: str, paper: str, compute_bound_only: bool = False, margin: float = 0.05) -> Verdict:
    """A software-stack or precision change speeds things up: median speedup above 1 + margin.

    With ``compute_bound_only`` only the configurations in the top half by model FLOPs count.
    """
    t = result.table
    if compute_bound_only and not t.empty:
        t = t[t["flops_model"] >= t["flops_model"].median()]
    if len(t) < 2:
        return Verdict(name, paper, UNKNOWN, f"{len(t)} configurations measured both ways (need 2)")
    median = float(t["speedup"].median())
    spread = f"range {t['speedup'].min():.2f}x-{t['speedup'].max():.2f}x"
    evidence = f"median speedup {median:.2f}x over {len(t)} configurations ({spread})"
    return Verdict(name, paper, HOLDS if median > 1 + margin else FAILS, evidence, {"median": median, "n": len(t)})


def trace_memory_bound_share(traces: pd.DataFrame, ridge: float = 75.0, threshold: float = 10.0) -> Verdict:
    """On the original TPU v2 traces: the best-utilised configuration's time share in op
    categories below the ridge point (``time_perc`` is in percent)."""
    name = "TPU v2: compute-bound models spend noticeable time in memory-bound ops"
    paper = "even compute-bound models spend a noticeable share of time in memory-bound ops"
    whole = traces[traces["category"] == "all"]
    ops = traces[traces["category"] != "all"]
    if whole.empty or ops.empty:
        return Verdict(name, paper, UNKNOWN, "no TPU traces with an op breakdown in the store")
    below = ops[ops["intensity"] < ridge].groupby("label")["time_perc"].sum()
    best = whole.loc[whole["flops_perc"].idxmax(), "label"]
    share = float(below.get(best, 0.0))
    evidence = (f"the best-utilised trace ({best}, {whole['flops_perc'].max():.0f}% of peak) spends {share:.0f}% of its "
                f"time in op categories below the {ridge:.0f} FLOPs/byte ridge")  # fmt: skip
    return Verdict(name, paper, HOLDS if share >= threshold else FAILS, evidence, {"label": best, "share_percent": share})


def version_speedup(df: pd.DataFrame) -> tuple[Verdict, SpeedupResult | None]:
    """Newest TensorFlow version over the oldest in the store (float32); the verdict and the comparison."""
    name, paper = "Newer software stacks speed things up", "newer software stacks speed things up"
    versions = sorted(df["sw_tensorflow"].dropna().unique(), key=lambda v: tuple(int(p) for p in v.split(".")[:3] if p.isdigit()))
    if len(versions) < 2:
        return Verdict(name, paper, UNKNOWN, f"one TensorFlow version in the store ({', '.join(versions) or 'none'})"), None
    result = compare(df[df["dtype"] == "float32"], versions[0], versions[-1], by="sw_tensorflow")
    return stack_speedup(result, name, paper), result


# Op categories whose arithmetic the profiler cannot count (a recurrent loop's matmuls run
# inside a While op): never called memory-bound for want of a FLOP count.
UNCOUNTED_CATEGORIES = ("recurrent loop",)


def compute_bound_memory_time(breakdown: pd.DataFrame, ridge: float, points: pd.DataFrame,
                              threshold: float = 0.10) -> Verdict:  # fmt: skip
    """Observation 2 on profiled models: those that are compute-bound still spend more than
    ``threshold`` of their time in memory-bound op categories (intensity below the ridge).

    The premise is checked on the roofline: a model is compute-bound when its point
    (``points``: label and intensity, as :func:`paradnn.analysis.roofline.model_points`
    gives them) lies at or right of the ridge. Op categories whose arithmetic the
    profiler cannot count are left out of the time shares, never called memory-bound.
    """
    name = "Compute-bound models spend noticeable time in memory-bound ops"
    paper = "even compute-bound models such as Transformer and ResNet-50 spend a noticeable share of time in memory-bound ops"
    if breakdown is None or breakdown.empty:
        return Verdict(name, paper, UNKNOWN, "no per-op profile")
    rows = []
    for label, g in breakdown.groupby("label", sort=False):
        counted = g[~g["category"].isin(UNCOUNTED_CATEGORIES)]
        on_roofline = points.loc[points["label"] == label, "intensity"]
        intensity = float(on_roofline.median()) if len(on_roofline) else float("nan")
        share = counted.loc[counted["intensity"].fillna(0) < ridge, "time_share"].sum() / max(counted["time_share"].sum(), 1e-12)
        rows.append({"family": g["family"].iloc[0], "label": label, "intensity": intensity, "memory_bound_share": share,
                     "uncounted_share": float(g.loc[g["category"].isin(UNCOUNTED_CATEGORIES), "time_share"].sum())})  # fmt: skip
    table = pd.DataFrame(rows)
    bound = table[table["intensity"] >= ridge]  # NaN (not on the roofline) is never compute-bound
    shown = "; ".join(f"{families.get(r.family).title} {r.intensity:.0f} FLOPs/B, {r.memory_bound_share:.0%} memory-bound"
                      for r in table.itertuples())  # fmt: skip
    if bound.empty:
        return Verdict(name, paper, UNKNOWN, f"no profiled model is compute-bound here (ridge {ridge:.0f} FLOPs/B: {shown})",
                       {"models": rows})  # fmt: skip
    holds = bool((bound["memory_bound_share"] > threshold).all())
    evidence = f"{len(bound)} of {len(table)} profiled models are right of the ridge ({ridge:.0f} FLOPs/B): {shown}"
    return Verdict(name, paper, HOLDS if holds else FAILS, evidence, {"models": rows})


def utilisation_ratio(table: pd.DataFrame, target: str = "tpu-v2-8", baseline: str = "v100") -> Verdict:
    """Fig. 11: per family measured on both, median FLOPS utilisation of ``target`` over ``baseline``.

    ``table`` is :func:`paradnn.analysis.workloads.platform_table` (families x platforms).
    """
    name = f"{target} reaches higher FLOPS utilisation than {baseline}"
    paper = "the TPU reaches higher FLOPS utilisation than the GPU, up to 3x"
    if target not in table or baseline not in table:
        missing = " and ".join(p for p in (target, baseline) if p not in table)
        return Verdict(name, paper, UNKNOWN, f"needs measurements on {missing}")
    both = table[[target, baseline]].dropna()
    if both.empty:
        return Verdict(name, paper, UNKNOWN, f"no family measured on both {target} and {baseline}")
    ratios = both[target] / both[baseline]
    shown = ", ".join(f"{families.get(f).title if f in families.names() else f} {r:.2f}x" for f, r in ratios.items())
    verdict = HOLDS if (ratios > 1).all() else FAILS
    return Verdict(name, paper, verdict, f"utilisation ratio per family: {shown}", {"ratios": ratios.to_dict()})
