"""Evidence that the harness is fast and trustworthy: ratios measured side by side in one run.

    python benchmarks/run.py                 # everything but the main job (about 30 minutes)
    python benchmarks/run.py --only harness,fit
    python benchmarks/run.py --main-job      # also time `paradnn report quick` from an empty store
    python benchmarks/run.py --tiny          # seconds; what the test suite runs

Sections (targets in brackets):
  harness   harness vs a minimal hand-written tf.function loop, call by call [>= 0.97]
  fit       harness vs Keras model.fit(steps_per_execution=32), call by call [>= 0.97 large FC, >= 1.2 small FC]
  workloads harness vs fit on ResNet-50 and Transformer at quick size [>= 0.97]; compile time per workload
  ceiling   model FLOP/s of the large FC over the measured matmul ceiling [>= 0.9, float32 + XLA]
  input     host-fed (tf.data) against device-resident steps of the large FC, alternating [host >= 0.95]
  devices   2 data-parallel CPU replicas of the large FC: communication share, scaling efficiency, all-reduce
            bandwidth, and examples/s against one process on all cores (alternating; no target)
  jax       harness's JAX loop vs a hand-written jax.jit loop, call by call [>= 0.97] (benchmarks/jax_loop.py)
  torch     harness's PyTorch step vs a hand-written loop over the same Keras model [>= 0.97], and that model vs the
            same network in torch.nn, eager and torch.compile'd: what Keras costs on PyTorch (benchmarks/torch_loop.py)
  overhead  sweep wall time outside timed samples, per configuration [median < 2 s without compile]
  ray       scheduling gap between configurations on a node, local vs a 2-node Ray cluster here [median < 1 s]
  repeat    three sweeps of 12 FC configurations, a CPU hog on in the middle one, with and without the
            contention check: pooled estimates' differences [checked: median <= 5%, p90 <= 15%]
  interleave XLA on/off and float32/mixed bfloat16 on 8 FC configurations, interleaved rounds, three
            times: each median ratio's spread over the runs [<= 3%]
  workers   sweeps with one worker and with two, alternating: wall time [CNN < 1, FC with XLA < 1.05] and the rows'
            difference [within the scatter of two sweeps of one setting + 2%]
  projection cpu[threads=1]'s profiled steps projected onto cpu, against cpu's own, FC/CNN/RNN at quick size
            [median |error| <= 25%, goal 10%]
  analysis  each notebook over a store of 20,000 synthetic rows [< 60 s each]; store rates
  main      wall time of the README's main command from an empty store (--main-job)

Prints one table and writes it as JSON to ``outputs/bench/latest.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from paradnn.engine.protocol import RunSettings
from paradnn.engine.record import measure  # noqa: E402
from paradnn.families import parse_label  # noqa: E402

LARGE_FC = "layer_4-node_2048-input_2000-output_1000-bs_512"
SMALL_FC = "layer_4-node_64-input_2000-output_1000-bs_64"
# CNN and RNN configurations of similar cost to the large FC on a 2-core CPU.
SIMILAR = [
    ("fc", LARGE_FC),
    ("cnn", "block_1-filter_16-image_64-output_1000-bs_32-residual"),
    ("rnn", "layer_1-maxlength_20-vocab_1000-embedding_256-bs_64-gru"),
]
TINY_FC = "layer_2-node_64-input_100-output_10-bs_32"

rows: list[dict] = []


def row(section: str, case: str, metric: str, value: float, target: str = "", ok: bool | None = None) -> None:
    rows.append({"section": section, "case": case, "metric": metric, "value": value, "target": target, "ok": ok})
    mark = "" if ok is None else ("  ok" if ok else "  MISSED")
    print(f"{section:<9} {case:<58} {metric:<28} {value:>10.4g}  {target}{mark}", flush=True)


# ------------------------------------------------------------------ minimal loop and fit


def minimal_loop(config, policy: str, xla: bool, k: int):
    """The shortest correct training loop: same model, optimizer, loss and data."""
    from paradnn.engine.training import make_optimizer, sparse_cross_entropy, tf
    from paradnn.families import family_of

    family = family_of(config)
    model = family.build(config, policy)
    opt = make_optimizer(policy)
    opt.build(model.trainable_variables)
    loss_fn = family.loss(config) if family.loss else sparse_cross_entropy()
    x, y = family.data(config, 0)

    @tf.function(jit_compile=xla)
    def train(x, y):
        loss = tf.constant(0.0)
        for _ in tf.range(k):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, tf.cast(model(x, training=True), tf.float32))
            opt.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    return lambda: float(train(x, y).numpy())


def harness_calls(config, policy: str, xla: bool):
    """The harness's timed call, ``Trainer.run(k)``, with k from the harness's own calibration."""
    from paradnn.engine.training import Trainer

    m = measure(config, RunSettings(dtype=policy, xla=xla, max_seconds=0.2), count_graph=False)
    assert m.state == "ok", m.error
    trainer = Trainer(config, policy, xla)
    trainer.run(m.steps_per_call)  # compile
    return lambda: trainer.run(m.steps_per_call), m.steps_per_call


def interleaved(runs: dict[str, tuple[Callable[[], object], int]], seconds: float, min_rounds: int) -> list[dict[str, float]]:
    """Seconds per step of each ``(call, steps per call)``, taking turns call by call.

    Returns one dict per round. The first of each round is swapped every round, so the
    machine's drift (10-20% over minutes here) reaches every contender alike, and a
    ratio taken within a round cancels it.
    """
    for call, _ in runs.values():  # warm up
        call()
        call()
    rounds: list[dict[str, float]] = []
    names = list(runs)
    end = time.perf_counter() + seconds
    while len(rounds) < min_rounds or time.perf_counter() < end:
        sample = {}
        for name in names:
            call, steps = runs[name]
            start = time.perf_counter()
            call()
            sample[name] = (time.perf_counter() - start) / steps
        rounds.append(sample)
        names.reverse()
    return rounds


def framework_main(bench: Callable[[bool], list[dict]], doc: str) -> int:
    """The command line of a framework's loop script (``jax_loop.py``, ``torch_loop.py``): ``--tiny``,
    then one JSON list of ``bench``'s rows on standard output, for :func:`bench_framework`."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="one tiny configuration: checks that it runs")
    print(json.dumps(bench(parser.parse_args().tiny)))
    return 0


