"""The framework run setting: JAX through Keras 3 trains the same models, and is its own identity."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

from paradnn.config import ConfigError
from paradnn.counting import count_params, flops_model
from paradnn.engine import frameworks
from paradnn.engine.protocol import RunSettings
from paradnn.families import parse_label
from paradnn.identity import run_key
from paradnn.sweeps.plan import SweepOptions, run_key_of

FC = "layer_2-node_64-input_100-output_10-bs_32"
CNN = "block_1-filter_8-image_32-output_10-bs_8-residual"

# Runs in a fresh interpreter whose Keras uses JAX; prints one JSON object per configuration.
JAX_SCRIPT = (
    textwrap.dedent(
        """
    import json, os
    os.environ["KERAS_BACKEND"] = "jax"
    from paradnn.families import parse_label
    from paradnn.engine.jaxstep import JaxTrainer
    for family, label in [("fc", "FC"), ("cnn", "CNN")]:
        trainer = JaxTrainer(parse_label(family, label))
        first = trainer.run(1)
        later = trainer.run(30)
        params = sum(int(v.numpy().size) for v in trainer.model.trainable_variables)
        print(json.dumps({"family": family, "params": params, "flops": trainer.flops(), "first_loss": first,
                          "later_loss": later}))
    """
    )
    .replace('"FC"', repr(FC))
    .replace('"CNN"', repr(CNN))
)


@pytest.fixture(scope="module")
def jax_runs() -> dict[str, dict]:
    result = subprocess.run([sys.executable, "-c", JAX_SCRIPT], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {r["family"]: r for r in runs}


@pytest.mark.parametrize("family,label", [("fc", FC), ("cnn", CNN)])
def test_jax_builds_the_same_model_and_trains_it(jax_runs, family, label):
    run = jax_runs[family]
    assert run["params"] == count_params(parse_label(family, label))
    assert math.isfinite(run["first_loss"]) and math.isfinite(run["later_loss"])
    assert run["later_loss"] < run["first_loss"]  # 30 steps on one batch of random labels: it learns them
    assert run["flops"] > 0


def test_jax_counts_the_fc_step_as_tensorflow_does(jax_runs):
    """XLA's cost analysis of the JAX step and TensorFlow's graph count of the TF step agree for FC."""
    from paradnn.engine.record import describe_config

    tf_graph = describe_config(parse_label("fc", FC))["flops_graph"]
    assert jax_runs["fc"]["flops"] == pytest.approx(tf_graph, rel=0.01)
    assert flops_model(parse_label("fc", FC)) > 0  # the analytic count, identical for both by construction


def paradnn_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "paradnn.cli", *args], capture_output=True, text=True, timeout=600)


def test_jax_sweep_stores_its_framework_and_resumes(tmp_path):
    store = tmp_path / "s.sqlite"
    grid = ["--set", "nodes=16", "--set", "batch=8,16", "--set", "layers=1", "--set", "input=32", "--set", "output=10"]
    args = ["sweep", "fc", "--preset", "smoke", *grid, "--framework", "jax", "--max-seconds", "0.2", "--store", str(store)]
    first = paradnn_cli(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    rows = [dict(r) for r in _rows(store)]
    assert len(rows) == 2
    assert {(r["framework"], r["sw_jax"], r["xla"], r["state"]) for r in rows} == {("jax", metadata.version("jax"), 1, "ok")}
    assert all(r["flops_graph"] > 0 and r["step_time_s"] > 0 for r in rows)
    as_tensorflow = {**rows[0], "framework": "tensorflow", "sw_jax": None}
    assert run_key(rows[0]) == rows[0]["run_key"] != run_key(as_tensorflow)
    again = paradnn_cli(*args)
    assert again.returncode == 0 and "2 already in the store" in again.stderr


def _rows(store) -> list[sqlite3.Row]:
    with sqlite3.connect(store) as db:
        db.row_factory = sqlite3.Row
        return db.execute("SELECT * FROM results").fetchall()


def test_installing_jax_changes_no_tensorflow_identity():
    config = parse_label("fc", FC)
    software = {"tensorflow": "2", "keras": "3", "python": "3", "numpy": "2", "cuda": "", "cudnn": "", "paradnn": "0"}
    info = {"id": "cpu", "name": "cpu", "cores": 2, "host": "h", "software": software}
    with_jax = {**info, "software": {**info["software"], "jax": "0.10"}}
    tf_options, jax_options = SweepOptions(), SweepOptions(settings=RunSettings(framework="jax"))
    assert run_key_of(config, tf_options, info) == run_key_of(config, tf_options, with_jax)
    assert run_key_of(config, jax_options, with_jax) != run_key_of(config, tf_options, with_jax)


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"framework": "mxnet"}, "framework: 'mxnet' is not valid; allowed: tensorflow, jax, torch"),
        ({"framework": "jax", "xla": False}, "allowed: on (JAX always compiles with XLA)"),
        ({"framework": "jax", "dtype": "mixed_float16"}, "allowed: float32, bfloat16, mixed_bfloat16 with --framework jax"),
    ],
)
def test_bad_framework_settings_are_one_clear_error(settings, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RunSettings(**settings)


def test_jax_resolves_xla_auto_to_on():
    assert RunSettings(framework="jax", xla=None).xla is True


def test_a_framework_not_installed_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(frameworks, "installed", lambda name: name == "tensorflow")
    with pytest.raises(ConfigError, match=r"allowed: tensorflow \(the jax package is not installed: pip install jax\)"):
        frameworks.check("jax")


def test_a_family_without_jax_support_is_refused():
    with pytest.raises(ConfigError, match="framework: 'jax' is not valid; allowed: tensorflow, torch for family transformer"):
        frameworks.check_framework("transformer", "jax")


def test_jax_cannot_be_activated_where_keras_runs_tensorflow():
    from paradnn.tfimport import keras

    assert keras.backend.backend() == "tensorflow"
    with pytest.raises(ConfigError, match="Keras is already loaded with the tensorflow backend"):
        frameworks.activate("jax")
    assert os.environ["KERAS_BACKEND"] == "tensorflow"


@pytest.mark.parametrize(
    "args,message",
    [
        (["sweep", "transformer", "--framework", "jax"], "allowed: tensorflow, torch for family transformer"),
        (["measure", "fc", FC, "--framework", "jax", "--no-xla"], "JAX always compiles with XLA"),
        (["sweep", "fc", "--framework", "pytorch"], "framework: 'pytorch' is not valid"),
        (["sweep", "fc", "--framework", "jax", "--platform", "cpu[threads=1]"], "thread limits are TensorFlow's and PyTorch's"),
    ],
)
def test_cli_bad_framework_is_exit_2(tmp_path, args, message):
    result = paradnn_cli(*args, *(["--store", str(tmp_path / "s.sqlite")] if args[0] == "sweep" else []))
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "s.sqlite").exists()
