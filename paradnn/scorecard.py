"""Dai & Berleant's qualitative benchmark (2019) as data, and the parts of it a store can measure.

The paper (arXiv 1907.03626, the version with 7 principles, 12 hardware metrics, 7
framework metrics and 16 frameworks; see ``paradnn/data/dai-berleant-2019/scorecard.yaml``
for the exact copy followed) rates hardware classes and frameworks in words. This module
loads its tables unchanged and places each platform of a store in the hardware table by
its class (TPU: ASIC; GPU; CPU, a class the paper does not rate, added here and marked).

What a store can say is filled in beside the paper's words: the seven principles as an
audit of the measurements (:func:`principles_audit`), and the 12 hardware metrics per
platform, each measured, from a cited datasheet, or marked not measurable here
(:func:`hardware_metrics`), and a Table II row for the framework that measured the store
(:func:`framework_rows`). Still to come (issue 14): JAX through Keras 3, measured, and
the scorecard report.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import pandas as pd
import yaml

CPU_CLASS = "CPUs (not rated by the paper)"


@cache
def paper() -> dict:
    """The paper's principles, hardware metrics and table, framework metrics and table, as shipped."""
    with resources.files("paradnn").joinpath("data/dai-berleant-2019/scorecard.yaml").open() as f:
        return yaml.safe_load(f)


def principles() -> pd.DataFrame:
    """The seven benchmarking principles with a paraphrased definition."""
    return pd.DataFrame(paper()["principles"])


def hardware_table() -> pd.DataFrame:
    """Table I: one row per hardware metric, one column per device class, cells as printed."""
    rows = [{"metric": m["name"], **m["table"], "favourable": m["favourable"]} for m in paper()["hardware_metrics"]]
    return pd.DataFrame(rows).set_index("metric")


def framework_table() -> pd.DataFrame:
    """Table II: the 16 frameworks with the paper's seven metrics, cells as printed."""
    return pd.DataFrame(paper()["frameworks"], columns=["framework", *paper()["framework_metrics"]]).set_index("framework")


def device_class(platform: str) -> str:
    """The paper's hardware class of a platform id (``tpu-v2-8`` -> ASICs, ``v100``/``gpu:0`` -> GPUs, ``cpu`` -> CPUs)."""
    name = platform.lower()
    if name.startswith("tpu"):
        return "ASICs"
    if name.startswith(("gpu", "v100", "a100", "h100", "h200", "p100", "k80", "t4")):
        return "GPUs"
    if name.startswith("cpu"):
        return CPU_CLASS
    return "unknown"


def platforms_by_class(platform_names: list[str]) -> pd.DataFrame:
    """Each platform beside the paper's ratings of its class (empty for CPUs and unknown platforms)."""
    table = hardware_table()
    rows = []
    for platform in platform_names:
        kind = device_class(platform)
        ratings = table[kind] if kind in table.columns else pd.Series("", index=table.index)
        rows.append({"platform": platform, "class": kind, **ratings.to_dict()})
    return pd.DataFrame(rows).set_index("platform")


PROVENANCE = ("platform_fingerprint", "sw_tensorflow", "sw_keras", "sw_python", "sw_numpy", "sw_paradnn", "started_at")


def principles_audit(results: pd.DataFrame) -> pd.DataFrame:
    """What the measurements in a store did about each principle, with the number that shows it.

    Rows measured here and rows imported from the original study are told apart (imported
    rows carry their source file instead of a software stack and have no timing samples).
    """
    measured = results[~results["source"].fillna("").str.startswith("legacy")]
    ok = measured[measured["state"] == "ok"]
    rows = [
        ("relevance", "families and real workloads measured (ok rows)", ", ".join(sorted(ok["family"].unique())) or "none"),
        ("representativeness", "trainable parameters covered, ok rows", _range(ok["params"])),
        ("equity", "platforms measured under one protocol (same dtype set, XLA choice recorded per row)", _equity(measured)),
        ("repeatability", "median within-run CV of step time; median rerun difference", _repeatability(ok)),
        ("cost-effectiveness", "median device seconds per configuration (incl. compile)", _median(measured["wall_time_s"], "s")),
        ("scalability", "configurations per device-hour; platforms", _rate(measured)),
        ("transparency", "share of measured rows with complete provenance", _provenance(measured)),
    ]
    table = pd.DataFrame(rows, columns=["principle", "what paradnn shows", "this store"])
    return table.merge(principles(), left_on="principle", right_on="name").drop(columns="name").set_index("principle")


