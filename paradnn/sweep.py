"""Sweeps that survive anything: plan a grid, skip what the store has, measure the rest.

Each configuration runs in a worker process that is reused across configurations (so
TensorFlow's import is paid once) and replaced after a crash, a timeout or an
out-of-memory kill. The driver (this process) never imports TensorFlow; it writes every
result to the store in its own transaction the moment it arrives, so ``kill -9`` loses
nothing that had finished and a rerun resumes.

Failures are results:
  ``skipped``  predicted to exceed the memory budget (the estimate is recorded);
  ``oom``      TensorFlow could not allocate, or the worker outgrew the budget and was
               stopped, or the kernel's OOM killer took it (the worker volunteers:
               ``oom_score_adj`` 1000, so the sweep itself is never the victim);
  ``timeout``  a configuration ran past its time limit;
  ``error``    anything else, with the message (a crashed worker included).

Order: the grid is run in a fixed pseudo-random permutation (seed 0), so a sweep cut
short by ``--max-minutes`` or Ctrl-C has covered a uniform sample of the grid, every axis
value in proportion, instead of only the first values of the first axes.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import platform as pyplatform
import random
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

import psutil

from paradnn import __version__
from paradnn.config import Config, parse_label
from paradnn.counting import memory_estimate
from paradnn.harness import RunSettings
from paradnn.platform import Target, compute_dtype, fingerprint
from paradnn.record import describe_config
from paradnn.store import STATES, Store, run_key

FAULT_CRASH_ENV = "PARADNN_FAULT_CRASH_ON"  # fault injection for tests: a label whose worker aborts
WORKER_START_TIMEOUT_S = 300.0
POLL_S = 0.2


@dataclass(frozen=True)
class SweepOptions:
    """How to run a sweep (the grid itself is a list of configurations)."""

    settings: RunSettings = field(default_factory=RunSettings)
    target: Target = field(default_factory=Target)
    memory_budget_bytes: float | None = None  # None: 60% of RAM on CPU, no prediction on accelerators
    timeout_s: float = 600.0
    max_minutes: float | None = None
    retry_failed: bool = False
    force: bool = False
    seed: int = 0


@dataclass
class SweepSummary:
    planned: int = 0
    already_done: int = 0
    states: Counter = field(default_factory=Counter)
    interrupted: bool = False
    out_of_time: bool = False
    left: int = 0

    def line(self) -> str:
        done = ", ".join(f"{n} {s}" for s, n in sorted(self.states.items())) or "nothing measured"
        text = f"{self.planned} configurations: {self.already_done} already in the store; this run: {done}"
        if self.interrupted or self.out_of_time:
            why = "interrupted" if self.interrupted else "time budget spent"
            text += f"; {why}, {self.left} left (rerun to resume)"
        return text


def default_memory_budget(target: Target) -> float | None:
    """60% of RAM on a CPU; on accelerators rely on TensorFlow's own OOM errors."""
    return 0.6 * psutil.virtual_memory().total if target.kind == "cpu" else None


def ordered(configs: list[Config], seed: int = 0) -> list[Config]:
    """The run order: a fixed pseudo-random permutation (see the module docstring)."""
    order = list(configs)
    random.Random(seed).shuffle(order)
    return order


# ---------------------------------------------------------------------------- worker


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when the driver dies, and to pick it first on OOM."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    try:
        Path("/proc/self/oom_score_adj").write_text("1000")
    except OSError:
        pass


