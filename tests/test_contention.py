"""Contention seen and refused: what else used the machine while a window was timed."""

from __future__ import annotations

import math

import pytest

from paradnn.engine import contention
from paradnn.engine.contention import Reading, Usage
from paradnn.engine.protocol import RunSettings, run_protocol
from paradnn.sweeps.plan import BUSY_ROWS, SweepSummary


class FakeDevice:
    """``run(k)`` taking ``step`` seconds a step on a virtual clock."""

    def __init__(self, monkeypatch, step: float) -> None:
        self.now, self.step = 0.0, step
        monkeypatch.setattr("paradnn.engine.protocol.time.perf_counter", lambda: self.now)

    def __call__(self, k: int) -> float:
        self.now += k * self.step
        return 1.0


def planted(monkeypatch, usages: list[Usage | None]) -> list[float]:
    """Windows that read ``usages`` in turn; returns the waits for a quiet machine asked for."""
    left = iter(usages)
    waits: list[float] = []
    monkeypatch.setattr(contention, "read", lambda partners=(): None)
    monkeypatch.setattr(contention, "between", lambda start, end: next(left))
    monkeypatch.setattr(contention, "wait_for_quiet", lambda limit, longest: waits.append(longest) or (True, 0.0))
    return waits


def test_a_contended_window_is_refused_and_the_quiet_one_stands(monkeypatch):
    waits = planted(monkeypatch, [Usage(0.9, 0.0, 1.0), Usage(0.0, 0.02, 1.0)])
    m = run_protocol(FakeDevice(monkeypatch, 0.004), RunSettings(max_contention=0.1, quiet_wait_s=3.0))
    record = m.as_dict()
    assert record["refused_windows"] == 1 and waits == [3.0]
    assert record["contended"] is False
    assert record["contention_cores"] == 0.0 and record["steal_cores"] == 0.02
    assert record["extra"]["refused"] == [{"others": 0.9, "steal": 0.0, "seconds": 1.0}]


def test_a_row_that_never_had_a_quiet_window_is_flagged(monkeypatch):
    planted(monkeypatch, [Usage(0.9, 0.0, 1.0), Usage(0.5, 0.0, 1.0), Usage(0.4, 0.0, 1.0)])
    m = run_protocol(FakeDevice(monkeypatch, 0.004), RunSettings(max_contention=0.1, contention_retries=2))
    record = m.as_dict()
    assert record["contended"] is True and record["refused_windows"] == 2
    assert record["contention_cores"] == 0.4  # the standing window is the last one timed
    assert m.stats.median == pytest.approx(0.004)  # its timings are kept, flagged, never hidden


def test_steal_counts_as_contention(monkeypatch):
    planted(monkeypatch, [Usage(0.0, 0.3, 1.0), Usage(0.0, 0.0, 1.0)])
    m = run_protocol(FakeDevice(monkeypatch, 0.004), RunSettings(max_contention=0.1))
    assert m.as_dict()["refused_windows"] == 1


def test_an_unlimited_window_records_its_contention_without_refusing(monkeypatch):
    planted(monkeypatch, [Usage(0.9, 0.0, 1.0)])
    m = run_protocol(FakeDevice(monkeypatch, 0.004), RunSettings(max_contention=math.inf))
    record = m.as_dict()
    assert record["refused_windows"] == 0 and record["contended"] is False and record["contention_cores"] == 0.9


def test_where_the_counters_cannot_be_read_nothing_is_refused_and_the_row_says_so(monkeypatch):
    planted(monkeypatch, [None])
    record = run_protocol(FakeDevice(monkeypatch, 0.004), RunSettings(max_contention=0.1)).as_dict()
    assert record["contended"] is None and record["contention_cores"] is None and record["refused_windows"] == 0


def test_usage_is_the_others_cpu_over_the_window_less_a_tick_of_slack(monkeypatch):
    monkeypatch.setattr(contention.os, "cpu_count", lambda: 2)
    slack = contention.QUANTUM_TICKS * contention.TICK_S * 2
    start = Reading(wall=10.0, busy=100.0, steal=5.0, own=40.0)
    end = Reading(wall=12.0, busy=104.0, steal=5.5, own=42.0)  # 4 s busy, 2 s of them ours; 0.5 s stolen
    usage = contention.between(start, end)
    assert usage.others == pytest.approx((2.0 - slack) / 2) and usage.steal == pytest.approx((0.5 - slack) / 2)
    quiet = contention.between(start, Reading(wall=12.0, busy=102.01, steal=5.0, own=42.0))
    assert quiet.others == 0.0 and quiet.quiet(0.1)
    assert contention.between(None, end) is None


def test_the_machine_s_counters_read_here():
    if not contention.PROC_STAT.exists():
        pytest.skip("no /proc/stat on this system")
    first = contention.read()
    assert first is not None and first.busy > 0 and first.own > 0


@pytest.mark.parametrize("text,limit", [("", contention.MAX_CONTENTION), ("0.25", 0.25), ("off", math.inf)])
def test_the_limit_comes_from_the_environment(monkeypatch, text, limit):
    monkeypatch.setenv(contention.CONTENTION_ENV, text)
    assert contention.declared_limit() == limit


@pytest.mark.parametrize("text", ["-1", "0", "lots"])
def test_a_bad_limit_in_the_environment_says_what_is_allowed(monkeypatch, text):
    monkeypatch.setenv(contention.CONTENTION_ENV, text)
    with pytest.raises(ValueError, match="allowed: a positive number of cores, or off"):
        contention.declared_limit()


def test_the_sweep_summary_counts_refusals_flags_and_steal():
    summary = SweepSummary(planned=3)
    summary.account({"state": "ok", "refused_windows": 2, "contended": False, "steal_cores": 0.05})
    summary.account({"state": "ok", "refused_windows": 2, "contended": True, "steal_cores": 0.0})
    summary.account({"state": "oom", "refused_windows": 0, "contended": None})
    assert (summary.refused, summary.contended, summary.steal, summary.unread) == (4, 1, 0.05, 0)
    line = summary.line()
    assert "4 timing window(s) refused for contention" in line and "1 row(s) never had a quiet window" in line
    assert "steal up to 0.05 cores" in line


def test_a_machine_busy_row_after_row_stops_the_waiting_until_a_quiet_row():
    summary = SweepSummary()
    for _ in range(BUSY_ROWS):
        assert not summary.machine_busy
        summary.account({"state": "ok", "refused_windows": 2, "contended": True})
    assert summary.machine_busy
    summary.account({"state": "ok", "refused_windows": 0, "contended": False})
    assert not summary.machine_busy


def test_a_partner_s_cpu_is_this_measurement_s_own_not_contention():
    if not contention.PROC_STAT.exists():
        pytest.skip("no /proc/stat on this system")
    import subprocess
    import sys
    import time

    # A busy process that is not this one's child (its parent exits at once), as a data-parallel run's replicas
    # are for their leader.
    busy = "import time\\nt = time.time()\\nwhile time.time() - t < 1.5: pass"
    started = subprocess.run(
        [
            sys.executable,
            "-c",
            "import subprocess, sys; print(subprocess.Popen([sys.executable, "
            f"'-c', '{busy}'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(started.stdout)
    before, alone = contention._own((pid,)), contention._own()
    time.sleep(0.8)
    gained = contention._own((pid,)) - before
    assert gained > 0.3 and contention._own() - alone < 0.1  # its CPU counts only when named