def _range(values: pd.Series) -> str:
    v = values.dropna()
    return f"{v.min():.3g} to {v.max():.3g} ({len(v)} rows)" if len(v) else "no rows"


def _median(values: pd.Series, unit: str) -> str:
    v = values.dropna()
    return f"{v.median():.3g} {unit} over {len(v)} rows" if len(v) else "no rows"


def _equity(measured: pd.DataFrame) -> str:
    if measured.empty:
        return "no measured rows"
    dtypes = measured.groupby("platform")["dtype"].apply(lambda d: ", ".join(sorted(d.unique())))
    return "; ".join(f"{p}: {d}" for p, d in dtypes.items())


def _repeatability(ok: pd.DataFrame) -> str:
    cv = ok["step_time_cv"].dropna()
    key = ["platform", "label", "dtype", "xla"]
    repeated = ok.dropna(subset=["step_time_s"]).groupby(key, dropna=False)["step_time_s"]
    diffs = repeated.apply(lambda s: abs(s.iloc[-1] / s.iloc[-2] - 1) if len(s) > 1 else float("nan")).dropna()
    within = f"CV {cv.median():.1%} ({len(cv)} rows)" if len(cv) else "no samples"
    rerun = f"rerun difference {diffs.median():.1%} ({len(diffs)} configurations measured twice)" if len(diffs) else "no reruns"
    return f"{within}; {rerun}"


def _rate(measured: pd.DataFrame) -> str:
    hours = measured["wall_time_s"].dropna().sum() / 3600
    per_hour = f"{len(measured) / hours:.0f} configurations per hour" if hours > 0 else "no timings"
    return f"{per_hour}; {measured['platform'].nunique()} platform(s): {', '.join(sorted(measured['platform'].unique()))}"


def _provenance(measured: pd.DataFrame) -> str:
    if measured.empty:
        return "no measured rows"
    complete = measured[list(PROVENANCE)].notna().all(axis=1)
    return f"{complete.mean():.0%} of {len(measured)} rows"


# Facts about known devices, with their source. Only what a public vendor document states.
DATASHEET_FACTS = {
    "v100": {
        "Die Size": ("815 mm², 21.1 billion transistors", "NVIDIA Tesla V100 GPU Architecture whitepaper (2017)"),
        "Time-to-Market": ("announced May 2017", "NVIDIA GTC 2017 keynote; V100 whitepaper (2017)"),
    },
    "tpu-v2-8": {
        "Time-to-Market": ("announced May 2017; Cloud TPU beta February 2018", "Google I/O 2017; Google Cloud blog (2018)"),
    },
}
MEASURED = ("Computing Performance", "Low Latency", "Compatibility")
NOT_MEASURABLE = {
    "Energy efficiency": "not measurable here: no power reading (RAPL or NVML) is recorded with these rows",
    "Scalability": "not measured: every row is a single-device run",
}


def hardware_metrics(results: pd.DataFrame, platforms: pd.DataFrame) -> pd.DataFrame:
    """The 12 hardware metrics for every platform of a store: measured, from a cited datasheet, or the
    paper's rating of the platform's class, each with its source (long form: metric, platform, value, source)."""
    rows = []
    for platform in sorted(results["platform"].unique()):
        mine = results[results["platform"] == platform]
        kind = device_class(platform)
        for metric in paper()["hardware_metrics"]:
            name = metric["name"]
            value, source = _hardware_cell(name, platform, mine, platforms)
            rating = metric["table"].get(kind, "")
            rows.append({"metric": name, "platform": platform, "class": kind, "value": value, "source": source,
                         "paper rating of class": rating or "not rated"})  # fmt: skip
    return pd.DataFrame(rows)