def ratio_rows(
    section: str, case: str, rounds: list[dict[str, float]], comparisons: list[tuple[str, str, str, float | None]]
) -> list[dict]:
    """One row per ``(mine, other, metric, target)``: the median over ``rounds`` (seconds per step)
    of examples/s ``mine`` / ``other``, against ``target`` (a lower bound) where there is one."""
    rows = []
    for mine, other, metric, target in comparisons:
        value = float(np.median([r[other] / r[mine] for r in rounds]))
        rows.append(
            {
                "section": section,
                "case": case,
                "metric": metric,
                "value": value,
                "target": f">= {target}" if target else "",
                "ok": value >= target if target else None,
            }
        )
    return rows


def time_fit_interleaved(config, xla: bool, seconds: float) -> dict[str, float]:
    """Median seconds per step of Keras ``fit`` executions and of harness calls, taking turns.

    One ``fit`` call with ``steps_per_execution=32`` and the optimizer users would pick
    (Keras's own RMSprop, same hyperparameters); a callback runs one harness call after
    each execution, so the two alternate; an execution's time excludes that call.
    """
    from paradnn.engine.training import RMSPROP, keras, tf
    from paradnn.families import family_of

    harness, k = harness_calls(config, "float32", xla)
    spe = 32
    family = family_of(config)
    model = family.build(config, "float32")
    loss = family.loss(config) if family.loss else keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=keras.optimizers.RMSprop(**RMSPROP), loss=loss, steps_per_execution=spe, jit_compile=xla)
    x, y = family.data(config, 0)
    samples: dict[str, list[float]] = {"fit": [], "harness": []}

    class TakeTurns(keras.callbacks.Callback):
        last: float | None = None

        def on_train_batch_end(self, batch, logs=None):
            if batch >= 2 * spe and self.last is not None:  # the first two executions trace and compile
                samples["fit"].append((time.perf_counter() - self.last) / spe)
            start = time.perf_counter()
            harness()
            samples["harness"].append((time.perf_counter() - start) / k)
            self.last = time.perf_counter()

    start = time.perf_counter()
    harness()
    guess = (time.perf_counter() - start) / k
    executions = 2 + max(6, math.ceil(seconds / (guess * (spe + k))))
    data = tf.data.Dataset.from_tensors((x, y)).repeat()
    model.fit(data, epochs=1, steps_per_epoch=executions * spe, callbacks=[TakeTurns()], verbose=0)
    return {name: float(np.median(values)) for name, values in samples.items()}


def bench_harness(tiny: bool, families: list[str]) -> None:
    cases = [("fc", TINY_FC)] if tiny else [(f, label) for f, label in SIMILAR if f in families]
    policies = ["float32"] if tiny else ["float32", "mixed_bfloat16"]
    for family, label in cases:
        config = parse_label(family, label)
        for policy in policies:
            for xla in (True, False):
                harness, k = harness_calls(config, policy, xla)
                rounds = interleaved(
                    {"harness": (harness, k), "minimal": (minimal_loop(config, policy, xla, k), k)},
                    0.5 if tiny else 8,
                    5 if tiny else 15,
                )
                # examples/s ratio harness / minimal: the median of the ratios within rounds
                value = float(np.median([r["minimal"] / r["harness"] for r in rounds]))
                row(
                    "harness",
                    f"{family} {label} {policy} xla={'on' if xla else 'off'}",
                    "examples/s harness/minimal",
                    value,
                    ">= 0.97",
                    value >= 0.97,
                )


def bench_fit(tiny: bool) -> None:
    cases = [(TINY_FC, 0.97)] if tiny else [(LARGE_FC, 0.97), (SMALL_FC, 1.2)]
    for label, target in cases:
        config = parse_label("fc", label)
        for xla in (True, False):
            medians = time_fit_interleaved(config, xla, 0.5 if tiny else 10)
            value = medians["fit"] / medians["harness"]
            row(
                "fit",
                f"fc {label} xla={'on' if xla else 'off'}",
                "examples/s harness/fit",
                value,
                f">= {target}",
                value >= target,
            )


