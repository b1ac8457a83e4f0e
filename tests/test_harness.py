"""The measurement protocol, with a fake device (exact) and a real one (behaviour)."""

from __future__ import annotations

import math

import pytest

from paradnn.engine.protocol import RunSettings, Stats, run_protocol
from paradnn.engine.record import measure
from paradnn.families import parse_label


class FakeDevice:
    """``run(k)`` that takes ``step`` seconds per step on a virtual clock."""

    def __init__(self, monkeypatch, step: float, compile_s: float = 2.0, losses=None):
        self.now = 0.0
        self.step = step
        self.compile_s = compile_s
        self.calls: list[int] = []
        self.losses = losses
        monkeypatch.setattr("paradnn.engine.protocol.time.perf_counter", lambda: self.now)

    def __call__(self, k: int) -> float:
        self.now += (self.compile_s if not self.calls else 0.0) + k * self.step
        self.calls.append(k)
        return self.losses(len(self.calls)) if self.losses else 1.0


def test_protocol_calibrates_steps_per_call_and_separates_compile_time(monkeypatch):
    device = FakeDevice(monkeypatch, step=0.004)
    m = run_protocol(device, RunSettings(min_call_seconds=0.1, max_seconds=5))
    assert m.state == "ok"
    assert m.compile_time_s == pytest.approx(2.004)
    assert m.steps_per_call == 25  # ceil(0.1 / 0.004)
    assert m.samples and all(s == pytest.approx(0.004) for s in m.samples)
    # Identical samples pin the median at once: the minimum number is taken, no more.
    assert len(m.samples) == RunSettings().min_samples
    assert m.stats.median == pytest.approx(0.004) and m.stats.cv == pytest.approx(0, abs=1e-9)
    assert not m.unstable


def test_protocol_caps_steps_per_call(monkeypatch):
    device = FakeDevice(monkeypatch, step=1e-7)
    m = run_protocol(device, RunSettings(max_steps_per_call=1000))
    assert m.steps_per_call == 1000


def test_warm_up_ends_when_a_call_agrees_with_the_one_before(monkeypatch):
    steady = FakeDevice(monkeypatch, step=0.004)
    assert run_protocol(steady, RunSettings()).warmup_calls == 1  # agrees with the last calibration call

    slow_start = FakeDevice(monkeypatch, step=0.004)
    base = slow_start.__call__

    def warming(k):  # calls 2-5 take 3x, 2x, 1.5x, 1.2x as long; from call 6 on, steady
        factor = {2: 3.0, 3: 2.0, 4: 1.5, 5: 1.2}.get(len(slow_start.calls) + 1, 1.0)
        loss = base(k)
        slow_start.now += (factor - 1) * k * slow_start.step
        return loss

    m = run_protocol(warming, RunSettings())
    # Calls: compile, calibration x2 (3x, 2x), warm-up 1.5x, 1.2x, 1x, 1x (the first pair within 5%).
    assert m.warmup_calls == 4
    assert all(s == pytest.approx(0.004) for s in m.samples)


@pytest.mark.parametrize("loss", [1.0, math.nan], ids=["ok", "error"])
def test_garbage_collection_is_paused_while_timing_and_restored(monkeypatch, loss):
    import gc

    device = FakeDevice(monkeypatch, step=0.004, losses=lambda call: 1.0 if call < 6 else loss)
    enabled: list[bool] = []

    def run(k):
        enabled.append(gc.isenabled())
        return device(k)

    assert gc.isenabled()
    m = run_protocol(run, RunSettings())
    assert m.state == ("ok" if loss == 1.0 else "error")
    assert enabled and not any(enabled)  # collected once before the first call, then paused to the last sample
    assert "gc_s" in m.phases
    assert gc.isenabled()


