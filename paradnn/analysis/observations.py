"""The paper's observations as checks against the data at hand, each one verdict record.

Every check returns a :class:`Verdict`: the claim, what was compared (``held_fixed``, with
what was left free and why), the **effect** (a median ratio, a slope, a share) with its 95%
**interval** (a bootstrap over configurations or groups, or a regression's own interval),
``n``, the **rule** as data (:class:`Rule`: threshold, direction, minimum ``n``) and an
outcome: ``holds`` or ``does not hold`` only when the whole interval lies on one side of the
threshold, ``inconclusive`` otherwise (the interval shown), and ``needs ...`` where no data
in the store can test it (:mod:`paradnn.analysis.registry`). A maximum never decides. A
claim of several parts (a trend that must both move and keep moving) holds when every part
holds and does not hold when any part does not; the record shows the part that decided.

Trends ("utilisation rises with batch size") are judged on matched groups (configurations
that differ only in the one hyperparameter): the median over groups of the metric's ratio
from the smallest to the largest value of the axis must clear 2%, and more than half of the
adjacent steps must move the claimed way (a metric that rises once and then stays flat does
not "rise with" the axis; a tail of flat steps is reported as a plateau); both intervals are
bootstraps over the groups.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from paradnn import families
from paradnn.analysis.regression import RegressionResult, regress
from paradnn.analysis.results import Results, Rows, results_of
from paradnn.analysis.speedup import SpeedupResult
from paradnn.platform import DATASHEETS
from paradnn.vocabulary import FAILS, HOLDS, INCONCLUSIVE, OOM, PROJECTED_FAILS, PROJECTED_HOLDS, TIMEOUT, plain_outcome

UNKNOWN_SENTENCE = "it is inconclusive"
FLAT = 0.02  # an adjacent step within 2% is flat
LEVEL = 0.95  # every interval's confidence level
MIN_MEASURED_N = 2  # no measured effect decides on fewer observations
BOOTSTRAP_DRAWS = 2000


@dataclass(frozen=True)
class Rule:
    """When a claim holds, as data. ``direction`` ``>``: the effect's whole interval above
    ``threshold + margin`` holds, below ``threshold - margin`` does not; ``<`` the other way
    round; ``>=`` and ``<=`` the same with the threshold itself on the holding side (for rules
    stated "at least", "at most"); ``within``: the whole interval within ``threshold ± margin`` holds, wholly outside it
    does not. Fewer than ``min_n`` observations, or an interval across the line, are inconclusive.
    ``exact``: the effect is a count or a deterministic figure (its interval is itself)."""

    statistic: str  # what the effect is, in words ("median speedup", "regression weight of batch")
    threshold: float
    direction: str = ">"
    min_n: int = 2
    margin: float = 0.0
    exact: bool = False

    def __post_init__(self) -> None:
        if self.direction not in (">", "<", ">=", "<=", "within"):
            raise ValueError(f"rule direction {self.direction!r}; allowed: >, <, >=, <=, within")

    def judge(self, effect: float | None, interval: tuple[float, float] | None, n: int) -> str:
        """The outcome of ``effect`` (its ``interval``, over ``n`` observations) under this rule. A
        measured effect needs at least two observations whatever ``min_n`` says (one value's
        interval is itself, of zero width); a count or deterministic figure (``exact``) its ``min_n``."""
        needed = self.min_n if self.exact else max(self.min_n, MIN_MEASURED_N)
        if effect is None or interval is None or n < needed or not all(map(math.isfinite, interval)):
            return INCONCLUSIVE
        low, high = interval
        lower, upper = self.threshold - self.margin, self.threshold + self.margin
        if self.direction == ">":
            return HOLDS if low > upper else FAILS if high < lower else INCONCLUSIVE
        if self.direction == "<":
            return HOLDS if high < lower else FAILS if low > upper else INCONCLUSIVE
        if self.direction == ">=":
            return HOLDS if low >= upper else FAILS if high < lower else INCONCLUSIVE
        if self.direction == "<=":
            return HOLDS if high <= lower else FAILS if low > upper else INCONCLUSIVE
        return HOLDS if lower <= low and high <= upper else FAILS if high < lower or low > upper else INCONCLUSIVE

    def words(self, level: float | None = None) -> str:
        """The rule in a few words: "median speedup > 1.05 over its whole 95% interval, n >= 2"."""
        level = LEVEL if level is None else level
        if self.direction == "within":
            line = f"{self.statistic} within {self.threshold:g} ± {self.margin:g}"
        else:
            line = f"{self.statistic} {self.direction} {self.threshold:g}"
            line += f" (± {self.margin:g} is neither)" if self.margin else ""
        return line + ("" if self.exact else f" over its whole {_percent(level)} interval") + f", n >= {self.min_n}"

    def as_dict(self) -> dict:
        return {
            "statistic": self.statistic,
            "threshold": self.threshold,
            "direction": self.direction,
            "min_n": self.min_n,
            "margin": self.margin,
            "exact": self.exact,
        }


@dataclass(frozen=True)
class Verdict:
    """One judged claim (see the module docstring). A verdict that says ``holds`` or ``does not
    hold`` must carry the rule, effect and interval that say so: it is checked when made."""

    observation: str  # what was checked, in a few words
    paper: str  # what the paper found
    verdict: str  # the outcome
    evidence: str  # the numbers behind the verdict, in words
    numbers: dict = field(default_factory=dict)
    id: str = ""  # the paper's observation (O1..O14); empty for the package's own checks
    platform: str = ""  # the platform (or pair) it was judged on
    held_fixed: dict | None = None  # a comparison's run settings held equal, and what it left free
    n: int | None = None  # observations behind the effect (pairs, configurations, groups)
    effect: float | None = None
    interval: tuple[float, float] | None = None
    rule: Rule | None = None
    level: float = LEVEL  # the interval's confidence level (below 95% never; above it after several looks)

    def __post_init__(self) -> None:
        decided = self.verdict in (HOLDS, FAILS, PROJECTED_HOLDS, PROJECTED_FAILS)
        if decided:
            said = plain_outcome(self.verdict)
            judged = self.rule.judge(self.effect, self.interval, self.n or 0) if self.rule else None
            if judged != said:
                raise ValueError(
                    f"{self.observation}: {self.verdict!r} needs a rule its effect and interval meet "
                    f"(effect {self.effect}, interval {self.interval}, n {self.n}, rule {self.rule})"
                )

    @property
    def figure(self) -> str:
        """The effect with its interval, n and rule, in words ("" without an effect)."""
        if self.effect is None or self.rule is None:
            return ""
        low, high = self.interval or (math.nan, math.nan)
        spread = "" if self.rule.exact else f" ({_percent(self.level)} interval {low:.3g} to {high:.3g})"
        return f"{self.rule.statistic} {self.effect:.3g}{spread}, n {self.n}; rule: {self.rule.words(self.level)}"

    @property
    def sentence(self) -> str:
        """The verdict in words; "the paper found" only before a finding of the paper (an observation id)."""
        here = {
            HOLDS: "it holds",
            FAILS: "it does not hold",
            PROJECTED_HOLDS: "projected, not measured, it holds",
            PROJECTED_FAILS: "projected, not measured, it does not hold",
        }.get(self.verdict, UNKNOWN_SENTENCE)
        where = f" on {self.platform}" if self.platform else ""
        said = "The paper found that" if self.id else "paradnn checks (not a finding of the paper) that"
        figure = f"; {self.figure}" if self.figure else ""
        return f"{said} {self.paper}; here{where} {here} ({self.evidence}{figure})."

    def row(self) -> dict:
        return {"observation": self.observation, "verdict": self.verdict, "evidence": self.evidence, "effect": self.figure}

    def about(self, id: str, platform: str = "") -> Verdict:
        """The same verdict, tagged with the observation and platform it judges."""
        return dataclasses.replace(self, id=id, platform=platform or self.platform)

    def as_dict(self) -> dict:
        """The record as ``observations.json`` holds it (outcome, effect, interval, n, rule, held_fixed)."""
        return {
            "outcome": self.verdict,
            "effect": self.effect,
            "level": self.level,
            "interval": list(self.interval) if self.interval is not None else None,
            "n": self.n,
            "rule": self.rule.as_dict() if self.rule else None,
            "held_fixed": self.held_fixed or {},
        }


@dataclass(frozen=True)
class Part:
    """One part of a claim: its effect, interval, n and rule (:func:`decide`)."""

    name: str
    effect: float | None
    interval: tuple[float, float] | None
    n: int
    rule: Rule
    level: float = LEVEL

    @property
    def outcome(self) -> str:
        return self.rule.judge(self.effect, self.interval, self.n)


def decide(*parts: Part) -> Part:
    """The part that decides a claim of several: the first that does not hold, else the first
    inconclusive, else (all hold) the one nearest its threshold relative to its interval."""
    for outcome in (FAILS, INCONCLUSIVE):
        for part in parts:
            if part.outcome == outcome:
                return part
    return min(parts, key=lambda p: abs(p.effect - p.rule.threshold) if p.effect is not None else math.inf)


def judged(
    name: str,
    paper: str,
    parts: Part | Sequence[Part],
    evidence: str,
    numbers: dict | None = None,
    projected: bool = False,
    **about: Any,
) -> Verdict:
    """A verdict from its part(s): the outcome, effect, interval, n and rule of the deciding
    part; every part's figures in ``numbers["parts"]`` when there are several."""
    parts = [parts] if isinstance(parts, Part) else list(parts)
    deciding = decide(*parts)
    outcome = deciding.outcome
    if projected and outcome != INCONCLUSIVE:
        outcome = PROJECTED_HOLDS if outcome == HOLDS else PROJECTED_FAILS
    numbers = dict(numbers or {})
    if len(parts) > 1:
        numbers["parts"] = [
            {
                "part": p.name,
                "outcome": p.outcome,
                "effect": p.effect,
                "interval": list(p.interval) if p.interval else None,
                "n": p.n,
                "rule": p.rule.words(),
            }
            for p in parts
        ]
        others = "; ".join(
            f"{p.name}: {p.rule.statistic} {_num(p.effect)} {_spread(p)} ({p.outcome})" for p in parts if p is not deciding
        )
        evidence += f"; also {others}" if others else ""
    return Verdict(
        name,
        paper,
        outcome,
        evidence,
        numbers,
        n=deciding.n,
        effect=deciding.effect,
        interval=deciding.interval,
        rule=deciding.rule,
        level=deciding.level,
        **about,
    )


