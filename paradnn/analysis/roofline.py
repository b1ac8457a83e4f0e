"""Rooflines: where each model sits against the platform's compute and memory ceilings.

Operational intensity of a model is ``flops_model / bytes_estimate`` (FLOPs per byte of
estimated memory traffic); its performance is the achieved model FLOP/s. The ceilings
come from the store's platforms table: measured matmul FLOP/s and copy bandwidth for
measured platforms, datasheet figures for imported ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from paradnn.analysis.results import Rows, results_of
from paradnn.config import compute_dtype
from paradnn.platform import DATASHEETS
from paradnn.settings import DEFAULTS


@dataclass(frozen=True)
class Ceilings:
    """A platform's peak FLOP/s (for one dtype) and memory bandwidth, and their source."""

    peak_flops: float
    bandwidth: float
    source: str

    @property
    def ridge(self) -> float:
        """Intensity (FLOPs/byte) where the memory roof meets the compute roof."""
        return self.peak_flops / self.bandwidth


def ceilings_for(platforms: pd.DataFrame, platform: str, dtype: str = DEFAULTS["dtype"]) -> Ceilings | None:
    """Ceilings of ``platform`` for a dtype policy, from a store's platforms table."""
    rows = platforms[platforms["platform"] == platform]
    dt = compute_dtype(dtype)
    for _, row in rows.iloc[::-1].iterrows():
        measured = json.loads(row["ceilings"]) if isinstance(row["ceilings"], str) else None
        if measured and measured.get("matmul_flops", {}).get(dt) and measured.get("copy_bandwidth"):
            peak = max(measured["matmul_flops"][dt].values())
            return Ceilings(peak, max(measured["copy_bandwidth"].values()), "measured")
    sheet = DATASHEETS.get(platform)
    if sheet:
        peak = sheet.peak_flops.get(dt) or max(sheet.peak_flops.values())
        return Ceilings(peak, sheet.memory_bandwidth, f"datasheet:{sheet.name}")
    return None


def model_points(rows: Rows) -> pd.DataFrame:
    """One point per measured configuration: intensity (FLOPs/byte) and FLOP/s achieved."""
    ok = results_of(rows).ok().positive("bytes_estimate").frame.copy()
    ok["intensity"] = ok["flops_model"] / ok["bytes_estimate"]
    ok["achieved_flops"] = ok["flops_per_sec"]
    return ok


def reference_points(rows: Rows) -> pd.DataFrame:
    """Whole-model points of the original study's rows: the operational intensity of paradnn's own
    count (``flops_model / bytes_estimate`` of one replica, as the study's per-core traces see it;
    computed from the label for rows imported before it was stored) and the FLOP/s achieved. The
    sweep files' own ``intensity`` is FLOPs per weight byte, not a roofline intensity; it stays in
    ``reported_intensity`` for reference."""
    from paradnn.families import parse_label
    from paradnn.store.legacy import PLATFORMS, replica_bytes

    ok = results_of(rows).ok().positive("flops_per_sec").frame.copy()
    if ok.empty:
        return ok.assign(intensity=pd.Series(dtype=float), achieved_flops=pd.Series(dtype=float))
    stored = (
        pd.to_numeric(ok["bytes_estimate"], errors="coerce")
        if "bytes_estimate" in ok
        else pd.Series(float("nan"), index=ok.index)
    )
    counted = [
        b if b == b else replica_bytes(parse_label("fc", label), PLATFORMS[platform])
        for b, label, platform in zip(stored, ok["label"], ok["platform"])
    ]
    extras = [json.loads(e) if isinstance(e, str) else (e or {}) for e in ok.get("extra", [None] * len(ok))]
    ok["reported_intensity"] = pd.to_numeric(pd.Series([e.get("intensity") for e in extras], index=ok.index), errors="coerce")
    ok["intensity"] = ok["flops_model"] / pd.Series(counted, index=ok.index, dtype=float)
    ok["achieved_flops"] = ok["flops_per_sec"]
    return ok[ok["intensity"] > 0]


def ridge_agreement(points: pd.DataFrame, traces: pd.DataFrame, ridge: float) -> tuple[float, int]:
    """The share of traced configurations that ``points`` put on the same side of ``ridge`` as the
    traces' own intensity (the profiler's FLOPs over bytes of the whole step), and how many there are."""
    whole = traces[(traces["category"] == "all") & traces["intensity"].notna()] if len(traces) else traces
    both = points[["label", "intensity"]].merge(whole[["label", "intensity"]], on="label", suffixes=("", "_traced"))
    if both.empty:
        return float("nan"), 0
    same = (both["intensity"] < ridge) == (both["intensity_traced"] < ridge)
    return float(same.mean()), len(both)


def peak_used(rows: pd.DataFrame, ceiling: float | None = None) -> str:
    """The peak FLOP/s ``rows``' utilisation is measured against, in words, with its source: a
    measured ceiling, a datasheet, or the rate a configuration achieved above the measured ceiling
    (that configuration's utilisation is 100% by construction, and the words say so)."""
    stated = rows.dropna(subset=["peak_flops"]) if "peak_flops" in rows else rows.iloc[:0]
    if stated.empty:
        return "peak unknown"
    top = stated.loc[pd.to_numeric(stated["peak_flops"]).idxmax()]
    source = str(top.get("peak_source") or "measured")
    if source.startswith("achieved:"):
        above = f" above the measured ceiling {ceiling:.3g} FLOP/s" if ceiling else " above the measured ceiling"
        return (
            f"peak {top['peak_flops']:.3g} FLOP/s, the rate {source.split(':', 1)[1]} achieved{above} (100% "
            "there by construction)"
        )
    return f"peak {top['peak_flops']:.3g} FLOP/s ({source})"


# Measurement tolerance of a point on the roofline: an op's FLOP/s may exceed its roof by
# this factor (timer resolution, FLOP counts of fused ops) before it is called impossible.
ROOF_TOLERANCE = 1.1


def under_roof(intensity, flops_per_sec, peak_flops: float, bandwidth: float, tolerance: float = ROOF_TOLERANCE):
    """True where a point lies under its roof (min(peak, bandwidth x intensity)) within ``tolerance``."""
    import numpy as np

    roof = np.minimum(peak_flops, bandwidth * np.asarray(intensity, dtype=float))
    return np.asarray(flops_per_sec, dtype=float) <= tolerance * roof
