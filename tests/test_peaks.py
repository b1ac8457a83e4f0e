"""Ceilings are maxima: no measured utilisation above 100%, a beaten ceiling measured again."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from paradnn.engine.record import settle_peak
from paradnn.store import Store
from paradnn.store.peaks import current_peaks, current_utilisation

FP = "cpu|x|2|2.21.0"


def row(label: str, rate: float, peak: float = 100e9, source: str = "measured", dtype: str = "float32", **extra) -> dict:
    return {
        "family": "fc",
        "label": label,
        "platform": "cpu",
        "platform_fingerprint": FP,
        "dtype": dtype,
        "compute_dtype": dtype,
        "xla": True,
        "state": "ok",
        "step_time_s": 1.0,
        "flops_per_sec": rate,
        "peak_flops": peak,
        "peak_source": source,
        "utilization": rate / peak,
        **extra,
    }


def test_a_row_that_beats_a_stale_ceiling_raises_the_peak_for_every_row():
    rows = pd.DataFrame([row("a", 50e9), row("b", 130e9), row("c", 60e9, dtype="bfloat16")])
    peaks = current_peaks(rows, {FP: {"matmul_flops": {"float32": {"xla": 100e9, "no_xla": 90e9}}}})
    assert peaks[(FP, "float32")] == (130e9, "achieved:b")
    out = current_utilisation(rows, peaks)
    assert list(out["utilization"]) == pytest.approx([50 / 130, 1.0, 0.6])  # bfloat16 keeps its own peak
    assert out["utilization"].max() <= 1.0 and list(out["peak_source"])[:2] == ["achieved:b", "achieved:b"]


def test_a_ceiling_measured_again_later_lowers_every_utilisation_with_it():
    rows = pd.DataFrame([row("a", 50e9), row("b", 90e9)])
    peaks = current_peaks(rows, {FP: {"matmul_flops": {"float32": {"xla": 200e9}}}})
    out = current_utilisation(rows, peaks)
    assert list(out["utilization"]) == pytest.approx([0.25, 0.45]) and set(out["peak_source"]) == {"measured"}


def test_datasheet_peaks_are_left_as_stored():
    rows = pd.DataFrame([row("a", 5e12, peak=15.7e12, source="datasheet:v100", platform_fingerprint="legacy:v100")])
    out = current_utilisation(rows, current_peaks(rows, {}))
    assert out["peak_source"].iloc[0] == "datasheet:v100" and out["utilization"].iloc[0] == pytest.approx(5 / 15.7)


def test_the_store_derives_utilisation_when_rows_are_read(tmp_path):
    with Store(tmp_path / "r.sqlite") as store:
        store.put_platform(FP, "cpu", {"id": "cpu"}, {"matmul_flops": {"float32": {"xla": 100e9}}}, "measured")
        store.add_results([row("a", 50e9), row("b", 150e9)])  # b was stored at 150%: a disturbed ceiling
        everything = store.results()
        only_a = store.results(family="fc").query("label == 'a'")
    assert everything["utilization"].max() == pytest.approx(1.0)
    assert only_a["utilization"].iloc[0] == pytest.approx(50 / 150)  # a filter never changes the peak


def test_a_beaten_ceiling_is_measured_again_before_the_peak_rises():
    info, calls = {"datasheet": None}, []

    def remeasure(dtype: str) -> dict:
        calls.append(dtype)
        return {"matmul_flops": {dtype: {"xla": 300e9}}}

    record = {
        "label": "b",
        "state": "ok",
        "batch": 8,
        "step_time_s": 1.0,
        "flops_model": 200e9,
        "flops_per_sec": 200e9,
        "peak_flops": 150e9,
        "peak_source": "measured",
        "utilization": 200 / 150,
    }
    settled = settle_peak(dict(record), info, {}, "mixed_bfloat16", remeasure)
    assert calls == ["bfloat16"] and settled["peak_flops"] == 300e9 and settled["utilization"] == pytest.approx(2 / 3)
    still = settle_peak(dict(record), info, {}, "float32", lambda dtype: {"matmul_flops": {dtype: {"xla": 160e9}}})
    assert still["peak_source"] == "achieved:b" and still["utilization"] == pytest.approx(1.0)
    below = settle_peak({**record, "flops_per_sec": 100e9}, info, {}, "float32", lambda d: pytest.fail("measured again"))
    assert below["peak_flops"] == 150e9


def test_a_ceiling_beaten_only_through_the_model_count_is_not_measured_again():
    """Model FLOPs count work the step never executes; the graph's count of what ran decides."""
    record = {
        "label": "c",
        "state": "ok",
        "batch": 8,
        "step_time_s": 1.0,
        "flops_model": 160e9,
        "flops_per_sec": 160e9,
        "flops_graph": 140e9,
        "peak_flops": 150e9,
        "peak_source": "measured",
        "utilization": 160 / 150,
    }
    settled = settle_peak(dict(record), {"datasheet": None}, {}, "float32", lambda d: pytest.fail("measured again"))
    assert settled["peak_source"] == "achieved:c" and settled["peak_flops"] == 160e9
    assert settled["utilization"] == pytest.approx(1.0)
    calls = []
    executed_too = {**record, "flops_graph": 155e9}  # what ran beat the ceiling: measure it again
    settle_peak(executed_too, {"datasheet": None}, {}, "float32", lambda d: calls.append(d) or {"matmul_flops": {}})
    assert calls == ["float32"]