def inconclusive(name: str, paper: str, why: str, **about: Any) -> Verdict:
    """A verdict with too little to judge: says why (the minimum it needs)."""
    return Verdict(name, paper, INCONCLUSIVE, why, **about)


def _percent(level: float) -> str:
    """A confidence level as the pages print it: 95%, 97.5%."""
    return f"{level * 100:.3g}%"


def level_after(looks: int) -> float:
    """The confidence level of each of ``looks`` looks at one comparison: 95% split over them (Bonferroni)."""
    return 1 - (1 - LEVEL) / max(1, looks)


def _num(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.3g}"


def _spread(part: Part) -> str:
    if part.rule.exact or part.interval is None:
        return ""
    return f"[{_num(part.interval[0])}, {_num(part.interval[1])}]"


def bootstrap(
    values: Sequence[float] | np.ndarray,
    statistic: Callable[[np.ndarray], float] = np.median,
    log: bool = False,
    seed: int = 0,
    replicates: Sequence[Sequence[float]] | None = None,
    level: float = LEVEL,
) -> tuple[float, float]:
    """The percentile-bootstrap interval (``level``, 95% by default) of ``statistic`` over ``values``
    (one per configuration or group), in log space for ratios (``log``). NaNs when empty.

    With ``replicates`` (per value, its repeated measurements: the per-round speedups of an
    interleaved pair, or each measurement's speedup) the bootstrap has two levels: each draw
    resamples the values, and within each its replicates, whose median stands for it in that
    draw; so the interval holds the spread between reruns as well as between configurations."""
    a = np.asarray(values, dtype=float)
    keep = np.isfinite(a) & ((a > 0) if log else True)
    if not keep.any():
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    inner = _inner_draws(a, keep, replicates, log, rng)  # values x draws
    picks = rng.integers(0, inner.shape[0], size=(BOOTSTRAP_DRAWS, inner.shape[0]))
    draws = np.array([statistic(inner[row, i]) for i, row in enumerate(picks)])
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(draws, tail), np.percentile(draws, 100 - tail)
    return (float(np.exp(low)), float(np.exp(high))) if log else (float(low), float(high))


def _inner_draws(
    values: np.ndarray, keep: np.ndarray, replicates: Sequence[Sequence[float]] | None, log: bool, rng: np.random.Generator
) -> np.ndarray:
    """Per kept value, its value in each bootstrap draw: the median of its resampled replicates
    (a value without two replicates stands as itself); in log space with ``log``."""
    rows = []
    for value, reps in zip(
        values[keep], [r for r, k in zip(replicates, keep) if k] if replicates is not None else [None] * int(keep.sum())
    ):
        r = np.asarray([x for x in (reps if reps is not None else []) if np.isfinite(x) and (x > 0 or not log)], dtype=float)
        if len(r) < 2:
            rows.append(np.full(BOOTSTRAP_DRAWS, value))
            continue
        rows.append(np.median(r[rng.integers(0, len(r), size=(BOOTSTRAP_DRAWS, len(r)))], axis=1))
    inner = np.vstack(rows)
    return np.log(inner) if log else inner


def median_part(
    name: str,
    values: Sequence[float] | np.ndarray | pd.Series,
    rule: Rule,
    log: bool = False,
    replicates: Sequence[Sequence[float]] | pd.Series | None = None,
    level: float = LEVEL,
) -> Part:
    """A part whose effect is the median of ``values`` (one per configuration), bootstrapped (over
    the values, and within each over its ``replicates`` where given: :func:`bootstrap`) at ``level``."""
    a = np.asarray(values, dtype=float)
    reps = list(replicates) if replicates is not None else None
    keep = np.isfinite(a) & ((a > 0) if log else True)
    effect = float(np.median(a[keep])) if keep.any() else None
    interval = bootstrap(a, log=log, replicates=reps, level=level) if keep.any() else None
    return Part(name, effect, interval, int(keep.sum()), rule, level)


def speedup_part(name: str, table: pd.DataFrame, rule: Rule, looks: int = 1) -> Part:
    """A part whose effect is the median speedup of a comparison's pairs (``SpeedupResult.table`` or
    a subset of it), its interval resampling the pairs and, within each, its rounds or reruns, at
    the level :func:`level_after` its ``looks`` leave."""
    replicates = table["replicates"] if "replicates" in table else None
    return median_part(name, table["speedup"], rule, log=True, replicates=replicates, level=level_after(looks))


