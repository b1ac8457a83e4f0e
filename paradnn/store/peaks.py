"""Utilisation derived when rows are read, against the platform's peak as it stands now.

A measured peak is a maximum: the best matmul rate the platform's ceilings reached (best of
several trials), the peak each row was measured against, and the best model FLOP/s any
row of the same platform and arithmetic dtype achieved. A row that beat a ceiling was
re-measured against a fresh one when it ran (:func:`paradnn.engine.record.measure_config`);
if it still won, its rate became the peak, recorded as ``achieved:<label>``. Reading
derives every row's utilisation from its stored FLOP/s and that one peak, so a corrected
ceiling corrects every report and no measured utilisation exceeds 100%.

Datasheet peaks (imported platforms, accelerators with a vendor figure) are left as
stored: beating a datasheet would be a counting error to find, not a peak to raise.
"""

from __future__ import annotations

import json

import pandas as pd


def ceiling_of(ceilings: dict | None, dtype: str) -> float:
    """The best measured matmul FLOP/s of ``dtype`` in a ceilings record (XLA on or off), or 0."""
    rates = ((ceilings or {}).get("matmul_flops") or {}).get(dtype) or {}
    return max([float(v) for v in rates.values() if v], default=0.0)


def platform_ceilings(platforms: pd.DataFrame) -> dict[str, dict]:
    """The measured ceilings of each platform fingerprint in a store's platforms table."""
    out = {}
    for fingerprint, text in zip(platforms.get("fingerprint", []), platforms.get("ceilings", [])):
        try:
            out[fingerprint] = json.loads(text) if isinstance(text, str) and text else {}
        except json.JSONDecodeError:
            out[fingerprint] = {}
    return out


# What :func:`current_peaks` reads of every row (the store selects these columns of its measured-peak rows).
PEAK_COLUMNS = ("platform_fingerprint", "compute_dtype", "label", "flops_per_sec", "peak_flops", "peak_source")


def measured_peak(rows: pd.DataFrame) -> pd.Series:
    """Which rows ran against a measured (or achieved) peak and have a rate: the rows a peak can rise for."""
    peak = rows["peak_source"].fillna("")  # a peak's source: measured, achieved:..., datasheet
    rate = pd.to_numeric(rows["flops_per_sec"], errors="coerce")
    return (peak.str.startswith("measured") | peak.str.startswith("achieved")) & (rate > 0)


def current_peaks(rows: pd.DataFrame, ceilings: dict[str, dict]) -> dict[tuple[str, str], tuple[float, str]]:
    """The peak of every (platform fingerprint, compute dtype) as it stands now, and where it comes
    from, over ``rows`` (every row of a store, :data:`PEAK_COLUMNS`): the largest of the platform's
    ceiling, the peaks rows were measured against, and the best rate a row achieved."""
    rows = rows[measured_peak(rows)]
    peaks = {}
    for (fingerprint, dtype), group in rows.groupby(["platform_fingerprint", "compute_dtype"]):
        rate = pd.to_numeric(group["flops_per_sec"])
        best = rate.idxmax()
        candidates = [
            (ceiling_of(ceilings.get(fingerprint), dtype), "measured"),  # the platform's ceiling now
            *zip(pd.to_numeric(group["peak_flops"]).fillna(0.0), group["peak_source"]),  # what rows ran against
            (float(rate[best]), f"achieved:{group.at[best, 'label']}"),
        ]
        peaks[(fingerprint, dtype)] = max(candidates, key=lambda c: c[0])  # the first of equals: a ceiling
    return peaks


def current_utilisation(df: pd.DataFrame, peaks: dict[tuple[str, str], tuple[float, str]]) -> pd.DataFrame:
    """``df`` with ``peak_flops``, ``peak_source`` and ``utilization`` of its measured-peak rows
    derived from ``peaks`` (:func:`current_peaks`); other rows unchanged."""
    if df.empty or not set(PEAK_COLUMNS) <= set(df.columns):
        return df
    mine = measured_peak(df)
    if not mine.any():
        return df
    df = df.copy()
    for key, rows in df[mine].groupby(["platform_fingerprint", "compute_dtype"]):
        peak, why = peaks.get(key, (float(pd.to_numeric(rows["peak_flops"]).max()), "measured"))
        df.loc[rows.index, "peak_flops"] = peak
        df.loc[rows.index, "peak_source"] = why
        df.loc[rows.index, "utilization"] = pd.to_numeric(rows["flops_per_sec"]) / peak
    return df