# The real workloads at their quick sizes (what the main job measures).
WORKLOADS_FIT = [
    ("resnet50", "image_64-bs_8", False),
    ("transformer", "layer_2-width_128-vocab_8192-length_32-bs_16", False),
    ("transformer", "layer_2-width_128-vocab_8192-length_32-bs_16", True),
]
TINY_WORKLOAD = ("squeezenet", "image_32-bs_2", False)


def bench_workloads(tiny: bool) -> None:
    """Harness vs Keras fit on real workloads, and every workload's compile time."""
    from paradnn import families
    from paradnn.space import expand

    for family, label, xla in [TINY_WORKLOAD] if tiny else WORKLOADS_FIT:
        medians = time_fit_interleaved(parse_label(family, label), xla, 0.5 if tiny else 20)
        value = medians["fit"] / medians["harness"]
        row(
            "workloads",
            f"{family} {label} xla={'on' if xla else 'off'}",
            "examples/s harness/fit",
            value,
            ">= 0.97",
            value >= 0.97,
        )
    workloads = [f for f in families.all_families() if f.layers is None]
    for family in workloads[:1] if tiny else workloads:
        config = expand(family.name, "smoke" if tiny else "quick")[0]
        for xla in (False,) if tiny else (False, True):
            m = measure(config, RunSettings(xla=xla, max_seconds=0.5), count_graph=False)
            assert m.state == "ok", m.error
            row(
                "workloads",
                f"{family.name} {config.label} xla={'on' if xla else 'off'}",
                "compile s (trace + first step)",
                m.compile_time_s,
            )
            row("workloads", f"{family.name} {config.label} xla={'on' if xla else 'off'}", "median step s", m.stats.median)


def bench_ceiling(tiny: bool) -> None:
    from paradnn import platform as plat
    from paradnn.counting import flops_model
    from paradnn.engine import ceilings as ceil
    from paradnn.engine import machine

    target = plat.Target()
    info = machine.describe(target)
    ceilings = ceil.ceilings(target, info)
    config = parse_label("fc", TINY_FC if tiny else LARGE_FC)
    for policy, xla in [("float32", True), ("float32", False), ("mixed_bfloat16", True), ("mixed_bfloat16", False)]:
        if tiny and policy != "float32":
            continue
        m = measure(config, RunSettings(dtype=policy, xla=xla, max_seconds=0.5 if tiny else 3), count_graph=False)
        assert m.state == "ok", m.error
        peak, _ = plat.peak(info, ceilings, policy)
        value = flops_model(config) / m.stats.median / peak
        goal = policy == "float32" and xla
        row(
            "ceiling",
            f"fc {config.label} {policy} xla={'on' if xla else 'off'}",
            "model FLOP/s / matmul ceiling",
            value,
            ">= 0.9" if goal else "",
            (value >= 0.9) if goal else None,
        )


def bench_input(tiny: bool) -> None:
    """Host input modes against the device-resident loop, sampled alternately within one measurement."""
    config = parse_label("fc", TINY_FC if tiny else LARGE_FC)
    for mode, target in (("host", 0.95), ("host-prep", None)):
        m = measure(config, RunSettings(input=mode, max_seconds=0.5 if tiny else 8), count_graph=False)
        assert m.state == "ok", m.error
        value = float(np.median(m.reference_samples) / np.median(m.samples))  # examples/s host / device
        row(
            "input",
            f"fc {config.label} {mode}",
            "examples/s host-fed / device-resident",
            value,
            f">= {target}" if target else "",
            (value >= target) if target else None,
        )


def bench_devices(tiny: bool) -> None:
    """Two data-parallel CPU replicas (each on its own cores) against one process on all of them, alternating."""
    from paradnn.counting import count_params

    if len(os.sched_getaffinity(0)) < 2:
        print("devices   skipped: needs two cores", flush=True)
        return
    config = parse_label("fc", TINY_FC if tiny else LARGE_FC)
    seconds = 0.3 if tiny else 8.0
    runs: dict[int, list] = {1: [], 2: []}
    for _ in range(1 if tiny else 2):  # A B A B: drift reaches both alike
        for devices in (2, 1):
            m = measure(config, RunSettings(devices=devices, xla=False, max_seconds=seconds), count_graph=False)
            assert m.state == "ok", m.error
            runs[devices].append(m)
    case = f"fc {config.label}"
    parallel = [m.as_dict() for m in runs[2]]
    share = float(np.median([r["comm_share"] for r in parallel]))
    row("devices", case, "communication share (timed)", share)
    row("devices", case, "all-reduce share (profiler)", float(np.median([r["allreduce_share"] or math.nan for r in parallel])))
    row("devices", case, "weak-scaling efficiency", float(np.median([r["scaling_efficiency"] for r in parallel])))
    comm_s = float(np.median([r["step_time_s"] - r["replica_step_time_s"] for r in parallel]))
    ring_bytes = 4 * count_params(config) * 2 * (2 - 1) / 2  # each replica sends and receives this per step
    row("devices", case, "all-reduce GB/s per replica", ring_bytes / comm_s / 1e9 if comm_s > 0 else math.nan)
    speed = float(np.median([r1.stats.median / r2.stats.median for r1, r2 in zip(runs[1], runs[2])]))
    row("devices", case, "examples/s 2 replicas / 1 process", speed)


