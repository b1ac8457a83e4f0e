"""Parameter and FLOP counts against Keras, TensorFlow's profiler and the original study."""

from __future__ import annotations

import json

import numpy as np
import pytest

from paradnn import counting
from paradnn.engine.graphcount import count_graph_flops
from paradnn.families import parse_label

SPREAD = [
    ("fc", "layer_1-node_32-input_100-output_10-bs_4"),
    ("fc", "layer_3-node_200-input_2000-output_1000-bs_8"),
    ("cnn", "block_1-filter_4-image_32-output_10-bs_2-residual"),
    ("cnn", "block_2-filter_8-image_40-output_100-bs_2-bottleneck"),
    ("cnn", "block_3-filter_4-image_33-output_7-bs_2-residual"),
    ("rnn", "layer_1-maxlength_5-vocab_50-embedding_16-bs_2-rnn"),
    ("rnn", "layer_2-maxlength_5-vocab_50-embedding_16-bs_2-lstm"),
    ("rnn", "layer_3-maxlength_5-vocab_70-embedding_12-bs_2-gru"),
]


def fc_executed_matmul_flops(config) -> int:
    """FLOPs of the matmuls an FC training step really executes, counted independently.

    Forward: one [B, w_in] x [w_in, w_out] matmul per layer. Backward: a weight gradient
    per layer and an input gradient per layer except the first (the input needs none).
    """
    widths = [config.input] + [config.nodes] * config.layers + [config.output]
    per_matmul = [2 * config.batch * w_in * w_out for w_in, w_out in zip(widths, widths[1:])]
    return 2 * sum(per_matmul) + sum(per_matmul[1:])


@pytest.mark.parametrize("family,label", SPREAD)
def test_analytic_params_equal_keras(family, label):
    from paradnn.families import family_of

    config = parse_label(family, label)
    model = family_of(config).build(config, "float32")
    keras_count = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    assert counting.count_params(config) == keras_count


@pytest.mark.parametrize("family,label", SPREAD)
def test_the_generic_layer_walker_equals_the_hand_formulas(family, label):
    """Parameters, multiply-adds and activations, layer by layer in sum, exactly."""
    import dataclasses

    config = parse_label(family, label)
    hand = counting.layers(config)
    walked = counting._walked(dataclasses.replace(config, batch=1))
    for field in ("params", "macs", "activations"):
        assert sum(getattr(x, field) for x in walked) == sum(getattr(x, field) for x in hand), field


def keras_layer_count(layer, input_shape):
    from paradnn.tfimport import keras, tf

    inputs = keras.Input(input_shape[1:], batch_size=1)
    model = keras.Model(inputs, layer(inputs))
    return counting.keras_layers(model, tf.TensorSpec(input_shape))[1:]


@pytest.mark.parametrize(
    "make,shape,macs",
    [
        (lambda k: k.layers.Dense(7), (1, 5, 3), 5 * (3 * 7 + 7)),
        (lambda k: k.layers.Conv1D(4, 3, padding="same"), (1, 10, 2), 10 * (3 * 2 * 4 + 4)),
        (lambda k: k.layers.Conv2D(4, 3, strides=2, use_bias=False), (1, 9, 9, 2), 4 * 4 * 3 * 3 * 2 * 4),
        (lambda k: k.layers.DepthwiseConv2D(3, depth_multiplier=2, padding="same"), (1, 6, 6, 3), 36 * (9 * 3 * 2 + 6)),
        (lambda k: k.layers.SeparableConv2D(5, 3, padding="same"), (1, 6, 6, 3), 36 * (9 * 3 + 3 * 5 + 5)),
        (lambda k: k.layers.Conv2DTranspose(4, 3, strides=2, padding="same"), (1, 5, 5, 2), 25 * 3 * 3 * 4 * 2 + 100 * 4),
        (lambda k: k.layers.EinsumDense("abc,cd->abd", output_shape=(None, 6), bias_axes="d"), (1, 4, 3), 4 * 3 * 6 + 4 * 6),
        (lambda k: k.layers.Embedding(50, 8), (1, 4), 0),
        (lambda k: k.layers.LSTM(6, return_sequences=True), (1, 5, 3), 5 * 4 * (3 * 6 + 6 * 6 + 6)),
        (lambda k: k.layers.GRU(6), (1, 5, 3), 5 * (3 * (3 * 6 + 6 * 6) + 2 * 3 * 6)),
        (lambda k: k.layers.MaxPooling2D(2), (1, 4, 4, 3), 0),
    ],
)
def test_the_layer_walker_counts_each_layer_type(make, shape, macs):
    from paradnn.tfimport import keras

    if len(shape) == 2:  # token ids
        layer = make(keras)
        inputs = keras.Input(shape[1:], batch_size=1, dtype="int32")
        from paradnn.tfimport import tf

        counted = counting.keras_layers(keras.Model(inputs, layer(inputs)), tf.TensorSpec(shape, tf.int32))[1:]
    else:
        layer = make(keras)
        counted = keras_layer_count(layer, shape)
    assert sum(c.macs for c in counted) == macs
    assert sum(c.params for c in counted) == sum(int(np.prod(w.shape)) for w in layer.trainable_weights)


