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

import numpy as np
import pandas as pd

from paradnn import counting, families
from paradnn.analysis.results import Results, Rows, results_of
from paradnn.analysis.speedup import SpeedupResult
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
        rows.append(
            {
                "family": family.name,
                "title": family.title,
                "kind": kind,
                "configurations": len(configs),
                "min": params.min(),
                "median": params.median(),
                "max": params.max(),
            }
        )
    return pd.DataFrame(rows)


def precision_table(rows: Rows, low_precision: str, baseline: str = "float32") -> pd.DataFrame:
    """Median FLOPS utilisation per family in ``baseline`` and ``low_precision``, and the examples/s speedup.

    Utilisation is against each dtype's own peak. Families measured only one way get an
    empty cell on the other side.
    """
    results = results_of(rows).ok()
    ok = results.frame
    util = ok.pivot_table(index="family", columns="dtype", values="utilization", aggfunc="median")
    table = pd.DataFrame(index=sorted(set(ok["family"]), key=_order))
    for dtype in (baseline, low_precision):
        table[dtype] = util[dtype] if dtype in util else float("nan")
    speed = results.matched("dtype", baseline, low_precision) if {baseline, low_precision} <= set(ok["dtype"]) else None
    medians = speed.table.groupby("family")["speedup"].median() if speed is not None and speed.n else pd.Series(dtype=float)
    table["speedup"] = medians.reindex(table.index)
    return table.rename_axis("family").reset_index()


def platform_table(rows: Rows, dtype: str | None = None) -> pd.DataFrame:
    """Median FLOPS utilisation of every family on every platform (rows: family; columns: platform).

    With ``dtype``, measured rows of other dtypes are left out (imported rows keep the
    precision they were run in).
    """
    ok = results_of(rows).ok().with_value("utilization")
    if dtype is not None:
        ok = Results.concat([ok.measured().for_settings(dtype=dtype), ok.imported()])
    frame = on_common_sets(ok.frame)
    table = frame.pivot_table(index="family", columns="platform", values="utilization", aggfunc="median")
    table.attrs["n"] = frame.groupby("family")["label"].nunique().to_dict()  # configurations per family's medians
    return table.reindex(sorted(table.index, key=_order))


def on_common_sets(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` kept, per family, on the configurations every platform of the largest group that shares
    some measured (:func:`common_set`): medians set side by side are then over one set."""
    kept = []
    for _, family in rows.groupby("family", sort=False):
        members, labels = common_set({p: set(g["label"]) for p, g in family.groupby("platform")})
        kept.append(family[family["platform"].isin(members) & family["label"].isin(labels)])
    return pd.concat(kept) if kept else rows


def common_set(labels: dict[str, set[str]]) -> tuple[set[str], set[str]]:
    """The largest group of platforms whose configurations overlap, and the configurations all of them
    measured: a table of medians compares like with like only on one set. A platform is dropped
    (the one whose removal leaves the most in common) until the rest share some."""

    def shared(group: set[str]) -> set[str]:
        return set.intersection(*(labels[p] for p in group)) if group else set()

    return _largest_sharing(set(labels), shared, 1)


def _largest_sharing(members: set[str], shared, least: int) -> tuple[set[str], set[str]]:
    """Drop from ``members`` the platform whose removal leaves the most ``shared`` configurations,
    until some are shared or ``least`` platforms are left; the group and what it shares."""
    while len(members) > least and not shared(members):
        members = max(({p for p in members if p != drop} for drop in sorted(members)), key=lambda g: len(shared(g)))
    return members, shared(members)


PAIR_COLUMNS = ["family", "baseline", "target", "n", "median", "geomean", "chained", "held"]


def pair_speedups(rows: Rows) -> pd.DataFrame:
    """For each pair of platforms and each family both measured: n, median and geometric-mean speedup.

    Each pair is compared as :meth:`~paradnn.analysis.results.Results.matched` does (each
    platform at its own precision and XLA setting where the two share none, like with like where
    they share one; ``held`` says which), in the paper's orientation: the accelerator over the
    CPU, the TPU over the GPU (:func:`platform_rank`). Pairs of a family are taken over one
    common set of configurations (:func:`chain`), so that their geometric means chain
    (A over C = A over B times B over C); ``chained`` is True for those, False for a pair
    whose platforms share no configuration with the chain (its own set, never drawn beside it).
    Pairs where a side waited on its input (:mod:`paradnn.store.bounds`) are left out: these are
    comparisons of chips.
    """
    results = results_of(rows)
    platforms = sorted(results.ok().frame["platform"].unique(), key=lambda p: (platform_rank(p), p))
    rows = []
    for family in sorted(results.frame["family"].unique(), key=_order):
        pairs = {}
        for baseline, target in itertools.combinations(platforms, 2):
            result = results.matched("platform", baseline, target, family=family).chips_only()
            if result.n:
                pairs[(baseline, target)] = result
        members, common = chain(pairs)
        for (baseline, target), result in pairs.items():
            chained = baseline in members and target in members
            table = result.table[result.table["label"].isin(common)] if chained else result.table
            speedup = table["speedup"].astype(float)
            rows.append(
                {
                    "family": family,
                    "baseline": baseline,
                    "target": target,
                    "n": len(table),
                    "median": float(speedup.median()),
                    "geomean": float(np.exp(np.log(speedup).mean())),
                    "chained": chained,
                    "held": _held_words(result),
                }
            )
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def chain(pairs: dict[tuple[str, str], SpeedupResult]) -> tuple[set[str], set[str]]:
    """The largest group of platforms (two or more) whose pairwise comparisons share configurations,
    and those configurations' labels: starting from every platform, the one whose removal leaves
    the most shared configurations is dropped until some are shared."""
    members = {p for pair in pairs for p in pair}

    def shared(group: set[str]) -> set[str]:
        labels = [set(r.table["label"]) for (b, t), r in pairs.items() if b in group and t in group]
        return set.intersection(*labels) if labels else set()

    members, common = _largest_sharing(members, shared, 2)
    return (members, common) if common else (set(), set())


def _held_words(result: SpeedupResult) -> str:
    """What a platform pair held and freed, in a few words ("dtype held (float32); xla free")."""
    return "; ".join(f"{c} {'held' if side['held'] else 'free'}" for c, side in result.sides.items())


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