def bench_framework(script: str, tiny: bool) -> None:
    """Another framework's loop against hand-written ones (``jax_loop.py``, ``torch_loop.py``), in a
    process of its own whose Keras runs that framework."""
    args = [sys.executable, str(ROOT / "benchmarks" / script), *(["--tiny"] if tiny else [])]
    result = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        raise RuntimeError(f"benchmarks/{script} failed: {result.stderr[-2000:]}")
    for r in json.loads(result.stdout.strip().splitlines()[-1]):
        row(r["section"], r["case"], r["metric"], r["value"], r["target"], r["ok"])


# ------------------------------------------------------------------ sweeps


def paradnn(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "paradnn.cli", *args], capture_output=True, text=True, cwd=ROOT)


def sweep_rows(store: Path):
    """The latest row of each configuration in ``store`` (these sweeps measure each once)."""
    from paradnn.store import Store

    with Store(store, create=False) as s:
        return s.results().drop_duplicates("label", keep="last")


def bench_overhead(tiny: bool, work: Path) -> None:
    families = ["fc"] if tiny else ["fc", "cnn", "rnn"]
    extra = ["--set", "nodes=64", "--set", "batch=64"] if tiny else []
    for family in families:
        store = work / f"overhead-{family}.sqlite"
        start = time.perf_counter()
        result = paradnn("sweep", family, "--preset", "smoke", "--max-seconds", "0.5", "--store", str(store), *extra)
        wall = time.perf_counter() - start
        assert result.returncode == 0, result.stderr
        df = sweep_rows(store)
        phases = [e["phases"] for e in df["extra"]]

        def phase(name: str, phases: list[dict] = phases) -> np.ndarray:
            return np.array([p.get(name, 0.0) for p in phases])

        compile_s = df["compile_time_s"].to_numpy()  # tracing the step, XLA compile, first step
        driver = (df["finished_at"] - df["started_at"]).to_numpy()  # send, measure, receive, store
        startup = wall - driver.sum()  # interpreter, worker spawn, TensorFlow import, exit: once per sweep
        split = {
            "build (model, optimizer, data, FLOP count)": phase("build_s") + phase("count_s"),
            "compile (trace, XLA, first step)": compile_s,
            "calibration + warm-up": phase("calibration_s") + phase("warmup_s"),
            "timed samples": phase("timed_s"),
            "bookkeeping (IPC, record, store)": driver - df["wall_time_s"].to_numpy(),
        }
        case = f"{family} smoke ({len(df)} configs)"
        for name, values in split.items():
            row("overhead", case, f"median s: {name}", float(np.median(values)))
        per_config = driver - phase("timed_s") - compile_s
        value = float(np.median(per_config))
        row("overhead", case, "median s/config outside samples", value, "< 2 (no compile)", value < 2)
        row("overhead", case, "s once per sweep: start-up + exit", startup)
        row("overhead", case, "median s/config incl. start-up/n", value + startup / len(df))


def scheduling_gaps(df) -> np.ndarray:
    """Seconds between one configuration's result being stored and the next one starting on the same node."""
    node = df["extra"].map(lambda e: (e or {}).get("ray_node", "local"))
    gaps = []
    for _, rows in df.assign(node=node).sort_values("started_at").groupby("node"):
        gaps += list(rows["started_at"].to_numpy()[1:] - rows["finished_at"].to_numpy()[:-1])
    return np.array(gaps)


def bench_ray(tiny: bool, work: Path) -> None:
    """Scheduling overhead per configuration: a local sweep and a sweep on a two-node Ray cluster on this machine."""
    from ray.cluster_utils import Cluster

    grid = [
        "--set",
        "layers=1",
        "--set",
        "nodes=16,32" if tiny else "nodes=16,32,64,128",
        "--set",
        "batch=8,16,32,64",
        "--set",
        "input=32",
        "--set",
        "output=10",
        "--max-seconds",
        "0.3",
    ]
    from paradnn.sweeps.cluster import add_local_node

    cluster = Cluster()
    try:
        add_local_node(cluster)  # the head
        add_local_node(cluster)
        cluster.wait_for_nodes()
        for backend in ("local", "ray"):
            store = work / f"ray-{backend}.sqlite"
            start = time.perf_counter()
            result = paradnn(
                "sweep",
                "fc",
                "--preset",
                "smoke",
                *grid,
                "--store",
                str(store),
                "--backend",
                backend,
                *(["--address", cluster.address] if backend == "ray" else []),
            )
            wall = time.perf_counter() - start
            assert result.returncode == 0, result.stderr[-2000:]
            df = sweep_rows(store)
            gaps = scheduling_gaps(df)
            case = f"fc tiny grid, {backend} ({len(df)} configs{', 2 nodes' if backend == 'ray' else ''})"
            row("ray", case, "median s between configs on a node", float(np.median(gaps)), "< 1", float(np.median(gaps)) < 1)
            row("ray", case, "s first config started after launch", float(df["started_at"].min() - (time.time() - wall)))
            row("ray", case, "s wall for the sweep", wall)
    finally:
        cluster.shutdown()


REPEAT_GRID = ["--set", "layers=2,4", "--set", "nodes=64,256,1024", "--set", "batch=64,256", "--max-seconds", "1.5"]
TINY_GRID = [
    "--set",
    "layers=1",
    "--set",
    "nodes=32,64",
    "--set",
    "batch=32",
    "--set",
    "input=100",
    "--set",
    "output=10",
    "--max-seconds",
    "0.5",
]


