"""Measured ceilings: the FLOP/s and bandwidth this platform really reaches, cached.

Large-matmul FLOP/s per dtype with XLA on and off, smaller matmuls' FLOP/s (the curve a
projection scales each operation by), and a streaming copy bandwidth, timed
with the harness's own protocol. They are measured once per machine and software stack
(the platform fingerprint of :mod:`paradnn.identity`) and cached as JSON in
``PARADNN_CACHE_DIR`` (default ``~/.cache/paradnn``).

The same cache keeps the **XLA choice** of ``--xla auto``: per family and dtype policy, a
short probe times a representative configuration (the ``quick`` preset's median by model
FLOPs) with XLA off and on, and the faster setting is used for that family on this
platform and stack. On a 2-core CPU XLA makes a small CNN 38x slower and turns mixed
bfloat16's speedup into a slowdown, while it speeds up large FC steps: a single global
setting would judge every family through somebody's slow path.

One process measures a platform's ceilings (or probes its XLA choice) at a time, under a
file lock beside the cache entry; another that needs them waits and reads what the first
wrote. Two measuring at once would each pay for it and each time the other's load, and a
ceiling is a maximum, not what a contended trial reached.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from paradnn.config import cache_dir
from paradnn.engine.machine import describe
from paradnn.identity import fingerprint
from paradnn.platform import Target
from paradnn.vocabulary import OK


def _operands(n: int) -> tuple:
    """An n x n uniform matrix and an orthogonal one (multiplying by it keeps norms put), float32."""
    from paradnn.tfimport import tf

    q, _ = tf.linalg.qr(tf.random.stateless_normal((n, n), seed=(1, 2)))
    return tf.random.stateless_uniform((n, n), seed=(3, 4), minval=-1, maxval=1), q


def _matmul_runner(n: int, dtype: str, xla: bool, operands: dict[int, tuple]):
    """``run(k)``: k chained n x n matmuls in ``dtype``. ``operands`` caches each size's matrices:
    a 2048 x 2048 QR decomposition takes about half a second, and four runners share one."""
    from paradnn.tfimport import tf

    if n not in operands:
        operands[n] = _operands(n)
    a, b = (tf.cast(m, dtype) for m in operands[n])

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


TRIALS = 3  # a peak is a maximum: the best of this many trials, spread over the measurement
# Smaller square matmuls timed beside the largest (XLA off, as a profile runs): the FLOP/s an
# operation of that size reaches, which a projection between two measured platforms scales by.
# Two threads gain nothing below n = 256 on a 2-core CPU and 1.9x at 2048.
CURVE_SIZES = (64, 128, 256, 512, 1024)
CURVE_SECONDS = 0.08  # per size and trial: small matmuls need few calls to time (building them takes longer)
CURVE_TRIALS = 2  # the curve's points: 6-7 s for two dtypes on a 2-core CPU


def measure_ceilings(
    target: Target, seconds: float = 0.5, trials: int = TRIALS, dtypes: list[str] | None = None, copy: bool = True
) -> dict:
    """Matmul FLOP/s per dtype (XLA on and off) and copy bandwidth on ``target``, each the best of
    ``trials`` rounds; every round times every dtype and XLA setting in turn, so a disturbance
    (another process, a frequency dip) spoils one trial of each at most, never a whole ceiling.
    The spread (worst and best trial) is kept beside each ceiling."""
    from paradnn.engine.protocol import RunSettings, run_protocol
    from paradnn.tfimport import tf

    settings = RunSettings(max_seconds=seconds, min_call_seconds=0.05, max_steps_per_call=200, max_warmup_calls=3)
    n = 2048 if target.kind == "cpu" else 8192
    dtypes = dtypes or ["float32", "bfloat16"] + ([] if target.kind == "cpu" else ["float16"])
    n_bytes = 256 * 2**20 if target.kind == "cpu" else 2 * 2**30
    trials_of: dict[tuple[str, str, str], list[float]] = {}
    with tf.device(target.tf_device):
        operands: dict[int, tuple] = {}
        runs = {
            ("matmul_flops", d, _key(x)): (_matmul_runner(n, d, x, operands), 2 * n**3) for d in dtypes for x in (True, False)
        }
        if copy:
            runs.update({("copy_bandwidth", "", _key(x)): (_copy_runner(n_bytes, x), 2 * n_bytes) for x in (True, False)})
        for _ in range(trials):
            for key, (run, work) in runs.items():
                m = run_protocol(run, settings)
                if m.stats:
                    trials_of.setdefault(key, []).append(work / m.stats.median)
    result: dict = {"matmul_size": n, "trials": trials, "matmul_flops": {}, "matmul_spread": {}}
    if copy:
        result.update(copy_bandwidth={}, copy_spread={})
    for (kind, dtype, xla), values in trials_of.items():
        spread = kind.split("_")[0] + "_spread"  # matmul_spread, copy_spread: [worst, best] trial
        best_of, spread_of = (
            (result[kind].setdefault(dtype, {}), result[spread].setdefault(dtype, {}))
            if dtype
            else (result[kind], result[spread])
        )
        best_of[xla], spread_of[xla] = max(values), [min(values), max(values)]
    if copy:  # a full measurement: the sizes' curve too
        with_curve(target, result)
    return result


def with_curve(target: Target, ceilings: dict) -> dict:
    """``ceilings`` with its ``matmul_curve`` measured (per dtype it has a ceiling of); the largest
    size is the no-XLA ceiling itself. Updated in place; returns it."""
    curves = measure_curve(target, list(ceilings.get("matmul_flops") or {}) or ["float32"])
    for dtype, curve in curves.items():
        no_xla = ((ceilings.get("matmul_flops") or {}).get(dtype) or {}).get(_key(False))
        if no_xla and ceilings.get("matmul_size"):
            curve[str(ceilings["matmul_size"])] = no_xla
    ceilings["matmul_curve"] = curves
    return ceilings


def measure_curve(target: Target, dtypes: list[str], trials: int = CURVE_TRIALS) -> dict[str, dict[str, float]]:
    """Matmul FLOP/s at each of ``CURVE_SIZES`` per dtype, XLA off, the best of ``trials`` rounds
    (each round times every size and dtype in turn)."""
    from paradnn.engine.protocol import RunSettings, run_protocol
    from paradnn.tfimport import tf

    settings = RunSettings(max_seconds=CURVE_SECONDS, min_call_seconds=0.02, max_steps_per_call=20000, max_warmup_calls=2)
    best: dict[str, dict[str, float]] = {d: {} for d in dtypes}
    with tf.device(target.tf_device):
        operands: dict[int, tuple] = {}
        runs = {(d, n): _matmul_runner(n, d, False, operands) for d in dtypes for n in CURVE_SIZES}
        for _ in range(trials):
            for (dtype, n), run in runs.items():
                m = run_protocol(run, settings)
                if m.stats:
                    best[dtype][str(n)] = max(best[dtype].get(str(n), 0.0), 2 * n**3 / m.stats.median)
    return best


def _key(xla: bool) -> str:
    return "xla" if xla else "no_xla"


def remeasure(target: Target, info: dict, ceilings: dict, dtype: str) -> dict:
    """Measure the matmul ceiling of ``dtype`` again, now (a configuration beat it): each setting's
    ceiling becomes the best of the old and the new trials. ``ceilings`` is updated in place (the
    worker keeps using it) and written back to the cache; returns it.

    Once per dtype and cache entry: a configuration that beats the best of two measurements does
    so through its count, not through a disturbed ceiling (model FLOPs count the first layer's
    input gradient, which is never computed: a fifth of a narrow quick FC step's). Measuring again for
    each such configuration cost 9 s apiece and never raised the ceiling (three times in one main
    job's one-thread sweep on an EPYC Zen 4); the record takes its own rate as the peak instead."""
    if any(entry.get("dtype") == dtype for entry in ceilings.get("remeasured", [])):
        return ceilings
    with _measuring(info):
        fresh = measure_ceilings(target, dtypes=[dtype], copy=False)
        old = ceilings.setdefault("matmul_flops", {}).setdefault(dtype, {})
        for xla, value in fresh["matmul_flops"].get(dtype, {}).items():
            old[xla] = max(old.get(xla, 0.0), value)
        ceilings.setdefault("remeasured", []).append({"dtype": dtype, "matmul_flops": fresh["matmul_flops"].get(dtype, {})})
        _write(info, ceilings)
    return ceilings


def probe_config(family: str):
    """The configuration the XLA probe times: the family's ``quick`` configuration of median model FLOPs."""
    from paradnn.counting import flops_model
    from paradnn.space import expand

    configs = sorted(expand(family, "quick"), key=flops_model)
    return configs[len(configs) // 2]


def probe_xla(target: Target, family: str, dtype: str, seconds: float = 1.0, config=None) -> dict:
    """Time the probe configuration (or ``config``) with XLA on and off, call by call in turns, so a
    slow spell of the machine lands on both; the faster setting wins.

    Timed one after the other (as before), a spell could decide it: on a 2 vCPU EPYC Zen 4 one of
    two such probes of the FC step read 14.7 ms with XLA against 12.7 ms without, the other 9.7
    against 12.3 (alternated, four runs: 10.1 against 12.6-13.5). Both steps are built first;
    they take turns at the XLA step's calls per run, and a failure on either side (out of
    memory, a non-finite loss) means XLA off, TensorFlow's default path."""
    from paradnn.engine.protocol import RunSettings, run_protocol
    from paradnn.engine.training import Trainer
    from paradnn.tfimport import tf

    config = config or probe_config(family)
    medians = {True: float("inf"), False: float("inf")}
    try:
        with tf.device(target.tf_device):
            on, off = Trainer(config, dtype, xla=True), Trainer(config, dtype, xla=False)
            m = run_protocol(on.run, RunSettings(dtype=dtype, device=target.tf_device, max_seconds=seconds), reference=off.run)
        if m.state == OK and m.samples and m.reference_samples:
            medians = {True: float(np.median(m.samples)), False: float(np.median(m.reference_samples))}
    except tf.errors.ResourceExhaustedError:
        pass
    chosen = medians[True] < medians[False]
    return {"xla": chosen, "probe": config.label, "step_s_xla": medians[True], "step_s_no_xla": medians[False]}


def xla_choice(target: Target, info: dict, family: str, dtype: str) -> dict:
    """The XLA setting ``--xla auto`` uses for ``family`` and ``dtype`` here: cached, else probed and cached."""
    key = f"{family}|{dtype}"
    cached = ceilings(target, info)
    if key not in cached.get("xla", {}):
        with _measuring(info):
            cached = cached_ceilings(info) or cached  # another process may have probed it meanwhile
            if key not in cached.get("xla", {}):
                cached.setdefault("xla", {})[key] = probe_xla(target, family, dtype)
                _write(info, cached)
    return cached["xla"][key]


def _cache_path(info: dict) -> Path:
    return cache_dir() / f"ceilings-{fingerprint(info)}.json"


@contextmanager
def _measuring(info: dict) -> Iterator[None]:
    """Hold the platform's measuring lock (a file beside its cache entry) for the block."""
    path = _cache_path(info).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


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
    if cached and "matmul_curve" in cached:
        return cached
    with _measuring(info):
        cached = None if refresh else cached_ceilings(info)  # another process may have measured them meanwhile
        if cached and "matmul_curve" not in cached:  # cached before sizes were measured: add them
            _write(info, with_curve(target, cached))
        if cached:
            return cached
        result = measure_ceilings(target)
        _write(info, result)
        return result


def _write(info: dict, result: dict) -> None:
    path = _cache_path(info)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result, indent=2))
    tmp.replace(path)
