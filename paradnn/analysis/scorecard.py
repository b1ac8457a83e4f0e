"""Dai & Berleant's qualitative benchmark (2019) as data, and the parts of it a store can measure.

The paper (arXiv 1907.03626, the version with 7 principles, 12 hardware metrics, 7
framework metrics and 16 frameworks; see ``paradnn/data/dai-berleant-2019/scorecard.yaml``
for the exact copy followed) rates hardware classes and frameworks in words. This module
loads its tables unchanged and places each platform of a store in the hardware table by
its class (TPU: ASIC; GPU; CPU, a class the paper does not rate, added here and marked).

What a store can say is filled in beside the paper's words: the seven principles as an
audit of the measurements (:func:`principles_audit`), and the 12 hardware metrics per
platform, each measured, from a cited datasheet, or marked not measurable here
(:func:`hardware_metrics`), a Table II row for each framework that measured the store
(:func:`framework_rows`: TensorFlow, JAX and PyTorch through Keras 3), their speed on identical
models (:func:`framework_speed`), and verdicts on the paper's headline claims that data
can reach (:func:`claims`). ``notebooks/scorecard.ipynb`` shows them.
"""

from __future__ import annotations

import math
from functools import cache
from importlib import resources

import numpy as np
import pandas as pd
import yaml

from paradnn import families
from paradnn.analysis.observations import (
    FAILS,
    HOLDS,
    Part,
    Rule,
    Verdict,
    bootstrap,
    comparison_held,
    exact_part,
    inconclusive,
    judged,
    median_part,
    speedup_part,
)
from paradnn.analysis.results import Results, Rows, results_of
from paradnn.settings import FRAMEWORK_TITLES as TITLES
from paradnn.settings import FRAMEWORK_VERSION_COLUMNS, setting

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


# Each principle's rule, stated so that it can fail (the paper states principles, not tests).
RERUN_TOLERANCE = 0.05  # repeatability: the median difference of true reruns
MIN_RERUNS = 3  # ... over at least this many run identities measured twice
# representativeness: the metrics a row reports, those the paper, MLPerf and Dai & Berleant use
ACCEPTED_METRICS = {
    "examples_per_sec": "throughput (examples/s)",
    "step_time_s": "time per step",
    "utilization": "FLOPS utilisation (% of peak)",
}
ACCEPTED_SHARE = 0.99  # ... on at least this share of the measured rows that finished
MAX_DEVICE_SECONDS = 60.0  # cost-effectiveness: median device time per configuration, compile included
COMPLETE_PROVENANCE = 0.99  # transparency: share of measured rows with every provenance field
RULES = {
    "relevance": "both kinds of model measured: a parameterized family and a real workload have ok rows",
    "representativeness": f"at least {ACCEPTED_SHARE:.0%} of the finished measured rows report the metrics the paper, "
    f"MLPerf and Dai & Berleant accept: {', '.join(ACCEPTED_METRICS.values())}",
    "equity": "every measured platform ran the same dtype policies, and every row records its XLA setting",
    "repeatability": f"the median difference of true reruns (one run identity measured again) is at most "
    f"{RERUN_TOLERANCE:.0%}, over at least {MIN_RERUNS} run identities",
    "cost-effectiveness": f"the median device time per configuration (compile included) is at most {MAX_DEVICE_SECONDS:.0f} s",
    "scalability": "measurements beyond one device: data-parallel replicas, or two machines (a thread limit of one "
    "machine is not a second machine); departs from Dai & Berleant, who rate how performance grows with "
    "devices: the hardware metric Scalability gives that efficiency",
    "transparency": f"at least {COMPLETE_PROVENANCE:.0%} of measured rows carry complete provenance",
}