def coefficient_part(name: str, reg: RegressionResult, axis: str, rule: Rule) -> Part:
    """A part whose effect is ``axis``'s regression weight with the regression's 95% interval."""
    if axis not in reg.coefficients.index:
        return Part(name, None, None, reg.n, rule)
    c = reg.coefficients.loc[axis]
    return Part(name, float(c["coef"]), (float(c["ci_low"]), float(c["ci_high"])), reg.n, rule)


def exact_part(name: str, effect: float, n: int, rule: Rule) -> Part:
    """A part whose effect is a count or a deterministic figure: its interval is itself."""
    return Part(name, float(effect), (float(effect), float(effect)), n, dataclasses.replace(rule, exact=True))


def table(verdicts: list[Verdict]) -> pd.DataFrame:
    """Verdicts as a DataFrame."""
    return pd.DataFrame([v.row() for v in verdicts], columns=["observation", "verdict", "evidence", "effect"])


# ------------------------------------------------------------------ trends

MIN_GROUPS = 2  # matched groups a trend needs


def matched_groups(rows: Rows, axis: str, metric: str, family: str) -> list[pd.Series]:
    """Per group of configurations equal in every other axis: the median ``metric`` at each ``axis`` value."""
    results = results_of(rows)
    others = [a.name for a in families.get(family).axes if a.name != axis and a.name in results.frame]
    ok = results.where(family=family).ok().with_value(metric).frame
    if ok.empty or ok[axis].nunique() < 2:
        return []
    keys = [c for c in others if c in ok and ok[c].notna().any()]
    groups = ok.groupby(keys, dropna=False) if keys else [(None, ok)]
    series = [group.groupby(axis)[metric].median().sort_index() for _, group in groups]
    return [s for s in series if len(s) >= 2 and (s > 0).all()]


def _share_part(name: str, hits: np.ndarray, totals: np.ndarray, rule: Rule) -> Part:
    """A part whose effect is a pooled share (``hits / totals`` summed over groups), bootstrapped over the groups."""
    if not len(totals) or totals.sum() == 0:
        return Part(name, None, None, 0, rule)
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(totals), size=(BOOTSTRAP_DRAWS, len(totals)))
    draws = hits[picks].sum(axis=1) / np.maximum(totals[picks].sum(axis=1), 1)
    tail = (1 - LEVEL) / 2 * 100
    interval = (float(np.percentile(draws, tail)), float(np.percentile(draws, 100 - tail)))
    return Part(name, float(hits.sum() / totals.sum()), interval, len(totals), rule)


def trend(
    rows: Rows,
    axis: str,
    family: str,
    metric: str = "utilization",
    paper: str = "",
    rising: bool = True,
    id: str = "O1",
    platform: str = "",
) -> Verdict:
    """Does ``metric`` rise (or fall) with ``axis`` for ``family``? Two parts, both bootstrapped over
    matched groups: the median ratio from the smallest to the largest value clears 2%, and more than
    half of the adjacent steps move that way (module doc)."""
    fam = families.get(family)
    way = "rises" if rising else "falls"
    what = "utilisation" if metric == "utilization" else metric.replace("_", " ")
    name = f"{fam.title}: {what} {way} with {axis}"
    paper = paper or f"{fam.title} {what} {way} with the {fam.axis(axis).title}"
    groups = matched_groups(rows, axis, metric, family)
    if not groups:
        return inconclusive(name, paper, f"no {fam.title} configurations that differ only in {axis}", id=id, platform=platform)
    sign = 1 if rising else -1
    logs = [np.log(s.to_numpy()[1:] / s.to_numpy()[:-1]) * sign for s in groups]
    along = np.array([(g > np.log1p(FLAT)).sum() for g in logs], dtype=float)
    against = np.array([(g < -np.log1p(FLAT)).sum() for g in logs], dtype=float)
    totals = np.array([len(g) for g in logs], dtype=float)
    ratios = [s.iloc[-1] / s.iloc[0] for s in groups]
    overall = median_part(
        "overall",
        ratios,
        Rule(f"median ratio from the smallest to the largest {axis}", (1 + FLAT) ** sign, ">" if rising else "<", MIN_GROUPS),
        log=True,
    )
    steps = _share_part("steps", along, totals, Rule(f"share of adjacent steps that {way[:-1]}", 0.5, ">", MIN_GROUPS))
    medians = results_of(rows).where(family=family).ok().frame.groupby(axis)[metric].median()
    plateau = _plateau(medians, sign)
    evidence = (
        f"{what} changes {overall.effect:.2f}x from the smallest to the largest {axis} "
        f"(median of {len(groups)} matched groups); of {int(totals.sum())} adjacent steps "
        f"{along.sum() / totals.sum():.0%} {way[:-1]}, {against.sum() / totals.sum():.0%} go the other way"
    )
    if plateau is not None:
        evidence += f"; the medians stop {'rising' if rising else 'falling'} from {axis} {plateau:g} on (a plateau)"
    numbers = {
        "groups": len(groups),
        "median_ratio": overall.effect,
        "share_along": steps.effect,
        "share_against": float(against.sum() / totals.sum()),
        "plateau_from": plateau,
        "median_by_value": {_json_key(k): float(v) for k, v in medians.items()},
    }
    return judged(name, paper, [overall, steps], evidence, numbers, id=id, platform=platform)


def _plateau(medians: pd.Series, sign: int) -> float | None:
    """The axis value from which the medians stop moving the claimed way (every later step flat
    or going back), if they moved that way before it."""
    values = medians.to_numpy(dtype=float)
    if len(values) < 3 or (values <= 0).any():
        return None
    steps = np.log(values[1:] / values[:-1]) * sign
    stalled = steps <= np.log1p(FLAT)
    start = len(steps)
    while start > 0 and stalled[start - 1]:
        start -= 1
    if start == len(steps) or start == 0:
        return None
    return float(medians.index[start])


def _json_key(value) -> str:
    return f"{value:g}" if isinstance(value, (int, float, np.integer, np.floating)) else str(value)


def family_trends(rows: Rows, family: str, platform: str = "") -> list[Verdict]:
    """The paper's Fig. 2 trends for one family: utilisation rises with batch and with width (O1)."""
    width = families.get(family).width
    return [trend(rows, "batch", family, platform=platform)] + ([trend(rows, width, family, platform=platform)] if width else [])


def _contrast(reg: RegressionResult, stronger: str, weaker: str) -> tuple[float, tuple[float, float]] | None:
    """|weight of ``stronger``| - |weight of ``weaker``| with its 95% interval (a linear contrast of the
    fit, each weight taken with the sign of its estimate); None when either is not in the fit."""
    coef = reg.coefficients["coef"]
    if reg.fit is None or stronger not in coef.index or weaker not in coef.index:
        return None
    names = list(reg.fit.params.index)
    contrast = np.zeros(len(names))
    contrast[names.index(stronger)] = np.sign(coef[stronger]) or 1.0
    contrast[names.index(weaker)] = -(np.sign(coef[weaker]) or 1.0)
    test = reg.fit.t_test(contrast)
    low, high = np.asarray(test.conf_int(alpha=1 - LEVEL)).ravel()
    return float(np.asarray(test.effect).ravel()[0]), (float(low), float(high))


