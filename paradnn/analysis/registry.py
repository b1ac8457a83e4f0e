"""The paper's 14 observations: what each claims, where, and which data can test it.

Numbered as in Table 1 of the published version of the paper (Wang, Wei, Brooks, "A
Systematic Methodology for Analysis of Deep Learning Hardware and Software Platforms",
MLSys 2020; the arXiv version 1907.10701 reports the same findings), claims in our words.
Each report judges the observations of its section (:func:`publish`), writes them next to
its store as JSON, and the pipeline merges every report's verdicts into
``observations.json`` and the index page; an observation no report could judge says
what would decide it (``needs ...``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from paradnn.analysis.observations import Verdict
from paradnn.vocabulary import FAILS, HOLDS, INCONCLUSIVE, PROJECTED_FAILS, PROJECTED_HOLDS

NEEDS = "needs"


@dataclass(frozen=True)
class Observation:
    id: str
    claim: str
    section: str
    figure: str
    report: str  # the notebook that judges it
    data: str  # which data can test it
    needs: str  # what would decide it when no data in the store can


OBSERVATIONS: tuple[Observation, ...] = (
    Observation(
        "O1",
        "FLOPS utilisation rises with batch size and with model width (nodes, filters, embedding); depth matters much less",
        "4.1",
        "Fig. 2",
        "architecture",
        "any platform's FC/CNN/RNN sweep; the original TPU v2 FC sweep",
        "a sweep with varied batch and width",
    ),
    Observation(
        "O2",
        "many operations are memory-bandwidth bound: even compute-bound models spend a noticeable share of "
        "their time in memory-bound ops",
        "4.2",
        "Fig. 3",
        "architecture",
        "the original TPU v2 op traces; this platform's op profiles",
        "a per-op profile of a compute-bound model",
    ),
    Observation(
        "O3",
        "communication between the chips of a multi-chip system takes a non-negligible share of the step, "
        "falling as the batch grows",
        "4.3",
        "Fig. 4",
        "architecture",
        "the original TPU v2 traces (cross-replica-sum)",
        "multi-device traces",
    ),
    Observation(
        "O4",
        "the host can fail to feed the device: smaller models wait on infeed more than larger ones",
        "4.4",
        "Fig. 5",
        "architecture",
        "the original TPU v2 traces (infeed)",
        "infeed measurements",
    ),
    Observation(
        "O5",
        "a newer TPU generation (v3 over v2) speeds up compute-bound operations by the peak ratio (2.3x) and "
        "memory-bound ones by the bandwidth ratio (1.5x); doubling the batch on its larger memory reaches about 3x",
        "4.5",
        "Fig. 6",
        "platform_comparison",
        "TPU v2 and v3 sweeps; the TPU v2 traces projected onto v3",
        "TPU v3 measurements",
    ),
    Observation(
        "O6",
        "the largest FC models run only on the platform with the most memory; examples/s falls with width and rises with batch",
        "5.1",
        "Fig. 7",
        "platform_comparison",
        "FC sweeps of several platforms with their failures",
        "FC sweeps on platforms of different memory sizes",
    ),
    Observation(
        "O7",
        "large batches favour the TPU and small batches the GPU: the TPU's speedup grows with batch",
        "5.1",
        "Fig. 8, 10",
        "platform_comparison",
        "the original TPU v2-8 and V100 FC sweeps",
        "TPU and GPU sweeps",
    ),
    Observation(
        "O8",
        "small FC models favour the TPU and large ones the GPU: the TPU's speedup shrinks with model size",
        "5.1",
        "Fig. 8",
        "platform_comparison",
        "the original TPU v2-8 and V100 FC sweeps",
        "TPU and GPU sweeps",
    ),
    Observation(
        "O9",
        "the TPU's speedup over the GPU grows with CNN size",
        "5.2",
        "Fig. 10",
        "platform_comparison",
        "CNN sweeps on a TPU and a GPU",
        "CNN measurements on a TPU and a GPU",
    ),
    Observation(
        "O10",
        "the TPU reaches higher FLOPS utilisation than the GPU (up to 3x)",
        "5.3",
        "Fig. 11",
        "workloads",
        "utilisation of the same families on a TPU and a GPU",
        "TPU and GPU measurements",
    ),
    Observation(
        "O11",
        "GPU performance scales better than the TPU's as the RNN embedding grows",
        "5.2",
        "Fig. 10",
        "platform_comparison",
        "RNN sweeps on a TPU and a GPU",
        "RNN measurements on a TPU and a GPU",
    ),
    Observation(
        "O12",
        "software-stack updates sped models up by large factors over a few months",
        "6.1",
        "Fig. 12",
        "software_stack",
        "the same grid under several TensorFlow versions",
        "measurements under several TensorFlow versions",
    ),
    Observation(
        "O13",
        "16-bit arithmetic speeds up compute-bound models",
        "6.2",
        "Fig. 12",
        "software_stack",
        "float32 and 16-bit runs of models right of the ridge",
        "float32 and 16-bit measurements",
    ),
    Observation(
        "O14",
        "each TensorFlow and CUDA release brings further gains",
        "6.1",
        "Fig. 12",
        "software_stack",
        "GPU measurements under several CUDA/TensorFlow versions",
        "GPU measurements under several CUDA versions",
    ),
)
BY_ID = {o.id: o for o in OBSERVATIONS}


def for_report(report: str) -> tuple[Observation, ...]:
    return tuple(o for o in OBSERVATIONS if o.report == report)


def entries(verdicts: list[Verdict], report: str) -> list[dict]:
    """The report's observations as entries: every verdict, plus a ``needs`` entry for each
    observation of the report that no verdict judged. Verdicts without a paper observation
    (the package's own checks) keep an empty id."""
    rows = [_entry(v) for v in verdicts]
    judged = {v.id for v in verdicts}
    rows += [_needs(o, f"no data in the store can test it ({o.data})") for o in for_report(report) if o.id not in judged]
    order = {o.id: i for i, o in enumerate(OBSERVATIONS)}
    for row in rows:
        row["report"] = report
    return sorted(rows, key=lambda r: order.get(r["id"], len(order)))


def _needs(o: Observation, why: str) -> dict:
    verdict = f"{NEEDS} {o.needs}"
    return {
        "id": o.id,
        "claim": o.claim,
        "platform": "",
        "verdict": verdict,
        "outcome": verdict,
        "effect": None,
        "interval": None,
        "n": 0,
        "rule": None,
        "held_fixed": {},
        "evidence": why,
        "figures": {},
        "report": o.report,
    }


def _entry(v: Verdict) -> dict:
    """A verdict as ``observations.json`` holds it: the record (outcome, effect, interval, n, rule,
    held_fixed), the claim, where it was judged and the numbers behind it."""
    claim = BY_ID[v.id].claim if v.id in BY_ID else v.paper
    return {
        "id": v.id,
        "claim": claim,
        "platform": v.platform,
        "verdict": v.verdict,
        **_plain(v.as_dict()),
        "evidence": v.evidence,
        "effect_words": v.figure,
        "figures": _plain(v.numbers),
        "check": v.observation,
    }


def _plain(value):
    """Numbers and keys as JSON can hold them (numpy scalars and non-string keys converted)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


# Where a report run by ``paradnn report`` writes its entries: the pipeline's output folder
# (``--outputs``), which may be far from a ``--store`` given to it. Set by the pipeline runner.
REPORT_DIR_ENV = "PARADNN_REPORT_DIR"


def publish(verdicts: list[Verdict], store: str | Path, report: str) -> pd.DataFrame:
    """Write the report's observation entries into its pipeline's output folder (``$PARADNN_REPORT_DIR``,
    set by ``paradnn report``), else beside the store (a notebook run by hand); return them as a table."""
    rows = entries(verdicts, report)
    folder = os.environ.get(REPORT_DIR_ENV) or Path(store).resolve().parent
    path = Path(folder) / f"observations-{report}.json"
    path.write_text(json.dumps(rows, indent=1, default=str))
    table = pd.DataFrame(rows, columns=["id", "platform", "verdict", "effect_words", "evidence", "check"])
    return table.rename(columns={"check": "what was checked", "effect_words": "effect (95% interval), rule"}).fillna("")


def merge(folder: Path, reports: list[str]) -> list[dict]:
    """Every report's entries of the paper's observations in ``folder``, and a ``needs`` entry
    for each observation none judged. A comparison two reports judge (the same observation, platform
    and check) is listed once, as the later report in ``reports`` judged it: it read every
    measurement the earlier one did, pooled with any taken since."""
    rows: list[dict] = []
    for report in reports:
        path = folder / f"observations-{report}.json"
        if path.exists():
            rows += [r for r in json.loads(path.read_text()) if r["id"]]  # the package's own checks stay in their report
    unique = {(r["id"], r.get("platform", ""), r.get("check", "")): r for r in rows}  # judged twice: the later stands
    rows = list(unique.values())
    judged = {r["id"] for r in rows}
    rows += [_needs(o, f"no report of this pipeline judges it ({o.report})") for o in OBSERVATIONS if o.id not in judged]
    order = {o.id: i for i, o in enumerate(OBSERVATIONS)}
    return sorted(rows, key=lambda r: (order.get(r["id"], len(order)), r.get("platform", "")))


def said(row: dict) -> str:
    """A verdict's evidence in words: what was checked, the evidence and the effect with its rule."""
    said = f"{row['check']}: {row['evidence']}" if row.get("check") else row["evidence"]
    return f"{said}; {row['effect_words']}" if row.get("effect_words") else said


def summary(rows: list[dict]) -> list[dict]:
    """One line per observation for the index: its claim and every verdict with its platform."""
    lines = []
    for o in OBSERVATIONS:
        mine = [r for r in rows if r["id"] == o.id]
        verdicts = [(r.get("platform", ""), r["verdict"], said(r), r.get("report", "")) for r in mine]
        lines.append({"id": o.id, "claim": o.claim, "section": o.section, "figure": o.figure, "verdicts": verdicts})
    return lines


KINDS = (HOLDS, FAILS, PROJECTED_HOLDS, PROJECTED_FAILS, INCONCLUSIVE, NEEDS)