def principles_audit(results: Rows) -> pd.DataFrame:
    """Each principle's rule, what this store shows for it, its verdict record and whether it passes
    (True: holds; False: does not hold; None: inconclusive, nothing or too little to judge it by).

    Every principle is judged as an observation is (:mod:`paradnn.analysis.observations`): an
    effect (a count, a share, a median with its bootstrap interval), a rule as data, an outcome.
    Rows measured here and rows imported from the original study are told apart (imported
    rows carry their source file instead of a software stack and have no timing samples).
    """
    rows = results_of(results)
    measured = rows.measured().frame
    ok = rows.measured().ok().frame
    imported = len(rows) - len(measured)
    nothing = "no finished rows measured here" + (
        f" ({imported:,} imported rows of the original study are not judged)" if imported else ""
    )
    judged_ = {
        "relevance": _relevance(ok, nothing),
        "representativeness": _representativeness(ok, nothing),
        "equity": _equity(measured, nothing),
        "repeatability": _repeatability(rows),
        "cost-effectiveness": _cost(measured["wall_time_s"], nothing),
        "scalability": _scalability(measured),
        "transparency": _provenance(measured),
    }
    rows = []
    for name, (value, part) in judged_.items():
        verdict = principle_verdict(name, value, part)
        passed = {HOLDS: True, FAILS: False}.get(verdict.verdict)
        rows.append((name, RULES[name], value, passed, verdict.verdict, verdict.figure, verdict))
    table = pd.DataFrame(rows, columns=["principle", "rule", "this store", "pass", "outcome", "effect", "record"], dtype=object)
    return table.merge(principles(), left_on="principle", right_on="name").drop(columns="name").set_index("principle")


def principle_verdict(name: str, value: str, part: Part | None) -> Verdict:
    """A principle's verdict record: judged from its part, inconclusive where there is nothing to judge."""
    claim = f"{name}: {RULES[name]}"
    return judged(name, claim, part, value) if part is not None else inconclusive(name, claim, value)


def audit_sentence(audit: pd.DataFrame) -> str:
    """The caption under the principle checklist: how many rules pass and what repeatability rests on."""
    passed, failed = int((audit["pass"] == True).sum()), int((audit["pass"] == False).sum())  # noqa: E712 - None is neither
    return (
        f"The paper stated seven principles a benchmark should follow and checked none of them against data; here "
        f"each has a rule that can fail, judged as the observations are: {passed} of 7 pass on this store, {failed} "
        f"fail, {7 - passed - failed} inconclusive ({audit.loc['repeatability', 'this store']} for "
        "repeatability)."
    )


def principles_json(audit: pd.DataFrame) -> list[dict]:
    """The audit as ``paradnn scorecard --json`` prints it: name, rule, value, pass, definition and
    ``record``, the verdict (outcome, effect, interval, n, rule as data)."""
    return [
        {
            "name": name,
            "rule": row["rule"],
            "value": row["this store"],
            "pass": _verdict(row["pass"]),
            "definition": row["definition"],
            "record": _plain(row["record"].as_dict()),
        }
        for name, row in audit.iterrows()
    ]


def _plain(value):
    """numpy scalars as Python values, for JSON."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value.item() if hasattr(value, "item") else value


def _verdict(value: object) -> bool | None:
    """A principle's pass as JSON holds it: True, False, or None when nothing could judge it."""
    return None if value is None or pd.isna(value) else bool(value)


def _yes(name: str, yes: bool, n: int, statistic: str) -> Part:
    """A principle's part that is a fact of the store (1: yes, 0: no), exact."""
    return exact_part(name, float(yes), n, Rule(f"{statistic} (1: yes)", 0.5, min_n=1))


def _relevance(ok: pd.DataFrame, nothing: str) -> tuple[str, Part | None]:
    if ok.empty:
        return nothing, None
    roles = {f: (families.get(f).role if f in families.names() else "unknown") for f in ok["family"].unique()}
    kinds = sorted(set(roles.values()) - {"unknown"})
    both = {"model", "workload"} <= set(kinds)
    return (
        f"{', '.join(sorted(roles))} (kinds: {', '.join(kinds) or 'none'})",
        _yes("kinds", both, len(ok), "a parameterized family and a real workload measured"),
    )


