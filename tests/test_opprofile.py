"""The per-op breakdown: measured times joined with FLOPs and bytes derived from the graph."""

from __future__ import annotations

import math

import pytest

from paradnn.counting import count_params
from paradnn.engine.profiler import category, op_breakdown
from paradnn.engine.training import RMSPROP_FLOPS_PER_WEIGHT
from paradnn.families import parse_label


def test_categories_of_common_op_types():
    assert category("_FusedMatMul") == category("MatMul") == "matmul"
    assert category("ResourceApplyRMSProp") == "optimizer"


def test_optimizer_row_counts_the_fused_update():
    config = parse_label("fc", "layer_2-node_32-input_50-output_10-bs_16")
    out = op_breakdown(config, steps=2).set_index("category")
    optimizer = out.loc["optimizer"]
    weights = count_params(config)
    assert optimizer["flops"] == RMSPROP_FLOPS_PER_WEIGHT * weights
    # float32 weight, 2 slots and gradient read, 3 written; plus the int64 step counter's add.
    assert optimizer["bytes"] == 7 * 4 * weights + 8
    assert optimizer["time_s"] > 0
    assert out["time_share"].sum() == pytest.approx(1.0)
    # Its products are 16 x 50 x 32, 16 x 32 x 32 and 16 x 32 x 10 (forward and gradients alike):
    # their size lies between the cube roots of the smallest and largest work; the optimizer has none.
    assert 5120 ** (1 / 3) < out.loc["matmul", "op_size"] < 25600 ** (1 / 3)
    assert math.isnan(optimizer["op_size"])
