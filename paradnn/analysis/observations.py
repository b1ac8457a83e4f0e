"""The paper's observations as checks against the data at hand.

Each check returns a :class:`Verdict`: ``holds``, ``does not hold`` or ``not enough
data``, with the numbers behind it, the observation it judges (``O1``..``O14``, see
:mod:`paradnn.analysis.registry`; empty for the package's own checks), the platform it
was judged on, and one sentence that pairs what the paper found with what this data
shows (used as figure captions in the notebooks).

Trends ("utilisation rises with batch size") are judged on their *shape*, on matched
groups (configurations that differ only in the one hyperparameter): every adjacent step
of the axis within a group counts. A trend holds when the metric moves the claimed way
from the smallest value to the largest (median over groups, by more than 2%), at least
half of the adjacent steps move that way and no more than a third go against it; steps
within 2% are flat, and a tail of flat steps is reported as a plateau (a metric that rises
once and then stays flat does not "rise with" the axis). The figures keep the metric's median at every value
of the axis.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from paradnn import families
from paradnn.analysis.regression import RegressionResult, regress
from paradnn.analysis.speedup import SpeedupResult, compare

HOLDS, FAILS, UNKNOWN = "holds", "does not hold", "not enough data"
# Verdicts judged on projections (paradnn.analysis.projection), not on measurements of the platform.
PROJECTED_HOLDS, PROJECTED_FAILS = "holds (projected)", "does not hold (projected)"
UNKNOWN_SENTENCE = "there is not enough data to tell"
AGREEMENT = 2 / 3
FLAT = 0.02  # an adjacent step within 2% is flat


@dataclass(frozen=True)
class Verdict:
    observation: str  # what was checked, in a few words
    paper: str  # what the paper found
    verdict: str
    evidence: str  # the numbers behind the verdict, in words
    numbers: dict = field(default_factory=dict)
    id: str = ""  # the paper's observation (O1..O14); empty for the package's own checks
    platform: str = ""  # the platform (or pair) it was judged on
    held_fixed: dict | None = None  # a comparison's run settings held equal (paradnn.analysis.results)
    n: int | None = None  # a comparison's matched pairs

    @property
    def sentence(self) -> str:
        """The verdict in words; "the paper found" only before a finding of the paper (an observation id)."""
        here = {HOLDS: "it holds", FAILS: "it does not hold", PROJECTED_HOLDS: "projected, not measured, it holds",
                PROJECTED_FAILS: "projected, not measured, it does not hold"}.get(self.verdict, UNKNOWN_SENTENCE)
        where = f" on {self.platform}" if self.platform else ""
        said = "The paper found that" if self.id else "paradnn checks (not a finding of the paper) that"
        return f"{said} {self.paper}; here{where} {here} ({self.evidence})."

    def row(self) -> dict:
        return {"observation": self.observation, "verdict": self.verdict, "evidence": self.evidence}

    def about(self, id: str, platform: str = "") -> Verdict:
        """The same verdict, tagged with the observation and platform it judges."""
        return dataclasses.replace(self, id=id, platform=platform or self.platform)


def table(verdicts: list[Verdict]) -> pd.DataFrame:
    """Verdicts as a DataFrame."""
    return pd.DataFrame([v.row() for v in verdicts], columns=["observation", "verdict", "evidence"])


# ------------------------------------------------------------------ trends


def matched_groups(df: pd.DataFrame, axis: str, metric: str, family: str) -> list[pd.Series]:
    """Per group of configurations equal in every other axis: the median ``metric`` at each ``axis`` value."""
    others = [a.name for a in families.get(family).axes if a.name != axis and a.name in df]
    ok = df[(df["family"] == family) & (df["state"] == "ok") & df[metric].notna()]
    if ok.empty or ok[axis].nunique() < 2:
        return []
    keys = [c for c in others if c in ok and ok[c].notna().any()]
    groups = ok.groupby(keys, dropna=False) if keys else [(None, ok)]
    series = [group.groupby(axis)[metric].median().sort_index() for _, group in groups]
    return [s for s in series if len(s) >= 2 and (s > 0).all()]


def matched_ratios(df: pd.DataFrame, axis: str, metric: str, family: str) -> pd.Series:
    """metric(largest axis value) / metric(smallest) within groups equal in every other axis."""
    return pd.Series([s.iloc[-1] / s.iloc[0] for s in matched_groups(df, axis, metric, family)], dtype=float)


def trend(df: pd.DataFrame, axis: str, family: str, metric: str = "utilization", paper: str = "", rising: bool = True,
          id: str = "O1", platform: str = "") -> Verdict:  # fmt: skip
    """Does ``metric`` rise (or fall) with ``axis`` for ``family``? Judged on the shape (module doc)."""
    fam = families.get(family)
    way = "rises" if rising else "falls"
    what = "utilisation" if metric == "utilization" else metric.replace("_", " ")
    name = f"{fam.title}: {what} {way} with {axis}"
    paper = paper or f"{fam.title} {what} {way} with the {fam.axis(axis).title}"
    groups = matched_groups(df, axis, metric, family)
    if not groups:
        return Verdict(name, paper, UNKNOWN, f"no {fam.title} configurations that differ only in {axis}", id=id,
                       platform=platform)  # fmt: skip
    sign = 1 if rising else -1
    steps = np.concatenate([np.log(s.to_numpy()[1:] / s.to_numpy()[:-1]) for s in groups]) * sign
    along, against = float((steps > np.log1p(FLAT)).mean()), float((steps < -np.log1p(FLAT)).mean())
    overall = float(np.median([s.iloc[-1] / s.iloc[0] for s in groups]))
    medians = df[(df["family"] == family) & (df["state"] == "ok")].groupby(axis)[metric].median()
    plateau = _plateau(medians, sign)
    moves = overall ** sign > 1 + FLAT
    verdict = HOLDS if moves and along >= 0.5 and against <= 1 - AGREEMENT else FAILS
    evidence = (f"{what} changes {overall:.2f}x from the smallest to the largest {axis} "
                f"(median of {len(groups)} matched groups); of {len(steps)} adjacent steps {along:.0%} {way[:-1]}, "
                f"{against:.0%} go the other way")  # fmt: skip
    if plateau is not None:
        evidence += f"; the medians stop {'rising' if rising else 'falling'} from {axis} {plateau:g} on (a plateau)"
    numbers = {"groups": len(groups), "median_ratio": overall, "share_along": along, "share_against": against,
               "plateau_from": plateau, "median_by_value": {_json_key(k): float(v) for k, v in medians.items()}}  # fmt: skip
    return Verdict(name, paper, verdict, evidence, numbers, id=id, platform=platform)


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


def family_trends(df: pd.DataFrame, family: str, platform: str = "") -> list[Verdict]:
    """The paper's Fig. 2 trends for one family: utilisation rises with batch and with width (O1)."""
    width = families.get(family).width
    return [trend(df, "batch", family, platform=platform)] + ([trend(df, width, family, platform=platform)] if width else [])


