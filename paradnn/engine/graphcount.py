"""``flops_graph``: what TensorFlow's profiler counts on one traced training step.

The analytic counts (``flops_model``, bytes, memory) are in :mod:`paradnn.counting`, below
the engine; this one needs a traced TensorFlow graph, so it lives here.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

# Op types that do real arithmetic; if the profiler has no FLOP statistic for one of
# them, its FLOPs are missing from ``flops_graph`` and the op type is reported.
_COMPUTE_OP = re.compile(r"MatMul|Conv|Einsum|BatchNorm|RNN|While|Call|Fft|Lstm|Gru", re.IGNORECASE)


@dataclass(frozen=True)
class GraphCount:
    """What TensorFlow's profiler counts on one traced training step."""

    flops: int
    by_op_type: dict[str, int]
    uncounted_ops: list[str]


def count_graph_flops(graph: Any) -> GraphCount:
    """Profile a traced training-step graph (``Trainer.trace().graph``) with ``float_operation``."""
    return count_graph_flops_by_op(graph)[0]


def count_graph_flops_by_op(graph: Any) -> tuple[GraphCount, list[tuple[str, int]]]:
    """:func:`count_graph_flops`, and each counted op's type and FLOPs (what a profile sizes its
    matrix products by; kept out of :class:`GraphCount`, which travels with every measurement)."""
    from paradnn.tfimport import tf  # first: it quiets TensorFlow's start-up logging

    from tensorflow.python.framework import ops as tf_ops  # isort: skip

    options = (
        tf.compat.v1.profiler.ProfileOptionBuilder(tf.compat.v1.profiler.ProfileOptionBuilder.float_operation())
        .with_empty_output()
        .build()
    )
    result = tf.compat.v1.profiler.profile(graph, options=options)
    by_type: Counter[str] = Counter()
    by_op = []
    for child in result.children:
        try:
            op_type = graph.get_operation_by_name(child.name).type
        except (KeyError, ValueError):
            op_type = "other"
        by_type[op_type] += child.total_float_ops
        by_op.append((op_type, int(child.total_float_ops)))
    uncounted = sorted(
        {
            op.type
            for op in graph.get_operations()
            if _COMPUTE_OP.search(op.type) and tf_ops.get_stats_for_node_def(graph, op.node_def, "flops").value is None
        }
    )
    return GraphCount(int(result.total_float_ops), dict(by_type), uncounted), by_op
