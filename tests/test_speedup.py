"""Speedup comparisons: the study's TPU/V100 figures and small tables with known answers."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

from paradnn.analysis.speedup import SpeedupResult, compare
from paradnn.store import Store
from paradnn.store.legacy import import_files

SUMMARY_KEYS = {
    "n",
    "min",
    "median",
    "geomean",
    "max",
    "baseline",
    "target",
    "by",
    "family",
    "metric",
    "held_fixed",
    "free",
    "sides",
    "interleaved",
    "looks",
}


@pytest.fixture(scope="module")
def legacy_results(reference, tmp_path_factory) -> pd.DataFrame:
    with Store(tmp_path_factory.mktemp("speedup") / "store.db") as store:
        import_files(store, [reference / "tpu_fc.json", reference / "gpu_fc.json"])
        return store.results(family="fc")


def test_tpu_over_v100_matches_the_study(legacy_results):
    # The study ran each platform at its own precision (TPU mixed bfloat16, V100 mixed float16):
    # held to the same precision nothing pairs, so the comparison frees it and says so.
    assert compare(legacy_results, "v100", "tpu-v2-8").n == 0
    result = compare(legacy_results, "v100", "tpu-v2-8", free=("dtype", "xla"))
    assert result.free == ("dtype", "xla")
    assert result.held_fixed == {"framework": "tensorflow", "input_mode": "host", "devices": 1}  # as the study fed both
    assert result.n == 176
    assert round(result.median, 2) == 3.79
    assert round(result.min, 2) == 0.21
    assert round(result.max, 2) == 11.70
    assert result.min <= result.geomean <= result.max
    table = result.table
    assert list(table.columns) == [
        "family",
        "family_version",
        "label",
        "framework",
        "input_mode",
        "devices",
        "layers",
        "nodes",
        "input",
        "output",
        "batch",
        "params",
        "flops_model",
        "bytes_estimate",
        "baseline",
        "target",
        "speedup",
        "rounds",
        "replicates",
    ]
    assert (table.speedup == table.target / table.baseline).all()
    assert table.label.is_unique


def test_reversed_comparison_is_the_reciprocal(legacy_results):
    forward = compare(legacy_results, "v100", "tpu-v2-8", family="fc", free=("dtype", "xla"))
    backward = compare(legacy_results, "tpu-v2-8", "v100", free=("dtype", "xla"))
    assert backward.n == forward.n == 176
    assert backward.max == pytest.approx(1 / forward.min)
    assert backward.geomean == pytest.approx(1 / forward.geomean)
    assert forward.summary()["family"] == "fc"


def _row(label: str, platform: str, xla: object, value: float, state: str = "ok") -> dict:
    layers = int(label[-1])
    return {
        "family": "fc",
        "label": label,
        "layers": layers,
        "blocks": None,
        "platform": platform,
        "xla": xla,
        "state": state,
        "examples_per_sec": value,
    }


@pytest.fixture
def xla_table() -> pd.DataFrame:
    """Two configurations matched on the CPU; everything else must be ignored."""
    return pd.DataFrame(
        [
            _row("fc1", "cpu", False, 100.0),
            _row("fc1", "cpu", True, 150.0),
            _row("fc1", "cpu", True, 250.0),  # repeated run: median 200 -> speedup 2
            _row("fc2", "cpu", False, 100.0),
            _row("fc2", "cpu", True, 50.0),  # speedup 0.5
            _row("fc3", "gpu", False, 10.0),
            _row("fc3", "cpu", True, 40.0),  # other platform: no pair
            _row("fc4", "cpu", False, 10.0, state="oom"),
            _row("fc4", "cpu", True, 40.0),  # baseline not ok: no pair
            _row("fc5", "cpu", None, 10.0),
            _row("fc5", "cpu", True, 40.0),  # XLA unknown is neither side
        ]
    )


def test_compare_by_xla_with_known_numbers(xla_table):
    result = compare(xla_table, False, True, by="xla")
    assert isinstance(result, SpeedupResult)
    assert result.n == 2
    assert list(result.table.speedup) == [2.0, 0.5]
    assert list(result.table.baseline) == [100.0, 100.0] and list(result.table.target) == [200.0, 50.0]
    assert list(result.table.columns) == [
        "family",
        "label",
        "platform",
        "layers",
        "baseline",
        "target",
        "speedup",
        "rounds",
        "replicates",
    ]
    assert (result.min, result.median, result.max) == (0.5, 1.25, 2.0)
    assert result.geomean == pytest.approx(1.0)
    summary = result.summary()
    assert set(summary) == SUMMARY_KEYS
    assert summary["by"] == "xla" and summary["baseline"] is False and summary["target"] is True


def test_no_common_configuration_gives_nan_not_an_error(xla_table):
    result = compare(xla_table, "tpu-v2-8", "v100")
    assert result.n == 0 and len(result.table) == 0
    assert all(math.isnan(result.summary()[k]) for k in ("min", "median", "geomean", "max"))
    assert {"baseline", "target", "speedup"} <= set(result.table.columns)
    assert compare(xla_table, False, True, by="xla", family="cnn").n == 0


def test_bad_requests_are_refused(xla_table):
    with pytest.raises(ValueError, match=r"other than the baseline's \('cpu'\)"):
        compare(xla_table, "cpu", "cpu")
    with pytest.raises(ValueError, match="lacks column.*sw_tensorflow"):
        compare(xla_table, "2.15", "2.16", by="sw_tensorflow")


@pytest.fixture(scope="module")
def legacy_store(reference, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("compare") / "store.sqlite"
    with Store(path) as store:
        import_files(store, [reference / "tpu_fc.json", reference / "gpu_fc.json"])
    return str(path)


def test_compare_pairs_the_original_study_as_the_paper_did(legacy_store):
    from click.testing import CliRunner

    from paradnn.cli import main

    out = CliRunner().invoke(
        main, ["compare", "--baseline", "v100", "--target", "tpu-v2-8", "--family", "fc", "--store", legacy_store]
    )
    assert out.exit_code == 0, out.output
    assert re.search(r"^n\s+176$", out.output, re.M) and re.search(r"^median\s+3.79", out.output, re.M)
    assert "free        dtype: v100 mixed_float16, tpu-v2-8 mixed_bfloat16 (each platform at its own precision" in out.output
    held = CliRunner().invoke(
        main, ["compare", "--baseline", "v100", "--target", "tpu-v2-8", "--hold", "dtype", "--store", legacy_store]
    )
    assert held.exit_code == 0 and not re.search(r"^n\s+0", held.output, re.M)
    assert held.output.strip() == (
        "nothing pairs tpu-v2-8 with v100: dtype differs: v100 has mixed_float16, tpu-v2-8 has "
        "mixed_bfloat16 (--free dtype lets each side keep its own)"
    )
    as_json = json.loads(
        CliRunner()
        .invoke(
            main, ["compare", "--baseline", "v100", "--target", "tpu-v2-8", "--hold", "dtype", "--store", legacy_store, "--json"]
        )
        .output
    )
    assert as_json["n"] == 0 and as_json["why"].startswith("dtype differs")


def _in_round(row: dict, round_no: int, sweep: str = "s1") -> dict:
    return {**row, "extra": {"sweep": sweep, "round": round_no, "position": 0}}


def test_an_interleaved_pair_is_the_median_of_its_per_round_ratios():
    base, target = [100.0, 50.0, 90.0], [200.0, 60.0, 100.0]  # per round 2.0, 1.2, 1.11; pooled medians 90 and 100
    rows = [
        _in_round(_row("fc1", "cpu", xla, speed), r)
        for xla, speeds in ((False, base), (True, target))
        for r, speed in enumerate(speeds, start=1)
    ]
    result = compare(pd.DataFrame(rows), False, True, by="xla")
    (pair,) = result.table.to_dict("records")
    assert pair["speedup"] == pytest.approx(1.2) and pair["rounds"] == 3 and result.interleaved == 1
    assert pair["replicates"] == pytest.approx([2.0, 1.2, 100 / 90])
    apart = [{**r, "extra": {"sweep": f"s{i}", "round": 1}} for i, r in enumerate(rows)]  # each measured in its own sweep
    (pair,) = compare(pd.DataFrame(apart), False, True, by="xla").table.to_dict("records")
    assert pair["rounds"] == 0 and pair["speedup"] == pytest.approx(100 / 90)  # the pooled medians' ratio
    assert len(pair["replicates"]) == 9  # every target measurement over every baseline one


def test_a_contended_row_is_left_out_of_a_comparison_where_a_quiet_one_stands():
    rows = pd.DataFrame(
        [
            _row("fc1", "cpu", False, 100.0),
            {**_row("fc1", "cpu", False, 10.0), "contended": True},
            _row("fc1", "cpu", True, 200.0),
        ]
    )
    rows["run_key"] = ["a", "a", "b"]
    rows["contended"] = rows["contended"].fillna(False)
    (pair,) = compare(rows, False, True, by="xla").table.to_dict("records")
    assert pair["speedup"] == 2.0
