"""Input modes: host pipelines feed every step, the device loop is timed beside them, and the mode is identity."""

from __future__ import annotations

import math
import re
import sqlite3
import subprocess
import sys
import weakref

import numpy as np
import pytest

from paradnn.config import ConfigError
from paradnn.engine import inputs
from paradnn.engine.protocol import RunSettings
from paradnn.engine.record import measure
from paradnn.families import get, parse_label
from paradnn.identity import run_key

FC = "layer_1-node_16-input_32-output_10-bs_8"


@pytest.mark.parametrize("mode", ["host", "host-prep"])
def test_a_host_mode_times_the_pipeline_and_the_device_loop_side_by_side(mode):
    m = measure(parse_label("fc", FC), RunSettings(input=mode, max_seconds=0.2, min_call_seconds=0.01), count_graph=False)
    assert m.state == "ok" and len(m.reference_samples) == len(m.samples) >= 5
    record = m.as_dict()
    assert record["device_step_time_s"] == pytest.approx(float(np.median(m.reference_samples)))
    assert record["infeed_share"] == pytest.approx(1 - record["device_step_time_s"] / record["step_time_s"])
    assert math.isfinite(m.final_loss)


def test_the_device_mode_records_no_infeed():
    m = measure(parse_label("fc", FC), RunSettings(max_seconds=0.1, min_call_seconds=0.01), count_graph=False)
    assert m.reference_samples == [] and m.as_dict()["infeed_share"] is None


def test_a_measured_pipeline_is_handed_over_and_stopped_by_the_next_measurement():
    # Stopping a pipeline can wait for tf.data's autotuning thread, so a sweep's worker does it
    # outside the timing gate; in one process the next measurement does it.
    inputs.stop_finished()
    m = measure(parse_label("fc", FC), RunSettings(input="host", max_seconds=0.1, min_call_seconds=0.01), count_graph=False)
    assert m.state == "ok" and len(inputs._finished) == 1
    pipeline = weakref.ref(inputs._finished[0])
    measure(parse_label("fc", FC), RunSettings(max_seconds=0.1, min_call_seconds=0.01), count_graph=False)
    assert pipeline() is None and inputs._finished == []


def _take(mode: str, family: str, label: str, n: int) -> list:
    config = parse_label(family, label)
    return [tuple(np.asarray(t) for t in batch) for batch in inputs.dataset(mode, get(family), config).take(n)]


def test_host_batches_cycle_through_a_pool_of_distinct_batches():
    batches = _take("host", "fc", FC, inputs.POOL + 1)
    assert batches[0][0].shape == (8, 32) and batches[0][0].dtype == np.float32
    assert not np.array_equal(batches[0][0], batches[1][0])
    assert np.array_equal(batches[0][0], batches[inputs.POOL][0])  # the pool repeats


def test_host_prep_decodes_crops_flips_and_normalises_images():
    ((x, y),) = _take("host-prep", "cnn", "block_1-filter_8-image_32-output_10-bs_4-residual", 1)
    assert x.shape == (4, 32, 32, 3) and x.dtype == np.float32 and y.shape == (4,)
    assert -2.0 <= x.min() and x.max() <= 2.0  # (pixel / 255 - 0.5) / 0.25


def test_host_prep_pads_token_sequences_of_random_length():
    ((x, y),) = _take("host-prep", "rnn", "layer_1-maxlength_12-vocab_100-embedding_8-bs_16-lstm", 1)
    assert x.shape == (16, 12) and x.dtype == np.int32 and y.shape == (16, 12)
    lengths = (x != 0).sum(axis=1)  # tokens are drawn from [0, vocab): a few zeros inside are possible
    assert lengths.min() < 12  # some sequences were shorter and padded


def test_host_prep_scales_stored_bytes_to_features():
    ((x, _),) = _take("host-prep", "fc", FC, 1)
    assert x.shape == (8, 32) and -0.5 <= x.min() and x.max() <= 0.5


def test_the_input_mode_is_part_of_the_run_identity():
    row = {"family": "fc", "label": FC, "dtype": "float32", "xla": True, "platform": "cpu"}
    assert run_key({**row, "input_mode": "device"}) == run_key(row) != run_key({**row, "input_mode": "host"})


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"input": "disk"}, "input: 'disk' is not valid; allowed: device, host, host-prep"),
        ({"input": "host", "framework": "jax"}, "allowed: device with --framework jax"),
    ],
)
def test_bad_input_settings_are_one_clear_error(settings, message):
    with pytest.raises(ConfigError, match=message):
        RunSettings(**settings)


def test_host_prep_refuses_a_family_with_several_inputs():
    config = parse_label("transformer", "layer_1-width_64-vocab_100-length_8-bs_4")
    with pytest.raises(ConfigError, match="device or host for transformer"):
        inputs.check_input_mode("host-prep", get("transformer"), config)


@pytest.mark.slow
def test_a_host_prep_sweep_stores_its_mode_and_compare_gives_the_infeed_table(tmp_path):
    store = tmp_path / "r.sqlite"
    grid = ["--set", "nodes=16", "--set", "batch=8,16", "--set", "layers=1", "--set", "input=32", "--set", "output=10"]

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "paradnn.cli", *args], capture_output=True, text=True, timeout=600)

    for mode in ("device", "host-prep"):
        result = cli("sweep", "fc", "--preset", "smoke", *grid, "--input", mode, "--max-seconds", "0.2", "--store", str(store))
        assert result.returncode == 0, result.stderr[-3000:]
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT input_mode, COUNT(*), MIN(infeed_share IS NOT NULL) FROM results GROUP BY 1").fetchall()
        auto = db.execute("SELECT DISTINCT xla_auto FROM results").fetchall()
    assert sorted(rows) == [("device", 2, 0), ("host-prep", 2, 1)]
    assert auto == [(1,)]  # --xla auto chose the setting, and the rows say so
    table = cli("compare", "--by", "input", "--baseline", "host-prep", "--target", "device", "--store", str(store))
    assert table.returncode == 0 and re.search(r"^n\s+2$", table.stdout, re.MULTILINE)
    assert "infeed_share" in table.stdout.splitlines()[0]  # the infeed table, configuration by configuration
    bad = cli("sweep", "transformer", "--input", "host-prep", "--store", str(tmp_path / "t.sqlite"))
    assert bad.returncode == 2 and "host-prep prepares one" in bad.stderr and not (tmp_path / "t.sqlite").exists()
