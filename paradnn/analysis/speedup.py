"""Speedup of one platform or setting over another, matched configuration by configuration.

``compare(df, "v100", "tpu-v2-8")`` pairs every configuration (family and label) that
finished on both sides and divides the target's throughput by the baseline's. ``by``
names the column whose values are being compared (``platform``, ``dtype``, ``xla``,
``sw_tensorflow``, ...); when it is not ``platform`` the pairs must also share the
platform, so that e.g. an XLA speedup never mixes a GPU with a CPU. Repeated runs of one
configuration on one side are reduced to their median, which ignores a stray slow run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paradnn.store import hyperparameter_names

VALUE_COLUMNS = ("baseline", "target", "speedup")
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

    def summary(self) -> dict:
        """The figures as a plain dict (NaN statistics when nothing matched)."""
        return {
            "n": self.n,
            "min": self.min,
            "median": self.median,
            "geomean": self.geomean,
            "max": self.max,
            "baseline": self.baseline,
            "target": self.target,
            "by": self.by,
            "family": self.family,
            "metric": self.metric,
        }


def _side(df: pd.DataFrame, by: str, value: object) -> pd.Series:
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
    """The median ``metric`` per key: repeated runs of one configuration count once."""
    return rows.groupby(key, sort=True, dropna=False)[metric].median()


def compare(
    df: pd.DataFrame,
    baseline: object,
    target: object,
    by: str = "platform",
    family: str | None = None,
    metric: str = "examples_per_sec",
) -> SpeedupResult:
    """Speedup (target / baseline) of ``metric`` over the configurations both sides finished.

    Only rows in state ``ok`` with a positive ``metric`` count. Pairs match on family and
    label, plus platform when ``by`` is another column. Nothing in common gives n = 0 and
    NaN statistics, not an error.
    """
    key = ["family", "label"] + (["platform"] if by != "platform" else [])
    _check_columns(df, [*key, "state", by, metric])
    if _same(baseline, target):
        raise ValueError(f"baseline and target are both {baseline!r}; compare two different values of {by}")
    rows = df[(df["state"] == "ok") & (pd.to_numeric(df[metric], errors="coerce") > 0)]
    if family is not None:
        rows = rows[rows["family"] == family]
    rows = rows.assign(**{metric: pd.to_numeric(rows[metric])})
    base = _medians(rows[_side(rows, by, baseline)], key, metric).rename("baseline")
    targ = _medians(rows[_side(rows, by, target)], key, metric).rename("target")
    paired = pd.concat([base, targ], axis=1, join="inner")
    paired["speedup"] = paired["target"] / paired["baseline"]
    # Sizes as the baseline has them (bytes_estimate depends on the dtype): its rows come first.
    ordered = pd.concat([rows[_side(rows, by, baseline)], rows[~_side(rows, by, baseline)]])
    table = _with_hyperparameters(paired.reset_index(), ordered, key)
    return SpeedupResult(table, baseline, target, by, family, metric)


def _same(a: object, b: object) -> bool:
    return a is b or (a is not None and b is not None and a == b)


def _with_hyperparameters(paired: pd.DataFrame, rows: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Add the hyperparameter columns of the matched configurations (empty ones dropped)."""
    hyper = [h for h in hyperparameter_names() if h in rows.columns]
    sizes = [c for c in SIZE_COLUMNS if c in rows.columns]
    configs = rows[["family", "label", *hyper, *sizes]].drop_duplicates(["family", "label"])
    table = paired.merge(configs, on=["family", "label"], how="left")
    hyper = [h for h in hyper if table[h].notna().any()]
    for h in hyper:  # integers read back as floats when a column has gaps; restore them
        if pd.api.types.is_float_dtype(table[h]) and (table[h].dropna() % 1 == 0).all():
            table[h] = table[h].astype("Int64")
    table = table[[*key, *hyper, *sizes, *VALUE_COLUMNS]]
    return table.sort_values(key, kind="stable").reset_index(drop=True)