def _representativeness(ok: pd.DataFrame, nothing: str) -> tuple[str, Part | None]:
    """The share of finished measured rows that report every accepted metric, each within its range
    (a positive rate and step, a utilisation above 0 and at most 100%)."""
    if ok.empty:
        return nothing, None
    values = {
        m: pd.to_numeric(ok[m], errors="coerce") if m in ok else pd.Series(math.nan, index=ok.index) for m in ACCEPTED_METRICS
    }
    use = values["utilization"]
    reported = values["examples_per_sec"].gt(0) & values["step_time_s"].gt(0) & use.gt(0) & use.le(1)
    missing = [words for m, words in ACCEPTED_METRICS.items() if not (values[m] > 0).any()]
    text = f"{int(reported.sum())} of {len(ok)} rows report all three"
    text += f" (none reports {', '.join(missing)})" if missing else ""
    rule = Rule("share of rows reporting the accepted metrics", ACCEPTED_SHARE, ">=", min_n=1)
    return text, exact_part("share", float(reported.mean()), len(ok), rule)


def _cost(seconds: pd.Series, nothing: str) -> tuple[str, Part | None]:
    v = seconds.dropna()
    if v.empty:
        return nothing, None
    rule = Rule("median device time per configuration (s)", MAX_DEVICE_SECONDS, "<=", min_n=1)
    return f"{v.median():.3g} s over {len(v)} rows", median_part("seconds", v, rule)


def _equity(measured: pd.DataFrame, nothing: str) -> tuple[str, Part | None]:
    if measured.empty:
        return nothing, None
    dtypes = measured.groupby("platform")["dtype"].apply(lambda d: tuple(sorted(d.unique())))
    unrecorded = int(measured["xla"].isna().sum())
    value = "; ".join(f"{p}: {', '.join(d)}" for p, d in dtypes.items()) + f"; {unrecorded} rows without an XLA setting"
    fair = bool(dtypes.nunique() == 1 and unrecorded == 0)
    return value, _yes("equity", fair, len(measured), "one set of dtype policies on every platform, XLA recorded")


def _repeatability(results: Results) -> tuple[str, Part | None]:
    """Within-run spread, and the spread between true reruns: rows of one run identity (the
    configuration, family version, every run setting, platform and stack), never rows that
    merely share a label. The effect is the median rerun difference with its bootstrap interval
    over run identities; fewer than :data:`MIN_RERUNS` of them is inconclusive."""
    cv = results.measured().ok().frame["step_time_cv"].dropna()
    reruns = results.reruns()
    within = f"CV {cv.median():.1%} ({len(cv)} rows)" if len(cv) else "no samples"
    if reruns.empty:
        return f"{within}; no reruns (no run identity measured twice)", None
    median, raw = float(reruns["difference"].median()), float(reruns["raw_difference"].median())
    value = (
        f"{within}; rerun difference {median:.1%} over the measurements pooled ({len(reruns)} run identities "
        f"measured more than once); {raw:.1%} over every measurement, contended ones included"
    )
    rule = Rule("median rerun difference", RERUN_TOLERANCE, "<=", min_n=MIN_RERUNS)
    return value, median_part("reruns", reruns["difference"], rule)


def _scalability(measured: pd.DataFrame) -> tuple[str, Part | None]:
    """Dai & Berleant's scalability is performance as devices are added: data-parallel rows, or
    rows of two machines (a host and device apart). paradnn's rule departs from their qualitative
    rating in asking only that such rows exist, not how well they scale (the scaling efficiency
    is the hardware metric's figure)."""
    if measured.empty:
        return "no measured rows", None
    replicated = int((measured["devices"].fillna(1) > 1).sum()) if "devices" in measured else 0
    machines = machines_of(measured)
    value = f"{_rate(measured)}; {replicated} data-parallel rows; {len(machines)} machine(s)"
    return value, _yes("scaled", len(machines) >= 2 or replicated > 0, len(measured), "data-parallel rows or two machines")


def machines_of(rows: pd.DataFrame) -> set[tuple[str, str]]:
    """The machines ``rows`` were measured on: (host, device name), whatever their platform's name
    or thread limit (``cpu`` and ``cpu[threads=1]`` of one host are one machine); from the platform
    fingerprint's device part where a row has no host."""
    fingerprint = rows.get("platform_fingerprint", pd.Series("", index=rows.index)).fillna("").astype(str)
    device = rows.get("device_name", pd.Series(None, index=rows.index)).fillna(fingerprint.str.split("|").str[1])
    host = rows.get("host", pd.Series(None, index=rows.index)).fillna("")
    return {(str(h), str(d)) for h, d in zip(host, device)}


