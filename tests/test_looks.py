"""Spending the rest of a report's budget where a verdict is undecided, without manufacturing one."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from paradnn.analysis import observations as obs
from paradnn.analysis.speedup import compare
from paradnn.sections import common
from paradnn.sweeps.plan import MAX_LOOKS, SweepSummary


def _row(label: str, xla: bool, speed: float, look: int = 1, round_no: int = 1) -> dict:
    extra = {"sweep": f"s{look}", "round": round_no, **({"look": look} if look > 1 else {})}
    return {
        "family": "fc",
        "label": label,
        "platform": "cpu",
        "xla": xla,
        "state": "ok",
        "examples_per_sec": speed,
        "extra": extra,
    }


def test_a_further_look_is_stamped_on_its_rows():
    summary = SweepSummary()
    assert summary.stamp({}, 1, 0)["extra"] == {"sweep": summary.sweep_id, "round": 1, "position": 0}
    assert summary.stamp({}, 2, 1, look=2)["extra"] == {"sweep": summary.sweep_id, "round": 2, "position": 1, "look": 2}


def test_the_interval_of_a_comparison_looked_at_twice_is_wider_at_its_split_level():
    rows = [
        _row(label, xla, speed)
        for label, base, fast in (("a", 100, 130), ("b", 100, 112), ("c", 100, 121))
        for xla, speed in ((False, base), (True, fast))
    ]
    once = compare(pd.DataFrame(rows), False, True, by="xla")
    twice = compare(pd.DataFrame([{**r, "extra": {**r["extra"], "look": 2}} for r in rows]), False, True, by="xla")
    assert once.looks == 1 and twice.looks == MAX_LOOKS == 2
    rule = obs.Rule("median speedup", 1.05, ">")
    first, second = obs.speedup_part("s", once.table, rule, once.looks), obs.speedup_part("s", twice.table, rule, twice.looks)
    assert first.level == 0.95 and second.level == pytest.approx(0.975)
    assert second.interval[0] <= first.interval[0] and second.interval[1] >= first.interval[1]
    verdict = obs.judged("bf16", "paper", second, "3 configurations")
    assert "97.5% interval" in verdict.figure and verdict.as_dict()["level"] == pytest.approx(0.975)


def _comparison(verdict: str, n: int, looks: int = 1):
    labels = [f"layer_1-node_{n}-input_8-output_2-bs_4" for n in (8, 16, 32)]
    table = pd.DataFrame({"family": ["fc"] * 3, "label": labels, "replicates": [[1.0, 1.1], [1.0, 2.0], [1.0]]})
    result = type("R", (), {"table": table, "looks": looks, "n": 3})()
    made = obs.Verdict(f"claim {verdict} {n}", "paper", verdict, "evidence", n=n)
    return result, made, [{"xla": False}, {"xla": True}]


def test_only_undecided_comparisons_with_room_are_measured_again_widest_rounds_first(monkeypatch):
    calls = []
    monkeypatch.setattr(common, "ensure_measured", lambda store, families, **kw: calls.append(kw) or ["measured"])
    undecided = _comparison(obs.INCONCLUSIVE, 3)
    decided = obs.judged("decided", "paper", obs.exact_part("x", 1.0, 3, obs.Rule("x", 0.5)), "evidence")
    assert decided.verdict == obs.HOLDS
    comparisons = [
        undecided,
        _comparison(obs.INCONCLUSIVE, 1),
        _comparison(obs.INCONCLUSIVE, 3, looks=MAX_LOOKS),
        (undecided[0], decided, undecided[2]),
    ]
    lines = common.look_again("s.sqlite", comparisons, started=time.monotonic(), budget_minutes=4, max_seconds=1, platform="cpu")
    assert len(calls) == 1 and calls[0]["look"] == 2 and calls[0]["variants"] == undecided[2]
    assert [c.nodes for c in calls[0]["configs"]] == [16, 8, 32]  # the pair whose rounds disagree most first
    assert lines == ["look 2 at 'claim inconclusive 3' (evidence): measured"]


def test_no_time_left_is_said_and_nothing_is_measured(monkeypatch):
    monkeypatch.setattr(common, "ensure_measured", lambda *a, **k: pytest.fail("measured with no time left"))
    lines = common.look_again(
        "s.sqlite",
        [_comparison(obs.INCONCLUSIVE, 3)],
        started=time.monotonic() - 300,
        budget_minutes=4,
        max_seconds=1,
        platform="cpu",
    )
    assert lines == ["1 undecided comparison(s) not measured again: 0.0 min of the budget left"]
