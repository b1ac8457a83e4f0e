"""Slow spells, call by call: where a configuration's 48-62% jumps between sweeps come from (issue 27).

Times one FC configuration's K-step calls for a while, with TensorFlow on every core and then on
one thread, and keeps per call: the wall time, this process's CPU time (all threads), the machine's
``/proc/stat`` shares (user, system, idle, steal) and a fixed single-thread probe (a Python loop)
pinned to each CPU in turn between calls. A *slow* call takes over 1.2x the median. Printed per
thread setting: how many calls were slow, and the medians of each measure in normal and slow calls,
so one can tell a core running slower (the probe slows), the process not running (CPU time per step
stays, wall grows), the hypervisor taking the CPU (steal) and the step's threads spending more CPU
on the same work (CPU time grows with wall, the probe does not).

    python benchmarks/spells.py [--label LABEL] [--seconds 120]   # both settings, a process each
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import numpy as np

DEFAULT_LABEL = "layer_4-node_256-input_2000-output_1000-bs_64"
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def machine_jiffies() -> np.ndarray:
    """The machine's CPU time by kind since boot (``/proc/stat``'s first line), in jiffies."""
    with open("/proc/stat") as f:
        return np.array([float(x) for x in f.readline().split()[1 : 1 + len(STAT_FIELDS)]])


def probe_each_cpu(cpus: list[int]) -> list[float]:
    """Seconds of a fixed pure-Python loop on each CPU in turn (this thread only moves)."""
    out = []
    for cpu in cpus:
        os.sched_setaffinity(0, {cpu})
        start, total = time.perf_counter(), 0
        for i in range(100_000):
            total += i
        out.append(time.perf_counter() - start)
    os.sched_setaffinity(0, set(cpus))
    return out


def record_calls(run, k: int, seconds: float, cpus: list[int]) -> dict[str, np.ndarray]:
    """Per call of ``run(k)`` for ``seconds``: wall and CPU seconds per step, the probes before it, /proc/stat's shares."""
    rows: list[list[float]] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        probes = probe_each_cpu(cpus)
        jiffies, cpu, wall = machine_jiffies(), time.process_time(), time.perf_counter()
        run(k)
        wall, cpu, jiffies = time.perf_counter() - wall, time.process_time() - cpu, machine_jiffies() - jiffies
        shares = jiffies / max(jiffies.sum(), 1.0)
        kinds = (shares[STAT_FIELDS.index(name)] for name in ("user", "system", "idle", "steal"))
        rows.append([wall / k, cpu / k, max(probes), *kinds])
    table = np.array(rows)
    return dict(zip(("wall", "cpu", "probe", "user", "system", "idle", "steal"), table.T))


def summarise(calls: dict[str, np.ndarray]) -> dict[str, object]:
    """Slow-call share and the median of every measure in normal (< 1.05x) and slow (> 1.2x) calls."""
    wall = calls["wall"]
    median = float(np.median(wall))
    groups = {"normal": wall < 1.05 * median, "slow": wall > 1.2 * median}
    out: dict[str, object] = {
        "calls": len(wall),
        "median_ms": 1e3 * median,
        "max_over_median": float(wall.max() / median),
        "slow_share": float(groups["slow"].mean()),
    }
    for name, mask in groups.items():
        if mask.any():
            out[name] = {key: float(np.median(values[mask])) for key, values in calls.items()}
    return out


def words(setting: str, summary: dict) -> str:
    """A summary as lines: the slow share, then each group's medians."""
    lines = [
        f"{setting}: {summary['calls']} calls, median {summary['median_ms']:.2f} ms a step, "
        f"max {summary['max_over_median']:.2f}x the median, slow (> 1.2x) {summary['slow_share']:.1%}"
    ]
    for group in ("normal", "slow"):
        if group in summary:
            m = summary[group]
            lines.append(
                f"  {group:6} wall {1e3 * m['wall']:.2f} ms, CPU {1e3 * m['cpu']:.2f} ms a step, "
                f"probe {1e3 * m['probe']:.2f} ms; machine user {m['user']:.0%}, system {m['system']:.0%}, "
                f"idle {m['idle']:.0%}, steal {m['steal']:.1%}"
            )
    return "\n".join(lines)


def measure(label: str, seconds: float, threads: int | None) -> dict[str, object]:
    """Build ``label`` (XLA on, float32) here with ``threads`` TensorFlow threads (None: its default); record its calls."""
    from paradnn.tfimport import tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    from paradnn.engine.training import Trainer
    from paradnn.families import get

    trainer = Trainer(get("fc").parse_label(label), "float32", True)
    trainer.run(1)
    start = time.perf_counter()
    trainer.run(20)
    k = max(1, int(0.1 / ((time.perf_counter() - start) / 20)))  # calls of about 0.1 s, as the protocol's
    gc.disable()
    return summarise(record_calls(trainer.run, k, seconds, sorted(os.sched_getaffinity(0))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default=DEFAULT_LABEL)
    parser.add_argument("--seconds", type=float, default=120.0, help="per thread setting")
    parser.add_argument("--threads", type=int, help="measure with this many TensorFlow threads in this process (0: its default)")
    args = parser.parse_args()
    if args.threads is not None:
        print(words(f"{args.threads or 'default'} threads", measure(args.label, args.seconds, args.threads or None)), flush=True)
        return
    import subprocess
    import sys

    for threads in ("0", "1"):  # a process each: TensorFlow's thread counts are fixed once it has run
        subprocess.run(
            [sys.executable, __file__, "--label", args.label, "--seconds", str(args.seconds), "--threads", threads], check=True
        )


if __name__ == "__main__":
    main()
