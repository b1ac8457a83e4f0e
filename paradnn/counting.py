"""Counting parameters, FLOPs and bytes of one training step.

Two FLOP counts, both for one training step of the whole batch:

* ``flops_model`` -- analytic, layer by layer: forward FLOPs x 3 (backward costs about
  twice the forward), the convention of the original study and of MLPerf utilisation.
  Forward FLOPs are 2 per weight or bias use (one multiply-add), so FC is exactly
  ``6 x params x batch``. Element-wise ops (batch norm, ReLU, residual adds, pooling,
  gate non-linearities, softmax) are not counted; they are memory-bound and small.
* ``flops_graph`` -- what TensorFlow's profiler counts on the traced training step
  (``paradnn.training.count_graph_flops``). It differs from ``flops_model`` in three
  ways: the first layer's input gradient is never computed (so FC counts less than
  6 x params x batch), element-wise ops and the optimizer update are counted (so it
  counts more), and ops without a registered FLOP statistic (the recurrent ``While``
  loop of Keras RNN layers, fused batch norm, batched matmuls, fused cuDNN kernels) are
  missed; those op types are listed as ``uncounted_ops``.

``bytes_estimate`` is a first-order estimate of the memory traffic of one step, for
rooflines: each weight is touched ~10 times (forward and backward reads, gradient write,
RMSProp's read-modify-write of weight, two slots and gradient) and each activation ~4
times (written forward, read backward, its gradient written and read).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from paradnn.config import CNN_GROUP_STRIDES, CNNConfig, Config, FCConfig, RNNConfig

WEIGHT_TOUCHES = 10
ACTIVATION_TOUCHES = 4


@dataclass(frozen=True)
class Layer:
    """One weight layer: its parameter count, uses per example, and output size."""

    name: str
    params: int  # trainable parameters (weights, biases, BN scale and offset)
    macs_params: int  # parameters that take part in multiply-adds (no BN)
    uses: int  # times each such parameter is used per example (positions, steps)
    activations: int  # output elements per example


def _fc_layers(c: FCConfig) -> list[Layer]:
    widths = [c.input] + [c.nodes] * c.layers + [c.output]
    return [
        Layer(f"dense_{i}", w_in * w_out + w_out, w_in * w_out + w_out, 1, w_out)
        for i, (w_in, w_out) in enumerate(zip(widths, widths[1:]))
    ]


def _conv(name: str, cin: int, cout: int, k: int, hw: int) -> list[Layer]:
    """A bias-free conv followed by batch norm (2 trainable parameters per channel)."""
    weights = k * k * cin * cout
    return [Layer(name, weights, weights, hw * hw, hw * hw * cout), Layer(name + "_bn", 2 * cout, 0, 0, hw * hw * cout)]


def _same(size: int, stride: int) -> int:
    return math.ceil(size / stride)


def _cnn_layers(c: CNNConfig) -> list[Layer]:
    hw = _same(c.image, 2)
    layers = _conv("stem", 3, c.filters, 7, hw)
    hw = _same(hw, 2)  # 3x3/2 max-pool
    channels = c.filters
    bottleneck = c.block == "bottleneck"
    for g, group_stride in enumerate(CNN_GROUP_STRIDES):
        f = c.filters * 2**g
        out = 4 * f if bottleneck else f
        for b in range(c.blocks):
            stride = group_stride if b == 0 else 1
            hw_out = _same(hw, stride)
            name = f"g{g}b{b}"
            if bottleneck:
                layers += _conv(name + "_a", channels, f, 1, hw)
                layers += _conv(name + "_b", f, f, 3, hw_out)
                layers += _conv(name + "_c", f, out, 1, hw_out)
            else:
                layers += _conv(name + "_a", channels, f, 3, hw_out)
                layers += _conv(name + "_b", f, f, 3, hw_out)
            if b == 0:
                layers += _conv(name + "_proj", channels, out, 1, hw_out)
            channels, hw = out, hw_out
    layers.append(Layer("logits", channels * c.output + c.output, channels * c.output + c.output, 1, c.output))
    return layers


def _rnn_cell_params(cell: str, e: int) -> int:
    """Kernel [E, gE] + recurrent kernel [E, gE] + bias, with g gates (Keras 3 layout)."""
    if cell == "rnn":
        return 2 * e * e + e
    if cell == "lstm":
        return 4 * (2 * e * e + e)
    return 3 * (2 * e * e) + 2 * 3 * e  # GRU, reset_after=True: two bias vectors


def _rnn_layers(c: RNNConfig) -> list[Layer]:
    t, e = c.maxlength, c.embedding
    gates = {"rnn": 1, "lstm": 4, "gru": 3}[c.cell]
    layers = [Layer("embedding", c.vocab * e, 0, 0, t * e)]  # a gather: no FLOPs
    cell = _rnn_cell_params(c.cell, e)
    layers += [Layer(f"{c.cell}_{i}", cell, cell, t, t * e * (gates + 1)) for i in range(c.layers)]
    layers.append(Layer("logits", e * c.vocab + c.vocab, e * c.vocab + c.vocab, t, t * c.vocab))
    return layers


def layers(config: Config) -> list[Layer]:
    """The weight layers of ``config`` with their analytic sizes."""
    if isinstance(config, FCConfig):
        return _fc_layers(config)
    if isinstance(config, CNNConfig):
        return _cnn_layers(config)
    return _rnn_layers(config)


def count_params(config: Config) -> int:
    """Trainable parameters; equals the sum of the Keras model's trainable weights."""
    return sum(layer.params for layer in layers(config))