def hog(seconds: float, after: float = 0.0) -> subprocess.Popen:
    """A process busy on one core for ``seconds``, starting ``after`` seconds from now (not a sweep's child)."""
    code = f"import time\ntime.sleep({after})\nt = time.time()\nwhile time.time() - t < {seconds}: pass"
    return subprocess.Popen([sys.executable, "-c", code])


def pooled_rows(store: Path):
    """One pooled row per configuration of ``store`` (every measurement of it counts)."""
    from paradnn.analysis.results import Results

    return Results.load(store).measured().pooled().frame.set_index("label")


def bench_repeat(tiny: bool, work: Path) -> None:
    """Three sweeps of one grid, with a CPU hog (a process busy on one core) on for part of the middle
    one, compared by their pooled estimates: once with the contention check (windows where others took
    more than a tenth of a core are refused and timed again) and once without it
    (``PARADNN_MAX_CONTENTION=off``: recorded, never refused). The six sweeps alternate (checked,
    unchecked, ...) so both see the same drift of the machine; the hog is on for the same span of both
    middle sweeps."""
    sets = TINY_GRID if tiny else REPEAT_GRID
    hog_after, hog_for = (1.0, 3.0) if tiny else (12.0, 25.0)
    modes = {"checked": ""} if tiny else {"checked": "", "unchecked": "off"}
    stores: dict[tuple[str, str], Path] = {}
    names = "ab" if tiny else "abc"  # tiny: the path runs; the third sweep adds nothing to that
    for run in names:
        for mode, limit in modes.items():
            stores[mode, run] = work / f"repeat-{mode}-{run}.sqlite"
            busy = hog(hog_for, hog_after) if run == "b" else None
            env = {**os.environ, "PARADNN_MAX_CONTENTION": limit}
            result = subprocess.run(
                [sys.executable, "-m", "paradnn.cli", "sweep", "fc", *sets, "--store", str(stores[mode, run])],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env=env,
            )
            if busy is not None:
                busy.kill()
                busy.wait()
            assert result.returncode == 0, result.stderr
    for mode in modes:
        runs = {run: pooled_rows(stores[mode, run]) for run in names}
        pairs = [(x, y) for i, x in enumerate(names) for y in names[i + 1 :]]
        diffs = np.concatenate(
            [((runs[y]["examples_per_sec"] / runs[x]["examples_per_sec"]).dropna() - 1).abs().to_numpy() for x, y in pairs]
        )
        case = f"fc, {len(runs['a'])} configurations, {len(names)} sweeps, hog in the second, {mode}"
        checked = mode == "checked"
        median, p90 = float(np.median(diffs)), float(np.quantile(diffs, 0.9))
        row(
            "repeat",
            case,
            "median |diff| pooled examples/s",
            median,
            "<= 0.05" if checked else "",
            median <= 0.05 if checked else None,
        )
        row("repeat", case, "p90 |diff| pooled examples/s", p90, "<= 0.15" if checked else "", p90 <= 0.15 if checked else None)
        for x, y in pairs:  # the machine's speed drifting between sweeps moves every configuration alike
            ratio = (runs[y]["examples_per_sec"] / runs[x]["examples_per_sec"]).dropna()
            drift = float(ratio.median())
            row("repeat", case, f"sweeps {x}->{y}: common drift (median ratio)", drift)
            row("repeat", case, f"sweeps {x}->{y}: median |diff| after the drift", float((ratio / drift - 1).abs().median()))
        middle = runs["b"]
        row("repeat", case, "middle sweep: windows refused", float(middle["refused_windows"].fillna(0).sum()))
        row("repeat", case, "middle sweep: rows contended", float(middle["contended"].fillna(0).astype(bool).sum()))
        row("repeat", case, "middle sweep: most contention (cores)", float(middle["contention_cores"].max()))
        for label, r in middle[middle["refused_windows"].fillna(0) > 0].iterrows():
            refused = ", ".join(f"{w['others']:.2f}" for w in (r["extra"] or {}).get("refused", []))
            print(
                f"repeat    {label}: refused windows at {refused} cores; the standing one {r['contention_cores']:.2f}", flush=True
            )