def weights_verdict(regressions: dict[str, RegressionResult], platform: str = "") -> Verdict:
    """O1's second half, on the regression weights: in every family, the weaker of batch and width
    carries a larger weight than depth (layers, blocks), by a contrast whose 95% interval is above 0."""
    name = "Batch and width matter, depth much less (regression weights)"
    paper = "batch size and the width of the layers carry the largest weights, and the depth much less"
    parts: list[Part] = []
    rows: dict[str, dict[str, Any]] = {}
    for family, reg in regressions.items():
        fam = families.get(family)
        coef = reg.coefficients["coef"].abs() if not reg.coefficients.empty else pd.Series(dtype=float)
        drivers = [a for a in ("batch", fam.width) if a and a in coef.index]
        if not drivers or not fam.depth or fam.depth not in coef.index:
            continue
        weaker = min(drivers, key=lambda a: coef[a])
        found = _contrast(reg, weaker, fam.depth)
        rule = Rule(f"{fam.title} |weight of {weaker}| - |weight of {fam.depth}|", 0.0, ">", min_n=len(coef) + 2)
        effect, interval = found or (None, None)
        parts.append(Part(fam.title, effect, interval, reg.n, rule))
        rows[family] = {
            "weaker_driver": weaker,
            "depth_weight": float(coef[fam.depth]),
            "driver_weights": {a: float(coef[a]) for a in drivers},
            "contrast": found and found[0],
        }
    if not parts:
        return inconclusive(
            name,
            paper,
            "no family has enough varied configurations for a regression of batch, width and depth",
            id="O1",
            platform=platform,
        )
    evidence = "; ".join(
        f"{families.get(f).title}: |depth| {r['depth_weight']:.3f} vs |batch/width| "
        + "/".join(f"{w:.3f}" for w in r["driver_weights"].values())
        for f, r in rows.items()
    )
    return judged(name, paper, parts, evidence, rows, id="O1", platform=platform)


# ------------------------------------------------------------------ memory-bound time (O2)

# Op categories whose arithmetic the profiler cannot count (a recurrent loop's matmuls run
# inside a While op): never called memory-bound for want of a FLOP count.
UNCOUNTED_CATEGORIES = ("recurrent loop",)
# TPU trace categories that contain other ops: the profiler credits them with their body's
# FLOPs but only their own few microseconds (up to 78x the peak), so they are not op points.
CONTAINER_CATEGORIES = ("while",)


def compute_bound_memory_time(
    breakdown: pd.DataFrame, ridge: float, points: pd.DataFrame, threshold: float = 0.10, platform: str = ""
) -> Verdict:
    """Observation 2 on profiled models: those that are compute-bound still spend more than
    ``threshold`` of their time in memory-bound op categories (intensity below the ridge); the
    effect is the median share over the compute-bound models.

    The premise is checked on the roofline: a model is compute-bound when its point
    (``points``: label and intensity, as :func:`paradnn.analysis.roofline.model_points`
    gives them) lies at or right of the ridge. Op categories whose arithmetic the
    profiler cannot count are left out of the time shares, never called memory-bound.
    """
    name = "Compute-bound models spend noticeable time in memory-bound ops"
    paper = "even compute-bound models such as Transformer and ResNet-50 spend a noticeable share of time in memory-bound ops"
    if breakdown is None or breakdown.empty:
        return inconclusive(name, paper, "no per-op profile", id="O2", platform=platform)
    rows = []
    for label, g in breakdown.groupby("label", sort=False):
        counted = g[~g["category"].isin(UNCOUNTED_CATEGORIES)]
        on_roofline = points.loc[points["label"] == label, "intensity"]
        intensity = float(on_roofline.median()) if len(on_roofline) else float("nan")
        share = counted.loc[counted["intensity"].fillna(0) < ridge, "time_share"].sum() / max(counted["time_share"].sum(), 1e-12)
        rows.append(
            {
                "family": g["family"].iloc[0],
                "label": label,
                "intensity": intensity,
                "memory_bound_share": share,
                "uncounted_share": float(g.loc[g["category"].isin(UNCOUNTED_CATEGORIES), "time_share"].sum()),
            }
        )
    table_ = pd.DataFrame(rows)
    bound = table_[table_["intensity"] >= ridge]  # NaN (not on the roofline) is never compute-bound
    shown = "; ".join(
        f"{families.get(r.family).title} {r.intensity:.0f} FLOPs/B, {r.memory_bound_share:.0%} memory-bound"
        for r in table_.itertuples()
    )
    if bound.empty:
        return inconclusive(
            name,
            paper,
            f"no profiled model is compute-bound here (ridge {ridge:.0f} FLOPs/B: {shown})",
            numbers={"models": rows},
            id="O2",
            platform=platform,
        )
    # One compute-bound model with a noticeable memory-bound share already shows what the claim says ("even").
    part = median_part(
        "share", bound["memory_bound_share"], Rule("median share of time in memory-bound ops", threshold, ">", min_n=1)
    )
    evidence = f"{len(bound)} of {len(table_)} profiled models are right of the ridge ({ridge:.0f} FLOPs/B): {shown}"
    return judged(name, paper, part, evidence, {"models": rows}, id="O2", platform=platform)


def trace_memory_bound_share(traces: pd.DataFrame, ridge: float = 75.0, threshold: float = 10.0) -> Verdict:
    """O2 on the original TPU v2 traces: of the configurations right of the ridge (the premise),
    the median share of time in op categories below it (``time_perc`` is in percent); container
    categories (``while``) are left out."""
    name = "TPU v2: compute-bound models spend noticeable time in memory-bound ops"
    paper = "even compute-bound models spend a noticeable share of time in memory-bound ops"
    whole = traces[traces["category"] == "all"]
    ops = traces[(traces["category"] != "all") & ~traces["category"].isin(CONTAINER_CATEGORIES)]
    if whole.empty or ops.empty:
        return inconclusive(name, paper, "no TPU traces with an op breakdown in the store", id="O2", platform="tpu-v2-8")
    bound = whole[whole["intensity"] >= ridge]
    if bound.empty:
        return inconclusive(
            name, paper, f"no traced configuration is right of the {ridge:.0f} FLOPs/byte ridge", id="O2", platform="tpu-v2-8"
        )
    below = ops[ops["intensity"].fillna(0) < ridge].groupby("label")["time_perc"].sum().reindex(bound["label"]).fillna(0)
    best = bound.loc[bound["flops_perc"].idxmax(), "label"]
    evidence = (
        f"{len(bound)} of {len(whole)} traced configurations are right of the {ridge:.0f} FLOPs/byte ridge; they spend "
        f"a median {below.median():.0f}% of their time in op categories below it (the best-utilised trace, {best} "
        f"at {bound['flops_perc'].max():.0f}% of peak, {below.get(best, 0):.0f}%)"
    )
    part = median_part("share", below, Rule("median % of time in memory-bound op categories", threshold, ">", min_n=3))
    numbers = {
        "compute_bound": len(bound),
        "median_share_percent": float(below.median()),
        "best": best,
        "best_share_percent": float(below.get(best, 0)),
    }
    return judged(name, paper, part, evidence, numbers, id="O2", platform="tpu-v2-8")


