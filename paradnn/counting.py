"""Counting parameters, FLOPs and bytes of one training step.

Two FLOP counts, both for one training step of the whole batch:

* ``flops_model`` -- analytic, layer by layer: forward FLOPs x 3 (backward costs about
  twice the forward), the convention of the original study and of MLPerf utilisation.
  Forward FLOPs are 2 per multiply-add, and every weight or bias use is one multiply-add,
  so FC is exactly ``6 x params x batch``. Element-wise ops (normalisation, activations,
  residual adds, pooling, gate non-linearities, softmax) are not counted; they are
  memory-bound and small. A family with an analytic counter (``Family.layers``) uses it;
  any other is counted by :func:`keras_layers`, which walks the built Keras model and
  agrees exactly with the FC, CNN and RNN formulas (tested).
* ``flops_graph`` -- what TensorFlow's profiler counts on the traced training step
  (:func:`paradnn.engine.graphcount.count_graph_flops`, in the engine: it needs TensorFlow).
  It differs from ``flops_model`` in three ways: the first layer's input gradient is never
  computed (so FC counts less than 6 x params x batch),
  element-wise ops and the optimizer update are counted (so it counts more), and ops
  without a registered FLOP statistic (the recurrent ``While`` loop of Keras RNN layers,
  fused batch norm, batched matmuls, fused cuDNN kernels) are missed; those op types are
  listed as ``uncounted_ops``.

``bytes_estimate`` is a first-order estimate of the memory traffic of one step, for
rooflines: each weight is touched ~10 times (forward and backward reads, gradient write,
RMSProp's read-modify-write of weight, two slots and gradient) and each activation ~4
times (written forward, read backward, its gradient written and read).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from functools import cache
from typing import Any

from paradnn.config import cache_dir
from paradnn.config import policy as policy_of
from paradnn.families import Config, Layer, family_of
from paradnn.settings import DEFAULTS

WEIGHT_TOUCHES = 10
ACTIVATION_TOUCHES = 4
# Resident bytes per trainable parameter: float32 weight, gradient and RMSProp's two slots.
BYTES_PER_PARAM = 16
# Live activation copies per element: the forward value kept for backward, its gradient,
# and one temporary.
ACTIVATION_COPIES = 3


class CountingError(RuntimeError):
    """A layer the generic counter has no rule for (never counted as zero in silence)."""


def layers(config: Config) -> list[Layer]:
    """The layers of ``config`` with their per-example sizes (the input first)."""
    family = family_of(config)
    if family.layers is not None:
        return family.layers(config)
    return _walked(dataclasses.replace(config, batch=1))  # type: ignore[type-var]


@cache
def _walked(one_example: Config) -> list[Layer]:
    """The walked layers of a one-example configuration, from the disk cache when counted before.

    Building and tracing a large model takes seconds; the counts depend only on the
    family's version, the configuration and Keras's layer definitions, which name the file.
    """
    from paradnn.tfimport import keras, tf

    family = family_of(one_example)
    path = cache_dir() / "layers" / f"{family.name}-v{family.version}-keras{keras.__version__}-{one_example.label}.json"
    try:
        return [Layer(**layer) for layer in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        pass  # not counted yet, or a damaged file: count again
    if keras.backend.backend() != "tensorflow":  # the walker traces TensorFlow graphs: count in a process that can
        _walk_under_tensorflow(one_example)
        return [Layer(**layer) for layer in json.loads(path.read_text())]
    x, _ = tf.function(lambda: family.data(one_example, 0)).get_concrete_function().structured_outputs
    layers = keras_layers(family.build(one_example, "float32"), tf.nest.map_structure(tf.TensorSpec.from_tensor, x))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps([dataclasses.asdict(layer) for layer in layers]))
    tmp.replace(path)
    return layers


def _walk_under_tensorflow(one_example: Config) -> None:
    """Walk ``one_example``'s layers in a fresh process whose Keras runs TensorFlow, which leaves them
    in the disk cache: a process running JAX's or PyTorch's backend counts the same model that way."""
    import subprocess
    import sys

    code = (
        "import sys; from paradnn.counting import layers; from paradnn.families import parse_label; "
        "layers(parse_label(sys.argv[1], sys.argv[2]))"
    )
    subprocess.run(
        [sys.executable, "-c", code, one_example.family, one_example.label],
        check=True,
        env=dict(os.environ, KERAS_BACKEND="tensorflow"),
        capture_output=True,
        timeout=600,
    )


def count_params(config: Config) -> int:
    """Trainable parameters; equals the sum of the Keras model's trainable weights."""
    return sum(layer.params for layer in layers(config))


