"""Energy counters: RAPL read from a powercap tree, joules per step over the timed calls, examples per joule."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from paradnn.analysis import scorecard
from paradnn.engine import energy
from paradnn.engine.protocol import RunSettings, run_protocol
from paradnn.engine.record import derived


def _domain(root, name: str, uj: int, max_uj: int = 1_000_000) -> None:
    d = root / name
    d.mkdir()
    (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")


def test_rapl_sums_the_packages_and_counts_wrap_around(tmp_path):
    _domain(tmp_path, "intel-rapl:0", 900_000)
    _domain(tmp_path, "intel-rapl:1", 100_000)
    _domain(tmp_path, "intel-rapl:0:0", 5)  # a sub-zone (cores) of package 0: inside its package's reading
    meter = energy.rapl_meter(tmp_path)
    assert meter is not None and meter.source == "rapl (2 package(s))"
    assert meter.read() == 0.0
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("100000\n")  # wrapped: 100,000 + 100,000 uJ later
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("600000\n")  # 500,000 uJ later
    assert meter.read() == pytest.approx(0.7)


def test_no_readable_counter_is_no_meter(tmp_path):
    assert energy.rapl_meter(tmp_path) is None  # no powercap domains
    _domain(tmp_path, "intel-rapl:0", 1)
    (tmp_path / "intel-rapl:0" / "energy_uj").chmod(0)
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("x")  # unreadable or garbled: either way no meter
    assert energy.rapl_meter(tmp_path) is None
    assert energy.meter_for("/TPU:0") is None


def test_the_protocol_keeps_the_energy_of_the_timed_calls_per_step():
    joules = [0.0]

    def run(k: int) -> float:
        time.sleep(2e-4 * k)
        joules[0] += 3.0 * k  # 3 J per step, as a counter would report it
        return 1.0

    meter = energy.Meter("fake", lambda: joules[0])
    m = run_protocol(run, RunSettings(max_seconds=0.1, min_call_seconds=0.005, min_samples=3), meter)
    assert m.state == "ok" and m.energy_per_step_j == pytest.approx(3.0) and m.energy_source == "fake"
    assert m.as_dict()["energy_per_step_j"] == pytest.approx(3.0)
    assert run_protocol(run, RunSettings(max_seconds=0.05, min_call_seconds=0.005)).energy_per_step_j is None


def test_examples_per_joule_is_the_batch_over_the_energy_of_a_step():
    record = {"state": "ok", "step_time_s": 0.5, "flops_model": 1e9, "batch": 64, "energy_per_step_j": 8.0}
    assert derived(record, 1e12)["examples_per_joule"] == 8.0
    assert derived({**record, "energy_per_step_j": None}, 1e12)["examples_per_joule"] is None


def test_the_scorecard_measures_energy_efficiency_where_rows_have_a_reading():
    rows = pd.DataFrame(
        [
            {
                "family": "fc",
                "label": "a",
                "platform": "cpu",
                "state": "ok",
                "batch": 64,
                "step_time_s": 0.01,
                "dtype": "float32",
                "utilization": 0.5,
                "examples_per_joule": 40.0,
                "energy_source": "rapl (1 package(s))",
            },
            {
                "family": "fc",
                "label": "b",
                "platform": "cpu",
                "state": "ok",
                "batch": 128,
                "step_time_s": 0.02,
                "dtype": "float32",
                "utilization": 0.6,
                "examples_per_joule": 60.0,
                "energy_source": "rapl (1 package(s))",
            },
        ]
    )
    cells = scorecard.hardware_metrics(rows, pd.DataFrame(columns=["platform", "ceilings"])).set_index("metric")
    assert cells.loc["Energy efficiency", "evidence"] == "measured"
    assert cells.loc["Energy efficiency", "value"] == "50 examples/J median, best 60 (2 rows; rapl (1 package(s)))"
    assert cells.loc["Energy efficiency", "short"] == "50 examples/J"
    unread = scorecard.hardware_metrics(rows.drop(columns="examples_per_joule"), pd.DataFrame(columns=["platform", "ceilings"]))
    assert unread.set_index("metric").loc["Energy efficiency", "evidence"] == "not measurable here"
