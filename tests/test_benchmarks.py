"""The benchmark suite runs end to end on tiny settings (no timing is asserted here)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# Every section but Ray's: a Ray cluster is the suite's one heavy Ray path (tests/test_cluster.py),
# and a second one here would hold the machine's Ray lock for a minute while the other worker waits.
SECTIONS = (
    "harness",
    "fit",
    "workloads",
    "ceiling",
    "input",
    "devices",
    "jax",
    "torch",
    "overhead",
    "repeat",
    "interleave",
    "workers",
    "projection",
    "analysis",
    "merge",
)


def test_every_section_but_rays_is_run_here():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert set(bench.SECTIONS) - set(SECTIONS) == {"ray"}


@pytest.mark.slow
def test_benchmarks_run_on_tiny_settings(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--tiny", "--only", ",".join(SECTIONS), "--output", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    sections = {r["section"] for r in report["rows"]}
    assert sections == set(SECTIONS)
    assert all(isinstance(r["value"], float) for r in report["rows"])
    assert report["machine"]["kind"] == "cpu"


def test_unknown_section_is_exit_2():
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--only", "speed"], capture_output=True, text=True
    )
    assert result.returncode == 2 and "unknown section 'speed'" in result.stderr


def test_the_spell_summary_splits_normal_from_slow_calls():
    import numpy as np

    spec = importlib.util.spec_from_file_location("spells", ROOT / "benchmarks" / "spells.py")
    spells = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(spells)

    wall = np.array([1.0, 1.0, 1.02, 1.0, 2.5, 1.3])  # median 1.01: two slow calls, four normal
    calls = {
        "wall": wall,
        "cpu": 2 * wall,
        "probe": np.full(6, 0.5),
        "user": np.full(6, 0.9),
        "system": np.zeros(6),
        "idle": np.full(6, 0.1),
        "steal": np.zeros(6),
    }
    summary = spells.summarise(calls)
    assert summary["calls"] == 6 and summary["slow_share"] == pytest.approx(2 / 6)
    assert summary["normal"]["wall"] == pytest.approx(1.0) and summary["slow"]["cpu"] == pytest.approx(3.8)
    text = spells.words("2 threads", summary)
    assert text.startswith("2 threads: 6 calls, median 1010.00 ms") and "slow   wall 1900.00 ms, CPU 3800.00 ms" in text
