"""Sweeps that survive anything: plan a grid, skip what the store has, measure the rest.

Each configuration runs in a worker process that is reused across configurations (so
TensorFlow's import is paid once) and replaced after a crash, a timeout or an
out-of-memory failure; a sweep that ends normally leaves its worker idle for this
process's next sweep (see :class:`IdleWorkers`). The driver (this process) never imports
TensorFlow; it writes every result to the store in its own transaction the moment it
arrives, so ``kill -9`` loses nothing that had finished and a rerun resumes. Driver and worker speak in the small
typed messages below; :func:`run_local` takes any worker factory, so the driver's
handling of timeouts, crashes and kills is tested in-process with a fake worker.

Failures are results:
  ``skipped``  predicted to exceed the memory budget (the estimate is recorded);
  ``oom``      TensorFlow could not allocate, or the worker outgrew the budget and was
               stopped, or the kernel's OOM killer took it (the system's ``oom_kill``
               count rose; the worker volunteers with ``oom_score_adj`` 1000, so the
               sweep itself is never the victim). A worker that hit OOM is replaced;
  ``timeout``  a configuration ran past its time limit;
  ``error``    anything else, with the message (a crash, or a kill from outside).

Before measuring a configuration the sweep claims it in the store; a second sweep over an
overlapping grid skips what the first one is measuring (two sweeps on one device would
disturb each other's timings anyway). A claim dies with its process.

Order: the grid is run in a fixed pseudo-random permutation (seed 0), so a sweep cut
short by ``--max-minutes`` or Ctrl-C has covered a uniform sample of the grid, every axis
value in proportion, instead of only the first values of the first axes.
"""

from __future__ import annotations

import atexit
import os
import platform as pyplatform
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from importlib import metadata
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Protocol, TypeVar

import psutil

from paradnn.config import ConfigError, cache_dir, check_number
from paradnn.engine import frameworks
from paradnn.engine.gate import GATE_ENV, gate
from paradnn.engine.machine import die_with_parent
from paradnn.engine.protocol import RunSettings
from paradnn.engine.record import describe_config, settings_fields
from paradnn.families import Config, family_of, parse_label
from paradnn.identity import fingerprint, run_key
from paradnn.platform import Target
from paradnn.store import CLAIM_MARGIN_S, STATES, Store
from paradnn.version import __version__

FAULT_CRASH_ENV = "PARADNN_FAULT_CRASH_ON"  # fault injection for tests: a label whose worker aborts
WORKER_START_TIMEOUT_S = 300.0
POLL_S = 0.2
IDLE_WORKERS_MAX = 3  # idle workers kept between sweeps (a software-stack sweep has one per stack)
IDLE_RSS_MAX_SHARE = 0.1  # a worker holding more of the RAM than this is stopped, not kept
MAX_WINDOWS = 5  # timing windows per configuration (--windows), further ones included (see confirmed)
MAX_WORKERS = 4  # worker processes of one local sweep (--workers)
WINDOW_CONFIRM = 0.10  # another window this close to the fastest confirms it; a row never confirmed is unstable
T = TypeVar("T")


# ---------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class Measure:
    """Driver -> worker: measure one configuration (``None`` instead asks the worker to exit)."""

    family: str
    label: str
    settings: dict


@dataclass(frozen=True)
class Describe:
    """Driver -> worker: the analytic record of a configuration whose family is counted by
    walking its Keras model (the driver never imports TensorFlow). Answered with a Result."""

    family: str
    label: str
    dtype: str


@dataclass(frozen=True)
class ChooseXLA:
    """Driver -> worker: which XLA setting ``--xla auto`` uses for a family and dtype here
    (probed once per platform and stack, then cached). Answered with a Result."""

    family: str
    dtype: str


@dataclass(frozen=True)
class Profile:
    """Driver -> worker: profile one configuration's step by operation category (for projection).
    Answered with a Result whose record holds the traces table's ``rows``."""

    family: str
    label: str
    dtype: str


@dataclass(frozen=True)
class Ready:
    """Worker -> driver, once: the platform it measures on."""

    info: dict
    ceilings: dict


@dataclass(frozen=True)
class StartFailed:
    """Worker -> driver, instead of Ready: the platform cannot be used (an absent GPU, say)."""

    error: str


@dataclass(frozen=True)
class Result:
    """Worker -> driver: the record of one measurement (its state may be ``oom`` or ``error``)."""

    record: dict


@dataclass(frozen=True)
class Failed:
    """Worker -> driver: measuring raised; the worker is still usable."""

    error: str
    traceback: str