def weights_verdict(regressions: dict[str, RegressionResult], platform: str = "") -> Verdict:
    """O1's second half, on the regression weights: batch or width carries the largest weight in
    every family, and depth (layers, blocks) less than either of them."""
    name = "Batch and width matter, depth much less (regression weights)"
    paper = "batch size and the width of the layers carry the largest weights, and the depth much less"
    rows, agrees = {}, []
    for family, reg in regressions.items():
        coef = reg.coefficients["coef"].abs() if not reg.coefficients.empty else pd.Series(dtype=float)
        fam = families.get(family)
        drivers = [a for a in ("batch", fam.width) if a and a in coef.index]
        if not drivers:
            continue
        strongest = coef.idxmax()
        depth = coef.get(fam.depth) if fam.depth else None
        rows[family] = {"strongest": strongest, "depth_weight": None if depth is None else float(depth),
                        "driver_weights": {a: float(coef[a]) for a in drivers}}  # fmt: skip
        agrees.append(strongest in drivers and (depth is None or depth < min(coef[a] for a in drivers)))
    if not rows:
        return Verdict(name, paper, UNKNOWN, "no family has enough varied configurations for a regression", id="O1",
                       platform=platform)  # fmt: skip
    evidence = "; ".join(
        f"{families.get(f).title}: largest {r['strongest']}"
        + (f", |depth| {r['depth_weight']:.3f} vs |batch/width| " + "/".join(f"{w:.3f}" for w in r["driver_weights"].values())
           if r["depth_weight"] is not None else "")
        for f, r in rows.items()
    )  # fmt: skip
    return Verdict(name, paper, HOLDS if all(agrees) else FAILS, evidence, rows, id="O1", platform=platform)


# ------------------------------------------------------------------ memory-bound time (O2)

# Op categories whose arithmetic the profiler cannot count (a recurrent loop's matmuls run
# inside a While op): never called memory-bound for want of a FLOP count.
UNCOUNTED_CATEGORIES = ("recurrent loop",)
# TPU trace categories that contain other ops: the profiler credits them with their body's
# FLOPs but only their own few microseconds (up to 78x the peak), so they are not op points.
CONTAINER_CATEGORIES = ("while",)