def bench_interleave(tiny: bool, work: Path) -> None:
    """Two comparisons on this machine, each one sweep of several runs (interleaved rounds: every round
    times both sides of a configuration one after the other, in a shuffled order), done three times:
    how far each median ratio moves between the runs [within 3%]. XLA on against off, and float32
    against mixed bfloat16 (XLA on)."""
    from paradnn.analysis.results import Results
    from paradnn.platform import parse_target
    from paradnn.space import expand
    from paradnn.store import Store
    from paradnn.sweeps.backends import run_sweep
    from paradnn.sweeps.plan import SilentProgress, SweepOptions

    grid = (
        {"layers": [1], "nodes": [32, 64], "batch": [32], "input": [100], "output": [10]}
        if tiny
        else {"layers": [2, 4], "nodes": [128, 512], "batch": [64, 256], "input": [2000], "output": [1000]}
    )
    configs = expand("fc", "quick", grid)
    seconds = 0.5 if tiny else 1.5
    target = parse_target("cpu")
    comparisons = {
        "xla on / off": ("xla", False, True, [RunSettings(xla=x, max_seconds=seconds) for x in (False, True)]),
        "mixed_bfloat16 / float32": (
            "dtype",
            "float32",
            "mixed_bfloat16",
            [RunSettings(xla=True, dtype=d, max_seconds=seconds) for d in ("float32", "mixed_bfloat16")],
        ),
    }
    comparisons = dict(list(comparisons.items())[:1]) if tiny else comparisons
    medians: dict[str, list[float]] = {name: [] for name in comparisons}
    for run in range(2 if tiny else 3):
        for name, (vary, base, other, runs) in comparisons.items():
            store = work / f"interleave-{vary}-{run}.sqlite"
            with Store(store) as s:
                run_sweep(configs, s, SweepOptions(settings=runs[0], target=target), runs=runs, progress=SilentProgress)
            result = Results.load(store).matched(vary, base, other, family="fc")
            medians[name].append(result.median)
            row(
                "interleave",
                f"{name}, run {run + 1}",
                f"median ratio over {result.n} ({result.interleaved} interleaved)",
                result.median,
            )
    for name, values in medians.items():
        spread = max(values) / min(values) - 1
        row("interleave", f"{name}, {len(values)} runs", "largest / smallest median - 1", spread, "<= 0.03", spread <= 0.03)


def bench_workers(tiny: bool, work: Path) -> None:
    """Each grid swept with one worker and with two, alternating (1, 2, 1, 2): each sweep's wall time
    as a user sees it (process start included), and how far the two settings' rows differ next to
    two sweeps of one setting. Two workers build and compile side by side and time one at a time
    (``paradnn sweep --workers``), so the rows must not move beyond the machine's own scatter."""
    # CNN without XLA: prepared by TensorFlow's graph optimiser on one core, so two workers overlap [< 1].
    # FC with XLA (chosen by --xla auto here): XLA's compiler uses both cores, so the sweep measures each
    # configuration alone, as one worker does [no slower: <= 1.05].
    grids = {
        "cnn quick": (["cnn", "--preset", "quick", "--max-seconds", "0.8"], 1.0),
        "fc quick, 4 layers": (["fc", "--preset", "quick", "--set", "layers=4", "--max-seconds", "0.8"], 1.05),
    }
    if tiny:
        grids = {
            "fc tiny": (
                [
                    "fc",
                    "--set",
                    "layers=1",
                    "--set",
                    "nodes=32,64",
                    "--set",
                    "batch=32",
                    "--set",
                    "input=100",
                    "--set",
                    "output=10",
                    "--max-seconds",
                    "0.3",
                    "--no-xla",
                ],
                1.0,
            )
        }
    runs = "a" if tiny else "ab"
    for name, (args, most) in grids.items():
        walls, rates = {}, {}
        for run in runs:
            for workers in (1, 2):
                store = work / f"workers-{name.split()[0]}-{workers}{run}.sqlite"
                start = time.perf_counter()
                result = paradnn("sweep", *args, "--workers", str(workers), "--store", str(store))
                walls[workers, run] = time.perf_counter() - start
                assert result.returncode == 0, result.stderr
                rates[workers, run] = sweep_rows(store).set_index("label")["examples_per_sec"]
        ratio = float(np.median([walls[2, run] / walls[1, run] for run in runs]))
        case = f"{name}, {len(rates[1, 'a'])} configs, 1 vs 2 workers ({len(runs) * 2} sweeps)"
        row("workers", case, "wall s, 2 workers / 1", ratio, f"< {most:g}", ratio < most)

        across = float(np.median([_apart(rates[1, run], rates[2, run]) for run in runs]))
        if tiny:
            row("workers", case, "median |diff| examples/s, 1 vs 2", across)
            continue
        within = max(_apart(rates[1, "a"], rates[1, "b"]), _apart(rates[2, "a"], rates[2, "b"]))
        row(
            "workers",
            case,
            "median |diff| examples/s, 1 vs 2",
            across,
            f"<= within one setting + 0.02 ({within:.3f})",
            across <= within + 0.02,
        )


def _apart(a, b) -> float:
    """Median |b / a - 1| over the configurations two sweeps share (examples/s by label)."""
    return float(((b / a).dropna() - 1).abs().median())