def test_tensorflow_s_import_is_frozen_out_of_the_collector():
    """The collection before each measurement walks only what was made since the import, not TensorFlow's
    hundreds of thousands of long-lived objects."""
    import gc

    from paradnn.tfimport import tf

    assert tf.__version__ and gc.get_freeze_count() > 100_000


UNUSED_AFTER_TF = """
import sys
import paradnn.tfimport
print("loaded_by_import", sorted({"sklearn", "matplotlib", "jax"} & set(sys.modules)))
import jax.numpy
import matplotlib.pyplot
from sklearn.linear_model import LinearRegression
print("importable_after", float(jax.numpy.ones(2).sum()), callable(matplotlib.pyplot.figure), callable(LinearRegression().fit))
"""


def test_tensorflow_s_import_skips_what_paradnn_does_not_use_yet_leaves_it_importable():
    """scikit-learn, Matplotlib and JAX are not loaded by every worker; prediction, figures and JAX still import."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", UNUSED_AFTER_TF], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "loaded_by_import []" in done.stdout and "importable_after 2.0 True True" in done.stdout


def test_non_finite_loss_is_reported_not_hidden(monkeypatch):
    device = FakeDevice(monkeypatch, step=0.01, losses=lambda call: 1.0 if call < 6 else math.nan)
    m = run_protocol(device, RunSettings())
    assert m.state == "error"
    assert "non-finite" in m.error and "nan" in m.error


def test_noisy_samples_stop_at_the_time_budget(monkeypatch):
    device = FakeDevice(monkeypatch, step=0.01)
    jitter = iter([1.0, 1.5] * 10_000)
    base = device.__call__

    def noisy(k):
        loss = base(k)
        device.now += 0.1 * (next(jitter) - 1)
        return loss

    m = run_protocol(noisy, RunSettings(max_seconds=3, target_precision=0.001))
    assert m.state == "ok"
    assert RunSettings().min_samples <= len(m.samples) < 40
    assert m.unstable  # CV of a 1 : 1.5 mixture is far above 10%


def test_stats_of_known_samples():
    s = Stats.of([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median == 3.0 and s.min == 1.0 and s.n == 5
    assert s.mad == 1.0
    assert s.mean == 22.0


CASES = [
    ("fc", "layer_2-node_32-input_64-output_10-bs_16"),
    ("cnn", "block_1-filter_4-image_32-output_10-bs_2-residual"),
    ("rnn", "layer_1-maxlength_4-vocab_50-embedding_16-bs_4-gru"),
]


@pytest.mark.parametrize("family,label", CASES)
@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("xla", [True, False], ids=["xla", "no-xla"])
def test_measure_every_family_dtype_and_xla(family, label, dtype, xla):
    settings = RunSettings(dtype=dtype, xla=xla, max_seconds=0.3, min_call_seconds=0.02)
    m = measure(parse_label(family, label), settings)
    assert m.state == "ok", m.error
    assert m.compile_time_s > 0 and m.steps_per_call >= 1
    assert len(m.samples) >= settings.min_samples
    assert math.isfinite(m.final_loss)
    assert m.graph is not None and m.graph.flops > 0


def test_mixed_float16_uses_loss_scaling():
    from paradnn.engine.training import Trainer, keras

    trainer = Trainer(parse_label("fc", "layer_1-node_8-input_8-output_4-bs_4"), "mixed_float16", xla=False)
    assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer)
    assert math.isfinite(trainer.run(3))


def test_loss_stays_finite_over_many_steps():
    from paradnn.engine.training import Trainer

    trainer = Trainer(parse_label("fc", "layer_8-node_64-input_200-output_100-bs_32"), xla=True)
    assert math.isfinite(trainer.run(500))


def test_embedding_gradients_reach_the_optimizer_dense():
    """Sparse (IndexedSlices) gradients have data-dependent shapes: XLA would recompile every call."""
    from paradnn.engine.training import Trainer

    trainer = Trainer(parse_label("rnn", "layer_1-maxlength_4-vocab_50-embedding_8-bs_2-lstm"), xla=False)
    seen: list[str] = []
    apply = trainer.optimizer.apply

    def spy(grads, variables):
        seen.extend(type(g).__name__ for g in grads)
        return apply(grads, variables)

    trainer.optimizer.apply = spy
    trainer.run(1)
    assert seen and "IndexedSlices" not in seen


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16", "bfloat16", "mixed_float16"])
@pytest.mark.parametrize("xla", [True, False], ids=["xla", "no-xla"])
def test_fused_rmsprop_matches_keras_rmsprop(policy, xla):
    """The fused kernel does Keras's arithmetic: same weights after a few steps from one seed."""
    import numpy as np

    from paradnn.engine import training
    from paradnn.engine.training import RMSPROP, Trainer, keras

    config = parse_label("fc", "layer_2-node_16-input_20-output_5-bs_8")
    fused = Trainer(config, policy, xla=xla)
    assert "ResourceApplyRMSProp" in _op_types(fused)
    stock = Trainer(config, policy, xla=xla)
    inner = keras.optimizers.RMSprop(**RMSPROP)
    stock.optimizer = keras.optimizers.LossScaleOptimizer(inner) if policy == "mixed_float16" else inner
    stock.optimizer.build(stock.model.trainable_variables)
    stock._run = training.tf.function(stock._steps, jit_compile=xla)
    fused.run(3)
    stock.run(3)
    tolerance = 1e-2 if policy == "bfloat16" else 1e-5  # bfloat16 weights keep 8 bits of mantissa
    for a, b in zip(fused.model.get_weights(), stock.model.get_weights()):
        np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(b, np.float32), rtol=tolerance, atol=tolerance)
    assert any(np.any(a != b) for a, b in zip(fused.model.get_weights(), Trainer(config, policy).model.get_weights()))