def bandwidth_wall(tpu: Rows, traces: pd.DataFrame, busy: float = 50.0) -> Verdict:
    """O2's bandwidth wall on the TPU: FC utilisation stops rising with nodes (a plateau of the
    medians) where the traces show memory-bandwidth utilisation above ``busy`` percent (the median
    over the traced configurations from the plateau on)."""
    name = "TPU v2: utilisation hits a memory-bandwidth wall as nodes grow"
    paper = "utilisation stops rising beyond a few thousand nodes, where memory bandwidth is busy"
    shape = trend(tpu, "nodes", "fc", id="O2", platform="tpu-v2-8")
    whole = traces[traces["category"] == "all"].copy()
    if not shape.numbers.get("median_by_value") or whole.empty:
        return inconclusive(name, paper, "needs the TPU v2 FC sweep and its traces", id="O2", platform="tpu-v2-8")
    whole["nodes"] = whole["label"].str.extract(r"node_(\d+)").astype(int)
    plateau = shape.numbers["plateau_from"]
    by_nodes = shape.numbers["median_by_value"]
    wall = exact_part("plateau", 0.0 if plateau is None else 1.0, 1, Rule("a plateau of the medians (1: found)", 0.5, min_n=1))
    at_wall = whole.loc[whole["nodes"] >= (plateau if plateau is not None else math.inf), "memory_bandwidth"]
    busy_part = median_part(
        "bandwidth", at_wall, Rule("median memory-bandwidth utilisation (%) from the plateau on", busy, ">", min_n=3)
    )
    bandwidth = whole.groupby("nodes")["memory_bandwidth"].median()
    if plateau is None:
        evidence = f"FLOPS utilisation keeps rising with nodes (its medians by nodes: {_fmt(by_nodes, '.0%')})"
    else:
        evidence = (
            f"FLOPS utilisation is flat from {plateau:g} nodes on (its medians by nodes: {_fmt(by_nodes, '.0%')}); "
            f"memory-bandwidth utilisation there is {at_wall.median():.0f}% of peak (its medians by nodes: "
            f"{', '.join(f'{k}: {v:.0f}%' for k, v in bandwidth.items())})"
        )
    numbers = {
        "plateau_from": plateau,
        "utilization_by_nodes": by_nodes,
        "bandwidth_by_nodes": {_json_key(k): float(v) for k, v in bandwidth.items()},
    }
    return judged(name, paper, [wall, busy_part], evidence, numbers, id="O2", platform="tpu-v2-8")


def _fmt(values: dict, spec: str) -> str:
    return ", ".join(f"{k}: {v:{spec}}" for k, v in values.items())


# ------------------------------------------------------------------ communication and infeed (O3, O4)


def _by_batch(rows: pd.DataFrame, column: str) -> pd.Series:
    batch = rows["label"].str.extract(r"bs_(\d+)")[0].astype(int)
    return rows.assign(batch=batch).groupby("batch")[column].median().sort_index()


def _batches(rows: pd.DataFrame) -> pd.Series:
    return rows["batch"] if "batch" in rows else rows["label"].str.extract(r"bs_(\d+)")[0].astype(int)


def communication_share(traces: pd.DataFrame, negligible: float = 1.0) -> Verdict:
    """O3 on the TPU v2 traces: the cross-replica-sum (all-reduce) share of step time is
    non-negligible (median above ``negligible`` percent) and falls as the batch grows."""
    name = "TPU v2: communication takes a share of the step that falls with batch"
    paper = "communication between chips takes a non-negligible share of the step, falling as the batch grows"
    comm = traces[(traces["category"] == "cross-replica-sum") & traces["time_perc"].notna()]
    if len(comm) < 3:
        return inconclusive(name, paper, "needs multi-chip traces (cross-replica-sum)", id="O3", platform="tpu-v2-8")
    return _communication_verdict(
        comm["time_perc"].astype(float), _batches(comm), f"{len(comm)} traces", negligible, name, paper, "tpu-v2-8"
    )


def measured_communication(rows: Rows, platform: str, negligible: float = 1.0) -> Verdict:
    """O3 on this platform's data-parallel runs (``--devices N``): the communication share of the
    step (``1 - t_replica / t_parallel``, both timed alternately) is non-negligible and falls as the
    global batch grows."""
    name = f"{platform}: communication takes a share of the step that falls with batch"
    paper = "communication between chips takes a non-negligible share of the step, falling as the batch grows"
    runs = results_of(rows).ok().with_value("comm_share").frame
    if len(runs) < 3 or runs["batch"].nunique() < 2:
        return inconclusive(
            name,
            paper,
            f"needs data-parallel measurements (--devices 2) at 2 batch sizes or more, {len(runs)} in the store",
            id="O3",
            platform=platform,
        )
    replicas = ", ".join(str(int(n)) for n in sorted(runs["devices"].unique()))
    return _communication_verdict(
        100 * runs["comm_share"].astype(float).clip(lower=0),
        runs["batch"].astype(int),
        f"{len(runs)} runs on {replicas} replicas",
        negligible,
        name,
        paper,
        platform,
    )


def _communication_verdict(
    percent: pd.Series, batch: pd.Series, what: str, negligible: float, name: str, paper: str, platform: str
) -> Verdict:
    """O3's verdict from communication shares (percent) and their batches: the median is above
    ``negligible`` and the share falls with batch (the slope of log share on log2 batch below 0)."""
    share = median_part("share", percent, Rule("median communication share (%)", negligible, ">", min_n=3))
    keep = percent > 0
    data = pd.DataFrame(
        {"log_share": np.log(percent[keep].to_numpy(dtype=float)), "log2_batch": np.log2(batch[keep].to_numpy(dtype=float))}
    )
    slope = _slope_part(
        "falls", data, "log2_batch", "log_share", Rule("slope of log share per doubling of batch", 0.0, "<", min_n=3)
    )
    by_batch = percent.groupby(batch.to_numpy()).median().sort_index()
    evidence = f"median {percent.median():.1f}% of step time over {what}; by batch {_fmt(_keys(by_batch), '.1f')} (%)"
    numbers = {"median_percent": float(percent.median()), "median_by_value": _keys(by_batch), "slope": slope.effect}
    return judged(name, paper, [share, slope], evidence, numbers, id="O3", platform=platform)


def _slope_part(name: str, data: pd.DataFrame, x: str, y: str, rule: Rule) -> Part:
    """A part whose effect is the OLS slope of ``y`` on ``x`` with its 95% interval."""
    if len(data) < 3 or data[x].nunique() < 2:
        return Part(name, None, None, len(data), rule)
    from statsmodels.regression.linear_model import OLS
    from statsmodels.tools.tools import add_constant

    fit = OLS(data[y].astype(float), add_constant(data[x].astype(float))).fit()
    low, high = fit.conf_int(1 - LEVEL).loc[x]
    slope = float(fit.params[x])
    interval = (float(low), float(high)) if np.isfinite(low) else (slope, slope)  # a perfect fit has no spread
    return Part(name, slope, interval, len(data), rule)


def _keys(series: pd.Series) -> dict:
    return {_json_key(k): float(v) for k, v in series.items()}


