"""The measurement protocol, with a fake device (exact) and a real one (behaviour)."""

from __future__ import annotations

import math

import pytest

from paradnn.config import parse_label
from paradnn.harness import RunSettings, Stats, measure, run_protocol


class FakeDevice:
    """``run(k)`` that takes ``step`` seconds per step on a virtual clock."""

    def __init__(self, monkeypatch, step: float, compile_s: float = 2.0, losses=None):
        self.now = 0.0
        self.step = step
        self.compile_s = compile_s
        self.calls: list[int] = []
        self.losses = losses
        monkeypatch.setattr("paradnn.harness.time.perf_counter", lambda: self.now)

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
    from paradnn.training import Trainer, keras

    trainer = Trainer(parse_label("fc", "layer_1-node_8-input_8-output_4-bs_4"), "mixed_float16", xla=False)
    assert isinstance(trainer.optimizer, keras.optimizers.LossScaleOptimizer)
    assert math.isfinite(trainer.run(3))


def test_loss_stays_finite_over_many_steps():
    from paradnn.training import Trainer

    trainer = Trainer(parse_label("fc", "layer_8-node_64-input_200-output_100-bs_32"), xla=True)
    assert math.isfinite(trainer.run(500))


def test_embedding_gradients_reach_the_optimizer_dense():
    """Sparse (IndexedSlices) gradients have data-dependent shapes: XLA would recompile every call."""
    from paradnn.training import Trainer

    trainer = Trainer(parse_label("rnn", "layer_1-maxlength_4-vocab_50-embedding_8-bs_2-lstm"), xla=False)
    seen: list[str] = []
    apply = trainer.optimizer.apply

    def spy(grads, variables):
        seen.extend(type(g).__name__ for g in grads)
        return apply(grads, variables)

    trainer.optimizer.apply = spy
    trainer.run(1)
    assert seen and "IndexedSlices" not in seen