def forward_flops_per_example(config: Config) -> int:
    """Forward FLOPs of one example: 2 per multiply-add."""
    return 2 * sum(layer.macs for layer in layers(config))


def flops_model(config: Config) -> int:
    """Analytic FLOPs of one training step (whole batch): forward x 3."""
    return 3 * forward_flops_per_example(config) * config.batch  # type: ignore[attr-defined]


def activations_per_example(config: Config) -> int:
    """Elements written by the forward pass of one example (input included)."""
    return sum(layer.activations for layer in layers(config))


def bytes_estimate(config: Config, policy: str = DEFAULTS["dtype"]) -> int:
    """First-order estimate of bytes moved by one training step (see module docstring)."""
    p = policy_of(policy)
    weights = WEIGHT_TOUCHES * p.param_bytes * count_params(config)
    return weights + ACTIVATION_TOUCHES * p.compute_bytes * activations_per_example(config) * config.batch  # type: ignore[attr-defined]


def memory_estimate(config: Config, policy: str = DEFAULTS["dtype"]) -> int:
    """Predicted peak memory of one training step in bytes (model and data, no runtime).

    Deliberately simple: it only has to say which configurations cannot fit, so that a
    sweep records them as ``skipped`` instead of running into the OOM killer.
    """
    acts = ACTIVATION_COPIES * policy_of(policy).compute_bytes * activations_per_example(config) * config.batch  # type: ignore[attr-defined]
    return BYTES_PER_PARAM * count_params(config) + acts


# ------------------------------------------------------------------ the generic layer walker

RNN_GATES = {"SimpleRNN": 1, "LSTM": 4, "GRU": 3}


def keras_layers(model: Any, inputs: Any) -> list[Layer]:
    """Per-example layer sizes of a built Keras model, from the shapes of one forward pass.

    ``inputs`` are the model's input specs (``tf.TensorSpec``, any nesting) for one
    example. The forward pass is traced, not run; every layer call is recorded on the way, so shared layers
    (RetinaNet's heads) count once per call and nested models are walked into. Leaf layers
    with weights are counted from their weight and output shapes (Dense, EinsumDense,
    convolutions of every kind, embeddings, normalisations); recurrent layers count their
    cell's weights once per time step; attention adds its QK^T and attention-times-V
    products. A leaf layer with weights and no rule raises :class:`CountingError`.
    """
    calls: list[tuple[Any, tuple, dict, Any]] = []
    inside: list[Any] = []
    patched = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if _recorded(layer):
            patched.append((layer, layer.__dict__.get("call")))
            object.__setattr__(layer, "call", _recording(layer, layer.call, calls, inside))
    from paradnn.tfimport import tf

    try:
        tf.function(lambda x: model(x, training=True)).get_concrete_function(inputs)
    finally:
        for layer, original in patched:
            if original is None:
                object.__delattr__(layer, "call")
            else:
                object.__setattr__(layer, "call", original)
    counted = [_count(layer, args, kwargs, out) for layer, args, kwargs, out in calls]
    seen: set[int] = set()
    for i, (layer, *_) in enumerate(calls):  # a shared layer's weights count once, its work once per call
        if id(layer) in seen:
            counted[i] = dataclasses.replace(counted[i], params=0)
        seen.add(id(layer))
    given = sum(_elements(t) for t in tf.nest.flatten(inputs))
    return [Layer("input", 0, 0, given)] + [c for c in counted if c.params or c.macs or c.activations]


def _recorded(layer: Any) -> bool:
    """Leaves, recurrent layers and attention are recorded; other containers are walked into."""
    kind = _kind(layer)
    return kind in ("rnn", "attention") or not layer._flatten_layers(include_self=False, recursive=False)


def _recording(layer: Any, call: Any, calls: list, inside: list) -> Any:
    def recorded_call(*args, **kwargs):
        if any(_kind(outer) == "rnn" for outer in inside):  # a cell stepped by its RNN layer
            return call(*args, **kwargs)
        inside.append(layer)
        try:
            out = call(*args, **kwargs)
        finally:
            inside.pop()
        calls.append((layer, args, kwargs, out))
        return out

    return recorded_call


