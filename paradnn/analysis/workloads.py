"""The real workloads among the parameterized models (paper Fig. 1, 3c-d, 5 top and 11).

* :func:`parameter_ranges` -- trainable parameters of every family: the range the paper
  grids of the parameterized families span (counted analytically, nothing built) and the
  real workloads as points at their paper size (Fig. 1);
* :func:`precision_table` -- FLOPS utilisation of each family in float32 and in a 16-bit
  policy, side by side (Fig. 5 top);
* :func:`platform_table` and :func:`pair_speedups` -- utilisation of every family on every
  platform in a store, and the examples/s speedup of each pair of platforms per family
  (Fig. 11).
"""

from __future__ import annotations

import itertools

import pandas as pd

from paradnn import counting, families
from paradnn.analysis.speedup import compare
from paradnn.config import ConfigError
from paradnn.space import expand, grid


def parameter_ranges(preset: str = "paper") -> pd.DataFrame:
    """One row per family: kind (``range`` or ``model``), min, max and median parameters.

    Parameter counts do not depend on the batch, so each grid is counted once per
    combination of its other axes; workloads are counted at their preset's first size.
    """
    rows = []
    for family in families.all_families():
        axes = grid(family.name, preset, {"batch": grid(family.name, preset)["batch"][:1]})
        configs = expand(family.name, preset, axes)
        workload = family.role == "workload"
        if workload:
            configs = configs[:1]
        params = pd.Series([counting.count_params(c) for c in configs], dtype=float)
        kind = "model" if workload else "range"
        rows.append({"family": family.name, "title": family.title, "kind": kind, "configurations": len(configs),
                     "min": params.min(), "median": params.median(), "max": params.max()})  # fmt: skip
    return pd.DataFrame(rows)


def precision_table(df: pd.DataFrame, low_precision: str, baseline: str = "float32") -> pd.DataFrame:
    """Median FLOPS utilisation per family in ``baseline`` and ``low_precision``, and the examples/s speedup.

    Utilisation is against each dtype's own peak. Families measured only one way get an
    empty cell on the other side.
    """
    ok = df[df["state"] == "ok"]
    util = ok.pivot_table(index="family", columns="dtype", values="utilization", aggfunc="median")
    table = pd.DataFrame(index=sorted(set(ok["family"]), key=_order))
    for dtype in (baseline, low_precision):
        table[dtype] = util[dtype] if dtype in util else float("nan")
    speed = compare(ok, baseline, low_precision, by="dtype") if {baseline, low_precision} <= set(ok["dtype"]) else None
    medians = speed.table.groupby("family")["speedup"].median() if speed is not None and speed.n else pd.Series(dtype=float)
    table["speedup"] = medians.reindex(table.index)
    return table.rename_axis("family").reset_index()


def platform_table(df: pd.DataFrame, dtype: str | None = None) -> pd.DataFrame:
    """Median FLOPS utilisation of every family on every platform (rows: family; columns: platform).

    With ``dtype``, measured rows of other dtypes are left out (imported rows keep the
    precision they were run in).
    """
    ok = df[(df["state"] == "ok") & df["utilization"].notna()]
    if dtype is not None:
        ok = ok[(ok["dtype"] == dtype) | (ok["source"] != "measured")]
    table = ok.pivot_table(index="family", columns="platform", values="utilization", aggfunc="median")
    return table.reindex(sorted(table.index, key=_order))


def pair_speedups(df: pd.DataFrame) -> pd.DataFrame:
    """For each pair of platforms and each family both measured: n, median and geometric-mean speedup.

    Each platform at its own precision and XLA setting, as the paper compared its platforms
    (the rest of the run identity held fixed), in the paper's orientation: the accelerator
    over the CPU, the TPU over the GPU (:func:`platform_rank`)."""
    rows = []
    platforms = sorted(df.loc[df["state"] == "ok", "platform"].unique(), key=lambda p: (platform_rank(p), p))
    for baseline, target in itertools.combinations(platforms, 2):
        for family in sorted(df["family"].unique(), key=_order):
            result = compare(df, baseline, target, family=family, free=("dtype", "xla"))
            if result.n:
                rows.append({"family": family, "baseline": baseline, "target": target, "n": result.n,
                             "median": result.median, "geomean": result.geomean})  # fmt: skip
    return pd.DataFrame(rows, columns=["family", "baseline", "target", "n", "median", "geomean"])


def platform_rank(platform: str) -> int:
    """Where a platform stands in a comparison's orientation: CPUs (0) as baselines of GPUs (1),
    GPUs of TPUs and other ASICs (2), as the paper sets the TPU over the GPU."""
    name = platform.lower()
    if name.startswith("cpu"):
        return 0
    return 2 if name.startswith("tpu") else 1


def _order(name: str) -> int:
    try:
        return families.get(name).order
    except ConfigError:  # a family the store knows and this paradnn does not: last
        return 10**6