def compute_bound_memory_time(breakdown: pd.DataFrame, ridge: float, points: pd.DataFrame, threshold: float = 0.10,
                              platform: str = "") -> Verdict:  # fmt: skip
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
        return Verdict(name, paper, UNKNOWN, "no per-op profile", id="O2", platform=platform)
    rows = []
    for label, g in breakdown.groupby("label", sort=False):
        counted = g[~g["category"].isin(UNCOUNTED_CATEGORIES)]
        on_roofline = points.loc[points["label"] == label, "intensity"]
        intensity = float(on_roofline.median()) if len(on_roofline) else float("nan")
        share = counted.loc[counted["intensity"].fillna(0) < ridge, "time_share"].sum() / max(counted["time_share"].sum(), 1e-12)
        rows.append({"family": g["family"].iloc[0], "label": label, "intensity": intensity, "memory_bound_share": share,
                     "uncounted_share": float(g.loc[g["category"].isin(UNCOUNTED_CATEGORIES), "time_share"].sum())})  # fmt: skip
    table_ = pd.DataFrame(rows)
    bound = table_[table_["intensity"] >= ridge]  # NaN (not on the roofline) is never compute-bound
    shown = "; ".join(f"{families.get(r.family).title} {r.intensity:.0f} FLOPs/B, {r.memory_bound_share:.0%} memory-bound"
                      for r in table_.itertuples())  # fmt: skip
    if bound.empty:
        return Verdict(name, paper, UNKNOWN, f"no profiled model is compute-bound here (ridge {ridge:.0f} FLOPs/B: {shown})",
                       {"models": rows}, id="O2", platform=platform)  # fmt: skip
    holds = bool((bound["memory_bound_share"] > threshold).all())
    evidence = f"{len(bound)} of {len(table_)} profiled models are right of the ridge ({ridge:.0f} FLOPs/B): {shown}"
    return Verdict(name, paper, HOLDS if holds else FAILS, evidence, {"models": rows}, id="O2", platform=platform)


def trace_memory_bound_share(traces: pd.DataFrame, ridge: float = 75.0, threshold: float = 10.0) -> Verdict:
    """O2 on the original TPU v2 traces: of the configurations right of the ridge (the premise),
    the share of time in op categories below it (``time_perc`` is in percent); container
    categories (``while``) are left out."""
    name = "TPU v2: compute-bound models spend noticeable time in memory-bound ops"
    paper = "even compute-bound models spend a noticeable share of time in memory-bound ops"
    whole = traces[traces["category"] == "all"]
    ops = traces[(traces["category"] != "all") & ~traces["category"].isin(CONTAINER_CATEGORIES)]
    if whole.empty or ops.empty:
        return Verdict(name, paper, UNKNOWN, "no TPU traces with an op breakdown in the store", id="O2", platform="tpu-v2-8")
    bound = whole[whole["intensity"] >= ridge]
    if bound.empty:
        return Verdict(name, paper, UNKNOWN, f"no traced configuration is right of the {ridge:.0f} FLOPs/byte ridge", id="O2",
                       platform="tpu-v2-8")  # fmt: skip
    below = ops[ops["intensity"].fillna(0) < ridge].groupby("label")["time_perc"].sum().reindex(bound["label"]).fillna(0)
    best = bound.loc[bound["flops_perc"].idxmax(), "label"]
    evidence = (f"{len(bound)} of {len(whole)} traced configurations are right of the {ridge:.0f} FLOPs/byte ridge; they spend "
                f"a median {below.median():.0f}% of their time in op categories below it (the best-utilised trace, {best} "
                f"at {bound['flops_perc'].max():.0f}% of peak, {below.get(best, 0):.0f}%)")  # fmt: skip
    verdict = HOLDS if below.median() >= threshold else FAILS
    numbers = {"compute_bound": len(bound), "median_share_percent": float(below.median()), "best": best,
               "best_share_percent": float(below.get(best, 0))}  # fmt: skip
    return Verdict(name, paper, verdict, evidence, numbers, id="O2", platform="tpu-v2-8")


