"""Parameter and FLOP counts against Keras, TensorFlow's profiler and the original study."""

from __future__ import annotations

import json

import numpy as np
import pytest

from paradnn import counting
from paradnn.config import parse_label

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


@pytest.mark.parametrize("family,label", SPREAD)
def test_analytic_params_equal_keras(family, label):
    from paradnn.models import build_model

    config = parse_label(family, label)
    model = build_model(config)
    keras_count = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    assert counting.count_params(config) == keras_count


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
    from paradnn.training import Trainer, count_graph_flops

    config = parse_label("fc", "layer_3-node_128-input_300-output_50-bs_16")
    graph = count_graph_flops(Trainer(config, xla=False))
    assert graph.by_op_type["MatMul"] == counting.fc_executed_matmul_flops(config)
    # The first layer's input gradient is skipped, so the matmuls stay below 6 x params x batch.
    assert counting.fc_executed_matmul_flops(config) < counting.flops_model(config)
    # Element-wise work (bias adds, ReLU, RMSProp) adds a little on top of the matmuls.
    assert graph.by_op_type["MatMul"] < graph.flops < 1.2 * graph.by_op_type["MatMul"]
    assert graph.uncounted_ops == []


def test_flops_graph_reports_what_it_cannot_see():
    from paradnn.training import Trainer, count_graph_flops

    config = parse_label("rnn", "layer_1-maxlength_4-vocab_30-embedding_8-bs_2-lstm")
    graph = count_graph_flops(Trainer(config, xla=False))
    assert any("While" in op for op in graph.uncounted_ops)
    assert graph.flops < counting.flops_model(config)


def test_bytes_estimate_grows_with_batch_and_shrinks_with_precision():
    small = parse_label("fc", "layer_2-node_64-input_100-output_10-bs_8")
    large = parse_label("fc", "layer_2-node_64-input_100-output_10-bs_64")
    assert counting.bytes_estimate(large) > counting.bytes_estimate(small)
    assert counting.bytes_estimate(large, compute_bytes=2) < counting.bytes_estimate(large)
    params = counting.count_params(small)
    acts = 100 + 64 + 64 + 10
    assert counting.bytes_estimate(small) == 10 * 4 * params + 4 * 4 * acts * 8