def _rate(measured: pd.DataFrame) -> str:
    hours = measured["wall_time_s"].dropna().sum() / 3600
    per_hour = f"{len(measured) / hours:.0f} configurations per hour" if hours > 0 else "no timings"
    platforms = f"{measured['platform'].nunique()} platform(s): {', '.join(sorted(measured['platform'].unique()))}"
    used = measured["framework"].fillna("tensorflow") if "framework" in measured else pd.Series(["tensorflow"])
    return f"{per_hour}; {platforms}; framework(s): {', '.join(sorted(used.unique()))}"


def _provenance(measured: pd.DataFrame) -> tuple[str, Part | None]:
    if measured.empty:
        return "no measured rows", None
    complete = measured[list(PROVENANCE)].notna().all(axis=1)
    rule = Rule("share of measured rows with complete provenance", COMPLETE_PROVENANCE, ">=", min_n=1)
    return f"{complete.mean():.0%} of {len(measured)} rows", exact_part("complete", float(complete.mean()), len(measured), rule)


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
    "Energy efficiency": "not measurable here: no row has a power reading (RAPL energy counters on CPUs, NVML on "
    "NVIDIA GPUs; this platform exposed neither to paradnn)",
    "Scalability": "not measured: no data-parallel rows of this platform (measure replicas with --devices N)",
}


def hardware_metrics(results: Rows, platforms: pd.DataFrame) -> pd.DataFrame:
    """The 12 hardware metrics for every platform of a store: measured, from a cited datasheet, or the
    paper's rating of the platform's class, each with its source (long form: metric, platform, value,
    source, ``evidence`` (measured, datasheet, paper's class rating, not measurable here) and ``short``,
    a few words for a chart cell)."""

    from paradnn.analysis.workloads import on_common_sets

    rows = []
    every = results_of(results)
    one_device = every.for_settings(input="device", devices=1)
    # Latency medians side by side only over configurations every platform measured (per family).
    timed = one_device.ok().with_value("step_time_s")
    shared = timed.subset(on_common_sets(timed.frame))
    for platform in sorted(every.frame["platform"].unique()):
        everything = every.where(platform=platform)
        kind = device_class(platform)
        for metric in paper()["hardware_metrics"]:
            name = metric["name"]
            # Scalability reads the data-parallel rows; the rest the device's own speed (one device, data on it).
            mine = everything if name == "Scalability" else one_device.where(platform=platform)
            mine = shared.where(platform=platform) if name == "Low Latency" else mine
            value, source = _hardware_cell(name, platform, mine, platforms)
            rating = metric["table"].get(kind, "")
            evidence = _evidence(source)
            short = _short(name, mine) if evidence == "measured" else value.split(",")[0].split(";")[0][:18]
            if evidence == "paper's class rating":
                short = rating or "not rated"
                value = value or (f"{rating} (the paper's rating of {kind})" if rating else f"not rated ({kind})")
            elif evidence == "not measurable here":
                short = "not measurable"
            rows.append(
                {
                    "metric": name,
                    "platform": platform,
                    "class": kind,
                    "value": value,
                    "source": source,
                    "paper rating of class": rating or "not rated",
                    "evidence": evidence,
                    "short": short,
                }
            )
    return pd.DataFrame(rows, columns=HARDWARE_COLUMNS)  # a store without rows: no row, every column


HARDWARE_COLUMNS = ["metric", "platform", "class", "value", "source", "paper rating of class", "evidence", "short"]


EVIDENCE = ("measured", "datasheet", "paper's class rating", "not measurable here")


def _evidence(cell_source: str) -> str:
    """A scorecard cell's kind of evidence (:data:`EVIDENCE`) from where its value came from."""
    if cell_source.startswith("datasheet"):
        return "datasheet"
    if cell_source in ("measured", "not measurable here"):
        return cell_source
    return "paper's class rating"