def bandwidth_wall(tpu: pd.DataFrame, traces: pd.DataFrame, busy: float = 50.0) -> Verdict:
    """O2's bandwidth wall on the TPU: FC utilisation stops rising with nodes (a plateau) where
    the traces show memory-bandwidth utilisation above ``busy`` percent."""
    name = "TPU v2: utilisation hits a memory-bandwidth wall as nodes grow"
    paper = "utilisation stops rising beyond a few thousand nodes, where memory bandwidth is busy"
    shape = trend(tpu, "nodes", "fc", id="O2", platform="tpu-v2-8")
    whole = traces[traces["category"] == "all"].copy()
    if shape.verdict == UNKNOWN or whole.empty:
        return Verdict(name, paper, UNKNOWN, "needs the TPU v2 FC sweep and its traces", id="O2", platform="tpu-v2-8")
    whole["nodes"] = whole["label"].str.extract(r"node_(\d+)").astype(int)
    bandwidth = whole.groupby("nodes")["memory_bandwidth"].median()
    plateau = shape.numbers["plateau_from"]
    by_nodes = shape.numbers["median_by_value"]
    if plateau is None:
        evidence = f"utilisation keeps rising with nodes (medians by nodes: {_fmt(by_nodes, '.0%')})"
        return Verdict(name, paper, FAILS, evidence, {"utilization_by_nodes": by_nodes}, id="O2", platform="tpu-v2-8")
    at_wall = bandwidth[bandwidth.index >= plateau]
    evidence = (f"utilisation is flat from {plateau:g} nodes on; memory-bandwidth utilisation there is "
                f"{at_wall.median():.0f}% of peak (medians by nodes: {_fmt(by_nodes, '.0%')})")  # fmt: skip
    verdict = HOLDS if len(at_wall) and at_wall.median() >= busy else FAILS
    numbers = {"plateau_from": plateau, "utilization_by_nodes": by_nodes,
               "bandwidth_by_nodes": {_json_key(k): float(v) for k, v in bandwidth.items()}}  # fmt: skip
    return Verdict(name, paper, verdict, evidence, numbers, id="O2", platform="tpu-v2-8")


def _fmt(values: dict, spec: str) -> str:
    return ", ".join(f"{k}: {v:{spec}}" for k, v in values.items())


# ------------------------------------------------------------------ communication and infeed (O3, O4)


def _by_batch(rows: pd.DataFrame, column: str) -> pd.Series:
    batch = rows["label"].str.extract(r"bs_(\d+)")[0].astype(int)
    return rows.assign(batch=batch).groupby("batch")[column].median().sort_index()


def communication_share(traces: pd.DataFrame, negligible: float = 1.0) -> Verdict:
    """O3 on the TPU v2 traces: the cross-replica-sum (all-reduce) share of step time is
    non-negligible (median above ``negligible`` percent) and falls as the batch grows."""
    name = "TPU v2: communication takes a share of the step that falls with batch"
    paper = "communication between chips takes a non-negligible share of the step, falling as the batch grows"
    comm = traces[traces["category"] == "cross-replica-sum"]
    if comm["time_perc"].notna().sum() < 3:
        return Verdict(name, paper, UNKNOWN, "needs multi-chip traces (cross-replica-sum)", id="O3", platform="tpu-v2-8")
    return _communication_verdict(_by_batch(comm, "time_perc"), float(comm["time_perc"].median()), f"{len(comm)} traces",
                                  negligible, name, paper, "tpu-v2-8")  # fmt: skip


def measured_communication(rows: pd.DataFrame, platform: str, negligible: float = 1.0) -> Verdict:
    """O3 on this platform's data-parallel runs (``--devices N``): the communication share of the
    step (``1 - t_replica / t_parallel``, both timed alternately) is non-negligible and falls as the
    global batch grows."""
    name = f"{platform}: communication takes a share of the step that falls with batch"
    paper = "communication between chips takes a non-negligible share of the step, falling as the batch grows"
    runs = rows[(rows["state"] == "ok") & rows["comm_share"].notna()] if "comm_share" in rows else rows.iloc[:0]
    if len(runs) < 3 or runs["batch"].nunique() < 2:
        return Verdict(name, paper, UNKNOWN, f"needs data-parallel measurements (--devices 2) at 2 batch sizes or more, "
                       f"{len(runs)} in the store", id="O3", platform=platform)  # fmt: skip
    percent = 100 * runs["comm_share"]
    by_batch = percent.groupby(runs["batch"].astype(int)).median().sort_index()
    replicas = ", ".join(str(int(n)) for n in sorted(runs["devices"].unique()))
    return _communication_verdict(by_batch, float(percent.median()), f"{len(runs)} runs on {replicas} replicas", negligible,
                                  name, paper, platform)  # fmt: skip