def test_ceilings_keep_their_trials_spread(monkeypatch, tmp_path):
    from paradnn.engine import ceilings

    monkeypatch.setenv("PARADNN_CACHE_DIR", str(tmp_path))
    result = json.loads(
        json.dumps(ceilings.measure_ceilings(ceilings.Target(), seconds=0.05, trials=2, dtypes=["float32"], copy=False))
    )
    assert result["trials"] == 2 and set(result["matmul_flops"]) == {"float32"}
    for xla, (worst, best) in result["matmul_spread"]["float32"].items():
        assert worst <= best == result["matmul_flops"]["float32"][xla]


def test_the_curve_is_the_best_matmul_flops_at_each_size(monkeypatch):
    from paradnn.engine import ceilings

    monkeypatch.setattr(ceilings, "CURVE_SIZES", (32, 64))
    curve = ceilings.measure_curve(ceilings.Target(), ["float32"], trials=1)
    assert set(curve) == {"float32"} and set(curve["float32"]) == {"32", "64"}
    assert all(rate > 0 for rate in curve["float32"].values())


def test_ceilings_cached_without_a_curve_get_one_and_keep_the_rest(monkeypatch, tmp_path):
    """A cache written before curves existed: the sizes are measured once, the largest is the no-XLA ceiling."""
    from paradnn.engine import ceilings

    monkeypatch.setenv("PARADNN_CACHE_DIR", str(tmp_path))
    info = {"id": "cpu", "name": "Fake CPU", "cores": 2, "software": {"tensorflow": "9.9", "keras": "9.9", "cuda": ""}}
    ceilings._write(info, {"matmul_size": 2048, "matmul_flops": {"float32": {"xla": 6.0, "no_xla": 5.0}}})
    monkeypatch.setattr(ceilings, "measure_curve", lambda target, dtypes: {d: {"64": 1.0} for d in dtypes})
    got = ceilings.ceilings(ceilings.Target(), info)
    assert got["matmul_curve"] == {"float32": {"64": 1.0, "2048": 5.0}} and got["matmul_flops"]["float32"]["xla"] == 6.0
    assert ceilings.cached_ceilings(info)["matmul_curve"] == got["matmul_curve"]


def test_cpu_theoretical_peak_is_cores_times_fma_width_times_clock():
    from paradnn.platform import cpu_theoretical_peak, theoretical_sentence

    zen4 = cpu_theoretical_peak({"fma", "avx2", "avx512f", "avx512_bf16"}, cores=2, max_ghz=3.0)
    assert zen4["flops_per_cycle"] == {"float32": 2 * 2 * 16 * 2, "bfloat16": 2 * 2 * 16 * 2 * 2}
    assert zen4["peak_flops"]["float32"] == pytest.approx(2 * 2 * 16 * 2 * 3.0e9)
    assert theoretical_sentence(zen4, 192e9, "float32").endswith("the measured ceiling is 50% of it.")
    amx = cpu_theoretical_peak({"fma", "avx2", "avx512f", "amx_bf16"}, cores=1, max_ghz=2.0)
    assert amx["peak_flops"]["bfloat16"] == pytest.approx(1024 * 2.0e9) and "AMX" in amx["basis"]["bfloat16"]
    assert cpu_theoretical_peak({"fma", "avx2"}, cores=4, max_ghz=None)["flops_per_cycle"]["float32"] == 4 * 32