def forward_flops_per_example(config: Config) -> int:
    """Forward FLOPs of one example: 2 per multiply-add of every weight and bias use."""
    return sum(2 * layer.macs_params * layer.uses for layer in layers(config))


def flops_model(config: Config) -> int:
    """Analytic FLOPs of one training step (whole batch): forward x 3."""
    return 3 * forward_flops_per_example(config) * config.batch


def activations_per_example(config: Config) -> int:
    """Elements written by the forward pass of one example (input included)."""
    inputs = {FCConfig: lambda c: c.input, CNNConfig: lambda c: 3 * c.image**2, RNNConfig: lambda c: c.maxlength}
    return inputs[type(config)](config) + sum(layer.activations for layer in layers(config))


def bytes_estimate(config: Config, compute_bytes: int = 4, param_bytes: int = 4) -> int:
    """First-order estimate of bytes moved by one training step (see module docstring)."""
    weights = WEIGHT_TOUCHES * param_bytes * count_params(config)
    acts = ACTIVATION_TOUCHES * compute_bytes * activations_per_example(config) * config.batch
    return weights + acts


def fc_executed_matmul_flops(config: FCConfig) -> int:
    """FLOPs of the matmuls an FC training step really executes, counted independently.

    Forward: one [B, w_in] x [w_in, w_out] matmul per layer. Backward: a weight gradient
    per layer and an input gradient per layer except the first (the input needs none).
    """
    widths = [config.input] + [config.nodes] * config.layers + [config.output]
    pairs = list(zip(widths, widths[1:]))
    per_matmul = [2 * config.batch * w_in * w_out for w_in, w_out in pairs]
    return 2 * sum(per_matmul) + sum(per_matmul[1:])


# Resident bytes per trainable parameter: float32 weight, gradient and RMSProp's two slots.
BYTES_PER_PARAM = 16
# Live activation copies per element: the forward value kept for backward, its gradient,
# and one temporary.
ACTIVATION_COPIES = 3


def memory_estimate(config: Config, compute_bytes: int = 4) -> int:
    """Predicted peak memory of one training step in bytes (model and data, no runtime).

    Deliberately simple: it only has to say which configurations cannot fit, so that a
    sweep records them as ``skipped`` instead of running into the OOM killer.
    """
    acts = ACTIVATION_COPIES * compute_bytes * activations_per_example(config) * config.batch
    return BYTES_PER_PARAM * count_params(config) + acts