def _short(metric: str, rows: Results) -> str:
    """A measured cell in a few words: utilisation, latency at the smallest batch, families that ran."""
    ok = rows.ok().with_value("step_time_s").frame
    if ok.empty:
        return "no rows"
    if metric == "Computing Performance":
        use = ok["utilization"].dropna()
        return f"{use.median():.0%} median use" if len(use) else "no peak"
    if metric == "Low Latency":  # FC where measured: every platform's chart cell of one family
        ok = ok[ok["family"] == "fc"] if (ok["family"] == "fc").any() else ok
        smallest = ok[ok["batch"] == ok["batch"].min()]  # the median, as in the cell's full value and the claims
        return f"{smallest['step_time_s'].median() * 1e3:.2g} ms at bs {int(smallest['batch'].iloc[0])}"
    if metric == "Energy efficiency":
        return f"{ok['examples_per_joule'].median():.3g} examples/J"
    if metric == "Scalability":
        runs = _replicated(ok)
        return f"{runs['scaling_efficiency'].median():.0%} eff. on {int(runs['devices'].max())}"
    return f"{ok['family'].nunique()} families, {len(rows.failed())} failed"


def _hardware_cell(metric: str, platform: str, rows: Results, platforms: pd.DataFrame) -> tuple[str, str]:
    if metric == "Computing Performance":
        return _performance(platform, rows, platforms)
    if metric == "Low Latency":
        return _latency(rows), "measured"
    if metric == "Compatibility":
        return _compatibility(rows), "measured"
    measured = {"Energy efficiency": _energy, "Scalability": _scaling}.get(metric, lambda _: None)(rows)
    if measured is not None:
        return measured, "measured"
    if metric in NOT_MEASURABLE:
        return NOT_MEASURABLE[metric], "not measurable here"
    fact = DATASHEET_FACTS.get(platform, {}).get(metric)
    if fact:
        return fact[0], f"datasheet: {fact[1]}"
    return "", "the paper's rating of the class only"


def _performance(platform: str, rows: Results, platforms: pd.DataFrame) -> tuple[str, str]:
    """Computing performance: the peak the platform's utilisation is measured against (the one its
    rows used, with where it comes from) and the utilisation per family in the run most rows used."""
    from paradnn.analysis.roofline import ceilings_for, peak_used

    results = rows.ok()
    run = results.dominant_run(("dtype",))
    ok = results.for_run(run).frame
    ceilings = ceilings_for(platforms, platform, run["dtype"])
    peak = f"{run['dtype']} {peak_used(ok, ceilings.peak_flops if ceilings else None)}" if len(ok) else "no rows"
    per_family = [
        f"{family} median {use.median():.0%}, best {use.max():.0%} ({len(use)} rows)"
        for family, use in ok.dropna(subset=["utilization"]).groupby("family")["utilization"]
    ]
    achieved = "; utilisation " + "; ".join(per_family) if per_family else ""
    return peak + achieved, (ceilings.source if ceilings else "measured")


def _replicated(rows: Rows) -> pd.DataFrame:
    """The data-parallel rows (``--devices`` above 1) with a measured scaling efficiency."""
    return results_of(rows).ok().with_value("scaling_efficiency").frame


def _scaling(rows: Results) -> str | None:
    """Weak-scaling efficiency and communication share of the data-parallel rows, or None if there are none."""
    runs = _replicated(rows)
    if runs.empty:
        return None
    replicas = ", ".join(str(int(n)) for n in sorted(runs["devices"].unique()))
    return (
        f"weak-scaling efficiency median {runs['scaling_efficiency'].median():.0%}, best "
        f"{runs['scaling_efficiency'].max():.0%}; communication {runs['comm_share'].median():.0%} of the step "
        f"({len(runs)} rows on {replicas} replicas)"
    )


def _energy(rows: Results) -> str | None:
    """Examples per joule from the rows with an energy reading (paradnn.engine.energy), or None if no row has one."""
    read = rows.ok().with_value("examples_per_joule").frame
    if read.empty:
        return None
    sources = ", ".join(sorted(read["energy_source"].dropna().unique()))
    return (
        f"{read['examples_per_joule'].median():.3g} examples/J median, best {read['examples_per_joule'].max():.3g} "
        f"({len(read)} rows; {sources})"
    )


