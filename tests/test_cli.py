"""The command-line contract: names, JSON keys, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from paradnn.cli import main

DESCRIBE_KEYS = {"family", "label", "batch", "params", "flops_model", "flops_graph", "uncounted_ops", "bytes_estimate"}
MEASURE_KEYS = DESCRIBE_KEYS | {
    "state",
    "dtype",
    "xla",
    "steps_per_call",
    "compile_time_s",
    "step_time_s",
    "step_time_mad_s",
    "step_time_cv",
    "n_samples",
    "examples_per_sec",
    "flops_per_sec",
    "peak_flops",
    "peak_source",
    "utilization",
    "platform",
}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "paradnn.cli", *args], capture_output=True, text=True, env=os.environ.copy())


@pytest.mark.parametrize(
    "args,needle",
    [
        (["describe", "mlp", "layer_1"], "FAMILY"),
        (["describe", "fc", "layer_1-node_2"], "label"),
        (["describe", "fc", "layer_0-node_2-input_3-output_4-bs_5"], "layers"),
        (["describe", "fc", "layer_1-node_2-input_3-output_4-bs_5", "--dtype", "float8"], "dtype"),
        (["measure", "fc", "layer_1-node_2-input_3-output_4-bs_5", "--dtype", "int8"], "dtype"),
        (["measure", "cnn", "block_1-filter_2-image_8-output_4-bs_5-dense"], "block"),
        (["measure", "fc", "layer_1-node_2-input_3-output_4-bs_5", "--max-seconds", "0"], "max-seconds"),
        (["measure", "fc", "layer_1-node_2-input_3-output_4-bs_5", "--platform", "fpga"], "platform"),
        (["measure", "fc", "layer_1-node_2-input_3-output_4-bs_5", "--max-seconds", "soon"], "max-seconds"),
        (["measure", "fc"], "LABEL"),
        (["measure", "fc", "layer_1-node_2-input_3-output_4-bs_5", "--platform", "tpu:0"], "no TPU path exists yet"),
        (["sweep", "fc", "--platform", "tpu"], "no TPU path exists yet"),
        (["sweep", "fc", "--input", "tape"], "error: --input: 'tape' is not valid; allowed: device, host, host-prep"),
        (["sweep", "fc", "--devices", "0"], "error: --devices: 0 is not valid; allowed: a whole number from 1 to 1024"),
        (["sweep", "fc", "--max-seconds", "0"], "error: --max-seconds: 0.0 is not valid; allowed: a positive number"),
        (["sweep", "fc", "--set", "layers=１"], "error: --set layers: '１' is not valid; allowed: a positive integer"),
        (["sweep", "fc", "--rounds", "0"], "--rounds (rounds): 0 is not valid; allowed: a whole number from 1 to 5"),
        (["sweep", "fc", "--rounds", "2", "--adaptive", "--budget", "3"], "--rounds: 2 is not valid; allowed: 1 with"),
        (["sweep", "fc", "--workers", "5"], "--workers (workers): 5 is not valid; allowed: a whole number from 1 to 4"),
        (["sweep", "fc", "--workers", "2", "--stack", "current"], "--workers: 2 is not valid; allowed: 1 with --stack"),
        (["compare", "--by", "input", "--baseline", "device", "--target", "tape"], "--target: 'tape'"),
        (["compare", "--baseline", "cpu", "--target", "gpu:0", "--free", "colour"], "--free: 'colour' is not valid"),
        (["compare", "--baseline", "cpu", "--target", "gpu:0", "--hold", "dtype,dtype"], "--hold: 'dtype,dtype' is not valid"),
        (["compare", "--baseline", "cpu", "--target", "gpu:0", "--free", ","], "--free: '' is not valid"),
        (["sweep", "fc", "--set", "layers=1,1"], "--set: 'layers=1,1' is not valid; allowed: each value of layers once"),
        (["sweep", "fc", "--stack", "current", "--stack", "current"], "--stack: 'current' is not valid; allowed: each software"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert needle in lines[0] and lines[0].startswith("paradnn: error:")


def test_describe_json():
    result = CliRunner().invoke(main, ["describe", "fc", "layer_2-node_16-input_20-output_10-bs_4", "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert DESCRIBE_KEYS <= set(record)
    assert record["params"] == 20 * 16 + 16 * 16 + 16 * 10 + 2 * 16 + 10
    assert record["flops_model"] == 6 * record["params"] * 4


@pytest.mark.slow
def test_measure_json_in_a_fresh_process():
    result = run_cli("measure", "fc", "layer_2-node_32-input_64-output_10-bs_16", "--max-seconds", "0.5", "--json")
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert MEASURE_KEYS <= set(record)
    assert record["state"] == "ok" and record["platform"] == "cpu"
    assert record["examples_per_sec"] == pytest.approx(16 / record["step_time_s"])
    assert record["utilization"] == pytest.approx(record["flops_per_sec"] / record["peak_flops"])
    assert record["peak_source"] == "measured"
    assert "Could not find cuda" not in result.stderr and "absl" not in result.stderr


@pytest.mark.slow
def test_platform_json_lists_ceilings():
    result = run_cli("platform", "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["kind"] == "cpu" and info["software"]["tensorflow"]
    assert info["ceilings"]["matmul_flops"]["float32"]["xla"] > 0
    assert set(info["ceilings"]["copy_bandwidth"]) == {"xla", "no_xla"}
    per_cycle = info["theoretical"]["flops_per_cycle"]  # cores x FMA units x lanes x 2, from /proc/cpuinfo
    assert per_cycle["float32"] in {info["cores"] * f for f in (16, 32, 64)}


def test_describe_is_analytic_for_any_batch():
    """No batch is allocated: its inputs alone would be 32 GB, more than these machines have."""
    result = CliRunner().invoke(main, ["describe", "fc", "layer_1-node_8-input_8-output_4-bs_1000000000", "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert record["flops_model"] == 6 * (8 * 8 + 8 + 8 * 4 + 4) * 10**9 and record["flops_graph"] > 0
    assert record["family_version"] == 1


def test_describe_skips_the_graph_count_of_a_model_too_large_to_build():
    result = CliRunner().invoke(main, ["describe", "fc", "layer_128-node_8192-input_8000-output_1000-bs_64", "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert record["flops_graph"] is None and "not traced" in record["flops_graph_note"]
    assert record["params"] == 8000 * 8192 + 127 * 8192**2 + 8192 * 1000 + 128 * 8192 + 1000


def test_measure_refuses_a_configuration_over_the_memory_budget():
    result = CliRunner().invoke(main, ["measure", "fc", "layer_1-node_8-input_8-output_4-bs_1000000000", "--memory-budget", "1"])
    assert result.exit_code == 1
    assert "state" in result.output and "skipped" in result.output and "budget 1 GB" in result.output


def test_bare_paradnn_prints_help_and_succeeds():
    result = CliRunner().invoke(main, [])
    assert result.exit_code == 0 and "Usage: paradnn" in result.output and "error" not in result.output


def test_every_command_shows_examples_and_label_formats():
    for command in ("platform", "describe", "measure", "sweep", "results", "import-legacy", "compare", "report"):
        text = CliRunner().invoke(main, [command, "--help"]).output
        assert "Examples:" in text and f"paradnn {command}" in text, command
    assert "image_<image>-alpha_<alpha>-bs_<batch>" in CliRunner().invoke(main, ["describe", "--help"]).output


def test_csv_export_writes_json_columns_as_json(tmp_path):
    import csv
    import io

    from paradnn.store import Store

    store = tmp_path / "r.sqlite"
    with Store(store) as s:
        s.add_results(
            [
                {
                    "family": "fc",
                    "label": "x",
                    "platform": "p",
                    "state": "ok",
                    "extra": {"phases": {"a": 1.5}},
                    "samples_s": [0.1, 0.2],
                }
            ]
        )
    result = CliRunner().invoke(main, ["results", "--store", str(store), "--format", "csv"])
    row = next(csv.DictReader(io.StringIO(result.output)))
    assert json.loads(row["extra"]) == {"phases": {"a": 1.5}} and json.loads(row["samples_s"]) == [0.1, 0.2]


@pytest.mark.slow
@pytest.mark.slow
def test_paradnn_lab_serves_the_notebooks(tmp_path):
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "JUPYTER_TOKEN": "paradnn-test",
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "paradnn.cli", "lab", "--port", str(port), "--no-browser"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        listing = None
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token=paradnn-test", timeout=2) as r:
                    listing = json.loads(r.read())
                break
            except OSError:
                time.sleep(0.5)
        assert listing is not None, "JupyterLab did not answer within a minute"
        assert {"architecture.ipynb", "workloads.ipynb"} <= {item["name"] for item in listing["content"]}
    finally:
        proc.terminate()
        proc.wait(30)