def _communication_verdict(by_batch: pd.Series, median: float, what: str, negligible: float, name: str, paper: str,
                           platform: str) -> Verdict:  # fmt: skip
    """O3's verdict from the communication share (percent) by batch: non-negligible, and falling."""
    steps = np.log(by_batch.to_numpy()[1:] / np.maximum(by_batch.to_numpy()[:-1], 1e-9))
    falling = float((steps < -np.log1p(FLAT)).mean()) if len(steps) else 0.0
    holds = median >= negligible and by_batch.iloc[-1] < by_batch.iloc[0] and falling >= AGREEMENT
    evidence = (f"median {median:.1f}% of step time over {what}; by batch {_fmt(_keys(by_batch), '.1f')} (%); "
                f"{falling:.0%} of the steps between batch sizes fall")  # fmt: skip
    numbers = {"median_percent": median, "median_by_value": _keys(by_batch), "share_falling_steps": falling}
    return Verdict(name, paper, HOLDS if holds else FAILS, evidence, numbers, id="O3", platform=platform)


def _keys(series: pd.Series) -> dict:
    return {_json_key(k): float(v) for k, v in series.items()}


def infeed_share(traces: pd.DataFrame) -> Verdict:
    """O4 on the TPU v2 FC traces: smaller models wait on infeed more. Compares the median
    infeed share of the third of traced configurations with the fewest FLOPs per example
    against the third with the most; the share by batch is in the figures."""
    name = "TPU v2: smaller models wait on infeed more than larger ones"
    paper = "the host can fail to feed the device, and smaller models are held back more by infeed than larger ones"
    whole = traces[(traces["category"] == "all") & traces["infeed"].notna()].copy()
    if len(whole) < 6:
        return Verdict(name, paper, UNKNOWN, "needs infeed traces", id="O4", platform="tpu-v2-8")
    from paradnn.counting import forward_flops_per_example

    whole["work"] = [forward_flops_per_example(families.parse_label("fc", label)) for label in whole["label"]]
    small, large = whole["work"].quantile([1 / 3, 2 / 3])
    low, high = whole.loc[whole["work"] <= small, "infeed"].median(), whole.loc[whole["work"] >= large, "infeed"].median()
    by_batch = _by_batch(whole, "infeed")
    evidence = (f"median infeed share {low:.1f}% for the smallest third of models by FLOPs per example, {high:.1f}% for the "
                f"largest third; by batch {_fmt(_keys(by_batch), '.1f')} (%)")  # fmt: skip
    numbers = {"smallest_third_percent": float(low), "largest_third_percent": float(high), "median_by_value": _keys(by_batch)}
    return Verdict(name, paper, HOLDS if low > high else FAILS, evidence, numbers, id="O4", platform="tpu-v2-8")


# Two sweeps of one host-fed configuration gave infeed shares a median 4-6 and at most 6-22 points
# apart (16 FC and CNN rows, and the six real workloads; docs/performance.md, section 19): a
# smaller gap between the two thirds says nothing either way.
INFEED_MARGIN_POINTS = 10.0


def measured_infeed(rows: pd.DataFrame, platform: str) -> Verdict:
    """O4 on this platform's host-fed measurements (``--input host`` or ``host-prep``): the median
    infeed share (``1 - t_device / t_host``, both timed alternately) of the third of configurations
    with the fewest FLOPs per example against the third with the most, judged only where they
    differ by more than :data:`INFEED_MARGIN_POINTS`."""
    name = f"{platform}: smaller models wait on their input pipeline more than larger ones"
    paper = "the host can fail to feed the device, and smaller models are held back more by infeed than larger ones"
    fed = rows[(rows["state"] == "ok") & rows["infeed_share"].notna()].copy() if "infeed_share" in rows else rows.iloc[:0]
    if len(fed) < 6:
        return Verdict(name, paper, UNKNOWN, f"needs host-fed measurements (--input host-prep) of 6 configurations, "
                       f"{len(fed)} in the store", id="O4", platform=platform)  # fmt: skip
    fed["work"] = fed["flops_model"] / fed["batch"]
    fed["infeed_percent"] = 100 * fed["infeed_share"]
    small, large = fed["work"].quantile([1 / 3, 2 / 3])
    low = fed.loc[fed["work"] <= small, "infeed_percent"].median()
    high = fed.loc[fed["work"] >= large, "infeed_percent"].median()
    modes = ", ".join(sorted(fed["input_mode"].dropna().unique()))
    evidence = (f"median infeed share {low:.1f}% for the smallest third of models by FLOPs per example, {high:.1f}% for the "
                f"largest third ({len(fed)} configurations fed by the {modes} pipeline)")  # fmt: skip
    numbers = {"smallest_third_percent": float(low), "largest_third_percent": float(high), "n": len(fed)}
    if abs(low - high) <= INFEED_MARGIN_POINTS:
        evidence += (f"; the thirds differ by {abs(low - high):.1f} points, within the {INFEED_MARGIN_POINTS:.0f} that "
                     "two sweeps of one configuration can differ by")  # fmt: skip
        return Verdict(name, paper, UNKNOWN, evidence, numbers, id="O4", platform=platform)
    return Verdict(name, paper, HOLDS if low > high else FAILS, evidence, numbers, id="O4", platform=platform)


