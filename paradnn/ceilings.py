"""Measured ceilings: the FLOP/s and bandwidth this platform really reaches, cached.

Large-matmul FLOP/s per dtype with XLA on and off, and a streaming copy bandwidth, timed
with the harness's own protocol. They are measured once per machine and software stack
(the platform fingerprint of :mod:`paradnn.identity`) and cached as JSON in
``PARADNN_CACHE_DIR`` (default ``~/.cache/paradnn``).
"""

from __future__ import annotations

import json
from pathlib import Path

from paradnn.config import cache_dir
from paradnn.identity import fingerprint
from paradnn.platform import Target, describe


def _matmul_runner(n: int, dtype: str, xla: bool):
    from paradnn.tfimport import tf

    q, _ = tf.linalg.qr(tf.random.stateless_normal((n, n), seed=(1, 2)))  # orthogonal: norms stay put
    a = tf.cast(tf.random.stateless_uniform((n, n), seed=(3, 4), minval=-1, maxval=1), dtype)
    b = tf.cast(q, dtype)

    @tf.function(jit_compile=xla)
    def chain(a, b, k):
        a = tf.while_loop(lambda i, a: i < k, lambda i, a: (i + 1, tf.matmul(a, b)), (0, a))[1]
        return a[0, 0]

    return lambda k: float(chain(a, b, tf.constant(k)).numpy())


def _copy_runner(n_bytes: int, xla: bool):
    from paradnn.tfimport import tf

    x = tf.random.stateless_uniform((n_bytes // 4,), seed=(5, 6))

    @tf.function(jit_compile=xla)
    def stream(x, k):
        # one read and one write of every element per iteration
        x = tf.while_loop(lambda i, x: i < k, lambda i, x: (i + 1, x * 1.0000001), (0, x))[1]
        return x[0]

    return lambda k: float(stream(x, tf.constant(k)).numpy())


def measure_ceilings(target: Target, seconds: float = 1.5) -> dict:
    """Measure matmul FLOP/s per dtype (XLA on and off) and copy bandwidth on ``target``."""
    from paradnn.harness import RunSettings, run_protocol
    from paradnn.tfimport import tf

    settings = RunSettings(max_seconds=seconds, min_call_seconds=0.05, max_steps_per_call=200, max_warmup_calls=3)
    n = 2048 if target.kind == "cpu" else 8192
    dtypes = ["float32", "bfloat16"] + ([] if target.kind == "cpu" else ["float16"])
    matmul: dict[str, dict[str, float]] = {}
    with tf.device(target.tf_device):
        for dtype in dtypes:
            for xla in (True, False):
                m = run_protocol(_matmul_runner(n, dtype, xla), settings)
                if m.stats:
                    matmul.setdefault(dtype, {})["xla" if xla else "no_xla"] = 2 * n**3 / m.stats.median
        n_bytes = 256 * 2**20 if target.kind == "cpu" else 2 * 2**30
        bandwidth = {}
        for xla in (True, False):
            m = run_protocol(_copy_runner(n_bytes, xla), settings)
            if m.stats:
                bandwidth["xla" if xla else "no_xla"] = 2 * n_bytes / m.stats.median
    return {"matmul_size": n, "matmul_flops": matmul, "copy_bandwidth": bandwidth}


def _cache_path(info: dict) -> Path:
    return cache_dir() / f"ceilings-{fingerprint(info)}.json"


def cached_ceilings(info: dict) -> dict | None:
    """The cached ceilings of the platform ``info`` describes, or None."""
    try:
        return json.loads(_cache_path(info).read_text())
    except (OSError, json.JSONDecodeError):
        return None  # missing or damaged: measured again


def ceilings(target: Target, info: dict | None = None, refresh: bool = False) -> dict:
    """Measured ceilings of ``target``, from the cache when this stack measured them before."""
    info = info or describe(target)
    cached = None if refresh else cached_ceilings(info)
    if cached:
        return cached
    result = measure_ceilings(target)
    path = _cache_path(info)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2))
    tmp.replace(path)
    return result