def bench_projection(tiny: bool, work: Path) -> None:
    """Projection checked where the truth is here (issue 26): each configuration is measured on
    ``cpu[threads=1]`` and ``cpu`` in turn (XLA off, float32), profiled on the first, projected onto
    the second's measured ceilings and compared with the second's own step."""
    from paradnn.analysis.projection import Peaks, dominant_bound, projection, scale_factor
    from paradnn.platform import parse_target
    from paradnn.space import expand
    from paradnn.store import Store
    from paradnn.sweeps.backends import run_sweep
    from paradnn.sweeps.plan import SilentProgress, SweepOptions
    from paradnn.sweeps.profiles import profile_local

    source, target = "cpu[threads=1]", "cpu"
    grids = {"fc": ("smoke", {"nodes": [64], "batch": [64]})} if tiny else {f: ("quick", None) for f in ("fc", "cnn", "rnn")}
    settings = RunSettings(xla=False, max_seconds=0.3 if tiny else 2.0)
    store = work / "projection.sqlite"
    for family, (preset, overrides) in grids.items():
        configs = expand(family, preset, overrides)
        with Store(store) as s:
            for config in configs:  # the two platforms alternate, configuration by configuration
                for platform in (source, target):
                    run_sweep(
                        [config], s, SweepOptions(settings=settings, target=parse_target(platform)), progress=SilentProgress
                    )
            profile_local(configs, s, SweepOptions(settings=settings, target=parse_target(source)), progress=SilentProgress)
        rows, summary = projection(str(store), source, target, family)
        rows = rows.dropna(subset=["measured_step_time_s"])
        error = rows["projected_step_time_s"] / rows["measured_step_time_s"] - 1
        median = float(error.abs().median())
        case = f"{family} {preset}, {source} -> {target} ({len(rows)} configs)"
        row("projection", case, "median |error| of the step", median, "<= 0.25 (goal 0.10)", median <= 0.25)
        row("projection", case, "median signed error (+: projected too slow)", float(error.median()))
        bound = dominant_bound(rows)
        for name, errors in error.abs().groupby(bound):
            row("projection", case, f"median |error|, {name}-dominated (n={len(errors)})", float(errors.median()))
        # The baseline: the whole step scaled by one roofline ratio (peaks, no curve), as `predict`'s roofline moves a step.
        peaks = [dataclasses.replace(Peaks(**summary[side]), curve=()) for side in ("from", "to")]
        factor = [scale_factor(i, 1.0, "step", *peaks)[1] for i in rows["intensity"]]
        roofline = rows["source_step_time_s"] * factor / rows["measured_step_time_s"] - 1
        row("projection", case, "median |error|, whole step by the roofline ratio (baseline)", float(roofline.abs().median()))
        for r, e in zip(rows.itertuples(), error):
            print(
                f"  {r.label}: projected {r.projected_step_time_s * 1e3:.3g} ms, measured {r.measured_step_time_s * 1e3:.3g} "
                f"ms ({e:+.0%}), bound {r.bound}",
                file=sys.stderr,
            )


# ------------------------------------------------------------------ analysis at scale


def synthetic_store(path: Path, n: int) -> tuple[float, float]:
    """Fill ``path`` with ``n`` synthetic FC rows on two platforms; returns insert and query rates (rows/s)."""
    from paradnn.counting import count_params, flops_model
    from paradnn.space import expand
    from paradnn.store import Store

    rng = np.random.default_rng(0)
    configs = expand("fc", "paper")
    plans = [
        ("synthetic-a", "float32", True),
        ("synthetic-b", "float32", True),
        ("synthetic-a", "float32", False),
        ("synthetic-a", "mixed_bfloat16", True),
    ]
    records = []
    for platform, dtype, xla in plans:
        speed = {"synthetic-a": 1e12, "synthetic-b": 3e12}[platform] * (1.3 if dtype != "float32" else 1) * (1.1 if xla else 1)
        for c in configs:
            if len(records) >= n:
                break
            util = min(0.95, 0.05 * math.log2(c.batch) * math.log2(c.nodes) / 10 * rng.lognormal(0, 0.1))
            step = flops_model(c) / (speed * util)
            state = "oom" if c.nodes * c.nodes * c.layers > 2**31 else "ok"
            records.append(
                {
                    "family": "fc",
                    "label": c.label,
                    **c.hyperparameters(),
                    "dtype": dtype,
                    "xla": xla,
                    "platform": platform,
                    "state": state,
                    "params": count_params(c),
                    "flops_model": flops_model(c),
                    "bytes_estimate": 40.0 * count_params(c),
                    "step_time_s": step if state == "ok" else None,
                    "examples_per_sec": c.batch / step if state == "ok" else None,
                    "flops_per_sec": flops_model(c) / step if state == "ok" else None,
                    "utilization": util if state == "ok" else None,
                    "sw_tensorflow": "2.21.0",
                    "source": f"synthetic:{platform}:{dtype}:xla={xla}",
                }
            )
    with Store(path) as s:
        start = time.perf_counter()
        for i in range(0, len(records), 500):
            s.add_results(records[i : i + 500])
        insert_rate = len(records) / (time.perf_counter() - start)
        for name, peak in (("synthetic-a", 2e12), ("synthetic-b", 6e12)):
            ceil = {"matmul_flops": {"float32": {"xla": peak}, "bfloat16": {"xla": 2 * peak}}, "copy_bandwidth": {"xla": 1e11}}
            s.put_platform(f"synthetic:{name}", name, {"name": name, "source": "synthetic"}, ceil, "measured")
        start = time.perf_counter()
        n_read = len(s.results())
        query_rate = n_read / (time.perf_counter() - start)
    return insert_rate, query_rate


def bench_analysis(tiny: bool, work: Path) -> None:
    from paradnn.reports import ensure_kernel, execute_notebook

    n = 500 if tiny else 20_000
    store = work / "synthetic.sqlite"
    insert_rate, query_rate = synthetic_store(store, n)
    row("analysis", f"store of {n} synthetic rows", "insert rows/s (batches of 500)", insert_rate)
    row("analysis", f"store of {n} synthetic rows", "query rows/s (all rows)", query_rate)
    ensure_kernel()
    common = {"store": str(store), "measure_missing": False, "families": ["fc"]}
    notebooks = {
        "architecture": {"platform": "synthetic-a", "profile_count": 0, "low_precision_families": ["fc"]},
        "platform_comparison": {"baseline": "synthetic-a", "target": "synthetic-b"},
        "software_stack": {"platform": "synthetic-a"},
    }
    for name, params in list(notebooks.items())[: 1 if tiny else 3]:
        start = time.perf_counter()
        source, executed = ROOT / "notebooks" / f"{name}.ipynb", work / f"{name}.ipynb"
        execute_notebook(source, executed, {**common, **params})
        value = time.perf_counter() - start
        row("analysis", f"{name} over {n} rows", "wall s", value, "< 60", value < 60)


