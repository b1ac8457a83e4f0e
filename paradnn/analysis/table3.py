"""Table 3 of the paper: the platforms, with this machine (and every platform of a store) as rows.

Each row: the platform's kind (:func:`paradnn.analysis.scorecard.device_class`), where it
comes from (measured here, imported from the original study, or a datasheet only), its peak
FLOP/s per precision from its datasheet (a CPU's theoretical peak where it exposes its clock)
and as measured side by side (a measured ceiling is the best matmul rate over XLA on and
off), its memory bandwidth both ways, its memory, and for a measured platform the machine
(device, cores) and its TensorFlow. The paper's own platforms (TPU v2-8, TPU v3-8, V100)
always have a row, from their datasheets; its Skylake CPU has none, because paradnn holds no
cited datasheet for the machine the paper used.
"""

from __future__ import annotations

import json

import pandas as pd

from paradnn.analysis.scorecard import device_class
from paradnn.platform import DATASHEETS

PAPER_PLATFORMS = ("tpu-v2-8", "tpu-v3-8", "v100")  # the paper's Table 3, less its Skylake CPU (see above)
PRECISIONS = ("float32", "bfloat16", "float16")
COLUMNS = [
    "platform",
    "kind",
    "source",
    *(f"{d} TFLOP/s ({w})" for d in PRECISIONS for w in ("datasheet", "measured")),
    "bandwidth GB/s (datasheet)",
    "bandwidth GB/s (measured)",
    "memory GiB",
    "machine",
    "TensorFlow",
]


def _json(text: object) -> dict:
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _best(rates: object) -> float | None:
    values = [float(v) for v in (rates or {}).values() if v] if isinstance(rates, dict) else []
    return max(values) if values else None


def _row(name: str, source: str, info: dict, ceilings: dict) -> dict:
    sheet = DATASHEETS.get(info.get("datasheet") or name)
    row: dict = {"platform": name, "kind": device_class(name), "source": source}
    theoretical = (info.get("theoretical") or {}).get("peak_flops") or {}  # a CPU's, where it exposes its clock
    for dtype in PRECISIONS:
        stated = sheet.peak_flops.get(dtype) if sheet else theoretical.get(dtype)
        measured = _best((ceilings.get("matmul_flops") or {}).get(dtype))
        row[f"{dtype} TFLOP/s (datasheet)"] = stated / 1e12 if stated else None
        row[f"{dtype} TFLOP/s (measured)"] = measured / 1e12 if measured else None
    copy = _best(ceilings.get("copy_bandwidth"))
    row["bandwidth GB/s (datasheet)"] = sheet.memory_bandwidth / 1e9 if sheet else None
    row["bandwidth GB/s (measured)"] = copy / 1e9 if copy else None
    memory = info.get("memory_bytes") or (sheet.memory_bytes if sheet else 0)
    row["memory GiB"] = memory / 2**30 if memory else None
    threads = f" ({info['threads']} thread)" if info.get("threads") else ""
    cores = f", {info['cores']} cores{threads}" if info.get("cores") else ""
    row["machine"] = f"{info.get('name') or (sheet.note if sheet else '')}{cores}" or None
    row["TensorFlow"] = (info.get("software") or {}).get("tensorflow")
    return row


def table3(platforms: pd.DataFrame, results: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per platform of the store (the newest record of each name; only those with results
    where ``results`` is given), then the paper's platforms not in it, from their datasheets."""
    rows, seen = [], set()
    named = set(results["platform"]) if results is not None and "platform" in results else None
    ordered = platforms.sort_values("measured_at", na_position="first") if "measured_at" in platforms else platforms
    for name, group in ordered.groupby("platform", sort=True):
        if named is not None and name not in named:
            continue
        last = group.iloc[-1]
        source = {"measured": "measured here", "legacy": "original study (2019)"}.get(last["source"], str(last["source"]))
        rows.append(_row(name, source, _json(last["info"]), _json(last.get("ceilings"))))
        seen.add(name)
    for name in PAPER_PLATFORMS:
        if name not in seen:
            rows.append(_row(name, "datasheet only", {"datasheet": name}, {}))
    return pd.DataFrame(rows, columns=COLUMNS)
