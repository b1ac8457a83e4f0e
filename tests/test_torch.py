"""PyTorch as a framework: every family trains under Keras's torch backend, its step does
TensorFlow's arithmetic, and its rows are their own identity.

Keras picks one backend per process, so the PyTorch side runs in one fresh interpreter
(``TORCH_SCRIPT``) whose results this module's tests read.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from importlib import metadata

import numpy as np
import pytest

from paradnn import counting, families
from paradnn.config import ConfigError
from paradnn.engine import frameworks
from paradnn.engine.protocol import RunSettings
from paradnn.families import parse_label
from paradnn.identity import run_key
from paradnn.space import expand

FC = "layer_2-node_64-input_100-output_10-bs_32"
STEPS = 3
GRADIENTS = [0.5, 1.0, 2.0, -1.0, 3.0]  # large enough that epsilon's place in RMSProp shows (it is 1.0)

# Under the torch backend: the conformance suite for every family, FC trained STEPS steps from the
# weights in W0 (saved by the test, TensorFlow's initial weights), and Keras's RMSProp on GRADIENTS.
TORCH_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["KERAS_BACKEND"] = "torch"
    import numpy as np
    from paradnn import check_family, families
    from paradnn.engine.torchstep import TorchTrainer
    from paradnn.engine.training import RMSPROP
    from paradnn.families import parse_label
    from paradnn.tfimport import keras

    fc, steps, gradients, w0_path, out_path = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
    conformance = {}
    for family in families.all_families():
        try:
            check_family(family, framework="torch")
            conformance[family.name] = "passes"
        except AssertionError as exc:
            conformance[family.name] = str(exc)
    trainer = TorchTrainer(parse_label("fc", fc))
    w0 = np.load(w0_path)
    trainer.model.set_weights([w0[f"arr_{i}"] for i in range(len(w0))])
    trainer.run(steps)
    weight = keras.Variable(np.ones(len(gradients), np.float32))
    optimizer = keras.optimizers.RMSprop(**RMSPROP)
    optimizer.build([weight])
    for _ in range(steps):
        optimizer.apply([keras.ops.convert_to_tensor(np.asarray(gradients, np.float32))], [weight])
    np.savez(out_path, *[np.asarray(w) for w in trainer.model.get_weights()], rmsprop=keras.ops.convert_to_numpy(weight))
    # A worker compiles many trainers: past dynamo's limits a step would run eagerly (here: an error).
    import torch
    from torch._dynamo.utils import counters
    torch._dynamo.config.accumulated_recompile_limit = 2
    compiled = [TorchTrainer(parse_label("fc", f"layer_1-node_{n}-input_32-output_10-bs_8"), compiled=True)
                for n in (8, 16, 24)]
    for t in compiled:
        t.run(2)
    graphs = counters["stats"]["unique_graphs"]
    for t in compiled:  # a later round of each: nothing compiles again
        t.run(2)
    print(json.dumps({"conformance": conformance, "flops": trainer.flops(), "graphs": graphs,
                      "recompiled": counters["stats"]["unique_graphs"] - graphs}))
    """
)


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory) -> dict:
    """The torch process's results, with TensorFlow's for the same weights, data and gradients."""
    from paradnn.engine.training import Trainer

    folder = tmp_path_factory.mktemp("torch")
    for family in families.all_families():  # the analytic counts, walked here (a torch process walks in a TF one)
        counting.count_params(min(expand(family.name, "smoke"), key=counting.flops_model))
    trainer = Trainer(parse_label("fc", FC), xla=False)
    w0 = trainer.model.get_weights()
    np.savez(folder / "w0.npz", *w0)
    trainer.run(STEPS)
    args = [FC, str(STEPS), json.dumps(GRADIENTS), str(folder / "w0.npz"), str(folder / "out.npz")]
    result = subprocess.run([sys.executable, "-c", TORCH_SCRIPT, *args], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = np.load(folder / "out.npz")
    return {
        **json.loads(result.stdout.splitlines()[-1]),
        "w0": w0,
        "tensorflow": trainer.model.get_weights(),
        "torch": [out[f"arr_{i}"] for i in range(len(w0))],
        "rmsprop": out["rmsprop"],
    }


def test_every_family_conforms_under_torch(torch_run):
    assert torch_run["conformance"] == dict.fromkeys(families.names(), "passes")


def test_the_torch_step_trains_as_tensorflow_does(torch_run):
    """Same weights, same batch, three steps: each weight moves as TensorFlow's fused step moves it
    (to float32 rounding of the difference of two nearby weights)."""
    for before, tf_after, torch_after in zip(torch_run["w0"], torch_run["tensorflow"], torch_run["torch"]):
        tf_update, torch_update = tf_after - before, torch_after - before
        assert np.abs(tf_update).max() > 0
        np.testing.assert_allclose(torch_update, tf_update, rtol=0, atol=2e-3 * np.abs(tf_update).max())


def _tensorflow_rmsprop(gradients: list[float], steps: int) -> np.ndarray:
    """TensorFlow's fused RMSProp kernel (the TensorFlow step's optimizer) on one weight vector."""
    from paradnn.engine.training import RMSPROP, FusedRMSprop, keras

    weight = keras.Variable(np.ones(len(gradients), np.float32))
    optimizer = FusedRMSprop(**RMSPROP)
    optimizer.build([weight])
    for _ in range(steps):
        optimizer.apply([np.asarray(gradients, np.float32)], [weight])
    return weight.numpy()


def _torch_optim_rmsprop(gradients: list[float], steps: int) -> np.ndarray:
    """``torch.optim.RMSprop``'s arithmetic with the same hyperparameters (epsilon outside the root,
    the learning rate after the momentum), written out: what the step must not do."""
    from paradnn.engine.training import RMSPROP

    lr, rho, momentum, eps = RMSPROP["learning_rate"], RMSPROP["rho"], RMSPROP["momentum"], RMSPROP["epsilon"]
    g, w = np.asarray(gradients, np.float64), np.ones(len(gradients))
    square, buffer = np.zeros_like(w), np.zeros_like(w)
    for _ in range(steps):
        square = rho * square + (1 - rho) * g**2
        buffer = momentum * buffer + g / (np.sqrt(square) + eps)
        w = w - lr * buffer
    return w


def test_torch_uses_tensorflows_rmsprop_arithmetic(torch_run):
    expected = _tensorflow_rmsprop(GRADIENTS, STEPS)
    np.testing.assert_allclose(torch_run["rmsprop"], expected, rtol=1e-6)
    moved = np.abs(expected - 1.0)
    assert np.all(np.abs(_torch_optim_rmsprop(GRADIENTS, STEPS) - expected) > 0.05 * moved)  # the check can tell them apart


def test_compiled_trainers_keep_their_own_graphs(torch_run):
    """Three compiled trainers under a limit of two compiled entries per code object: each compiles
    its own copy of the step (forward and optimizer graphs), and running them again compiles nothing."""
    assert torch_run["graphs"] >= 3 and torch_run["recompiled"] == 0


def test_the_torch_flop_count_covers_matmuls_and_the_optimizer(torch_run):
    """PyTorch counts the products it runs: forward and both gradients of each layer but the first
    input's (never computed), plus RMSProp's 11 FLOPs per weight."""
    from paradnn.engine.training import RMSPROP_FLOPS_PER_WEIGHT

    config = parse_label("fc", FC)
    dims = [config.input] + [config.nodes] * config.layers + [config.output]
    products = sum(a * b for a, b in zip(dims, dims[1:]))
    weights = products + sum(dims[1:])
    matmuls = 2 * config.batch * (3 * products - dims[0] * dims[1])
    assert torch_run["flops"] == matmuls + RMSPROP_FLOPS_PER_WEIGHT * weights


def paradnn_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "paradnn.cli", *args], capture_output=True, text=True, timeout=600)