# ------------------------------------------------------------------ merging a large store


def heavy_store(path: Path, rows: int) -> None:
    """A store of ``rows`` measured rows as heavy as real ones (200 samples each), written with plain SQL."""
    from paradnn.store import Store

    record = {
        "family": "fc",
        "label": "layer_1-node_8-input_8-output_8-bs_8",
        "layers": 1,
        "nodes": 8,
        "input": 8,
        "output": 8,
        "batch": 8,
        "platform": "cpu",
        "state": "ok",
        "step_time_s": 0.01,
        "samples_s": [0.01] * 200,
        "device_name": "bench",
    }
    with Store(path) as s:
        s.add_results([record])
        names = [d[0] for d in s.conn.execute("SELECT * FROM results LIMIT 1").description if d[0] != "id"]
        first = dict(s.conn.execute(f"SELECT {', '.join(names)} FROM results LIMIT 1").fetchone())
        values = [
            [f"k{i:019d}" if n == "run_key" else 1e6 + i if n == "finished_at" else first[n] for n in names] for i in range(rows)
        ]
        with s.transaction() as c:
            c.executemany(f"INSERT INTO results ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", values)


def bench_merge(tiny: bool, work: Path) -> None:
    """Peak resident memory of ``paradnn merge`` of a large source into a new store, beside that of
    the command doing nothing (``paradnn merge --help``): merging streams rows in batches."""
    rows = 500 if tiny else 43_000  # about 90 MB
    source = work / "merge-source.sqlite"
    heavy_store(source, rows)
    size = source.stat().st_size / 1e6
    probe = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    command = [sys.executable, "-m", "paradnn.cli", "merge"]
    into = work / "merged.sqlite"
    cases = (("merge --help (the floor)", ["--help"]), (f"a {size:.0f} MB source", [str(source), "--store", str(into)]))
    for case, args in cases:
        start = time.perf_counter()
        peak = subprocess.run([sys.executable, "-c", probe, *command, *args], capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - start
        mb = int(peak.stdout.strip()) / 1024
        target = "< 200" if "source" in case else ""
        row("merge", case, "peak resident MB", mb, target, (mb < 200) if target and not tiny else None)
        row("merge", case, "wall s", seconds)


def bench_main_job(work: Path) -> None:
    start = time.perf_counter()
    result = paradnn("report", "quick", "--outputs", str(work / "main"))
    value = time.perf_counter() - start
    row("main", "paradnn report quick, empty store", "wall s", value, "exit status 0", result.returncode == 0)


SECTIONS = (
    "harness",
    "fit",
    "workloads",
    "ceiling",
    "input",
    "devices",
    "jax",
    "torch",
    "overhead",
    "ray",
    "repeat",
    "interleave",
    "workers",
    "projection",
    "analysis",
    "merge",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="tiny settings: checks that every section runs")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--main-job", action="store_true", help="also time the README's main command (about 7 min)")
    parser.add_argument("--families", default="fc,cnn,rnn", help="families in the harness section")
    parser.add_argument("--output", default=str(ROOT / "outputs" / "bench" / "latest.json"))
    args = parser.parse_args()
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        print(f"benchmarks: error: unknown section {sorted(unknown)[0]!r}; allowed: {', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    os.environ.setdefault("PARADNN_CACHE_DIR", str(Path.home() / ".cache" / "paradnn"))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        steps = {
            "harness": lambda: bench_harness(args.tiny, args.families.split(",")),
            "fit": lambda: bench_fit(args.tiny),
            "workloads": lambda: bench_workloads(args.tiny),
            "ceiling": lambda: bench_ceiling(args.tiny),
            "input": lambda: bench_input(args.tiny),
            "devices": lambda: bench_devices(args.tiny),
            "jax": lambda: bench_framework("jax_loop.py", args.tiny),
            "torch": lambda: bench_framework("torch_loop.py", args.tiny),
            "overhead": lambda: bench_overhead(args.tiny, work),
            "ray": lambda: bench_ray(args.tiny, work),
            "repeat": lambda: bench_repeat(args.tiny, work),
            "interleave": lambda: bench_interleave(args.tiny, work),
            "workers": lambda: bench_workers(args.tiny, work),
            "projection": lambda: bench_projection(args.tiny, work),
            "analysis": lambda: bench_analysis(args.tiny, work),
            "merge": lambda: bench_merge(args.tiny, work),
        }
        for name in only:
            started = time.perf_counter()
            steps[name]()
            print(f"benchmarks: {name} took {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        if args.main_job:
            bench_main_job(work)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    from paradnn.engine.machine import describe

    out.write_text(json.dumps({"machine": describe(), "tiny": args.tiny, "rows": rows}, indent=1, default=str))
    missed = [r for r in rows if r["ok"] is False]
    print(f"{len(rows)} figures, {len(missed)} targets missed; written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