def test_flops_graph_counts_the_fused_optimizer_update():
    from paradnn.counting import count_params
    from paradnn.engine.graphcount import count_graph_flops
    from paradnn.engine.training import RMSPROP_FLOPS_PER_WEIGHT, Trainer

    config = parse_label("fc", "layer_2-node_16-input_20-output_5-bs_8")
    graph = count_graph_flops(Trainer(config, xla=False).trace().graph)
    assert graph.by_op_type["ResourceApplyRMSProp"] == RMSPROP_FLOPS_PER_WEIGHT * count_params(config)


def _op_types(trainer) -> set[str]:
    """Op types of the traced step, including the bodies of its conditionals (loss scaling)."""
    from paradnn.engine.training import tf

    graph_def = tf.function(trainer.step).get_concrete_function(*trainer.specs).graph.as_graph_def()
    nodes = [*graph_def.node, *(n for f in graph_def.library.function for n in f.node_def)]
    return {n.op for n in nodes}


def test_a_later_round_times_the_kept_step_and_keeps_its_first_figures():
    from paradnn.engine import training
    from paradnn.tfimport import keras

    training.COMPILED.clear()
    config = parse_label("fc", "layer_1-node_16-input_32-output_10-bs_8")
    other = parse_label("fc", "layer_1-node_32-input_32-output_10-bs_8")
    settings = RunSettings(xla=True, max_seconds=0.2)
    first = measure(config, settings)
    keras.utils.clear_session(free_memory=False)  # as a sweep's worker does between configurations
    measure(other, settings)
    again = measure(config, settings)
    assert first.state == again.state == "ok" and math.isfinite(again.final_loss)
    assert not first.reused_step and again.reused_step and again.as_dict()["extra"]["reused_step"]
    assert again.compile_time_s == first.compile_time_s and again.graph == first.graph
    assert again.stats.n >= RunSettings().min_samples
    host = measure(config, RunSettings(xla=True, max_seconds=0.2, input="host"))
    assert not host.reused_step  # a host pipeline is built anew each time
    training.COMPILED.clear()
