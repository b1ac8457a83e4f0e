"""Per-op breakdown of a training step (paper Fig. 3): time share, FLOPs, bytes, intensity.

Times come from TensorFlow's profiler (an xplane trace converted by ``xprof``'s
``framework_op_stats``); FLOPs from the profiler's static count of the step's graph; bytes
from the sizes of every op's input and output tensors. Runtime ops are fused by grappler
(``_FusedMatMul`` is MatMul + BiasAdd + ReLU), so ops are compared by *category*
(matmul, convolution, element-wise, ...), not by exact type. XLA is off while profiling:
with XLA a step is one opaque cluster.

A breakdown kept for projection (:mod:`paradnn.analysis.projection`) is stored in the
store's ``traces`` table beside the original study's TPU traces, as :func:`trace_rows`:
each category's share of the profiled step's wall time, its bytes and its intensity. The
share the profile does not cover (the host's Python and executor, the profiler's own
cost) is left out of the rows, so a projection keeps it as fixed overhead.
"""

from __future__ import annotations

import glob
import json
import math
import re
import tempfile
import time
from collections import Counter
from collections.abc import Iterable

import pandas as pd

from paradnn.families import Config
from paradnn.identity import profile_source
from paradnn.settings import ENGINE_DEFAULTS

CATEGORIES = (
    ("matmul", r"MatMul|Einsum"),
    ("convolution", r"Conv"),
    ("normalisation", r"BatchNorm"),
    ("recurrent loop", r"While|CudnnRNN"),
    ("loss", r"SoftmaxCrossEntropy|Softmax"),
    ("optimizer", r"ApplyRMSProp|AssignSub|AssignAdd|AssignVariable"),
    ("reduction", r"^(Sum|Mean|Max|Min|Prod|ArgMax|BiasAddGrad)$"),
    ("data movement", r"Transpose|Reshape|Concat|Slice|Gather|Scatter|Tile|Pad|Identity|ReadVariable|Pack|Unpack|Split|Fill"),
    ("pooling", r"Pool"),
    ("element-wise", r".*"),
)
_IGNORED = re.compile(r"^(IDLE|NoOp|Const|Placeholder|_Arg|_Retval|Shape|Size|Rank|StopGradient)$")


def trace_rows(breakdown: pd.DataFrame, platform: str, dtype: str) -> list[dict]:
    """A breakdown (:func:`op_breakdown`) as rows of the store's traces table: per category its
    share of the profiled step's wall time in percent, its bytes (MB per step), its intensity and
    the size of its matrix products (None for a category without any)."""
    rows = []
    for r in breakdown.itertuples():
        intensity = r.flops / r.bytes if r.bytes > 0 else 0.0
        size = float(getattr(r, "op_size", math.nan))
        rows.append(
            {
                "source": profile_source(platform, dtype),
                "platform": platform,
                "label": r.label,
                "category": r.category,
                "time_perc": 100 * r.time_s / r.step_wall_s,
                "raw_mb": r.bytes / 1e6,
                "intensity": intensity,
                "op_size": None if math.isnan(size) else size,
            }
        )
    return rows


def category(op_type: str) -> str:
    """The category of a TensorFlow op type (see ``CATEGORIES``)."""
    for name, pattern in CATEGORIES:
        if re.search(pattern, op_type):
            return name
    return "element-wise"


# Op types whose work is a matrix product (a convolution's is its im2col product): their size is
# the n of the square matmul with the same FLOPs, 2 m k n = 2 n^3.
_MATRIX_PRODUCT = re.compile(r"MatMul|Einsum|Conv")


def op_sizes(by_op: Iterable[tuple[str, int]]) -> dict[str, float]:
    """Per category, the size of its matrix products: the geometric mean, weighted by FLOPs, of
    each product's (FLOPs / 2) ** (1/3), the n of the square matmul of the same work.

    A projection reads the platforms' matmul curves at this size. An FC layer's 64 x 1024 x
    1024 product has the intensity of a 170 x 170 matmul but the work of a 406 x 406 one, and
    two threads speed it up like the latter (by intensity the projection across thread counts
    was 32% off on FC at quick size, by this size 6%)."""
    logs: Counter[str] = Counter()
    weights: Counter[str] = Counter()
    for op_type, n in by_op:
        if n > 0 and _MATRIX_PRODUCT.search(op_type):
            logs[category(op_type)] += n * math.log(n / 2) / 3
            weights[category(op_type)] += n
    return {c: math.exp(logs[c] / weights[c]) for c in weights}