def _thirds(work: np.ndarray, percent: np.ndarray) -> tuple[float, float]:
    """The median of ``percent`` over the third of rows with the least ``work`` and over the third
    with the most (by rank: ties are split, so every third has n // 3 rows)."""
    order = np.argsort(work, kind="stable")
    k = max(1, len(order) // 3)
    return float(np.median(percent[order[:k]])), float(np.median(percent[order[-k:]]))


def _thirds_part(name: str, work: pd.Series, percent: pd.Series, rule: Rule) -> Part:
    """A part whose effect is :func:`_thirds`' smallest-third median minus its largest-third median,
    bootstrapped over configurations (the thirds made again in every draw)."""
    w, p = work.to_numpy(dtype=float), percent.to_numpy(dtype=float)
    low, high = _thirds(w, p)
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(BOOTSTRAP_DRAWS):
        pick = rng.integers(0, len(w), len(w))
        small, large = _thirds(w[pick], p[pick])
        draws.append(small - large)
    tail = (1 - LEVEL) / 2 * 100
    return Part(name, low - high, (float(np.percentile(draws, tail)), float(np.percentile(draws, 100 - tail))), len(w), rule)


def infeed_share(traces: pd.DataFrame) -> Verdict:
    """O4 on the TPU v2 FC traces: smaller models wait on infeed more. The effect is the median
    infeed share of the third of traced configurations with the fewest FLOPs per example minus
    that of the third with the most; the share by batch is in the figures."""
    name = "TPU v2: smaller models wait on infeed more than larger ones"
    paper = "the host can fail to feed the device, and smaller models are held back more by infeed than larger ones"
    whole = traces[(traces["category"] == "all") & traces["infeed"].notna()].copy()
    if len(whole) < 6:
        return inconclusive(name, paper, "needs infeed traces of 6 configurations or more", id="O4", platform="tpu-v2-8")
    from paradnn.counting import forward_flops_per_example

    whole["work"] = [forward_flops_per_example(families.parse_label("fc", label)) for label in whole["label"]]
    part = _thirds_part(
        "gap", whole["work"], whole["infeed"], Rule("infeed points of the smallest third over the largest", 0.0, ">", min_n=6)
    )
    low, high = _thirds(whole["work"].to_numpy(dtype=float), whole["infeed"].to_numpy(dtype=float))
    by_batch = _by_batch(whole, "infeed")
    evidence = (
        f"median infeed share {low:.1f}% for the smallest third of models by FLOPs per example, {high:.1f}% for the "
        f"largest third; by batch {_fmt(_keys(by_batch), '.1f')} (%)"
    )
    numbers = {"smallest_third_percent": float(low), "largest_third_percent": float(high), "median_by_value": _keys(by_batch)}
    return judged(name, paper, part, evidence, numbers, id="O4", platform="tpu-v2-8")


# Two sweeps of one host-fed configuration gave infeed shares a median 4-6 and at most 6-22 points
# apart (16 FC and CNN rows, and the six real workloads; docs/history.md): a gap between the two
# thirds within this band says nothing either way. A store whose host-fed configurations were
# measured more than once gives its own band (:func:`infeed_margin`).
INFEED_MARGIN_POINTS = 10.0
MIN_RERUN_CONFIGURATIONS = 3  # configurations measured at least twice that a measured band needs


def infeed_margin(fed: pd.DataFrame) -> tuple[float, str]:
    """How far two measurements of one host-fed configuration's infeed share lie apart, in points:
    the median over configurations measured at least twice (pooled rows' ``measurements``) of
    their largest minus smallest share; :data:`INFEED_MARGIN_POINTS` where fewer than
    :data:`MIN_RERUN_CONFIGURATIONS` were. Returns the band and where it comes from, in words."""
    spreads = []
    for measured in fed.get("measurements", pd.Series(dtype=object)):
        shares = [m["infeed_share"] for m in measured or [] if isinstance(m, dict) and m.get("infeed_share") is not None]
        if len(shares) >= 2:
            spreads.append(100 * (max(shares) - min(shares)))
    if len(spreads) < MIN_RERUN_CONFIGURATIONS:
        return INFEED_MARGIN_POINTS, (
            f"{INFEED_MARGIN_POINTS:.0f} points, what two sweeps of one configuration differed by "
            f"in earlier runs ({len(spreads)} configuration(s) here measured twice)"
        )
    band = float(np.median(spreads))
    return band, f"{band:.1f} points, the median spread of the {len(spreads)} configurations measured more than once here"


def measured_infeed(rows: Rows, platform: str) -> Verdict:
    """O4 on this platform's host-fed measurements (``--input host`` or ``host-prep``): the median
    infeed share (``1 - t_device / t_host``, both timed alternately) of the third of configurations
    with the fewest FLOPs per example minus that of the third with the most; the band of
    :data:`INFEED_MARGIN_POINTS` around 0 is neither."""
    name = f"{platform}: smaller models wait on their input pipeline more than larger ones"
    paper = "the host can fail to feed the device, and smaller models are held back more by infeed than larger ones"
    fed = results_of(rows).ok().with_value("infeed_share").frame.copy()
    if len(fed) < 6:
        return inconclusive(
            name,
            paper,
            f"needs host-fed measurements (--input host-prep) of 6 configurations, {len(fed)} in the store",
            id="O4",
            platform=platform,
        )
    fed["work"] = fed["flops_model"] / fed["batch"]
    fed["infeed_percent"] = 100 * fed["infeed_share"].clip(lower=0)  # below 0 is within noise: no wait
    margin, margin_words = infeed_margin(fed)
    rule = Rule("infeed points of the smallest third over the largest", 0.0, ">", min_n=6, margin=margin)
    part = _thirds_part("gap", fed["work"], fed["infeed_percent"], rule)
    low, high = _thirds(fed["work"].to_numpy(dtype=float), fed["infeed_percent"].to_numpy(dtype=float))
    modes = ", ".join(sorted(fed["input_mode"].dropna().unique()))
    evidence = (
        f"median infeed share {low:.1f}% for the smallest third of models by FLOPs per example, {high:.1f}% for the "
        f"largest third ({len(fed)} configurations fed by the {modes} pipeline); a gap within {margin_words} "
        "says nothing either way"
    )
    numbers = {"smallest_third_percent": float(low), "largest_third_percent": float(high), "n": len(fed), "margin_points": margin}
    return judged(name, paper, part, evidence, numbers, id="O4", platform=platform)


# ------------------------------------------------------------------ platforms (O6-O10)

MIN_REGRESSION_PAIRS = 6


def speedup_direction(
    table_: pd.DataFrame, family: str, axis: str, grows: bool, id: str, platform: str, paper: str, held_fixed: dict | None = None
) -> Verdict:
    """The sign of ``axis``'s weight in a regression of log2(speedup) on the standardised log2
    hyperparameters: positive (the target's advantage grows with the axis) or negative, judged
    on its 95% confidence interval."""
    way = "grows" if grows else "shrinks"
    name = f"{families.get(family).title}: the target's advantage {way} with {axis}"
    sub = table_[table_["family"] == family] if "family" in table_ else table_
    pairs: dict[str, Any] = {"held_fixed": held_fixed}
    if len(sub) < MIN_REGRESSION_PAIRS:
        return inconclusive(
            name,
            paper,
            f"{len(sub)} configurations on both platforms (need {MIN_REGRESSION_PAIRS})",
            id=id,
            platform=platform,
            n=len(sub),
            **pairs,
        )
    reg = regress(sub.assign(log2_speedup=np.log2(sub["speedup"])), "log2_speedup", family=family)
    rule = Rule(f"log2-speedup weight of {axis}", 0.0, ">" if grows else "<", MIN_REGRESSION_PAIRS)
    part = coefficient_part(axis, reg, axis, rule)
    if part.effect is None:
        return inconclusive(
            name,
            paper,
            f"{axis} does not vary in the configurations both platforms ran",
            id=id,
            platform=platform,
            n=len(sub),
            **pairs,
        )
    evidence = (
        f"R² {reg.r_squared:.2f}; speedup {sub['speedup'].min():.2f}x to {sub['speedup'].max():.2f}x, median "
        f"{sub['speedup'].median():.2f}x"
    )
    low, high = part.interval or (None, None)
    numbers = {"coef": part.effect, "ci_low": low, "ci_high": high, "r_squared": reg.r_squared}
    return judged(name, paper, part, evidence, numbers, id=id, platform=platform, **pairs)


# A weight within this band (log2 speedup per s.d. of a log2 hyperparameter: about 3.5%) is no dependence.
NO_DEPENDENCE = 0.05


def speedup_depends_on(
    table_: pd.DataFrame, family: str, axes: tuple[str, ...] = ("nodes", "batch"), platform: str = "", id: str = ""
) -> Verdict:
    """Platform speedup varies with model shape: log2(speedup) regressed on log2 features; the
    effect is the weight of ``axes`` furthest from zero, in absolute value. Holds when its interval
    clears :data:`NO_DEPENDENCE`; does not hold when every weight's interval lies within it.

    A local pair (one CPU against itself with fewer threads) tests only that a speedup
    depends on shape, not the paper's TPU/GPU direction: it carries no observation id.
    """
    name = f"{families.get(family).title}: speedup depends on {' and '.join(axes)}"
    paper = "the speedup between two platforms depends on the model's shape (nodes and batch)"
    sub = table_[table_["family"] == family] if "family" in table_ else table_
    if len(sub) < MIN_REGRESSION_PAIRS:
        return inconclusive(
            name,
            paper,
            f"{len(sub)} configurations on both platforms (need {MIN_REGRESSION_PAIRS})",
            id=id,
            platform=platform,
            n=len(sub),
        )
    reg = regress(sub.assign(log2_speedup=np.log2(sub["speedup"])), "log2_speedup", family=family)
    coef = reg.coefficients
    present = [a for a in axes if a in coef.index]
    rule = Rule("largest |log2-speedup weight| of " + " and ".join(axes), NO_DEPENDENCE, ">", MIN_REGRESSION_PAIRS)
    if not present:
        return inconclusive(
            name,
            paper,
            f"neither {' nor '.join(axes)} varies in the configurations both platforms ran",
            id=id,
            platform=platform,
            n=len(sub),
        )

    def magnitude(a: str) -> tuple[float, float, float]:
        low, high = float(coef.loc[a, "ci_low"]), float(coef.loc[a, "ci_high"])
        near = 0.0 if low <= 0 <= high else min(abs(low), abs(high))
        return abs(float(coef.loc[a, "coef"])), near, max(abs(low), abs(high))

    strongest = max(present, key=lambda a: magnitude(a)[1:])
    effect, near, far = magnitude(strongest)
    significant = [a for a in present if magnitude(a)[1] > 0]
    coefs = ", ".join(f"{a} {coef.loc[a, 'coef']:+.2f}" for a in present)
    evidence = (
        f"speedup {sub['speedup'].min():.2f}x to {sub['speedup'].max():.2f}x; log2-speedup weights {coefs} "
        f"(R² {reg.r_squared:.2f}); strongest {strongest}"
    )
    part = Part(strongest, effect, (near, far), reg.n, rule)
    return judged(name, paper, part, evidence, {"significant": significant, "r_squared": reg.r_squared}, id=id, platform=platform)


def out_of_memory_first(results: Rows, family: str = "fc") -> Verdict:
    """O6: on the configurations every platform attempted, the platform with the least memory runs
    out of memory first (the most ``oom`` cells; timeouts and errors are not out of memory), and
    configurations it could not fit run on the platform with the most memory (a count)."""
    name = f"{families.get(family).title}: the platform with less memory runs out first"
    paper = "the largest models run only on the platform with the most memory"
    rows = results_of(results).where(family=family)
    per_platform = [set(g["label"]) for _, g in rows.frame.groupby("platform")]
    labels = set.intersection(*per_platform) if len(per_platform) > 1 else set()
    attempted = rows.where(label=sorted(labels))
    shared = attempted.frame
    oom = attempted.where(state=OOM).frame.groupby("platform")["label"].nunique()
    oom = oom.reindex(sorted(shared["platform"].unique())).fillna(0).astype(int)
    unfinished = attempted.where(state=TIMEOUT).frame.groupby("platform")["label"].nunique()
    memory = {p: _memory_bytes(p) for p in oom.index}
    smallest = min(memory, key=lambda p: memory[p] or math.inf) if memory else None
    platform = " vs ".join(oom.index)
    if smallest is not None and oom.get(smallest, 0) == 0 and unfinished.get(smallest, 0) > 0:
        return inconclusive(
            name,
            paper,
            f"{smallest} (least memory) records no out-of-memory result, but "
            f"{unfinished[smallest]} of the shared configurations timed out (not out of memory); "
            + ", ".join(f"{p} {n} out of memory" for p, n in oom.items()),
            numbers={"oom": oom.to_dict()},
            id="O6",
            platform=platform,
        )
    if oom.empty or oom.sum() == 0:
        others = ", ".join(f"{p}: {n}" for p, n in attempted.failed().frame.groupby("platform").size().items())
        return inconclusive(
            name,
            paper,
            f"no out-of-memory results on configurations two platforms share "
            f"({len(labels)} shared; other failures: {others or 'none'})",
            id="O6",
        )
    first = oom.idxmax()
    evidence = (
        f"out of memory on the {len(labels)} shared configurations: "
        + ", ".join(f"{p} {n}" for p, n in oom.items())
        + "; memory per model replica: "
        + ", ".join(f"{p} {m / 2**30:.0f} GiB" if m else f"{p} unknown" for p, m in memory.items())
    )
    numbers = {"oom": oom.to_dict(), "memory_bytes": memory}
    if not memory[first]:
        return inconclusive(
            name, paper, evidence + f"; the memory of {first} is unknown", numbers=numbers, id="O6", platform=platform
        )
    first_part = exact_part(
        "first",
        float(first == smallest),
        len(labels),
        Rule("the platform with the least memory has the most out-of-memory cells (1: yes)", 0.5),
    )
    largest = max(memory, key=lambda p: memory[p] or 0)
    too_big = set(attempted.where(platform=smallest, state=OOM).frame["label"])
    there = shared[(shared["platform"] == largest) & shared["label"].isin(too_big)]["state"].value_counts()
    numbers["on_largest"] = there.to_dict()
    evidence += f"; of the {len(too_big)} that ran out of memory on {smallest}, {largest}: " + ", ".join(
        f"{n} {s}" for s, n in there.items()
    )
    if first == smallest and not there.get("ok", 0) and there.get("timeout", 0):
        return inconclusive(
            name, paper, evidence + " (timeouts say nothing of memory)", numbers=numbers, id="O6", platform=platform
        )
    runs = exact_part(
        "runs",
        float(there.get("ok", 0)),
        len(too_big),
        Rule(f"configurations out of memory on {smallest} that run on {largest}", 0.5, min_n=1),
    )
    return judged(name, paper, [first_part, runs], evidence, numbers, id="O6", platform=platform)


def _memory_bytes(platform: str) -> float | None:
    """Memory one replica of a model has on ``platform``, from its datasheet (paper Table 3: a TPU board
    replicates the model on each of its 8 cores, each with its own 8 GiB (v2) or 16 GiB (v3) of HBM)."""
    sheet = DATASHEETS.get(platform)
    return sheet.replica_memory if sheet is not None else None


def comparison_held(result: SpeedupResult) -> dict:
    """What a comparison held fixed, with what it left free and why (a verdict's ``held_fixed``)."""
    free = {c: side["why"] for c, side in result.sides.items() if not side["held"]}
    free.update({c: "freed on request" for c in result.free if c not in free})
    return {**result.held_fixed, "free": sorted(free), "why_free": free}


def utilisation_ratio(result: SpeedupResult) -> Verdict:
    """O10 (Fig. 11): the median over matched configurations of the target's FLOPS utilisation over
    the baseline's (``result``: a platform comparison of ``utilization``, e.g.
    ``Results.matched("platform", "v100", "tpu-v2-8", metric="utilization")``), above 1."""
    target, baseline = result.target, result.baseline
    name = f"{target} reaches higher FLOPS utilisation than {baseline}"
    paper = "the TPU reaches higher FLOPS utilisation than the GPU, up to 3x"
    pair = f"{target} vs {baseline}"
    held = comparison_held(result)
    if not result.n:
        return inconclusive(
            name,
            paper,
            f"no configuration measured on both {target} and {baseline}" + (f": {result.why}" if result.why else ""),
            id="O10",
            platform=pair,
            held_fixed=held,
            n=0,
        )
    ratios = result.table.groupby("family")["speedup"].median()
    counts = result.table.groupby("family").size()
    shown = ", ".join(
        f"{families.get(f).title if f in families.names() else f} {r:.2f}x (n {counts[f]})" for f, r in ratios.items()
    )
    part = speedup_part("ratio", result.table, Rule("median utilisation ratio", 1.0, ">", min_n=3))
    return judged(
        name,
        paper,
        part,
        f"median utilisation ratio on matched configurations: {shown}",
        {"ratios": ratios.to_dict()},
        id="O10",
        platform=pair,
        held_fixed=held,
    )


# ------------------------------------------------------------------ software stack (O12-O14)

STACK_MARGIN = 0.05  # a speedup must clear 5% to count as one


def stack_speedup(
    result: SpeedupResult,
    name: str,
    paper: str,
    margin: float = STACK_MARGIN,
    ridge: float | None = None,
    id: str = "",
    platform: str = "",
) -> Verdict:
    """A software-stack or precision change speeds things up: the median speedup over matched
    configurations above 1 + margin over its whole interval (a bootstrap over configurations).

    With ``ridge`` only the configurations right of the ridge point on the baseline's
    roofline count (compute-bound: ``flops_model / bytes_estimate >= ridge``).
    """
    t = result.table
    scope = ""
    if ridge is not None and not t.empty:
        t = t[t["flops_model"] / t["bytes_estimate"] >= ridge]
        scope = f" right of the ridge ({ridge:.0f} FLOPs/byte)"
    held = comparison_held(result)
    if len(t) < 2:
        why = f": {result.why}" if result.why and not result.n else ""
        return inconclusive(
            name,
            paper,
            f"{len(t)} configurations{scope} measured both ways (need 2){why}",
            id=id,
            platform=platform,
            held_fixed=held,
            n=len(t),
        )
    part = speedup_part("speedup", t, Rule("median speedup", 1 + margin, ">", min_n=2), result.looks)
    evidence = f"over {len(t)} configurations{scope} (range {t['speedup'].min():.2f}x-{t['speedup'].max():.2f}x)"
    return judged(name, paper, part, evidence, {"median": part.effect, "n": len(t)}, id=id, platform=platform, held_fixed=held)


def xla_speedup(results: Results, platform: str) -> tuple[SpeedupResult, Verdict]:
    """XLA on against off in float32: the package's own check (not a paper finding)."""
    result = results.for_settings(dtype="float32").matched("xla", False, True)
    return result, stack_speedup(
        result,
        "XLA speeds up training (the package's own check, not a paper finding)",
        "compiling with XLA speeds up the step",
        platform=platform,
    )


def precision_speedups(
    results: Results, platform: str, dtype: str, low_precision: str, ridge: float | None, settings: Sequence[bool] = (True, False)
) -> list[tuple[str, SpeedupResult, Verdict]]:
    """``dtype`` against ``low_precision`` at each XLA setting of ``settings`` (O13 each, on models right of
    the ridge): the setting in words, the comparison and its verdict. One definition for every report that
    judges it, so one comparison reads the same everywhere."""
    out = []
    for setting in settings:
        words = "XLA on" if setting else "XLA off"
        result = results.for_settings(xla=setting).matched("dtype", dtype, low_precision)
        out.append(
            (
                words,
                result,
                stack_speedup(
                    result,
                    f"{low_precision} speeds up models right of the ridge ({words})",
                    "16-bit arithmetic speeds up compute-bound models",
                    ridge=ridge,
                    id="O13",
                    platform=f"{platform}, {words}",
                ),
            )
        )
    return out


def version_chain(rows: Rows, platform: str = "") -> tuple[Verdict, list[SpeedupResult]]:
    """Every TensorFlow version against the one before it, like with like (same dtype and XLA
    setting, each pair measured side by side in one sweep where the rows say which sweep), one part
    per version step: holds when every step's median speedup clears 1.05 over its whole interval,
    does not hold when any step's interval lies below it. Filed as O14 (each
    TensorFlow and CUDA release brings gains) on a GPU, else as O12 (software-stack updates sped
    models up, which the paper found on the TPU)."""
    from paradnn.analysis.rows import version_key

    name, paper = "Newer TensorFlow versions speed things up", "software-stack updates sped models up by large factors"
    gpu = platform.lower().startswith("gpu") or platform.lower() in ("v100", "a100", "h100", "h200")
    oid = "O14" if gpu else "O12"
    if gpu:
        paper = "each TensorFlow and CUDA release brings further gains on the GPU"
    stacks = results_of(rows)
    versions = sorted(stacks.frame["sw_tensorflow"].dropna().unique(), key=version_key)
    if len(versions) < 2:
        return inconclusive(
            name,
            paper,
            f"one TensorFlow version in the store ({', '.join(versions) or 'none'})",
            id=oid,
            platform=platform,
            held_fixed={"platform": platform},
            n=0,
        ), []
    results, steps = [], []
    for older, newer in zip(versions, versions[1:]):
        result = stacks.side_by_side("sw_tensorflow").matched("sw_tensorflow", older, newer, hold=("xla",), within=("sweep",))
        if result.n:
            results.append(result)
            steps.append(f"{older}->{newer} {result.median:.2f}x over {result.n} ({sides_held(result)})")
    if not results:
        return inconclusive(
            name,
            paper,
            "no configuration measured under two versions side by side with the same settings",
            id=oid,
            platform=platform,
            held_fixed={"platform": platform},
            n=0,
        ), []
    parts = [
        speedup_part(
            f"{r.baseline}->{r.target}",
            r.table,
            Rule(f"median speedup of {r.target} over {r.baseline}", 1 + STACK_MARGIN, ">", min_n=2),
            r.looks,
        )
        for r in results
    ]
    numbers = {f"{r.baseline}->{r.target}": r.median for r in results}
    held = {k: v for k, v in results[0].held_fixed.items()} | {"platform": platform, "measured": "side by side"}
    return judged(name, paper, parts, "; ".join(steps), numbers, id=oid, platform=platform, held_fixed=held), results


def sides_held(result: SpeedupResult) -> str:
    """The run settings of a comparison's pairs in words ("float32, XLA on" or "dtype and XLA matched per pair")."""
    held = result.held_fixed
    dtype = held.get("dtype")
    xla = held.get("xla")
    words = [
        str(dtype) if dtype not in (None, "matched per pair") else "dtype matched per pair",
        ("XLA on" if xla else "XLA off") if isinstance(xla, (bool, int)) and xla is not None else "XLA matched per pair",
    ]
    return ", ".join(words)