# ---------------------------------------------------------------------------- options and summary


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
    xla_choices: dict[str, bool] = field(default_factory=dict)  # per family, when settings.xla is None (auto)
    windows: int = 1  # timing windows per configuration, one pass over the grid apart (see merge_windows)
    workers: int = 1  # worker processes preparing side by side, timing one at a time (see _measure_todo)

    def __post_init__(self) -> None:  # every bound checked here, whichever front end made the options
        for name, value, top in (("windows", self.windows, MAX_WINDOWS), ("workers", self.workers, MAX_WORKERS)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ConfigError(name, value, f"a whole number from 1 to {top}")
        for name, value in (("max_minutes", self.max_minutes), ("timeout_s", self.timeout_s),
                            ("memory_budget", self.memory_budget_bytes)):  # fmt: skip
            if value is not None:
                check_number(name, value)

    def settings_for(self, config: Config) -> RunSettings:
        """The run settings of one configuration: with ``--xla auto``, its family's chosen XLA setting."""
        if self.settings.xla is not None:
            return self.settings
        return replace(self.settings, xla=self.xla_choices.get(config.family, False))


# One configuration to measure: its run key, its worker's slot and the options of its run.
Job = tuple[Config, str, str, SweepOptions]


@dataclass
class SweepSummary:
    planned: int = 0
    already_done: int = 0
    busy: int = 0  # being measured by another sweep
    states: Counter = field(default_factory=Counter)
    interrupted: bool = False
    out_of_time: bool = False
    left: int = 0
    stranded: int = 0  # left because no worker of their platform is alive (a cluster that lost its nodes)
    skipped_stacks: dict[str, str] = field(default_factory=dict)  # software stacks that could not be built or started
    # Stamped on every row this sweep stores (``extra["sweep"]``): rows of one sweep were measured side by side.
    sweep_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def stamp(self, record: dict) -> dict:
        """``record`` marked as measured by this sweep."""
        return {**record, "extra": {**(record.get("extra") or {}), "sweep": self.sweep_id}}

    def line(self) -> str:
        done = ", ".join(f"{n} {s}" for s, n in sorted(self.states.items())) or "nothing measured"
        text = f"{self.planned} configurations: {self.already_done} already in the store; this run: {done}"
        if self.busy:
            text += f"; {self.busy} being measured by another sweep (skipped)"
        if self.interrupted or self.out_of_time:
            why = "interrupted" if self.interrupted else "time budget spent"
            text += f"; {why}, {self.left} left (rerun to resume)"
        elif self.stranded:
            text += f"; {self.stranded} left: no node of their platform is alive (rerun to resume)"
        return text + "".join(f"; stack {name} skipped: {why}" for name, why in self.skipped_stacks.items())


class SilentProgress:
    """A progress bar that shows nothing (for notebooks and library calls that print a summary instead)."""

    def __init__(self, *args, total: int = 0, **kwargs) -> None:
        self.total = total

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass


def default_memory_budget(target: Target) -> float | None:
    """60% of RAM on a CPU; on accelerators rely on TensorFlow's own OOM errors."""
    return 0.6 * psutil.virtual_memory().total if target.kind == "cpu" else None


def ordered(configs: list[T], seed: int = 0) -> list[T]:
    """The run order: a fixed pseudo-random permutation (see the module docstring)."""
    order = list(configs)
    random.Random(seed).shuffle(order)
    return order


def oom_kills() -> int:
    """How many processes the kernel's OOM killer has killed since boot (-1 if unknown)."""
    try:
        match = re.search(r"^oom_kill (\d+)$", Path("/proc/vmstat").read_text(), re.MULTILINE)
    except OSError:
        return -1
    return int(match.group(1)) if match else -1


# ---------------------------------------------------------------------------- the worker process


def _worker_main(conn, target: Target) -> None:
    """Worker main loop: import TensorFlow once, then measure what the driver sends.

    Everything a worker does (starting, then each message) holds the timing gate shared,
    and the protocol's timed phases hold it exclusively (:mod:`paradnn.engine.gate`): the
    workers of a multi-worker sweep start, build and compile side by side, never beside a
    timed call. Waiting for a message holds nothing."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's business
    die_with_parent()
    from paradnn.engine import ceilings as ceil
    from paradnn.engine import machine
    from paradnn.engine.inputs import stop_finished

    try:
        with gate().shared():
            machine.apply_threads(target)
            info = machine.describe(target)
            ceilings = ceil.ceilings(target, info)
    except ConfigError as exc:
        conn.send(StartFailed(exc.allowed))  # the driver names the option and value
        os._exit(0)
    conn.send(Ready(info, ceilings))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            message = None
        if message is None:  # done: skip TensorFlow's interpreter teardown (~1 s); nothing is pending
            os._exit(0)
        with gate().shared():
            ceilings = _answer(conn, message, target, info, ceilings)
        stop_finished()  # outside the gate: it can wait, idle, for seconds (paradnn.engine.inputs.finish)


def _answer(conn, message: Measure | Describe | ChooseXLA | Profile, target: Target, info: dict, ceilings: dict) -> dict:
    """Do what one message asks and send the result (any failure is a result too); returns the
    platform's ceilings as they now stand (a probe adds its XLA choice, a beaten ceiling rises)."""
    from paradnn.engine import ceilings as ceil
    from paradnn.engine.profiler import op_breakdown, trace_rows
    from paradnn.engine.record import measure_config
    from paradnn.tfimport import keras

    try:
        if isinstance(message, ChooseXLA):
            choice = ceil.xla_choice(target, info, message.family, message.dtype)
            ceilings = ceil.ceilings(target, info)
            conn.send(Result({**choice, "ceilings": ceilings}))
        elif isinstance(message, Profile):
            keras.utils.clear_session(free_memory=False)
            breakdown = op_breakdown(parse_label(message.family, message.label), message.dtype)
            conn.send(Result({"rows": trace_rows(breakdown, target.platform, message.dtype)}))
        elif isinstance(message, Describe):
            conn.send(Result(describe_config(parse_label(message.family, message.label), message.dtype, trace=False)))
        else:
            if os.environ.get(FAULT_CRASH_ENV) == message.label:
                os.abort()
            # Drop Keras's global state from the previous configuration (its garbage is collected
            # once, before timing starts: see harness.run_protocol).
            keras.utils.clear_session(free_memory=False)
            config = parse_label(message.family, message.label)
            conn.send(Result(measure_config(config, RunSettings(**message.settings), target, info, ceilings)))
    # Any failure is a result: ChooseXLA falls back to XLA off and says so, a Profile is
    # reported and the sweep goes on, a Describe records what it can without the counts.
    except Exception as exc:  # noqa: BLE001
        conn.send(Failed(f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=5)))
    return ceilings


class Worker(Protocol):
    """What the driver needs of a worker (a process, or a fake one in tests)."""

    info: dict
    ceilings: dict
    base_rss: int

    def send(self, message: Measure | Describe | ChooseXLA | Profile | None) -> None: ...
    def poll(self, timeout: float) -> bool: ...
    def recv(self) -> Result | Failed: ...  # EOFError when the worker died
    def rss(self) -> int: ...
    def alive(self) -> bool: ...
    def exit_code(self) -> int | None: ...
    def kill(self) -> None: ...
    def stop(self) -> None: ...