def test_a_cpu_without_its_maximum_clock_gets_no_peak_but_the_clock_its_ceiling_implies():
    from paradnn.platform import cpu_theoretical_peak, theoretical_sentence

    vm = cpu_theoretical_peak({"fma", "avx2", "avx512f"}, cores=2, max_ghz=None)
    assert vm["peak_flops"] == {}
    sentence = theoretical_sentence(vm, 128 * 2.5e9, "float32")
    assert "not known here" in sentence and "at least 2.50 GHz" in sentence
    beaten = theoretical_sentence(cpu_theoretical_peak({"fma", "avx2"}, cores=1, max_ghz=1.0), 40e9, "float32")
    assert "exceeds" in beaten and "does not hold" in beaten  # never a share above 100%


def test_two_processes_needing_the_same_ceilings_measure_them_once(monkeypatch, tmp_path):
    """Three callers at once (threads holding their own lock files, as processes do): one measures, two read."""
    import threading
    import time

    from paradnn.engine import ceilings

    monkeypatch.setenv("PARADNN_CACHE_DIR", str(tmp_path))
    info = {"id": "cpu", "name": "Fake CPU", "cores": 2, "software": {"tensorflow": "9.9", "keras": "9.9", "cuda": ""}}
    measured = []

    def slow_measure(target):
        measured.append(threading.get_ident())
        time.sleep(0.3)
        return {"matmul_flops": {"float32": {"no_xla": 5.0}}, "matmul_curve": {"float32": {"64": 1.0}}}

    monkeypatch.setattr(ceilings, "measure_ceilings", slow_measure)
    got = []
    callers = [threading.Thread(target=lambda: got.append(ceilings.ceilings(ceilings.Target(), info))) for _ in range(3)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert len(measured) == 1 and len(got) == 3 and all(g["matmul_flops"]["float32"]["no_xla"] == 5.0 for g in got)


def test_a_ceiling_is_measured_again_once_per_dtype(monkeypatch, tmp_path):
    """A second configuration beating the re-measured ceiling beats it through its FLOP count: no third measurement."""
    from paradnn.engine import ceilings

    monkeypatch.setenv("PARADNN_CACHE_DIR", str(tmp_path))
    measured = []

    def fake(target, dtypes, copy):
        measured.append(dtypes)
        return {"matmul_flops": {dtypes[0]: {"xla": 120e9}}}

    monkeypatch.setattr(ceilings, "measure_ceilings", fake)
    info = {"id": "cpu", "name": "Fake CPU", "cores": 2, "software": {"tensorflow": "9.9", "keras": "9.9", "cuda": ""}}
    held = {"matmul_flops": {"float32": {"xla": 100e9}}}
    for _ in range(3):
        ceilings.remeasure(ceilings.Target(), info, held, "float32")
    ceilings.remeasure(ceilings.Target(), info, held, "bfloat16")
    assert measured == [["float32"], ["bfloat16"]] and held["matmul_flops"]["float32"]["xla"] == 120e9
    assert [entry["dtype"] for entry in ceilings.cached_ceilings(info)["remeasured"]] == ["float32", "bfloat16"]


def test_the_xla_probe_times_both_settings_in_turns_and_picks_the_faster():
    from paradnn.engine import ceilings
    from paradnn.families import parse_label

    config = parse_label("fc", "layer_1-node_32-input_64-output_10-bs_16")
    got = ceilings.probe_xla(ceilings.Target(), "fc", "float32", seconds=0.2, config=config)
    assert got["probe"] == config.label
    assert 0 < got["step_s_xla"] < math.inf and 0 < got["step_s_no_xla"] < math.inf
    assert got["xla"] == (got["step_s_xla"] < got["step_s_no_xla"])