def test_the_layer_walker_counts_attention_products_and_shared_layers():
    from paradnn.tfimport import keras, tf

    tokens = keras.Input((16, 32), batch_size=1)
    attended = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8)(tokens, tokens)
    shared = keras.layers.Dense(32)
    out = shared(shared(attended))  # one layer, called twice: counted twice
    layers = counting.keras_layers(keras.Model(tokens, out), tf.TensorSpec((1, 16, 32)))
    projections = 4 * (32 * 32 + 32) * 16  # query, key, value and output, per position
    products = 4 * 16 * 16 * (8 + 8)  # QK^T and attention x V
    assert sum(x.macs for x in layers) == projections + products + 2 * (32 * 32 + 32) * 16
    assert sum(x.params for x in layers) == 5 * (32 * 32 + 32)  # the shared layer's weights count once
    assert layers[0].activations == 16 * 32  # the input


def test_the_layer_walker_refuses_a_layer_it_cannot_count():
    from paradnn.tfimport import keras, tf

    class Scale(keras.layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(shape=(shape[-1],))

        def call(self, x):
            return x * self.w

    inputs = keras.Input((4,), batch_size=1)
    with pytest.raises(counting.CountingError, match="Scale"):
        counting.keras_layers(keras.Model(inputs, Scale()(inputs)), tf.TensorSpec((1, 4)))


def test_mobilenet_matches_its_paper():
    """MobileNet v1 1.0-224: 569 M multiply-adds (Howard et al. 2017, Table 1), 4.23 M trainable weights."""
    from paradnn.tfimport import keras, tf

    model = keras.applications.MobileNet(weights=None, input_shape=(224, 224, 3))
    layers = counting.keras_layers(model, tf.TensorSpec((1, 224, 224, 3)))
    assert sum(x.macs for x in layers) == pytest.approx(569e6, rel=0.01)
    assert sum(x.params for x in layers) == 4_231_976


def test_fc_params_formula():
    c = parse_label("fc", "layer_4-node_512-input_2000-output_1000-bs_8192")
    i, n, o, layers = c.input, c.nodes, c.output, c.layers
    assert counting.count_params(c) == i * n + (layers - 1) * n * n + n * o + layers * n + o
    assert counting.flops_model(c) == 6 * counting.count_params(c) * c.batch


def test_fc_matches_the_original_v100_sweep(reference):
    data = json.loads((reference / "gpu_fc.json").read_text())
    assert len(data["labels"]) == 176
    for label, params, gflops in zip(data["labels"], data["params"], data["fl"], strict=True):
        config = parse_label("fc", label)
        assert counting.count_params(config) == pytest.approx(params, rel=0.005), label
        assert counting.flops_model(config) / 1e9 == pytest.approx(gflops, rel=0.015), label


def test_cnn_flops_by_hand():
    # One residual block per group, 8 filters, 32x32 images, 10 outputs:
    # spatial sizes 16 (stem) -> 8 (pool) -> 8, 4, 2, 1 for the four groups.
    c = parse_label("cnn", "block_1-filter_8-image_32-output_10-bs_1-residual")
    macs = 7 * 7 * 3 * 8 * 16 * 16
    cin = 8
    for f, size in ((8, 8), (16, 4), (32, 2), (64, 1)):
        macs += (3 * 3 * cin * f + 3 * 3 * f * f + cin * f) * size * size
        cin = f
    macs += 64 * 10 + 10
    assert counting.flops_model(c) == 3 * 2 * macs


def test_rnn_flops_scale_with_cell_gates():
    base = "layer_2-maxlength_10-vocab_1000-embedding_100-bs_4-"
    e = 100
    per_step_cells = {"rnn": 2 * e * e + e, "lstm": 4 * (2 * e * e + e), "gru": 6 * e * e + 6 * e}
    for cell, cell_params in per_step_cells.items():
        c = parse_label("rnn", base + cell)
        forward = 2 * 10 * (2 * cell_params + e * 1000 + 1000)
        assert counting.flops_model(c) == 3 * forward * 4


def test_flops_graph_counts_the_executed_fc_matmuls():
    from paradnn.engine.training import Trainer

    config = parse_label("fc", "layer_3-node_128-input_300-output_50-bs_16")
    graph = count_graph_flops(Trainer(config, xla=False).trace().graph)
    assert graph.by_op_type["MatMul"] == fc_executed_matmul_flops(config)
    # The first layer's input gradient is skipped, so the matmuls stay below 6 x params x batch.
    assert fc_executed_matmul_flops(config) < counting.flops_model(config)
    # Element-wise work (bias adds, ReLU, RMSProp) adds a little on top of the matmuls.
    assert graph.by_op_type["MatMul"] < graph.flops < 1.2 * graph.by_op_type["MatMul"]
    assert graph.uncounted_ops == []


def test_flops_graph_reports_what_it_cannot_see():
    from paradnn.engine.training import Trainer

    config = parse_label("rnn", "layer_1-maxlength_4-vocab_30-embedding_8-bs_2-lstm")
    graph = count_graph_flops(Trainer(config, xla=False).trace().graph)
    assert any("While" in op for op in graph.uncounted_ops)
    assert graph.flops < counting.flops_model(config)


def test_bytes_estimate_grows_with_batch_and_shrinks_with_precision():
    small = parse_label("fc", "layer_2-node_64-input_100-output_10-bs_8")
    large = parse_label("fc", "layer_2-node_64-input_100-output_10-bs_64")
    assert counting.bytes_estimate(large) > counting.bytes_estimate(small)
    assert counting.bytes_estimate(large, "mixed_bfloat16") < counting.bytes_estimate(large)
    params = counting.count_params(small)
    acts = 100 + 64 + 64 + 10
    assert counting.bytes_estimate(small) == 10 * 4 * params + 4 * 4 * acts * 8


def test_walked_counts_are_cached_on_disk_and_recounted_when_damaged(tmp_path, monkeypatch):
    import dataclasses

    monkeypatch.setenv("PARADNN_CACHE_DIR", str(tmp_path))
    config = parse_label("squeezenet", "image_32-bs_4")
    one = dataclasses.replace(config, batch=1)
    counting._walked.cache_clear()
    first = counting.layers(config)
    (path,) = (tmp_path / "layers").glob("squeezenet-v1-*image_32-bs_1.json")
    assert json.loads(path.read_text())[1]["params"] == first[1].params
    path.write_text("[{not json")
    counting._walked.cache_clear()
    sizes = [(x.params, x.macs, x.activations) for x in first]
    assert [(x.params, x.macs, x.activations) for x in counting._walked(one)] == sizes  # counted again
    assert json.loads(path.read_text())  # and the file repaired
    counting._walked.cache_clear()