def _last_line(path: str) -> str:
    """The last non-empty line of a worker's log (an environment's import error, say), or ''."""
    try:
        lines = [x.strip() for x in Path(path).read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _worker_entry(fd: int, target: Target) -> None:
    """The worker process's entry point (``python -c``): the driver's end of the socket is ``fd``."""
    from multiprocessing.connection import Connection

    _worker_main(Connection(fd), target)


class ProcessWorker:
    """A worker process and its socket, seen from the driver.

    The worker is a fresh interpreter (``python -c``) talking over a socket pair, not a
    ``multiprocessing`` child: spawning one re-imports the caller's ``__main__``, which
    breaks any plain script that calls :func:`paradnn.sweep` without an
    ``if __name__ == "__main__":`` guard.
    """

    def __init__(self, target: Target, framework: str = frameworks.DEFAULT, python: str | None = None,
                 gated: bool = False) -> None:  # fmt: skip
        parent, child = socket.socketpair()
        code = f"from paradnn.sweeps.driver import _worker_entry, Target; _worker_entry({child.fileno()}, {target!r})"
        # The worker's own TMPDIR, removed with it: it exits with os._exit (or is killed), which skips
        # the hooks that delete TensorFlow's autograph files (one per traced step) and kept replicas' folder.
        self.tmp = tempfile.TemporaryDirectory(prefix="paradnn-worker-")
        env = {**worker_environment(framework, gated), "TMPDIR": self.tmp.name}
        self.identity = worker_identity(target, framework, python, gated)
        # ``python``: another environment's interpreter (a software stack, see paradnn.sweeps.stacks). Older
        # TensorFlows log to stderr whatever TF_CPP_MIN_LOG_LEVEL says: their stderr goes to the
        # environment's worker.log, which a failed start names.
        log = open(Path(python).parents[1] / "worker.log", "ab") if python else None  # noqa: SIM115 - closed below
        self.process = subprocess.Popen([python or sys.executable, "-c", code], pass_fds=[child.fileno()], env=env,
                                        stderr=log)  # fmt: skip
        if log is not None:
            log.close()  # the child holds its own descriptor
        where = f"; its stderr is in {log.name}" if log is not None else ""
        child.close()
        self.conn = Connection(parent.detach())
        self.ps = psutil.Process(self.process.pid)
        try:
            message = self._first_message(log.name if log is not None else None, where)
        except KeyboardInterrupt:  # Ctrl-C while it imports TensorFlow: no worker outlives its driver
            self.kill()
            raise
        if isinstance(message, StartFailed):
            self.kill()
            raise ConfigError("--platform", target.id, message.error)
        self.info, self.ceilings = message.info, message.ceilings
        self.base_rss = self.rss()

    def _first_message(self, log: str | None, where: str) -> object:
        """The worker's first message (its platform, or why it could not start); raises if it never comes."""
        if not self.conn.poll(WORKER_START_TIMEOUT_S):
            self.kill()
            raise RuntimeError(f"the worker did not start within 5 minutes{where}")
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            code = self._exit_code()  # before kill(), which would report its own signal
            self.kill()
            last = _last_line(log) if log is not None else ""
            why = f": {last}" if last else ""
            raise RuntimeError(f"the worker died while starting (exit code {code}){why}{where}") from None

    def _exit_code(self, wait_s: float = 10.0) -> int | None:
        """The worker's own exit status once it has exited (None if it is still running after ``wait_s``)."""
        try:
            return self.process.wait(wait_s)
        except subprocess.TimeoutExpired:
            return None

    def send(self, message: Measure | Describe | ChooseXLA | Profile | None) -> None:
        self.conn.send(message)

    def poll(self, timeout: float) -> bool:
        return self.conn.poll(timeout)

    def recv(self) -> Result | Failed:
        try:
            return self.conn.recv()
        except OSError:
            raise EOFError from None

    def rss(self) -> int:
        """Resident memory of the worker and its children (the replicas of a data-parallel run)."""
        total = 0
        try:
            for process in (self.ps, *self.ps.children(recursive=True)):
                total += process.memory_info().rss
        except psutil.Error:
            pass
        return int(total)

    def alive(self) -> bool:
        return self.process.poll() is None

    def exit_code(self) -> int | None:
        try:
            return self.process.wait(5)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.conn.close()
        self.tmp.cleanup()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


def worker_environment(framework: str, gated: bool = False) -> dict[str, str]:
    """A worker's environment: Keras's backend (chosen when the worker imports it) and, for the
    workers of a multi-worker sweep, the machine's timing gate (:mod:`paradnn.engine.gate`)."""
    env = frameworks.worker_environment(framework)
    env.pop(GATE_ENV, None)
    if gated:
        env[GATE_ENV] = str(cache_dir() / "timing-gate.lock")
        Path(env[GATE_ENV]).parent.mkdir(parents=True, exist_ok=True)
    return env


def worker_identity(target: Target, framework: str = frameworks.DEFAULT, python: str | None = None,
                    gated: bool = False) -> tuple:  # fmt: skip
    """What a worker was started with: interpreter, target, framework and environment.

    Two sweeps may share a worker only when all of these match (a test's fault-injection
    variable or another cache folder in the environment makes a different worker, and so
    does the timing gate of a multi-worker sweep).
    """
    env = worker_environment(framework, gated)
    return (python or sys.executable, repr(target), framework, tuple(sorted(env.items())))


class IdleWorkers:
    """Workers this process keeps between sweeps, so that its next sweep skips TensorFlow's import.

    A report's notebook runs a dozen sweeps in one kernel, and an adaptive sweep one per round;
    each used to start its own worker, paying the import and the platform's description again
    (about 5 s on 2 cores, more under an older software stack). A sweep that ends normally
    parks its worker here and the next sweep with the same :func:`worker_identity` takes it.
    Measuring in a worker that measured before is what every sweep already does from its
    second configuration on: the worker clears Keras's session before each one. A worker that
    was interrupted, failed or holds more than ``IDLE_RSS_MAX_SHARE`` of the RAM is stopped
    instead; at most ``IDLE_WORKERS_MAX`` are kept (the oldest is stopped first), and all are
    stopped when this process exits (or die with it: see ``die_with_parent``).
    """

    def __init__(self) -> None:
        self._idle: list = []  # ProcessWorkers (or test doubles with an ``identity``), oldest first
        self._lock = threading.Lock()  # a sweep's lanes start their workers from several threads at once

    def take(self, identity: tuple) -> ProcessWorker | None:
        """An idle, living worker started with ``identity`` (removed from the pool), or None."""
        while True:
            with self._lock:
                worker = next((w for w in self._idle if w.identity == identity), None)
                if worker is None:
                    return None
                self._idle.remove(worker)
            if worker.alive():
                return worker
            worker.kill()

    def park(self, worker: Worker) -> None:
        """Keep ``worker`` for a later sweep if it is alive, small and has an identity; stop it otherwise."""
        keep = (getattr(worker, "identity", None) is not None and worker.alive()
                and worker.rss() <= IDLE_RSS_MAX_SHARE * psutil.virtual_memory().total)  # fmt: skip
        if not keep:
            worker.stop()
            return
        with self._lock:
            self._idle.append(worker)
            evicted = self._idle[: max(0, len(self._idle) - IDLE_WORKERS_MAX)]
            del self._idle[: len(evicted)]
        for old in evicted:  # the oldest first
            old.stop()

    def stop_all(self) -> None:
        with self._lock:
            workers, self._idle = self._idle, []
        for worker in reversed(workers):
            worker.stop()


IDLE = IdleWorkers()
atexit.register(IDLE.stop_all)


def reuse_or_start(target: Target, framework: str = frameworks.DEFAULT, python: str | None = None,
                   gated: bool = False) -> ProcessWorker:  # fmt: skip
    """An idle worker of this process started with the same identity, or a new one."""
    return IDLE.take(worker_identity(target, framework, python, gated)) or ProcessWorker(target, framework, python, gated)


def _finish(workers: list[Worker | None], ended_normally: bool) -> None:
    """At a sweep's end: park its workers if it ended normally, stop them otherwise."""
    for worker in workers:
        if worker is None:
            continue
        if ended_normally:
            IDLE.park(worker)
        else:
            worker.stop()


# ---------------------------------------------------------------------------- the driver


def identity_record(config: Config, options: SweepOptions, info: dict) -> dict:
    """What a configuration's record holds before any counting: configuration, settings, platform."""
    family = family_of(config)
    record = {"family": family.name, "family_version": family.version, "label": config.label, **config.hyperparameters()}
    record.update(settings_fields(options.settings_for(config), config), **options.target.fields(),
                  threads=options.target.threads)
    record["xla_auto"] = options.settings.xla is None
    record.update(_platform_fields(info, options.settings.framework))
    return record


def _base_record(config: Config, options: SweepOptions, worker: Worker) -> dict:
    """The record of a configuration that produced no measurement: identity plus analytic counts.

    Families counted by walking their Keras model are described by the worker, which has
    TensorFlow (and is idle between configurations); analytic ones here.
    """
    record = identity_record(config, options, worker.info)
    dtype = options.settings.dtype
    if family_of(config).layers is not None:
        return {**describe_config(config, dtype, trace=False), **record}
    worker.send(Describe(config.family, config.label, dtype))
    if worker.poll(WORKER_START_TIMEOUT_S):
        try:
            answer = worker.recv()
        except EOFError:
            return record
        if isinstance(answer, Result):
            return {**answer.record, **record}
    return record


def _platform_fields(info: dict, framework: str) -> dict:
    """The platform's part of a record; JAX's version only in JAX runs (see paradnn.identity)."""
    software = {k: v for k, v in info["software"].items() if k != "jax" or framework == "jax"}
    return {
        "platform_fingerprint": fingerprint(info),
        "device_name": info["name"],
        "host": info["host"],
        "software": software,
    }


def run_key_of(config: Config, options: SweepOptions, info: dict) -> str:
    record = identity_record(config, options, info)
    record.update({f"sw_{k}": v for k, v in record.pop("software").items()})
    return run_key(record)


def skip_states(options: SweepOptions) -> tuple[str, ...]:
    if options.force:
        return ()
    return ("ok",) if options.retry_failed else STATES


def check_settings(configs: list[Config], options: SweepOptions) -> None:
    """ConfigError before anything runs when the run settings cannot serve the grid: a framework
    the platform or a family cannot take, or a host-prep pipeline a family's inputs do not fit."""
    framework = options.settings.framework
    frameworks.check_target(framework, options.target)
    for family in sorted({c.family for c in configs}):
        frameworks.check_family(family, framework)
    if options.settings.input == "host-prep":  # a family host-prep cannot feed is bad input, not an error row
        from paradnn.engine import inputs

        for config in {c.family: c for c in configs}.values():
            inputs.check_family("host-prep", family_of(config), config)
    devices = options.settings.devices
    if options.workers > 1 and (options.target.kind != "cpu" or devices > 1):
        why = "1 with --devices > 1 (the replicas are processes of their own)" if devices > 1 else \
            f"1 on {options.target.kind} (two processes would share one device's memory)"
        raise ConfigError("--workers", options.workers, why)
    if devices > 1:
        from paradnn.engine import replicas as parallel

        if options.target.kind == "cpu":
            parallel.check_cpu(devices, options.target.threads)
        elif options.target.kind != "gpu":
            raise ConfigError("--devices", devices, f"1 on {options.target.kind} (replicas run on CPUs and GPUs)")
        parallel.check_batches(devices, {c.batch for c in configs})


def check_devices_present(options: SweepOptions, info: dict) -> None:
    """ConfigError when a GPU sweep asks for more replicas than the platform has GPUs (known once a worker started)."""
    if options.settings.devices > 1 and options.target.kind == "gpu":
        from paradnn.engine import replicas as parallel

        parallel.check_gpus(options.settings.devices, options.target.index, info.get("devices", {}).get("GPU", 0))


def run_local(
    configs: list[Config],
    store: Store,
    options: SweepOptions,
    progress: Callable[..., object] | None = None,
    start_worker: Callable[[Target], Worker] | None = None,
    runs: Sequence[RunSettings] = (),
) -> SweepSummary:
    """Measure every configuration the store lacks; see the module docstring.

    ``start_worker(target)`` starts a worker (default: an idle worker of this process, else a
    new :class:`ProcessWorker`, running the settings' framework).

    ``runs``: several run settings measured in this one sweep (default: ``options.settings``
    alone), each configuration under every run in turn, on the same workers. Each run is
    declared whole and keys its own rows; what they share is the sweep: its workers, its
    budget (``max_minutes`` for all of them) and its order. A worker times only while no other
    prepares (:mod:`paradnn.engine.gate`), so two workers gain most when they prepare models of
    one size at once, and one configuration under two runs is that pair; run one after the
    other, each run's sweep paired large models with small ones and ended on its longest
    preparation beside an idle core.
    """
    from tqdm import tqdm

    plans = [replace(options, settings=s) for s in runs] or [options]
    if len({plan.settings.framework for plan in plans}) > 1:
        raise ValueError("the runs of one sweep share a framework (they share its workers)")
    for plan in plans:
        check_settings(configs, plan)
    start_worker = start_worker or partial(reuse_or_start, framework=options.settings.framework,
                                           gated=options.workers > 1)  # fmt: skip

    planned = len(configs) * len(plans)
    summary = SweepSummary(planned=planned, left=planned)  # all of them, until the store says otherwise
    deadline = time.monotonic() + options.max_minutes * 60 if options.max_minutes else None
    budget = options.memory_budget_bytes or default_memory_budget(options.target)
    worker: Worker | None = None
    workers: dict[str, Worker | None] = {}
    bar = None
    ended_normally = False
    try:
        info = _known_platform(store, options.target, options.settings.framework)
        if info is None:  # first sweep of this platform and stack: ask a worker
            worker = _start_worker(store, options.target, start_worker)
            info = worker.info
        for i, plan in enumerate(plans):
            check_devices_present(plan, info)
            if plan.settings.xla is None:  # --xla auto: one setting per family, probed once per platform
                choices, worker = _xla_choices(configs, plan, store, info, worker, start_worker)
                plans[i] = replace(plan, xla_choices=choices)
        done = store.run_keys(skip_states(options))
        # Each configuration under every run in turn, the runs' order reversed every round: the
        # runs' rows of one configuration are timed side by side, and two workers prepare the
        # same model at once (preparing it takes about as long under each run).
        jobs = [(c, plan) for i, c in enumerate(ordered(configs, options.seed)) for plan in (plans[::-1] if i % 2 else plans)]
        todo = [(c, k, "", window_options(plan)) for c, plan in jobs if (k := run_key_of(c, plan, info)) not in done]
        summary.already_done = planned - len(todo)
        summary.left = len(todo)
        desc = f"sweep {options.target.id}" + (f", {len(plans)} runs" if len(plans) > 1 else "") + \
            (f", {options.windows} windows each" if options.windows > 1 else "") + \
            (f", {options.workers} workers" if options.workers > 1 else "")
        bar = (progress or tqdm)(total=len(todo) * options.windows, unit="config", desc=desc, dynamic_ncols=True)
        workers[""], worker = worker, None  # from here on the worker lives in ``workers``

        def start(_: str) -> Worker:
            return start_worker(options.target)

        earlier = _measure_todo(todo, store, summary, bar, budget, deadline, workers, start, lanes=options.workers)
        # Each further window a whole pass later: the machine has moved on. Past the windows asked
        # for, only configurations whose fastest window no other has confirmed are timed again.
        for n in range(2, (MAX_WINDOWS if options.windows > 1 else 1) + 1):
            again = [job for job in todo if wants_window(earlier.get(job[1]), n, options.windows)]
            if summary.out_of_time or (n > options.windows and not again):
                break
            if n <= options.windows:
                bar.update(len(todo) - len(again))  # nothing to time again for what failed
            else:
                bar.total += len(again)
                bar.refresh()
            earlier = {**earlier, **_measure_todo(again, store, summary, bar, budget, deadline, workers, start,
                                                  earlier=earlier, lanes=options.workers)}  # fmt: skip
        ended_normally = True
    except KeyboardInterrupt:
        summary.interrupted = True
    finally:
        if bar is not None:
            bar.close()
        _finish([worker, *workers.values()], ended_normally and not summary.interrupted)
    return summary


def window_options(options: SweepOptions) -> SweepOptions:
    """The options of one timing window: the configuration's ``max_seconds`` shared among the windows."""
    if options.windows == 1:
        return options
    return replace(options, settings=replace(options.settings, max_seconds=options.settings.max_seconds / options.windows))


def merge_windows(first: dict, later: dict, window_seconds: float) -> dict:
    """One record from a configuration's record so far (``first``, itself merged after a third
    window) and its next timing window (``later``), taken a pass over the grid apart.

    A shared machine's speed moves for seconds at a time (another tenant, a frequency
    step), and it only ever makes a step slower; so the faster window's record stands,
    as a ceiling is a maximum. ``extra["windows"]`` keeps every window's median and start;
    ``window_spread`` is slow / fast - 1 over them all. A row whose fastest window no other
    confirms (:func:`confirmed`) is marked unstable; ``max_seconds`` is the time all its windows had.
    """
    windows = (first.get("extra") or {}).get("windows") or [_window(first)]
    windows = [*windows, _window(later)]
    best = min((first, later), key=lambda r: r["step_time_s"])
    steps = [w["step_time_s"] for w in windows]
    extra = {**(best.get("extra") or {}), "windows": windows, "window_spread": max(steps) / min(steps) - 1}
    merged = {**best, "extra": extra, "max_seconds": window_seconds * len(windows), "started_at": first["started_at"]}
    own = bool(min(windows, key=lambda w: w["step_time_s"]).get("unstable"))  # the fastest window's own flag (its CV)
    return {**merged, "unstable": own or not confirmed(merged)}


def confirmed(record: dict) -> bool:
    """Whether the record's fastest timing window has a second within :data:`WINDOW_CONFIRM` of it.

    One window can land in a slow spell of the machine (two threads running at half speed for
    seconds), and so can both windows of two; the faster of two windows that agree is one the
    machine did not slow. A configuration whose windows disagree is timed again, up to
    :data:`MAX_WINDOWS` in all (:func:`wants_window`)."""
    steps = sorted(w["step_time_s"] for w in (record.get("extra") or {}).get("windows", []))
    return len(steps) > 1 and steps[1] <= steps[0] * (1 + WINDOW_CONFIRM)


def wants_window(record: dict | None, n: int, asked: int) -> bool:
    """Whether a configuration gets an ``n``-th timing window: every one measured so far does up
    to the ``asked`` windows; after them, one whose fastest window is not yet :func:`confirmed`."""
    if record is None or record.get("state") != "ok":
        return False
    return n <= asked or not confirmed(record)


def _window(record: dict) -> dict:
    return {"step_time_s": record["step_time_s"], "started_at": record.get("started_at"),
            "step_time_cv": record.get("step_time_cv"), "n_samples": record.get("n_samples"),
            "unstable": bool(record.get("unstable"))}  # fmt: skip


def _measure_todo(todo: list[Job], store: Store, summary: SweepSummary, bar, budget: float | None,
                  deadline: float | None, workers: dict[str, Worker | None], start: Callable[[str], Worker],
                  earlier: dict[str, dict] | None = None, lanes: int = 1) -> dict[str, dict]:  # fmt: skip
    """Claim, measure and store each ``(config, key, slot, options)`` in order, on the worker of its slot.

    A slot is one worker (a sweep has one, a sweep over software stacks one per stack);
    ``start(slot)`` starts it when it is missing or dead, in the lane's thread (so it does not use
    the store; the worker's platform is recorded here). A worker that may not measure again is
    dropped and restarted when next needed. Updates ``summary`` and ``bar``; claims held when
    interrupted are released. Returns the records stored, by key. With ``earlier`` (records by
    key of an earlier pass) this is a further timing window: each new measurement is merged
    with its earlier record (:func:`merge_windows`) and stored as a new row; one that failed
    stores nothing.

    With ``lanes`` > 1 (``--workers``), that many configurations are in flight at once, each
    on a worker of its own (slots ``""``, ``"#2"``, ...); the timing gate lets those workers
    start, build and compile side by side and time one at a time (:mod:`paradnn.engine.gate`).
    TensorFlow's graph optimiser prepares a step on one core, so two preparations overlap
    well; XLA's compiler already uses about 1.5-1.7 of two (an FC step: 0.59 s of wall, 0.88
    s of CPU; an LSTM: 3.9 s and 6.8 s), so a configuration compiled by XLA is measured
    alone, as with one worker. Each lane has its share of the memory ``budget``; a
    configuration that does not fit in a share (predicted over it, grown past it, or out of
    memory beside another) is measured again alone with the whole budget, and only that
    measurement is recorded.
    """
    stored: dict[str, dict] = {}
    claimed: set[str] = set()
    # The last field: measured alone (one lane; or XLA, whose compiler already keeps both cores busy).
    queue = deque((c, key, slot, opts, lanes == 1 or _compiles_in_parallel(c, opts)) for c, key, slot, opts in todo)
    free = ["", *(f"#{i}" for i in range(2, lanes + 1))]
    running: dict[Future, tuple[Config, str, str, SweepOptions, bool, str]] = {}
    pool = ThreadPoolExecutor(lanes, thread_name_prefix="paradnn-lane") if lanes > 1 else _Inline()
    ended = threading.Event()  # set when this pass ends: a worker a lane starts after that is stopped
    try:
        while queue or running:
            while queue and free and not any(alone for *_, alone, _ in running.values()):
                if deadline and time.monotonic() >= deadline:
                    summary.out_of_time = True
                    queue.clear()
                    break
                config, key, slot, opts, alone = queue[0]
                if alone and running:  # wait until the other lanes are idle
                    break
                queue.popleft()
                if key not in claimed and not _claim(config, key, store, summary, bar, opts, earlier):
                    continue
                claimed.add(key)
                failed = sum(n for s, n in summary.states.items() if s != "ok")
                bar.set_postfix_str(f"failed {failed} | {slot + ' | ' if slot else ''}{config.label}")
                free.sort(key=lambda lane: workers.get(slot + lane) is None)  # a lane with a worker first
                lane = slot + free.pop(0)
                worker = workers.get(lane)
                if worker is not None and not worker.alive():
                    workers[lane] = worker = None
                share = budget / lanes if budget and not alone else budget
                future = pool.submit(_run_on_lane, config, worker, partial(start, slot), ended, opts, share, deadline)
                running[future] = (config, key, slot, opts, alone, lane)
            finished, _ = wait(list(running), timeout=POLL_S, return_when=FIRST_COMPLETED) if running else ((), ())
            for future in finished:
                config, key, slot, opts, alone, lane = running.pop(future)
                free.append(lane[len(slot):])
                record, reusable, workers[lane], fresh = future.result()
                if fresh:
                    _register(store, opts.target, workers[lane])
                if not reusable:
                    workers[lane].kill()
                    workers[lane] = None
                if record is None:  # the sweep's own time ran out mid-configuration: not a result
                    summary.out_of_time = True
                    queue.clear()
                elif not alone and record["state"] in ("oom", "skipped"):  # did not fit beside another lane
                    queue.appendleft((config, key, slot, opts, True))
                else:
                    _settle(record, key, store, summary, bar, stored, earlier, opts)
                    claimed.discard(key)
    finally:
        ended.set()
        pool.shutdown(wait=False, cancel_futures=True)
        if claimed:  # interrupted: what was in flight is not measured
            store.release(sorted(claimed))
    return stored


def _run_on_lane(config: Config, worker: Worker | None, start: Callable[[], Worker], ended: threading.Event,
                 options: SweepOptions, budget: float | None, deadline: float | None,
                 ) -> tuple[dict | None, bool, Worker | None, bool]:  # fmt: skip
    """:func:`run_one` on a lane's worker, started here first if it has none: two lanes start
    their workers side by side (importing TensorFlow takes about 5 s of one core), and a lane
    that starts one does not hold up the others. Returns run_one's record and verdict, the
    worker and whether it is new (the driver records its platform: the store is not this thread's)."""
    fresh = worker is None
    if fresh:
        worker = start()
        if ended.is_set():  # the sweep was interrupted meanwhile: no worker outlives it, nothing is measured
            worker.stop()
            return None, False, None, False
    record, reusable = run_one(config, worker, options, budget, deadline)
    return record, reusable, worker, fresh


def _compiles_in_parallel(config: Config, options: SweepOptions) -> bool:
    """Whether this configuration's step is compiled by XLA (JAX's always is), whose compiler keeps
    more than one core busy: preparing another configuration beside it would gain nothing."""
    settings = options.settings_for(config)
    return settings.framework == "jax" or bool(settings.xla)


class _Inline:
    """An executor for one lane: runs each call at once in this thread, as a plain loop would
    (an interrupt stops it where it is)."""

    def submit(self, fn: Callable, *args: object) -> Future:
        future: Future = Future()
        future.set_result(fn(*args))
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def _claim(config: Config, key: str, store: Store, summary: SweepSummary, bar, options: SweepOptions,
           earlier: dict[str, dict] | None) -> bool:  # fmt: skip
    """Claim ``key`` in the store for measuring; False (counted) if it is done or being measured meanwhile."""
    done_states = skip_states(options) if earlier is None else ()
    status = store.claim(key, config.label, done_states, options.timeout_s + CLAIM_MARGIN_S)
    if status == "claimed":
        return True
    if earlier is None:  # finished or being measured by another sweep meanwhile
        summary.already_done += status == "done"
        summary.busy += status == "busy"
        summary.left -= 1
    bar.update(1)
    return False


def _settle(record: dict, key: str, store: Store, summary: SweepSummary, bar, stored: dict[str, dict],
            earlier: dict[str, dict] | None, options: SweepOptions) -> None:  # fmt: skip
    """Store one configuration's record (merged with its earlier windows, if any); the claim ends either way."""
    if earlier is not None:
        if record["state"] != "ok":  # this window failed: the earlier row stands
            store.release([key])
            bar.update(1)
            return
        record = merge_windows(earlier[key], record, options.settings.max_seconds)
    record = summary.stamp({**record, "run_key": key})
    store.add_results([record], release=True)
    stored[key] = record
    if earlier is None:
        summary.states[record["state"]] += 1
        summary.left -= 1
    bar.update(1)


def _xla_choices(configs: list[Config], options: SweepOptions, store: Store, info: dict, worker: Worker | None,
                 start_worker: Callable[[Target], Worker]) -> tuple[dict[str, bool], Worker | None]:  # fmt: skip
    """The XLA setting per family for ``--xla auto``: from the platform's cached choices, else
    asked of a worker (which probes once and caches). Returns the choices and the worker."""
    from paradnn.engine.ceilings import cached_ceilings

    dtype = options.settings.dtype
    known = (cached_ceilings(info) or {}).get("xla", {})
    choices = {}
    for family in sorted({c.family for c in configs}):
        key = f"{family}|{dtype}"
        if key in known:
            choices[family] = bool(known[key]["xla"])
            continue
        if worker is None or not worker.alive():
            worker = _start_worker(store, options.target, start_worker)
        worker.send(ChooseXLA(family, dtype))
        answer = worker.recv() if worker.poll(WORKER_START_TIMEOUT_S) else None
        if isinstance(answer, Result):
            choices[family] = bool(answer.record["xla"])
            worker.ceilings = answer.record["ceilings"]  # with the probe's choice: a later sweep may reuse it
            store.put_platform(fingerprint(worker.info), options.target.platform, worker.info, answer.record["ceilings"],
                               "measured")
        else:
            choices[family] = False  # TensorFlow's default path
    return choices, worker


def _start_worker(store: Store, target: Target, start_worker: Callable[[Target], Worker]) -> Worker:
    worker = start_worker(target)
    _register(store, target, worker)
    return worker


def _register(store: Store, target: Target, worker: Worker) -> None:
    """Record a started worker's platform (its identity and ceilings) in the store."""
    store.put_platform(fingerprint(worker.info), target.platform, worker.info, worker.ceilings, "measured")


def _known_platform(store: Store, target: Target, framework: str = frameworks.DEFAULT) -> dict | None:
    """What an earlier sweep recorded about ``target`` on this host with these versions.

    Lets a sweep with nothing left to measure finish without starting TensorFlow.
    """
    installed = {"python": pyplatform.python_version(), "paradnn": __version__}
    for name in ("tensorflow", "keras", *(("jax",) if framework == "jax" else ())):
        try:
            installed[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            return None
    for info in store.platform_infos(target.platform):
        software = info.get("software", {})
        if info.get("host") == pyplatform.node() and all(software.get(k) == v for k, v in installed.items()):
            return info
    return None


def run_one(
    config: Config, worker: Worker, options: SweepOptions, budget: float | None, deadline: float | None
) -> tuple[dict | None, bool]:
    """Measure one configuration: its record (None if the sweep ran out of time) and whether
    the worker may measure the next one."""
    s = options.settings_for(config)
    base = _base_record(config, options, worker)
    base["started_at"] = time.time()
    # Data-parallel replicas are processes like the worker, each with its share of the batch
    # (the weights they duplicate are left out: activations dominate the estimate).
    predicted = base.get("memory_estimate_bytes", 0) + s.devices * worker.base_rss
    base["memory_estimate_bytes"] = predicted
    if budget and predicted > budget:
        return {**base, "state": "skipped", "error": f"predicted {_gb(predicted)} > budget {_gb(budget)}"}, True
    kills_before = oom_kills()
    worker.send(Measure(config.family, config.label, asdict(s)))
    started = time.monotonic()
    while not worker.poll(POLL_S):
        rss = worker.rss()
        if budget and rss > budget:
            return {**base, "state": "oom", "error": f"worker grew to {_gb(rss)} > budget {_gb(budget)}; stopped"}, False
        if not worker.alive():
            break
        if time.monotonic() - started > options.timeout_s:
            return {**base, "state": "timeout", "error": f"no result within {options.timeout_s:g} s"}, False
        if deadline and time.monotonic() > deadline:
            return None, False
    try:
        message = worker.recv()
    except EOFError:
        return {**base, **_death(worker.exit_code(), kills_before)}, False
    if isinstance(message, Failed):
        return {**base, "state": "error", "error": message.error, "extra": {"traceback": message.traceback}}, True
    record = message.record
    record.update({k: v for k, v in base.items() if k not in record or record[k] is None})
    record["xla_auto"] = base["xla_auto"]  # the worker measured a resolved setting; the sweep knows it chose it
    return record, record["state"] != "oom"  # after a real OOM the worker's heap is suspect


def _death(code: int | None, kills_before: int) -> dict:
    """State and error text of a worker that died mid-configuration."""
    if code == -signal.SIGKILL:
        if kills_before >= 0 and oom_kills() > kills_before:
            return {"state": "oom", "error": "worker killed by the kernel's OOM killer (the system's oom_kill count rose)"}
        return {"state": "error", "error": "worker killed by signal SIGKILL from outside (the oom_kill count did not rise)"}
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return {"state": "error", "error": f"worker crashed (killed by signal {name})"}
    return {"state": "error", "error": f"worker crashed (exit code {code})"}


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


# ---------------------------------------------------------------------------- profiles for projection


def profile_local(configs: list[Config], store: Store, options: SweepOptions, progress: Callable[..., object] | None = None,
                  start_worker: Callable[[Target], Worker] | None = None) -> dict:  # fmt: skip
    """Profile each configuration's step by operation category on ``options.target`` (in a worker,
    with the target's threads) and keep it in the store's traces table, for projection from this
    platform (:mod:`paradnn.analysis.projection`). What the store already holds is skipped.

    Returns counts (``profiled``, ``already``) and ``failed``: label -> error.
    """
    from tqdm import tqdm

    from paradnn.identity import profile_source

    start_worker = start_worker or partial(reuse_or_start, framework=options.settings.framework)
    dtype, platform = options.settings.dtype, options.target.platform
    traces = store.traces()
    held = set(traces.loc[traces["source"] == profile_source(platform, dtype), "label"]) if not traces.empty else set()
    todo = [c for c in configs if c.label not in held]
    out: dict = {"profiled": 0, "already": len(configs) - len(todo), "failed": {}}
    if not todo:
        return out
    worker = _start_worker(store, options.target, start_worker)
    ended_normally = False
    bar = (progress or tqdm)(total=len(todo), unit="config", desc=f"profile {options.target.id}", dynamic_ncols=True)
    try:
        for config in todo:
            worker.send(Profile(config.family, config.label, dtype))
            if not worker.poll(options.timeout_s):
                out["failed"][config.label] = f"no profile within {options.timeout_s:g} s"
                return out  # the worker may still be busy: stopped below, not kept
            answer = worker.recv()
            if isinstance(answer, Result):
                store.add_traces(answer.record["rows"])
                out["profiled"] += 1
            else:
                out["failed"][config.label] = answer.error
            bar.update(1)
        ended_normally = True
    except EOFError:
        out["failed"][config.label] = "the worker died while profiling"
    finally:
        bar.close()
        _finish([worker], ended_normally)
    return out


# ---------------------------------------------------------------------------- software stacks side by side


def run_sweep_stacks(
    configs: list[Config],
    store: Store,
    options: SweepOptions,
    stacks: list,
    progress: Callable[..., object] | None = None,
    echo: Callable[[str], None] = lambda line: None,
    start_worker: Callable[[Target, str], Worker] | None = None,
) -> tuple[SweepSummary, dict[str, str]]:
    """Measure every configuration the store lacks on every software stack, interleaved.

    One worker per stack (its environment built once by :func:`paradnn.sweeps.stacks.ensure`)
    stays alive; each configuration is measured on every stack in turn, the stacks' order
    reversed every round, so a version ratio is taken side by side and the machine's drift
    reaches every stack alike. A stack that cannot be built or started is skipped with its
    reason (returned by name) and the others go on; if none can, ConfigError.
    ``start_worker(target, python)`` starts a worker (default: an idle worker of this process,
    else a new :class:`ProcessWorker`).
    """
    from tqdm import tqdm

    from paradnn.sweeps import stacks as stk

    if options.settings.framework != "tensorflow":
        raise ConfigError("--framework", options.settings.framework, "tensorflow with --stack (stacks are TensorFlow versions)")
    check_settings(configs, options)
    start = start_worker or (lambda target, python: reuse_or_start(target, python=python))
    skipped: dict[str, str] = {}
    workers: dict[str, Worker | None] = {}
    pythons: dict[str, str] = {}
    summary = SweepSummary(planned=len(configs) * len(stacks), left=len(configs) * len(stacks))
    deadline = time.monotonic() + options.max_minutes * 60 if options.max_minutes else None
    budget = options.memory_budget_bytes or default_memory_budget(options.target)
    bar = None
    ended_normally = False
    try:
        for stack in stacks:
            try:
                pythons[stack.name] = str(stk.ensure(stack, echo))
                workers[stack.name] = _start_worker(store, options.target, lambda t, p=pythons[stack.name]: start(t, p))
            except (stk.StackFailed, RuntimeError, ConfigError) as exc:
                skipped[stack.name] = str(exc)
                echo(f"stack {stack.name}: skipped: {exc}")
        if not workers:
            raise ConfigError("--stack", ", ".join(s.name for s in stacks),
                              "a stack that installs and starts here (" + "; ".join(skipped.values()) + ")")  # fmt: skip
        plans = {}
        for name, worker in workers.items():
            stack_options = options
            if options.settings.xla is None:
                choices, worker = _xla_choices(configs, options, store, worker.info, worker,
                                               lambda t, p=pythons[name]: start(t, p))  # fmt: skip
                workers[name], stack_options = worker, replace(options, xla_choices=choices)
            plans[name] = stack_options
        names = list(workers)
        summary.planned = len(configs) * len(names)
        done = store.run_keys(skip_states(options))
        todo = []
        for round_no, config in enumerate(ordered(configs, options.seed)):
            keys = {name: run_key_of(config, plans[name], workers[name].info) for name in names}
            if all(key in done for key in keys.values()):
                continue
            # Missing under one stack: measured again under every stack, side by side (a finished row
            # of another stack is measured again, not skipped), so no version ratio rests on a row
            # measured minutes or reports apart.
            for name in names if round_no % 2 == 0 else names[::-1]:
                todo.append((config, keys[name], name, replace(plans[name], force=True)))
        summary.already_done = summary.planned - len(todo)
        summary.left = len(todo)
        bar = (progress or tqdm)(total=len(todo), unit="config", desc=f"sweep {options.target.id} x {len(names)} stacks",
                                 dynamic_ncols=True)  # fmt: skip
        def restart(name: str) -> Worker:
            return start(options.target, pythons[name])

        _measure_todo(todo, store, summary, bar, budget, deadline, workers, restart)
        ended_normally = True
    except KeyboardInterrupt:
        summary.interrupted = True
    finally:
        if bar is not None:
            bar.close()
        _finish(list(workers.values()), ended_normally and not summary.interrupted)
    summary.skipped_stacks = skipped
    return summary, skipped