# ------------------------------------------------------------------ platforms (O6-O10)


def speedup_direction(table_: pd.DataFrame, family: str, axis: str, grows: bool, id: str, platform: str,
                      paper: str, held_fixed: dict | None = None) -> Verdict:  # fmt: skip
    """The sign of ``axis``'s weight in a regression of log2(speedup) on the standardised log2
    hyperparameters: positive (the target's advantage grows with the axis) or negative, with
    its 95% confidence interval excluding zero."""
    way = "grows" if grows else "shrinks"
    name = f"{families.get(family).title}: the target's advantage {way} with {axis}"
    sub = table_[table_["family"] == family] if "family" in table_ else table_
    pairs = {"held_fixed": held_fixed, "n": len(sub)}
    if len(sub) < 6:
        return Verdict(name, paper, UNKNOWN, f"{len(sub)} configurations on both platforms (need 6)", id=id, platform=platform,
                       **pairs)  # fmt: skip
    reg = regress(sub.assign(log2_speedup=np.log2(sub["speedup"])), "log2_speedup", family=family)
    if axis not in reg.coefficients.index:
        return Verdict(name, paper, UNKNOWN, f"{axis} does not vary in the configurations both platforms ran", id=id,
                       platform=platform, **pairs)  # fmt: skip
    c = reg.coefficients.loc[axis]
    sign = 1 if grows else -1
    holds = c["ci_low"] * sign > 0 and c["ci_high"] * sign > 0
    evidence = (f"log2-speedup weight of {axis} {c['coef']:+.2f} (95% CI {c['ci_low']:+.2f} to {c['ci_high']:+.2f}; "
                f"R² {reg.r_squared:.2f}, n {reg.n}); speedup {sub['speedup'].min():.2f}x to "
                f"{sub['speedup'].max():.2f}x")  # fmt: skip
    numbers = {"coef": float(c["coef"]), "ci_low": float(c["ci_low"]), "ci_high": float(c["ci_high"]), "r_squared": reg.r_squared}
    return Verdict(name, paper, HOLDS if holds else FAILS, evidence, numbers, id=id, platform=platform, **pairs)


def speedup_depends_on(table_: pd.DataFrame, family: str, axes: tuple[str, ...] = ("nodes", "batch"), platform: str = "",
                       id: str = "") -> Verdict:  # fmt: skip
    """Platform speedup varies with model shape: log2(speedup) regressed on log2 features.

    A local pair (one CPU against itself with fewer threads) tests only that a speedup
    depends on shape, not the paper's TPU/GPU direction: it carries no observation id.
    """
    name = f"{families.get(family).title}: speedup depends on {' and '.join(axes)}"
    paper = "the speedup between two platforms depends on the model's shape (nodes and batch)"
    sub = table_[table_["family"] == family] if "family" in table_ else table_
    if len(sub) < 6:
        return Verdict(name, paper, UNKNOWN, f"{len(sub)} configurations on both platforms (need 6)", id=id, platform=platform)
    data = sub.assign(log2_speedup=np.log2(sub["speedup"]))
    reg = regress(data, "log2_speedup", family=family)
    coef = reg.coefficients
    significant = [a for a in axes if a in coef.index and np.sign(coef.loc[a, "ci_low"]) == np.sign(coef.loc[a, "ci_high"])]
    coefs = ", ".join(f"{a} {reg.coefficients.loc[a, 'coef']:+.2f}" for a in axes if a in reg.coefficients.index)
    spread = f"speedup {sub['speedup'].min():.2f}x to {sub['speedup'].max():.2f}x"
    evidence = f"{spread}; log2-speedup weights {coefs} (R^2 {reg.r_squared:.2f}, n {reg.n})"
    verdict = HOLDS if significant and reg.r_squared >= 0.3 else FAILS
    return Verdict(name, paper, verdict, evidence, {"significant": significant, "r_squared": reg.r_squared}, id=id,
                   platform=platform)  # fmt: skip


