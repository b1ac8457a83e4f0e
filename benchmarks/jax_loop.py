"""The harness's JAX loop against hand-written ``jax.jit`` loops, call by call.

    python benchmarks/jax_loop.py [--tiny]

Run by ``benchmarks/run.py --only jax`` (this process must start with Keras on JAX, so it
is a script of its own). All train the same FC model (same shapes, initial weights, data,
loss and RMSProp arithmetic) K steps per call in a ``jax.lax.fori_loop`` under ``jax.jit``:

* ``minimal``: the shortest correct loop over the same Keras model, loss and optimizer
  (``stateless_call`` / ``stateless_apply``), as ``run.py``'s TensorFlow minimal loop;
  the ratio is the harness's own cost [target >= 0.97];
* ``jax.numpy``: the model, softmax cross-entropy and RMSProp written in ``jax.numpy``
  alone; the ratio is what Keras costs on JAX (reported, no target).

Calls alternate and ratios of examples/s are taken within each round. Prints one JSON
list of rows in ``run.py``'s format.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["KERAS_BACKEND"] = "jax"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before jax: quiets XLA's start-up logging as paradnn does
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from run import framework_main, interleaved, ratio_rows  # noqa: E402

from paradnn.engine.jaxstep import JaxTrainer, measure  # noqa: E402
from paradnn.engine.protocol import RunSettings  # noqa: E402
from paradnn.engine.training import RMSPROP  # noqa: E402
from paradnn.families import parse_label  # noqa: E402

CASES = ["layer_4-node_2048-input_2000-output_1000-bs_512", "layer_4-node_64-input_2000-output_1000-bs_64"]
TINY = "layer_2-node_64-input_100-output_10-bs_32"


def minimal_loop(trainer: JaxTrainer, k: int):
    """The shortest correct loop over ``trainer``'s Keras model, loss and optimizer (no harness code)."""
    model, opt, loss_fn = trainer.model, trainer.optimizer, trainer.loss_fn
    x, y = trainer.data

    def loss_of(tv, ntv):
        logits, ntv = model.stateless_call(tv, ntv, x, training=True)
        return loss_fn(y, logits), ntv

    def step(_, carry):
        tv, ntv, ov, _ = carry
        (loss, ntv), grads = jax.value_and_grad(loss_of, has_aux=True)(tv, ntv)
        tv, ov = opt.stateless_apply(ov, grads, tv)
        return list(tv), list(ntv), list(ov), loss

    run = jax.jit(lambda carry: jax.lax.fori_loop(0, k, step, carry), donate_argnums=0)
    values = [
        [jnp.array(v.value) for v in vs] for vs in (model.trainable_variables, model.non_trainable_variables, opt.variables)
    ]
    state = {"carry": (*values, jnp.float32(0))}

    def call() -> float:
        state["carry"] = run(state["carry"])
        return float(state["carry"][3])

    return call


def hand_written(trainer: JaxTrainer, k: int):
    """A pure ``jax.numpy`` FC training loop starting from the harness model's weights and data."""
    lr, rho, mu, eps = (RMSPROP[n] for n in ("learning_rate", "rho", "momentum", "epsilon"))
    params = [jnp.array(v.value) for v in trainer.model.trainable_variables]  # kernel, bias, kernel, bias, ...
    x, y = trainer.data

    def loss_fn(params, x, y):
        h = x
        for i in range(0, len(params) - 2, 2):
            h = jax.nn.relu(h @ params[i] + params[i + 1])
        logits = h @ params[-2] + params[-1]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    def step(_, carry):
        params, ms, mom, _ = carry
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        ms = [rho * m + (1 - rho) * g * g for m, g in zip(ms, grads)]
        mom = [mu * m + lr * g / jnp.sqrt(s + eps) for m, g, s in zip(mom, grads, ms)]
        return [p - m for p, m in zip(params, mom)], ms, mom, loss

    @jax.jit
    def run(carry):
        return jax.lax.fori_loop(0, k, step, carry)

    zeros = [jnp.zeros_like(p) for p in params]
    state = {"carry": (params, zeros, list(zeros), jnp.float32(0))}

    def call() -> float:
        state["carry"] = run(state["carry"])
        return float(state["carry"][3])

    return call


def harness_call(trainer: JaxTrainer, k: int):
    return lambda: trainer.run(k)


def bench(tiny: bool) -> list[dict]:
    rows = []
    for label in [TINY] if tiny else CASES:
        config = parse_label("fc", label)
        m = measure(config, RunSettings(framework="jax", max_seconds=0.2), count_graph=False)
        assert m.state == "ok", m.error
        k = m.steps_per_call
        trainer = JaxTrainer(config)
        runs = {
            "harness": (harness_call(trainer, k), k),
            "minimal": (minimal_loop(trainer, k), k),
            "jax.numpy": (hand_written(trainer, k), k),
        }
        rounds = interleaved(runs, 0.5 if tiny else 8, 5 if tiny else 15)
        rows += ratio_rows(
            "jax",
            f"fc {label} float32",
            rounds,
            [
                ("harness", other, f"examples/s harness/{other} jax", target)
                for other, target in (("minimal", 0.97), ("jax.numpy", None))
            ],
        )
    return rows


if __name__ == "__main__":
    sys.exit(framework_main(bench, __doc__))