def _latency(rows: Results) -> str:
    ok = rows.ok().with_value("step_time_s").frame
    parts = []
    for family, sub in ok.groupby("family"):
        smallest = sub[sub["batch"] == sub["batch"].min()]
        parts.append(f"{family} batch {int(smallest['batch'].iloc[0])}: {smallest['step_time_s'].median() * 1e3:.3g} ms")
    return "; ".join(parts) or "no measured rows"


def _compatibility(rows: Results) -> str:
    ran = ", ".join(sorted(rows.ok().frame["family"].unique())) or "nothing"
    failed = rows.failed().frame.groupby("state").size()
    frame = rows.frame
    dtypes = ", ".join(sorted(frame["dtype"].dropna().unique()))
    text = f"ran {ran} ({dtypes})"
    if "framework" in frame and frame["framework"].notna().any():
        text += " under " + ", ".join(sorted(frame["framework"].dropna().unique()))
    return text + ("; did not finish: " + ", ".join(f"{n} {s}" for s, n in failed.items()) if len(failed) else "")


# The distributions that hold each framework's code (JAX's compiled part is jaxlib).
DISTRIBUTIONS = {"tensorflow": ("tensorflow",), "jax": ("jax", "jaxlib"), "torch": ("torch",)}
NATIVE_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
# The XLA setting's meaning under each framework: compiled (TensorFlow's XLA, JAX's jit, torch.compile) or eager.
MODES = {"compiled": True, "eager": False}
MODE_WORDS = {
    "compiled": "compiled (TensorFlow with XLA, JAX's jit, torch.compile)",
    "eager": "uncompiled (TensorFlow without XLA, PyTorch eager; JAX always compiles)",
}


def measured_rows(results: Rows) -> Results:
    """The store's rows measured here (not imported from the original study), framework filled in."""
    measured = results_of(results).measured()
    # Data resident on one device (not host-fed, not data-parallel): the frameworks' own speed.
    return measured.newest_stack().for_settings(input="device", devices=1)


def framework_rows(results: Rows) -> pd.DataFrame:
    """Rows for the frameworks that produced this store's measurements, in Table II's columns.

    Filled from what is known here, not from opinion: the installed packages' metadata
    (license) and files (core code), the versions recorded with each row, the platforms they
    ran on, and the families measured. Data sets are synthetic by design.
    """
    ok = measured_rows(results).ok().frame
    rows = []
    for framework, mine in ok.groupby("framework"):
        keras = ", ".join(sorted(mine["sw_keras"].dropna().unique()))
        version_column = FRAMEWORK_VERSION_COLUMNS.get(framework, "sw_tensorflow")
        versions = ", ".join(sorted(mine[version_column].dropna().unique())) if version_column in mine else ""
        rows.append(
            {
                "framework": f"{TITLES.get(framework, framework)} {versions} (Keras {keras}), measured here",
                "License Type": _license(DISTRIBUTIONS.get(framework, (framework,))[0]),
                "Core Codes": core_code(framework),
                "API Codes": "Python (through Keras 3, the API paradnn drives)",
                "Hardware Devices": ", ".join(sorted(mine["platform"].unique())) + " (ran here)",
                "Multi-Server": _multi_server(results, framework),
                "Tested Networks": ", ".join(sorted(mine["family"].unique())),
                "Related Datasets": "synthetic data (by design: nothing is downloaded)",
            }
        )
    return pd.DataFrame(rows, columns=["framework", *paper()["framework_metrics"]]).set_index("framework")


@cache
def core_code(framework: str) -> str:
    """Table II's Core Codes cell from the installed files: how much of ``framework``'s distributions
    is compiled native code (shared libraries) and how much Python source, in MB."""
    from importlib import metadata

    native = python = 0.0
    libraries = 0
    for name in DISTRIBUTIONS.get(framework, (framework,)):
        try:
            files = metadata.files(name) or []
        except metadata.PackageNotFoundError:
            continue
        for f in files:
            size = f.size or 0
            if any(s in f.name for s in NATIVE_SUFFIXES):
                native, libraries = native + size, libraries + 1
            elif f.name.endswith(".py"):
                python += size
    if not native and not python:
        return "not installed here"
    return (
        f"native libraries {native / 1e6:,.0f} MB ({libraries} files), Python {python / 1e6:,.0f} MB "
        f"(installed {', '.join(DISTRIBUTIONS.get(framework, (framework,)))})"
    )