def out_of_memory_first(df: pd.DataFrame, family: str = "fc") -> Verdict:
    """O6: on the configurations every platform attempted, which one ran out of memory first
    (the most ``oom`` cells); the paper found the platform with the least memory does."""
    name = f"{families.get(family).title}: the platform with less memory runs out first"
    paper = "the largest models run only on the platform with the most memory"
    rows = df[df["family"] == family]
    per_platform = [set(g["label"]) for _, g in rows.groupby("platform")]
    labels = set.intersection(*per_platform) if len(per_platform) > 1 else set()
    shared = rows[rows["label"].isin(labels)]
    oom = shared[shared["state"] == "oom"].groupby("platform")["label"].nunique().reindex(sorted(shared["platform"].unique()))
    oom = oom.fillna(0).astype(int)
    unfinished = shared[shared["state"] == "timeout"].groupby("platform")["label"].nunique()
    memory = {p: _memory_bytes(p) for p in oom.index}
    smallest = min(memory, key=lambda p: memory[p] if memory[p] else float("inf")) if memory else None
    if smallest is not None and oom.get(smallest, 0) == 0 and unfinished.get(smallest, 0) > 0:
        return Verdict(name, paper, UNKNOWN, f"{smallest} (least memory) records no out-of-memory result, but "
                       f"{unfinished[smallest]} of the shared configurations did not finish for no recorded reason; "
                       + ", ".join(f"{p} {n} out of memory" for p, n in oom.items()), {"oom": oom.to_dict()}, id="O6",
                       platform=" vs ".join(oom.index))  # fmt: skip
    if oom.empty or oom.sum() == 0:
        others = ", ".join(f"{p}: {n}" for p, n in shared[shared["state"] != "ok"].groupby("platform").size().items())
        return Verdict(name, paper, UNKNOWN, f"no out-of-memory results on configurations two platforms share "
                       f"({len(labels)} shared; other failures: {others or 'none'})", id="O6")  # fmt: skip
    first = oom.idxmax()
    evidence = (f"out of memory on the {len(labels)} shared configurations: " + ", ".join(f"{p} {n}" for p, n in oom.items())
                + "; memory per model replica: " + ", ".join(f"{p} {m / 2**30:.0f} GiB" if m else f"{p} unknown"
                                                             for p, m in memory.items()))  # fmt: skip
    numbers = {"oom": oom.to_dict(), "memory_bytes": memory}
    if not memory[first]:
        return Verdict(name, paper, UNKNOWN, evidence, numbers, id="O6", platform=" vs ".join(oom.index))
    if first != smallest:
        return Verdict(name, paper, FAILS, evidence, numbers, id="O6", platform=" vs ".join(oom.index))
    # The claim is that the largest models *run* on the platform with the most memory: what became
    # of the configurations the smallest ran out of memory on, on the largest?
    largest = max(memory, key=lambda p: memory[p] or 0)
    too_big = set(shared.loc[(shared["platform"] == smallest) & (shared["state"] == "oom"), "label"])
    there = shared[(shared["platform"] == largest) & shared["label"].isin(too_big)]["state"].value_counts()
    evidence += f"; of the {len(too_big)} that ran out of memory on {smallest}, {largest}: " + \
        ", ".join(f"{n} {s}" for s, n in there.items())
    numbers["on_largest"] = there.to_dict()
    verdict = HOLDS if there.get("ok", 0) else (UNKNOWN if there.get("timeout", 0) else FAILS)
    return Verdict(name, paper, verdict, evidence, numbers, id="O6", platform=" vs ".join(oom.index))


# Memory one replica of a model has on the original study's platforms (paper Table 3), for O6: a
# TPU board replicates the model on each of its 8 cores, each with its own 8 GiB (v2) or 16 GiB
# (v3) of HBM; the V100 has 16 GiB.
PLATFORM_MEMORY = {"tpu-v2-8": 8 * 2**30, "tpu-v3-8": 16 * 2**30, "v100": 16 * 2**30}


def _memory_bytes(platform: str) -> float | None:
    return PLATFORM_MEMORY.get(platform)


