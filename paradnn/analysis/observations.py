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

from paradnn.analysis.regression import FAMILY_FEATURES, regress
from paradnn.config import parse_label
from paradnn.counting import flops_model

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
    others = [f for f in FAMILY_FEATURES[family] if f != axis] + [c for c in ("block", "cell") if c in df]
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
    name = f"{family.upper()}: {metric.replace('_', ' ')} rises with {axis}"
    ratios = matched_ratios(df, axis, metric, family)
    if ratios.empty:
        return Verdict(name, paper, UNKNOWN, f"no {family.upper()} configurations that differ only in {axis}")
    share = float((ratios > 1).mean())
    median = float(ratios.median())
    evidence = f"{(ratios > 1).sum()} of {len(ratios)} matched groups rise; median ratio largest/smallest {axis} {median:.2f}x"
    verdict = HOLDS if share >= AGREEMENT and median > 1 else FAILS
    return Verdict(name, paper, verdict, evidence, {"groups": len(ratios), "share_rising": share, "median_ratio": median})


PAPER_TRENDS = {
    ("fc", "batch"): "FC utilisation rises with batch size",
    ("cnn", "batch"): "CNN utilisation rises with batch size",
    ("rnn", "batch"): "RNN utilisation rises with batch size",
    ("fc", "nodes"): "FC utilisation rises with the number of nodes per layer",
    ("cnn", "filters"): "CNN utilisation rises with the number of filters",
    ("rnn", "embedding"): "RNN utilisation rises with the embedding size",
}


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
    name = f"{family.upper()}: speedup depends on {' and '.join(axes)}"
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
        flops = [flops_model(parse_label(f, label)) for f, label in zip(t["family"], t["label"])]
        t = t[np.asarray(flops) >= np.median(flops)]
    if len(t) < 2:
        return Verdict(name, paper, UNKNOWN, f"{len(t)} configurations measured both ways (need 2)")
    median = float(t["speedup"].median())
    spread = f"range {t['speedup'].min():.2f}x-{t['speedup'].max():.2f}x"
    evidence = f"median speedup {median:.2f}x over {len(t)} configurations ({spread})"
    return Verdict(name, paper, HOLDS if median > 1 + margin else FAILS, evidence, {"median": median, "n": len(t)})