def _worker(conn, target: Target) -> None:
    """Worker main loop: import TensorFlow once, then measure what the driver sends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's business
    _die_with_parent()
    from paradnn import platform as plat

    plat.apply_threads(target)
    from paradnn.record import measure_config
    from paradnn.tfimport import keras

    info = plat.describe(target)
    ceilings = plat.ceilings(target, info)
    conn.send(("ready", info, ceilings))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            message = None
        if message is None:  # done: skip TensorFlow's interpreter teardown (~1 s); nothing is pending
            os._exit(0)
        family, label, settings = message
        if os.environ.get(FAULT_CRASH_ENV) == label:
            os.abort()
        # Drop Keras's global state from the previous configuration (its garbage is collected
        # once, before timing starts: see harness.run_protocol).
        keras.utils.clear_session(free_memory=False)
        try:
            record = measure_config(parse_label(family, label), RunSettings(**settings), target, info, ceilings)
            conn.send(("result", record))
        except Exception as exc:  # noqa: BLE001 - any failure is a result
            conn.send(("failed", f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=5)))


class Worker:
    """A worker process and its pipe, seen from the driver."""

    def __init__(self, target: Target) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker, args=(child, target), daemon=True)
        self.process.start()
        child.close()
        self.ps = psutil.Process(self.process.pid)
        if not self.conn.poll(WORKER_START_TIMEOUT_S):
            self.kill()
            raise RuntimeError("the worker did not start within 5 minutes")
        try:
            _, self.info, self.ceilings = self.conn.recv()
        except EOFError:
            self.kill()
            raise RuntimeError(f"the worker died while starting (exit code {self.process.exitcode})") from None
        self.base_rss = self.rss()

    def rss(self) -> int:
        try:
            return int(self.ps.memory_info().rss)
        except psutil.Error:
            return 0

    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(10)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.process.join(10)
        self.kill()


# ---------------------------------------------------------------------------- driver


def _base_record(config: Config, options: SweepOptions, info: dict | None) -> dict:
    """The record of a configuration that produced no measurement."""
    s = options.settings
    record = describe_config(config, s.dtype, trace=False)
    record.update(
        dtype=s.dtype, compute_dtype=compute_dtype(s.dtype), xla=s.xla, max_seconds=s.max_seconds,
        platform=options.target.id, threads=options.target.threads,
    )  # fmt: skip
    if info:
        record.update(_platform_fields(info))
    return record


def _platform_fields(info: dict) -> dict:
    return {
        "platform_fingerprint": fingerprint(info),
        "device_name": info["name"],
        "host": info["host"],
        "software": info["software"],
    }


def _key(config: Config, options: SweepOptions, info: dict) -> str:
    record = {"family": config.family, "label": config.label, "dtype": options.settings.dtype, "xla": options.settings.xla,
              "platform": options.target.id, **_platform_fields(info)}  # fmt: skip
    record.update({f"sw_{k}": v for k, v in info["software"].items()})
    return run_key(record)


def _skip_states(options: SweepOptions) -> tuple[str, ...]:
    if options.force:
        return ()
    return ("ok",) if options.retry_failed else STATES


def run_sweep(
    configs: list[Config],
    store: Store,
    options: SweepOptions,
    progress: Callable[..., object] | None = None,
) -> SweepSummary:
    """Measure every configuration the store lacks; see the module docstring."""
    from tqdm import tqdm

    summary = SweepSummary(planned=len(configs))
    deadline = time.monotonic() + options.max_minutes * 60 if options.max_minutes else None
    budget = options.memory_budget_bytes or default_memory_budget(options.target)
    worker: Worker | None = None
    bar = None
    try:
        info = _known_platform(store, options.target)
        if info is None:  # first sweep of this platform and stack: ask a worker
            worker = _start_worker(store, options.target)
            info = worker.info
        done = store.run_keys(_skip_states(options))
        todo = [c for c in ordered(configs, options.seed) if _key(c, options, info) not in done]
        summary.already_done = len(configs) - len(todo)
        summary.left = len(todo)
        bar = (progress or tqdm)(total=len(todo), unit="config", desc=f"sweep {options.target.id}", dynamic_ncols=True)
        for config in todo:
            if deadline and time.monotonic() >= deadline:
                summary.out_of_time = True
                break
            bar.set_postfix_str(f"failed {sum(n for s, n in summary.states.items() if s != 'ok')} | {config.label}")
            if worker is None or not worker.alive():
                worker = _start_worker(store, options.target)
            record, worker = _run_one(config, worker, options, budget, deadline)
            if record is None:  # the sweep's own time ran out mid-configuration: not a result
                summary.out_of_time = True
                break
            store.add_results([record])
            summary.states[record["state"]] += 1
            summary.left -= 1
            bar.update(1)
    except KeyboardInterrupt:
        summary.interrupted = True
    finally:
        if bar is not None:
            bar.close()
        if worker is not None:
            worker.stop()
    return summary


def _start_worker(store: Store, target: Target) -> Worker:
    worker = Worker(target)
    store.put_platform(fingerprint(worker.info), target.id, worker.info, worker.ceilings, "measured")
    return worker


def _known_platform(store: Store, target: Target) -> dict | None:
    """What an earlier sweep recorded about ``target`` on this host with these versions.

    Lets a sweep with nothing left to measure finish without starting TensorFlow.
    """
    installed = {"python": pyplatform.python_version(), "paradnn": __version__}
    for name in ("tensorflow", "keras"):
        try:
            installed[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            return None
    for info in store.platform_infos(target.id):
        software = info.get("software", {})
        if info.get("host") == pyplatform.node() and all(software.get(k) == v for k, v in installed.items()):
            return info
    return None


def _run_one(
    config: Config, worker: Worker, options: SweepOptions, budget: float | None, deadline: float | None
) -> tuple[dict | None, Worker | None]:
    """Measure one configuration; returns its record (None if the sweep ran out of time)."""
    s = options.settings
    base = _base_record(config, options, worker.info)
    base["started_at"] = time.time()
    predicted = memory_estimate(config, 2 if compute_dtype(s.dtype) != "float32" else 4) + worker.base_rss
    base["memory_estimate_bytes"] = predicted
    if budget and predicted > budget:
        return {**base, "state": "skipped", "error": f"predicted {_gib(predicted)} > budget {_gib(budget)}"}, worker
    worker.conn.send((config.family, config.label, asdict(s)))
    started = time.monotonic()
    while not worker.conn.poll(POLL_S):
        rss = worker.rss()
        if budget and rss > budget:
            worker.kill()
            return {**base, "state": "oom", "error": f"worker grew to {_gib(rss)} > budget {_gib(budget)}; stopped"}, None
        if not worker.alive():
            break
        if time.monotonic() - started > options.timeout_s:
            worker.kill()
            return {**base, "state": "timeout", "error": f"no result within {options.timeout_s:.0f} s"}, None
        if deadline and time.monotonic() > deadline:
            worker.kill()
            return None, None
    try:
        message = worker.conn.recv()
    except (EOFError, OSError):
        worker.process.join(5)
        code = worker.process.exitcode
        worker.kill()
        if code == -signal.SIGKILL:
            return {**base, "state": "oom", "error": "worker killed by SIGKILL (the kernel's OOM killer, most likely)"}, None
        return {**base, "state": "error", "error": f"worker crashed (exit code {code})"}, None
    if message[0] == "failed":
        return {**base, "state": "error", "error": message[1], "extra": {"traceback": message[2]}}, worker
    record = message[1]
    record.update({k: v for k, v in base.items() if k not in record or record[k] is None})
    return record, worker


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"
