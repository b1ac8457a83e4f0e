"""The harness's PyTorch step against hand-written loops, call by call.

    python benchmarks/torch_loop.py [--tiny]

Run by ``benchmarks/run.py --only torch`` (this process must start with Keras on PyTorch, so
it is a script of its own). All train the same FC network (same shapes, initial weights, data,
loss and RMSProp arithmetic), K steps per call, on the CPU with the harness's thread count:

* ``minimal``: the shortest correct loop over the same Keras model, loss and optimizer
  (forward, ``backward``, ``optimizer.apply``); the ratio is the harness's own cost
  [target >= 0.97], as for TensorFlow and JAX;
* ``torch.nn``: the network written in ``torch.nn`` (``Linear`` and ``ReLU``), PyTorch's
  cross-entropy and the same RMSProp arithmetic in ``torch`` ops, eager and under
  ``torch.compile``; the ratio Keras model / ``torch.nn`` is what Keras costs on PyTorch
  (reported, no target), the figure the framework comparison states.

Calls alternate and ratios of examples/s are taken within each round. Prints one JSON
list of rows in ``run.py``'s format.
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

os.environ["KERAS_BACKEND"] = "torch"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from run import framework_main, interleaved, ratio_rows  # noqa: E402

from paradnn.engine.protocol import RunSettings  # noqa: E402
from paradnn.engine.torchstep import TorchTrainer, measure  # noqa: E402
from paradnn.engine.training import RMSPROP  # noqa: E402
from paradnn.families import parse_label  # noqa: E402

CASES = [
    "layer_4-node_64-input_2000-output_1000-bs_64",
    "layer_4-node_256-input_2000-output_1000-bs_256",
    "layer_4-node_1024-input_2000-output_1000-bs_1024",
]
TINY = "layer_2-node_64-input_100-output_10-bs_32"


def minimal_loop(trainer: TorchTrainer, k: int):
    """The shortest correct loop over ``trainer``'s Keras model, loss and optimizer (no harness code)."""
    model, optimizer, loss_fn = trainer.model, trainer.optimizer, trainer.loss_fn
    weights = [v.value for v in model.trainable_variables]
    x, y = trainer.data

    def call() -> float:
        loss = None
        for _ in range(k):
            loss = loss_fn(y, model(x, training=True).float())
            for w in weights:
                w.grad = None
            loss.backward()
            optimizer.apply([w.grad for w in weights], model.trainable_variables)
        return float(loss.detach())

    return call


class TorchFC(torch.nn.Module):
    """The FC family's network in ``torch.nn``: ReLU layers, then the logits."""

    def __init__(self, kernels: list[np.ndarray], biases: list[np.ndarray]) -> None:
        super().__init__()
        self.linears = torch.nn.ModuleList()
        for kernel, bias in zip(kernels, biases):
            linear = torch.nn.Linear(*kernel.shape)
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(kernel.T.copy()))
                linear.bias.copy_(torch.from_numpy(bias))
            self.linears.append(linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for linear in self.linears[:-1]:
            x = torch.relu(linear(x))
        return self.linears[-1](x)


def torch_nn(trainer: TorchTrainer, k: int, compiled: bool):
    """The same network, loss and RMSProp arithmetic in plain PyTorch, from the harness model's weights."""
    lr, rho, mu, eps = (RMSPROP[n] for n in ("learning_rate", "rho", "momentum", "epsilon"))
    weights = trainer.model.get_weights()
    net = TorchFC(weights[0::2], weights[1::2])
    params = list(net.parameters())
    square = [torch.zeros_like(p) for p in params]
    momentum = [torch.zeros_like(p) for p in params]
    x, y = trainer.data

    def step() -> torch.Tensor:
        loss = torch.nn.functional.cross_entropy(net(x), y.long())
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p, s, m in zip(params, square, momentum):
                s.mul_(rho).addcmul_(p.grad, p.grad, value=1 - rho)
                m.mul_(mu).add_(lr * p.grad / torch.sqrt(s + eps))
                p.sub_(m)
        return loss.detach()

    one = torch.compile(step) if compiled else step

    def call() -> float:
        loss = None
        for _ in range(k):
            loss = one()
        return float(loss)

    return call


def bench(tiny: bool) -> list[dict]:
    rows = []
    for label in [TINY] if tiny else CASES:
        config = parse_label("fc", label)
        m = measure(config, RunSettings(framework="torch", xla=False, max_seconds=0.2), count_graph=False)
        assert m.state == "ok", m.error
        k = m.steps_per_call
        eager, compiled = TorchTrainer(config), TorchTrainer(config, compiled=True)
        runs = {
            "harness": (partial(eager.run, k), k),
            "minimal": (minimal_loop(eager, k), k),
            "torch.nn": (torch_nn(eager, k, compiled=False), k),
            "harness compiled": (partial(compiled.run, k), k),
            "torch.nn compiled": (torch_nn(compiled, k, compiled=True), k),
        }
        rounds = interleaved(runs, 0.5 if tiny else 10, 5 if tiny else 15)
        rows += ratio_rows(
            "torch",
            f"fc {label} float32",
            rounds,
            [
                ("harness", "minimal", "examples/s harness/minimal torch", 0.97),
                ("harness", "torch.nn", "examples/s Keras model/torch.nn eager", None),
                ("harness compiled", "torch.nn compiled", "examples/s Keras model/torch.nn torch.compile", None),
            ],
        )
    return rows


if __name__ == "__main__":
    sys.exit(framework_main(bench, __doc__))