def _multi_server(results: Rows, framework: str) -> str:
    """Table II's Multi-Server cell for a framework measured here, from the replicated rows it ran."""
    replicated = _replicated(results_of(results).for_settings(framework=framework))
    if replicated.empty:
        return "not exercised here (single-device runs)"
    return (
        f"data parallel on one server here ({int(replicated['devices'].max())} replicas, {len(replicated)} rows); "
        "several servers not exercised"
    )


def framework_table_with_measured(results: Rows) -> pd.DataFrame:
    """Table II as printed, then the rows measured here; ``source`` says which is which."""
    printed = framework_table().assign(source="paper (Table II)")
    return pd.concat([printed, framework_rows(results).assign(source="measured here")])


SPEED_COLUMNS = [
    "platform",
    "family",
    "dtype",
    "target",
    "mode",
    "n",
    "geomean",
    "low",
    "high",
    "min",
    "max",
    "held",
    "compile_s_baseline",
    "compile_s_target",
]


def framework_speed(results: Rows, baseline: str = "tensorflow") -> pd.DataFrame:
    """Throughput of every other framework over ``baseline`` on identical models, compiled and uncompiled.

    One row per platform, family, dtype, target framework and mode (:data:`MODES`: both sides
    compiled, or both uncompiled; JAX always compiles): matched configurations (same label and
    run settings but the framework), the geometric mean of the examples/s ratio target / baseline
    with its 95% bootstrap interval over configurations, minimum and maximum, what was held
    (``held``, a verdict's ``held_fixed``), and the median compile time of each side.
    """
    rows = measured_rows(results)
    targets = [f for f in setting("framework").choices if f != baseline]
    out = []
    for (platform, family, dtype), group in rows.frame.groupby(["platform", "family", "dtype"]):
        for target in targets:
            for mode, xla in MODES.items():
                sides = rows.subset(group).where(framework=[baseline, target], xla=xla)
                result = sides.matched("framework", baseline, target, family=family)
                if not result.n:
                    continue
                low, high = bootstrap(result.table["speedup"], statistic=np.mean, log=True, replicates=result.table["replicates"])
                compile_s = sides.subset(result.rows).ok().frame.groupby("framework")["compile_time_s"].median()
                out.append(
                    {
                        "platform": platform,
                        "family": family,
                        "dtype": dtype,
                        "target": target,
                        "mode": mode,
                        "n": result.n,
                        "geomean": result.geomean,
                        "low": low,
                        "high": high,
                        "min": result.min,
                        "max": result.max,
                        "held": comparison_held(result),
                        "compile_s_baseline": compile_s.get(baseline),
                        "compile_s_target": compile_s.get(target),
                    }
                )
    return pd.DataFrame(out, columns=SPEED_COLUMNS)


def _license(package: str) -> str:
    """The license an installed package declares in its metadata, or 'not installed here'."""
    from importlib import metadata

    try:
        meta = metadata.metadata(package)
    except metadata.PackageNotFoundError:
        return "not installed here"
    return meta.get("License-Expression") or meta.get("License") or "not declared"


# ------------------------------------------------------------------ the paper's headline claims

ASIC, GPU = "tpu-v2-8", "v100"  # the original study's platforms: the ASIC and the GPU with data in every store


