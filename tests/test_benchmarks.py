"""The benchmark suite runs end to end on tiny settings (no timing is asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_benchmarks_run_on_tiny_settings(tmp_path, ray_alone):  # its Ray section starts a cluster
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--tiny", "--output", str(out)],
                            capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    sections = {r["section"] for r in report["rows"]}
    assert sections == {"harness", "fit", "workloads", "ceiling", "input", "devices", "jax", "overhead", "ray", "repeat",
                        "projection", "analysis"}  # fmt: skip
    assert all(isinstance(r["value"], float) for r in report["rows"])
    assert report["machine"]["kind"] == "cpu"


def test_unknown_section_is_exit_2():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--only", "speed"], capture_output=True,
                            text=True)  # fmt: skip
    assert result.returncode == 2 and "unknown section 'speed'" in result.stderr