def utilisation_ratio(result: SpeedupResult) -> Verdict:
    """O10 (Fig. 11): per family, the median over matched configurations of the target's FLOPS
    utilisation over the baseline's (``result``: a platform comparison of ``utilization``, e.g.
    ``Results.matched("platform", "v100", "tpu-v2-8", metric="utilization", free=("dtype", "xla"))``)."""
    target, baseline = result.target, result.baseline
    name = f"{target} reaches higher FLOPS utilisation than {baseline}"
    paper = "the TPU reaches higher FLOPS utilisation than the GPU, up to 3x"
    pair = f"{target} vs {baseline}"
    pairs = {"held_fixed": {**result.held_fixed, "free": list(result.free)}, "n": result.n}
    if not result.n:
        return Verdict(name, paper, UNKNOWN, f"no configuration measured on both {target} and {baseline}", id="O10",
                       platform=pair, **pairs)  # fmt: skip
    ratios = result.table.groupby("family")["speedup"].median()
    counts = result.table.groupby("family").size()
    shown = ", ".join(f"{families.get(f).title if f in families.names() else f} {r:.2f}x (n {counts[f]})"
                      for f, r in ratios.items())  # fmt: skip
    verdict = HOLDS if (ratios > 1).all() else FAILS
    return Verdict(name, paper, verdict, f"median utilisation ratio on matched configurations: {shown}",
                   {"ratios": ratios.to_dict()}, id="O10", platform=pair, **pairs)  # fmt: skip


# ------------------------------------------------------------------ software stack (O12-O14)


def stack_speedup(result, name: str, paper: str, margin: float = 0.05, ridge: float | None = None, id: str = "",
                  platform: str = "") -> Verdict:  # fmt: skip
    """A software-stack or precision change speeds things up: median speedup above 1 + margin.

    With ``ridge`` only the configurations right of the ridge point on the baseline's
    roofline count (compute-bound: ``flops_model / bytes_estimate >= ridge``).
    """
    t = result.table
    scope = ""
    if ridge is not None and not t.empty:
        t = t[t["flops_model"] / t["bytes_estimate"] >= ridge]
        scope = f" right of the ridge ({ridge:.0f} FLOPs/byte)"
    if len(t) < 2:
        return Verdict(name, paper, UNKNOWN, f"{len(t)} configurations{scope} measured both ways (need 2)", id=id,
                       platform=platform, held_fixed=result.held_fixed, n=len(t))  # fmt: skip
    median = float(t["speedup"].median())
    spread = f"range {t['speedup'].min():.2f}x-{t['speedup'].max():.2f}x"
    evidence = f"median speedup {median:.2f}x over {len(t)} configurations{scope} ({spread})"
    return Verdict(name, paper, HOLDS if median > 1 + margin else FAILS, evidence, {"median": median, "n": len(t)}, id=id,
                   platform=platform, held_fixed=result.held_fixed, n=len(t))  # fmt: skip


def version_chain(df: pd.DataFrame, platform: str = "") -> tuple[Verdict, list[SpeedupResult]]:
    """Every TensorFlow version against the one before it, like with like (same dtype and XLA
    setting); holds when no newer version is slower (median speedup below 1 - 5%). Filed as
    O14 (each TensorFlow and CUDA release brings gains) on a GPU, else as O12 (software-stack
    updates sped models up, which the paper found on the TPU)."""
    name, paper = "Newer TensorFlow versions speed things up", "software-stack updates sped models up"
    gpu = platform.lower().startswith("gpu") or platform.lower() in ("v100", "a100", "h100", "h200")
    oid = "O14" if gpu else "O12"
    if gpu:
        paper = "each TensorFlow and CUDA release brings further gains on the GPU"
    from paradnn.analysis.rows import version_key

    versions = sorted(df["sw_tensorflow"].dropna().unique(), key=version_key)
    if len(versions) < 2:
        return Verdict(name, paper, UNKNOWN, f"one TensorFlow version in the store ({', '.join(versions) or 'none'})", id=oid,
                       platform=platform, held_fixed={"platform": platform}, n=0), []  # fmt: skip
    results, steps = [], []
    for (dtype, xla), rows in df.groupby(["dtype", "xla"]):
        for older, newer in zip(versions, versions[1:]):
            result = compare(rows, older, newer, by="sw_tensorflow")
            if result.n:
                results.append(result)
                steps.append(f"{older}->{newer} ({dtype}, XLA {'on' if xla else 'off'}) {result.median:.2f}x over {result.n}")
    if not results:
        return Verdict(name, paper, UNKNOWN, "no configuration measured under two versions with the same settings", id=oid,
                       platform=platform, held_fixed={"platform": platform}, n=0), []  # fmt: skip
    slower = [r for r in results if r.median < 0.95]
    verdict = FAILS if slower else HOLDS
    numbers = {f"{r.baseline}->{r.target}": r.median for r in results}
    held = {k: v for k, v in results[0].held_fixed.items() if k not in ("dtype", "xla")} | {"dtype": "matched per pair",
                                                                                             "xla": "matched per pair"}
    return Verdict(name, paper, verdict, "; ".join(steps), numbers, id=oid, platform=platform, held_fixed=held,
                   n=sum(r.n for r in results)), results