def _hardware_cell(metric: str, platform: str, rows: pd.DataFrame, platforms: pd.DataFrame) -> tuple[str, str]:
    if metric == "Computing Performance":
        return _performance(platform, rows, platforms)
    if metric == "Low Latency":
        return _latency(rows), "measured"
    if metric == "Compatibility":
        return _compatibility(rows), "measured"
    if metric in NOT_MEASURABLE:
        return NOT_MEASURABLE[metric], "not measurable here"
    fact = DATASHEET_FACTS.get(platform, {}).get(metric)
    if fact:
        return fact[0], f"datasheet: {fact[1]}"
    return "", "the paper's rating of the class only"


def _performance(platform: str, rows: pd.DataFrame, platforms: pd.DataFrame) -> tuple[str, str]:
    from paradnn.analysis.roofline import ceilings_for

    ok = rows[rows["state"] == "ok"]
    dtype = ok["dtype"].mode().iloc[0] if len(ok) else "float32"
    ceilings = ceilings_for(platforms, platform, dtype)
    peak = f"peak {ceilings.peak_flops:.3g} FLOP/s ({dtype})" if ceilings else "no ceilings"
    use = ok["utilization"].dropna()
    achieved = f"; utilisation median {use.median():.0%}, best {use.max():.0%} ({len(use)} rows)" if len(use) else ""
    return peak + achieved, (ceilings.source if ceilings else "measured")


def _latency(rows: pd.DataFrame) -> str:
    ok = rows[(rows["state"] == "ok") & rows["step_time_s"].notna()]
    parts = []
    for family, sub in ok.groupby("family"):
        smallest = sub[sub["batch"] == sub["batch"].min()]
        parts.append(f"{family} batch {int(smallest['batch'].iloc[0])}: {smallest['step_time_s'].median() * 1e3:.3g} ms")
    return "; ".join(parts) or "no measured rows"


def _compatibility(rows: pd.DataFrame) -> str:
    ran = ", ".join(sorted(rows.loc[rows["state"] == "ok", "family"].unique())) or "nothing"
    failed = rows[rows["state"] != "ok"].groupby("state").size()
    dtypes = ", ".join(sorted(rows["dtype"].dropna().unique()))
    text = f"ran {ran} ({dtypes})"
    return text + ("; did not finish: " + ", ".join(f"{n} {s}" for s, n in failed.items()) if len(failed) else "")


def framework_rows(results: pd.DataFrame) -> pd.DataFrame:
    """Rows for the frameworks that produced this store's measurements, in Table II's columns.

    Filled from what is known here, not from opinion: the installed package's metadata
    (license, version), the versions recorded with each row, the platforms they ran on,
    and the families and workloads measured. Data sets are synthetic by design.
    """
    measured = results[results["sw_tensorflow"].notna() & (results["state"] == "ok")]
    if measured.empty:
        return pd.DataFrame(columns=["framework", *paper()["framework_metrics"]]).set_index("framework")
    versions = ", ".join(sorted(measured["sw_tensorflow"].unique()))
    keras = ", ".join(sorted(measured["sw_keras"].dropna().unique()))
    row = {
        "framework": f"TensorFlow {versions} (Keras {keras}), measured here",
        "License Type": _license("tensorflow"),
        "Core Codes": "C++",
        "API Codes": "Python (the API paradnn drives)",
        "Hardware Devices": ", ".join(sorted(measured["platform"].unique())) + " (ran here)",
        "Multi-Server": "not exercised here (single-device runs)",
        "Tested Networks": ", ".join(sorted(measured["family"].unique())),
        "Related Datasets": "synthetic data (by design: nothing is downloaded)",
    }
    return pd.DataFrame([row]).set_index("framework")


def _license(package: str) -> str:
    """The license an installed package declares in its metadata, or 'not installed here'."""
    from importlib import metadata

    try:
        meta = metadata.metadata(package)
    except metadata.PackageNotFoundError:
        return "not installed here"
    return meta.get("License-Expression") or meta.get("License") or "not declared"
