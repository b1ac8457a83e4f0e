"""Speedup of one platform or setting over another, matched run by run.

``compare(df, "v100", "tpu-v2-8")`` pairs every run that finished on both sides and
divides the target's throughput by the baseline's. ``by`` names the column whose values
are being compared (``platform``, ``dtype``, ``xla``, ``sw_tensorflow``, ...); a pair is
equal in every other part of the run identity (:func:`paradnn.analysis.results.comparison_key`:
the configuration with its family version, every declared run setting, the platform's
fingerprint and software stack), except what varies with ``by`` and what ``free`` lets go
on purpose, so e.g. a precision speedup never mixes XLA settings and a framework speedup
never mixes input modes. The result says what it held (``held_fixed``) and freed.
Repeated runs of one identity on one side are reduced to their median, which ignores a
stray slow run. Analyses reach this through :meth:`paradnn.analysis.results.Results.matched`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from paradnn.analysis.rows import MISSING, comparison_key, finished_with, held_fixed, looks_of, quiet_first, round_ids, unpool
from paradnn.config import ConfigError
from paradnn.store import hyperparameter_names
from paradnn.vocabulary import is_finished

# ``rounds``: the interleaved rounds a pair's speedup is the median of (0: its sides' pooled medians
# divided); ``replicates``: the speedups a two-level bootstrap resamples within the pair (per round,
# else every target measurement over every baseline one).
VALUE_COLUMNS = ("baseline", "target", "speedup", "rounds", "replicates")
# Model sizes carried from the store into every table (analysis never recomputes them from labels);
# bytes_estimate (for the roofline intensity) is the baseline's.
SIZE_COLUMNS = ("params", "flops_model", "bytes_estimate")


@dataclass(frozen=True, eq=False)
class SpeedupResult:
    """Per-configuration speedups of ``target`` over ``baseline`` and their summary.

    ``table`` has one row per matched configuration: family, label (and platform when
    ``by`` is not the platform), the hyperparameter columns that are not all empty, the
    baseline and target values of ``metric`` and ``speedup`` = target / baseline.
    """

    table: pd.DataFrame
    baseline: object
    target: object
    by: str
    family: str | None
    metric: str
    carried: tuple[str, ...] = ()  # columns of the target's rows kept beside the speedup (see compare)
    key: tuple[str, ...] = ("family", "label")  # the identity columns each pair agrees in
    held_fixed: dict = field(default_factory=dict)  # run settings held equal: one value, or "matched per pair"
    free: tuple[str, ...] = ()  # identity columns let go on purpose (e.g. each platform's own best precision)
    # Per setting a comparison could free: why, and whether it was held (both sides had a value in
    # common) or each side kept its own values (paradnn.analysis.results.Results.matched).
    sides: dict = field(default_factory=dict)
    rows: pd.DataFrame | None = None  # the rows the pairs were made from (for intervals)
    why: str = ""  # when nothing paired: what differs between the sides and how to free it
    looks: int = 1  # looks at this comparison its rows were measured in: its intervals' level is split over them

    @property
    def n(self) -> int:
        return len(self.table)

    def _stat(self, reduce) -> float:
        values = self.table["speedup"].to_numpy(dtype=float)
        return float(reduce(values)) if len(values) else math.nan

    @property
    def min(self) -> float:
        return self._stat(np.min)

    @property
    def median(self) -> float:
        return self._stat(np.median)

    @property
    def geomean(self) -> float:
        return self._stat(lambda v: np.exp(np.mean(np.log(v))))

    @property
    def max(self) -> float:
        return self._stat(np.max)

    @property
    def interleaved(self) -> int:
        """Pairs whose speedup is the median over rounds in which both sides were timed one after the other."""
        return int((self.table["rounds"] > 0).sum()) if self.n else 0

    def input_bound(self) -> pd.Series:
        """Pairs where either side's step waited on its input (``baseline_bound``/``target_bound``,
        see :mod:`paradnn.store.bounds`); all False where the table carries no bounds."""
        if not self.n or "baseline_bound" not in self.table:
            return pd.Series(False, index=self.table.index)
        return (self.table["baseline_bound"] == "input") | (self.table["target_bound"] == "input")

    def chips_only(self) -> SpeedupResult:
        """The pairs where neither side was input-bound: what a claim about the chips may rest on."""
        return replace(self, table=self.table[~self.input_bound()])

    def summary(self) -> dict:
        """The figures as a plain dict (NaN statistics when nothing matched)."""
        return {
            "n": self.n,
            "interleaved": self.interleaved,
            "looks": self.looks,
            "min": self.min,
            "median": self.median,
            "geomean": self.geomean,
            "max": self.max,
            "baseline": self.baseline,
            "target": self.target,
            "by": self.by,
            "family": self.family,
            "metric": self.metric,
            "held_fixed": self.held_fixed,
            "free": list(self.free),
            "sides": self.sides,
            **({"why": self.why} if self.why else {}),
            **{f"median_{c}": float(self.table[c].median()) if self.n else math.nan for c in self.carried},
        }


def side_rows(df: pd.DataFrame, by: str, value: object) -> pd.Series:
    """Rows of ``df`` whose ``by`` column equals ``value`` (None matches missing values)."""
    column = df[by]
    if value is None:
        return column.isna()
    return column.map(lambda v: v is not None and not (isinstance(v, float) and math.isnan(v)) and v == value).astype(bool)


def _check_columns(df: pd.DataFrame, needed: list[str]) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"results table lacks column(s) {', '.join(missing)}; expected a Store.results() DataFrame")


def _medians(rows: pd.DataFrame, key: list[str], metric: str) -> pd.Series:
    """The median ``metric`` per key: repeated runs of one identity count once."""
    return rows.groupby(key, sort=True)[metric].median()


def _by_rounds(
    paired: pd.DataFrame, base_rows: pd.DataFrame, targ_rows: pd.DataFrame, key: list[str], metric: str
) -> pd.DataFrame:
    """``paired`` with each pair's speedup the median over the rounds both sides were timed in
    (the per-round ratio, so a slow spell moves both sides of a round alike), where there are such
    rounds, and the replicates a bootstrap resamples within the pair."""

    def per_round(rows: pd.DataFrame) -> pd.Series:
        rows = rows.assign(_round=round_ids(rows)).dropna(subset=["_round"])
        return rows.groupby([*key, "_round"], sort=True)[metric].median()

    ratios = pd.concat([per_round(base_rows).rename("b"), per_round(targ_rows).rename("t")], axis=1, join="inner")
    ratios = (ratios["t"] / ratios["b"]).groupby(level=key).agg(list) if len(ratios) else pd.Series(dtype=object)
    sides = [rows.groupby(key, sort=True)[metric].agg(list) for rows in (base_rows, targ_rows)]
    rounds, replicates = [], []
    for index in paired.index:
        interleaved = ratios.get(index) if len(ratios) else None
        if interleaved:
            rounds.append(len(interleaved))
            replicates.append([float(r) for r in interleaved])
        else:
            rounds.append(0)
            replicates.append([float(t / b) for b in sides[0][index] for t in sides[1][index]])
    paired["rounds"], paired["replicates"] = rounds, replicates
    interleaved = paired["rounds"] > 0
    paired.loc[interleaved, "speedup"] = [float(np.median(r)) for r in paired.loc[interleaved, "replicates"]]
    return paired


def _keyed(rows: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """``rows`` with missing values of the key columns made comparable (NaN never equals NaN)."""
    filled = {c: rows[c].astype(object).where(rows[c].notna(), MISSING) for c in key}
    return rows.assign(**filled)


def compare(
    df: pd.DataFrame,
    baseline: object,
    target: object,
    by: str = "platform",
    family: str | None = None,
    metric: str = "examples_per_sec",
    carry: tuple[str, ...] = (),
    free: tuple[str, ...] = (),
    within: tuple[str, ...] = (),
) -> SpeedupResult:
    """Speedup (target / baseline) of ``metric`` over the runs both sides finished, like with like.

    Only rows in state ``ok`` with a positive ``metric`` count. A pair agrees in every
    identity column of ``df`` but ``by``, what varies with it and ``free``. Nothing in
    common gives n = 0 and NaN statistics, not an error. ``carry``: columns kept beside the
    speedup, the median per pair of the side that has them (the target's, else the
    baseline's), e.g. ``comm_share`` when comparing replica counts. ``within``: columns beyond
    the run identity a pair must also agree in (``sweep``: both sides measured side by side).
    """
    _check_columns(df, ["family", "label", "state", by, metric, *within])
    if _same(baseline, target):
        raise ConfigError("target", target, f"a value of {by} other than the baseline's ({baseline!r})")
    key = comparison_key(df, by, free) + list(within)
    df = unpool(df)  # pooled rows pair measurement by measurement, round by round
    rows = quiet_first(finished_with(df, metric))
    if family is not None:
        rows = rows[rows["family"] == family]
    rows = _keyed(rows.assign(**{metric: pd.to_numeric(rows[metric])}), key)
    base_rows, targ_rows = rows[side_rows(rows, by, baseline)], rows[side_rows(rows, by, target)]
    base = _medians(base_rows, key, metric).rename("baseline")
    targ = _medians(targ_rows, key, metric).rename("target")
    paired = pd.concat([base, targ], axis=1, join="inner")
    paired["speedup"] = paired["target"] / paired["baseline"]
    paired = _by_rounds(paired, base_rows, targ_rows, key, metric)
    # Sizes as the baseline has them (bytes_estimate depends on the dtype): its rows come first.
    ordered = pd.concat([rows[side_rows(rows, by, baseline)], rows[~side_rows(rows, by, baseline)]])
    table = _with_hyperparameters(paired.reset_index(), ordered, key)
    for column in (c for c in carry if c in rows):  # from the side that has it (the host mode, the replicas)
        values = rows.assign(**{column: pd.to_numeric(rows[column], errors="coerce")})
        side = values[side_rows(values, by, target)]
        side = side if side[column].notna().any() else values[side_rows(values, by, baseline)]
        table = table.merge(side.groupby(key)[column].median().reset_index(), on=key, how="left")
    held = held_fixed(table.replace({MISSING: None}), key)
    table = table.replace({MISSING: None})
    carry = tuple(c for c in carry if c in table)
    looks = int(looks_of(pd.concat([base_rows, targ_rows])).max()) if len(paired) else 1
    return SpeedupResult(table, baseline, target, by, family, metric, carry, tuple(key), held, tuple(free), looks=looks)


def _same(a: object, b: object) -> bool:
    return a is b or (a is not None and b is not None and a == b)


def _with_hyperparameters(paired: pd.DataFrame, rows: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Add the hyperparameter columns of the matched configurations (empty ones dropped);
    the key columns (what each pair agrees in) come first."""
    hyper = [h for h in hyperparameter_names() if h in rows.columns]
    sizes = [c for c in SIZE_COLUMNS if c in rows.columns]
    configs = rows[["family", "label", *hyper, *sizes]].drop_duplicates(["family", "label"])
    table = paired.merge(configs, on=["family", "label"], how="left")
    hyper = [h for h in hyper if table[h].notna().any()]
    for h in hyper:  # integers read back as floats when a column has gaps; restore them
        if pd.api.types.is_float_dtype(table[h]) and (table[h].dropna() % 1 == 0).all():
            table[h] = table[h].astype("Int64")
    table = table[[*key, *hyper, *sizes, *VALUE_COLUMNS]]
    return table.sort_values(key, kind="stable", key=lambda column: column.astype(str)).reset_index(drop=True)


def bootstrap_interval(
    df: pd.DataFrame, result: SpeedupResult, n_boot: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Interval of ``result``'s geometric-mean speedup from the measurements behind it.

    Each bootstrap draw resamples the configurations, and within each configuration its
    replicates (the per-round speedups of an interleaved pair, or every target measurement
    over every baseline one) where it has two or more; a configuration measured once a side
    resamples the per-step timing samples (``samples_s``) of both sides. So the interval
    holds the spread between configurations, between reruns and within each measurement.
    Rows without samples (imported ones) contribute their median only. NaNs when nothing matched.
    """
    if not result.n:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    key = list(result.key)
    rows = _keyed(unpool(df)[is_finished], key)
    logs = []
    for _, pair in result.table.iterrows():
        replicates = np.asarray(pair.get("replicates") or [], dtype=float)
        if len(replicates) > 1:
            logs.append(np.log(np.median(replicates[rng.integers(0, len(replicates), (n_boot, len(replicates)))], axis=1)))
            continue
        same = np.logical_and.reduce([rows[k] == (MISSING if pair[k] is None else pair[k]) for k in key])
        sides = [_boot_medians(rows[same & side_rows(rows, result.by, v)], rng, n_boot) for v in (result.baseline, result.target)]
        logs.append(np.log(sides[0] / sides[1]))  # step time baseline / target = speedup
    logs = np.array(logs)  # configurations x draws
    picks = rng.integers(0, len(logs), size=(n_boot, len(logs)))
    draws = np.exp(logs[picks, np.arange(n_boot)[:, None]].mean(axis=1))
    tail = (1 - level) / 2 * 100
    return float(np.percentile(draws, tail)), float(np.percentile(draws, 100 - tail))


def _boot_medians(rows: pd.DataFrame, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    """``n_boot`` bootstrap medians of the step-time samples of ``rows`` (their median step time if none)."""
    samples = [s for value in rows.get("samples_s", pd.Series(dtype=object)) for s in (_as_list(value) or [])]
    if not samples:
        return np.full(n_boot, float(rows["step_time_s"].median()))
    a = np.asarray(samples, dtype=float)
    return np.median(a[rng.integers(0, len(a), size=(n_boot, len(a)))], axis=1)


def _as_list(value) -> list | None:
    if isinstance(value, str):
        import json

        return json.loads(value)
    return list(value) if isinstance(value, (list, tuple, np.ndarray)) else None


def version_speedups(df: pd.DataFrame, column: str = "sw_tensorflow") -> pd.DataFrame:
    """Every software version against the one before it and against the oldest, like with like.

    Per family, dtype and XLA setting: configurations measured under both side by side (in one
    sweep, :func:`paradnn.analysis.rows.side_by_side`), geometric-mean
    speedup (examples/s, newer over older), its 95% bootstrap interval
    (:func:`bootstrap_interval`) and whether the difference is within the noise (the
    interval holds 1).
    """
    from paradnn.analysis.rows import side_by_side, version_key

    df = side_by_side(df, column)
    versions = sorted(df[column].dropna().unique(), key=version_key)
    out = []
    for (family, dtype, xla), rows in df.groupby(["family", "dtype", "xla"]):
        for i, newer in enumerate(versions[1:], start=1):
            pairs = {("previous", versions[i - 1])} | ({("oldest", versions[0])} if i > 1 else set())
            for against, older in sorted(pairs):
                result = compare(rows, older, newer, by=column, family=family, within=("sweep",))
                if not result.n:
                    continue
                low, high = bootstrap_interval(rows, result)
                out.append(
                    {
                        "family": family,
                        "dtype": dtype,
                        "xla": bool(xla),
                        "baseline": older,
                        "target": newer,
                        "against": against,
                        "n": result.n,
                        "geomean": result.geomean,
                        "low": low,
                        "high": high,
                        "within_noise": bool(low <= 1 <= high),
                    }
                )
    return pd.DataFrame(
        out, columns=["family", "dtype", "xla", "baseline", "target", "against", "n", "geomean", "low", "high", "within_noise"]
    )