def _graph_counts(trainer) -> tuple[Counter, Counter, dict[str, float]]:
    """FLOPs, bytes and matrix-product size (:func:`op_sizes`) per category of one step's graph."""
    from paradnn.engine.graphcount import count_graph_flops_by_op

    graph_count, by_op = count_graph_flops_by_op(trainer.trace().graph)
    flops: Counter[str] = Counter()
    for op_type, n in graph_count.by_op_type.items():
        flops[category(op_type)] += n
    moved: Counter[str] = Counter()
    for op in trainer.trace().graph.get_operations():
        if _IGNORED.match(op.type):
            continue
        if op.type == "ResourceApplyRMSProp":  # reads weight, 2 slots, gradient; writes 3
            grad = op.inputs[7]
            moved[category(op.type)] += 7 * grad.shape.num_elements() * grad.dtype.size
            continue
        n = 0
        for t in list(op.inputs) + list(op.outputs):
            if t.shape.is_fully_defined() and t.dtype.size:
                n += t.shape.num_elements() * t.dtype.size
        moved[category(op.type)] += n
    return flops, moved, op_sizes(by_op)


def op_times(logdir: str) -> pd.DataFrame:
    from xprof.convert import raw_to_tool_data

    paths = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
    raw = raw_to_tool_data.xspace_to_tool_data(paths, "framework_op_stats", {})
    data = json.loads(raw[0] if isinstance(raw, tuple) else raw)
    table = data[0] if isinstance(data, list) else data
    cols = [c["id"] for c in table["cols"]]
    rows = [[cell.get("v") for cell in r["c"]] for r in table["rows"]]
    return pd.DataFrame(rows, columns=cols)


def op_breakdown(config: Config, policy: str = ENGINE_DEFAULTS["dtype"], steps: int = 5) -> pd.DataFrame:
    """Profile ``steps`` training steps of ``config`` (XLA off) and summarise by op category.

    Columns: category, time_share (of the ops' time), time_s (per step), flops, bytes (per
    step), op_size (of its matrix products, :func:`op_sizes`; NaN without any), intensity
    (FLOPs/byte), flops_per_sec, and step_wall_s: the profiled step's wall time (the ops' time
    plus what the profile does not cover).
    """
    from paradnn.engine.training import Trainer, tf

    trainer = Trainer(config, policy, xla=False)
    trainer.run(2)  # trace and warm up outside the profile
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        started = time.perf_counter()
        trainer.run(steps)
        wall = (time.perf_counter() - started) / steps
        tf.profiler.experimental.stop()
        times = op_times(logdir)
    times = times[~times["type"].astype(str).str.match(_IGNORED.pattern)]
    times["category"] = times["type"].map(category)
    seconds = times.groupby("category")["total_self_time"].sum() / 1e6 / steps
    flops, moved, sizes = _graph_counts(trainer)
    out = pd.DataFrame({"time_s": seconds})
    out["flops"] = pd.Series(flops, dtype=float)
    out["bytes"] = pd.Series(moved, dtype=float)
    out["op_size"] = pd.Series(sizes, dtype=float)
    out = out.fillna({"flops": 0.0, "bytes": 0.0})
    out["time_share"] = out["time_s"] / out["time_s"].sum()
    out["intensity"] = out["flops"] / out["bytes"].where(out["bytes"] > 0)
    out["flops_per_sec"] = out["flops"] / out["time_s"].where(out["time_s"] > 0)
    out["step_wall_s"] = max(wall, float(out["time_s"].sum()))  # ops on several threads may overlap
    out = out.reset_index(names="category").sort_values("time_share", ascending=False)
    out.insert(0, "label", config.label)
    out.insert(0, "family", config.family)
    return out.reset_index(drop=True)