def test_torch_sweep_stores_its_framework_and_resumes(tmp_path):
    store = tmp_path / "s.sqlite"
    grid = ["--set", "nodes=16", "--set", "batch=8,16", "--set", "layers=1", "--set", "input=32", "--set", "output=10"]
    args = ["sweep", "fc", "--preset", "smoke", *grid, "--framework", "torch", "--max-seconds", "0.2", "--store", str(store)]
    first = paradnn_cli(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    with sqlite3.connect(store) as db:
        db.row_factory = sqlite3.Row
        rows = [dict(r) for r in db.execute("SELECT * FROM results")]
    assert len(rows) == 2
    version = metadata.version("torch")
    seen = {(r["framework"], r["sw_torch"], r["sw_jax"], r["xla"], r["state"]) for r in rows}
    assert seen == {("torch", version, None, 0, "ok")}
    assert all(r["flops_graph"] > 0 and r["step_time_s"] > 0 for r in rows)
    as_tensorflow = {**rows[0], "framework": "tensorflow", "sw_torch": None}
    assert run_key(rows[0]) == rows[0]["run_key"] != run_key(as_tensorflow)
    again = paradnn_cli(*args)
    assert again.returncode == 0 and "2 already in the store" in again.stderr
    one = [a if a != "batch=8,16" else "batch=8" for a in args]
    compiled = paradnn_cli(*one, "--xla", "--rounds", "2")  # torch.compile; round 2 times the step compiled in round 1
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT extra, compile_time_s FROM results WHERE xla = 1 AND state = 'ok'").fetchall()
    assert sorted((json.loads(e)["round"], bool(json.loads(e).get("reused_step"))) for e, _ in rows) == [(1, False), (2, True)]
    assert all(c > 1.0 for _, c in rows)  # torch.compile's first call, tracing and code generation, stored with both rounds


def test_measure_runs_a_family_under_torch():
    result = paradnn_cli(
        "measure", "fc", "layer_1-node_16-input_32-output_10-bs_8", "--framework", "torch", "--max-seconds", "0.2"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    fields = dict(line.split(None, 1) for line in result.stdout.splitlines() if len(line.split(None, 1)) == 2)
    assert (fields["framework"], fields["xla"], fields["state"]) == ("torch", "False", "ok")  # --xla auto: eager


def test_torch_settings_are_checked_before_anything_runs():
    assert RunSettings(framework="torch", xla=None).xla is False  # --xla auto: eager, PyTorch's default
    with pytest.raises(ConfigError, match="allowed: float32, bfloat16, mixed_bfloat16 with --framework torch"):
        RunSettings(framework="torch", dtype="mixed_float16")
    with pytest.raises(ConfigError, match=r"device with --framework torch \(host pipelines are tf.data\)"):
        RunSettings(framework="torch", input="host")
    frameworks.check_target("torch", type("T", (), {"threads": 1, "id": "cpu[threads=1]"})())  # torch honours threads


def test_a_missing_torch_names_the_extra(monkeypatch):
    monkeypatch.setattr(frameworks, "installed", lambda name: name != "torch")
    with pytest.raises(ConfigError, match=r"the torch package is not installed: pip install 'paradnn\[torch\]'"):
        frameworks.check("torch")