def claims(results: Rows) -> list:
    """Verdicts on Table I's headline ratings and Table II's framework row that this store can reach.

    Hardware claims are judged on the original study's TPU v2-8 (an ASIC) and V100 (a GPU)
    FC sweeps, on the configurations both finished where neither waited on its input (rows
    read by :meth:`paradnn.analysis.results.Results.load` carry each step's bound); energy
    efficiency and scalability need readings no store row has and say so.
    """
    fc = results_of(results).where(family="fc")
    pair = f"{ASIC} vs {GPU}"
    # Each platform at the precision the study ran it (TPU mixed bfloat16, V100 mixed float16): the default.
    speed = fc.matched("platform", GPU, ASIC, family="fc").chips_only() if {ASIC, GPU} <= set(fc.frame["platform"]) else None
    verdicts = []
    performance = ("ASICs lead in computing performance", "ASICs rate High and GPUs Moderate in computing performance")
    if speed is not None and speed.n:
        faster = Rule("median speedup of the TPU v2-8 over the V100", 1.0, ">", min_n=3)
        verdicts.append(
            judged(
                *performance,
                speedup_part("speedup", speed.table, faster),
                f"the TPU v2-8's FC throughput over the V100's on the {speed.n} configurations both "
                f"finished where neither waited on its input; {(speed.table['speedup'] > 1).mean():.0%} "
                "favour the TPU",
                {k: v for k, v in speed.summary().items() if k != "sides"},
                platform=pair,
                held_fixed=comparison_held(speed),
            )
        )
        small = speed.table[speed.table["batch"] == speed.table["batch"].min()]
        batch = int(small["batch"].iloc[0])
        quicker = Rule(f"median speedup at batch {batch}", 1.0, ">", min_n=3)
        verdicts.append(
            judged(
                "ASICs have the lower latency",
                "ASICs rate High and GPUs Low in low latency",
                speedup_part("speedup", small, quicker),
                f"at the smallest batch both ran ({batch}), the TPU v2-8's FC step against the V100's "
                f"({len(small)} configurations)",
                {"batch": batch, "n": len(small)},
                platform=pair,
                held_fixed=comparison_held(speed),
            )
        )
    else:
        verdicts.append(inconclusive(*performance, "the store lacks the original TPU v2-8 and V100 FC sweeps"))
    verdicts.append(
        inconclusive(
            "ASICs lead in energy efficiency",
            "ASICs rate High in energy efficiency, GPUs Good",
            "needs power readings (NVML on a GPU, an ASIC's power counters); no row has one",
        )
    )
    scaled = ", ".join(sorted(_replicated(results)["platform"].unique())) or "no platform"
    verdicts.append(
        inconclusive(
            "ASICs scale out best",
            "ASICs rate High in scalability and GPUs Moderate",
            f"needs data-parallel runs of an ASIC and a GPU; the store has them of {scaled}",
        )
    )
    for _, s in framework_speed(results).iterrows():
        title = TITLES.get(s["target"], s["target"])
        same_speed = Rule(f"geometric-mean throughput ratio {title} / TensorFlow", 1.0, "within", min_n=3, margin=0.1)
        part = Part("ratio", float(s["geomean"]), (float(s["low"]), float(s["high"])), int(s["n"]), same_speed)
        verdicts.append(
            judged(
                "Keras runs the same models on several backends at one speed (paradnn's check)",
                "Keras runs the same models on several backends at one speed (Table II lists Keras as a "
                "Python API on CPU/GPU and compares no framework speeds)",
                part,
                f"{title} through Keras 3 trains {s['family']} against TensorFlow, both "
                f"{MODE_WORDS[s['mode']]}; {s['dtype']}; {s['n']} configurations",
                s.drop("held").to_dict(),
                platform=s["platform"],
                held_fixed=s["held"],
            )
        )
    return verdicts


# ------------------------------------------------------------------ presentation

MEASURED_ROW = "background-color: #e6f4ea"


def highlight_measured(table: pd.DataFrame):
    """:func:`framework_table_with_measured` as a Styler whose rows measured here are green."""
    styled = table.style.apply(lambda row: [MEASURED_ROW if row["source"] == "measured here" else ""] * len(row), axis=1)
    return styled.format(na_rep="not measured", escape="html")  # the index names each framework row


def checklist(audit: pd.DataFrame) -> pd.DataFrame:
    """The principle audit as a checklist: ✓ the rule holds on this store, ✗ it does not, – inconclusive
    (nothing or too little to judge it by), with the effect and interval it was judged on."""
    marks = audit["pass"].map(lambda p: {True: "✓", False: "✗", None: "–"}[_verdict(p)])
    return audit.drop(columns="pass").assign(**{"": marks})[["", "rule", "this store", "effect", "definition"]]