def _kind(layer: Any) -> str:
    from paradnn.tfimport import keras

    names = {cls.__name__ for cls in type(layer).__mro__}
    if names & set(RNN_GATES):
        return "rnn"
    if isinstance(layer, keras.layers.MultiHeadAttention):
        return "attention"
    for kind, base in (
        ("conv_transpose", "BaseConvTranspose"),
        ("separable", "BaseSeparableConv"),
        ("depthwise", "BaseDepthwiseConv"),
        ("conv", "BaseConv"),
    ):
        if base in names:
            return kind
    for kind, cls in (
        ("dense", keras.layers.Dense),
        ("einsum", keras.layers.EinsumDense),
        ("embedding", keras.layers.Embedding),
        ("dot", keras.layers.Dot),
    ):
        if isinstance(layer, cls):
            return kind
    if "Normalization" in type(layer).__name__:
        return "normalization"
    return "other"


def _shape(tensor: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in tensor.shape)


def _elements(tensor: Any) -> int:
    return math.prod(_shape(tensor)[1:])  # per example: the batch axis dropped


def _size(weight: Any) -> int:
    return math.prod(int(d) for d in weight.shape)


def _outputs(out: Any) -> list:
    from paradnn.tfimport import tf

    return [t for t in tf.nest.flatten(out) if hasattr(t, "shape")]


def _count(layer: Any, args: tuple, kwargs: dict, out: Any) -> Layer:
    """One recorded call as a Layer: parameters, multiply-adds and output elements per example."""
    kind = _kind(layer)
    params = sum(_size(w) for w in layer.trainable_weights)
    outs = _outputs(out)
    written = sum(_elements(t) for t in outs) if layer.trainable_weights else 0
    inputs = [t for t in _outputs((args, kwargs))]
    macs = 0
    if kind == "rnn":
        steps = _shape(inputs[0])[1]
        units = layer.cell.units
        macs, written = params * steps, steps * units * (RNN_GATES[_rnn_name(layer)] + 1)
    elif kind == "attention":
        query, value = inputs[0], inputs[1]
        t_q, t_k = math.prod(_shape(query)[1:-1]), math.prod(_shape(value)[1:-1])
        heads = layer.num_heads
        macs = heads * t_q * t_k * (layer.key_dim + (layer.value_dim or layer.key_dim))
        params, written = 0, 2 * heads * t_q * t_k  # projections are counted as their own layers
    elif kind in ("dense", "conv", "depthwise"):
        kernel = layer.kernel
        positions = written // int(outs[0].shape[-1]) if outs else 0
        macs = (_size(kernel) + (int(layer.bias.shape[0]) if layer.bias is not None else 0)) * positions
    elif kind == "separable":
        positions = _elements(outs[0]) // int(outs[0].shape[-1])
        bias = int(layer.bias.shape[0]) if layer.bias is not None else 0
        macs = (_size(layer.depthwise_kernel) + _size(layer.pointwise_kernel) + bias) * positions
    elif kind == "conv_transpose":
        in_positions = _elements(inputs[0]) // int(inputs[0].shape[-1])
        out_positions = _elements(outs[0]) // int(outs[0].shape[-1])
        bias = int(layer.bias.shape[0]) if layer.bias is not None else 0
        macs = _size(layer.kernel) * in_positions + bias * out_positions
    elif kind == "einsum":
        macs = _einsum_macs(layer.equation, _shape(inputs[0]), _shape(layer.kernel))
        if layer.bias is not None:
            macs += _elements(outs[0])
    elif kind == "dot":
        a = _shape(inputs[0])
        axis = layer.axes[0] if isinstance(layer.axes, (list, tuple)) else layer.axes
        macs = _elements(outs[0]) * a[axis]
    elif kind == "embedding" and inputs[0].dtype.is_floating:  # a tied embedding used as the output projection
        macs = _elements(outs[0]) * int(layer.embeddings.shape[1])
    elif kind in ("embedding", "normalization") or not layer.trainable_weights:
        pass  # a gather or element-wise work: no multiply-adds
    else:
        raise CountingError(
            f"no FLOP rule for layer {layer.name!r} of type {type(layer).__name__} ({params:,} trainable parameters)"
        )
    return Layer(layer.name, params, macs, written)


def _rnn_name(layer: Any) -> str:
    return next(cls.__name__ for cls in type(layer).__mro__ if cls.__name__ in RNN_GATES)


def _einsum_macs(equation: str, x_shape: tuple[int, ...], kernel_shape: tuple[int, ...]) -> int:
    """Multiply-adds of ``x . kernel`` for one example: the product of every index's size."""
    inputs, _ = equation.split("->")
    x_idx, k_idx = inputs.split(",")
    sizes = dict(zip(k_idx, kernel_shape))
    sizes.update({i: d for i, d in zip(x_idx, x_shape) if i not in sizes})
    sizes[x_idx[0]] = 1  # the batch index
    return math.prod(sizes.values())
