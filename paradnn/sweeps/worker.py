"""The worker process that measures, and the driver's side of it.

Each configuration runs in a worker process that is reused across configurations (so
TensorFlow's import is paid once) and replaced after a crash, a timeout or an
out-of-memory failure; a sweep that ends normally leaves its worker idle for this
process's next sweep (see :class:`IdleWorkers`). The driver (this process) never imports
TensorFlow; driver and worker speak in the messages of :mod:`paradnn.sweeps.messages`.
:func:`run_one` measures one configuration on any :class:`Worker`, so its handling of
timeouts, crashes and kills is tested in-process with a fake worker.

Failures are results:
  ``skipped``  predicted to exceed the memory budget (the estimate is recorded);
  ``oom``      TensorFlow could not allocate, or the worker outgrew the budget and was
               stopped, or the kernel's OOM killer took it (the system's ``oom_kill``
               count rose; the worker volunteers with ``oom_score_adj`` 1000, so the
               sweep itself is never the victim). A worker that hit OOM is replaced;
  ``timeout``  a configuration ran past its time limit;
  ``error``    anything else, with the message (a crash, or a kill from outside).
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

import psutil

from paradnn.config import ConfigError, cache_dir, gigabytes
from paradnn.engine import frameworks
from paradnn.engine.gate import GATE_ENV, gate
from paradnn.engine.machine import die_with_parent
from paradnn.engine.protocol import RunSettings
from paradnn.engine.record import describe_config
from paradnn.families import Config, family_of, parse_label
from paradnn.identity import fingerprint
from paradnn.platform import Target
from paradnn.store import Store
from paradnn.sweeps.messages import ChooseXLA, Describe, Failed, Measure, Profile, Ready, Result, StartFailed
from paradnn.sweeps.plan import SweepOptions, identity_record
from paradnn.vocabulary import OOM

FAULT_CRASH_ENV = "PARADNN_FAULT_CRASH_ON"  # fault injection for tests: a label whose worker aborts
WORKER_START_TIMEOUT_S = 300.0
POLL_S = 0.2
IDLE_WORKERS_MAX = 3  # idle workers kept between sweeps (a software-stack sweep has one per stack)
IDLE_RSS_MAX_SHARE = 0.1  # a worker holding more of the RAM than this is stopped, not kept


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
            # once, before timing starts: see harness.run_protocol). Not under PyTorch: a step compiled
            # by torch.compile guards on that state, and every step kept for a later round
            # (paradnn.engine.training.COMPILED) would recompile on each call.
            if keras.backend.backend() != "torch":
                keras.utils.clear_session(free_memory=False)
            config = parse_label(message.family, message.label)
            conn.send(Result(measure_config(config, RunSettings(**message.settings), target, info, ceilings)))
    # Any failure is a result: ChooseXLA falls back to XLA off and says so, a Profile is
    # reported and the sweep goes on, a Describe records what it can without the counts.
    except Exception as exc:  # noqa: BLE001
        conn.send(Failed(f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=5)))
    return ceilings


class Started(Protocol):
    """What the sweep loop asks of a lane's worker, whatever runs it (a process here, a Ray actor's runner):
    the platform it measures on, whether it still lives, and ending it."""

    info: dict
    ceilings: dict

    def alive(self) -> bool: ...
    def kill(self) -> None: ...
    def stop(self) -> None: ...


class Worker(Started, Protocol):
    """What the driver needs of a worker process it talks to (a process, or a fake one in tests)."""

    base_rss: int

    def send(self, message: Measure | Describe | ChooseXLA | Profile | None) -> None: ...
    def poll(self, timeout: float) -> bool: ...
    def recv(self) -> Result | Failed: ...  # EOFError when the worker died
    def rss(self) -> int: ...
    def exit_code(self) -> int | None: ...


def _last_line(path: str) -> str:
    """The last non-empty line of a worker's log (an environment's import error, say), or ''."""
    try:
        lines = [x.strip() for x in Path(path).read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def worker_entry(fd: int, target: Target) -> None:
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

    def __init__(
        self, target: Target, framework: str = frameworks.DEFAULT, python: str | None = None, gated: bool = False
    ) -> None:
        parent, child = socket.socketpair()
        code = f"from paradnn.sweeps.worker import worker_entry, Target; worker_entry({child.fileno()}, {target!r})"
        # The worker's own TMPDIR, removed with it: it exits with os._exit (or is killed), which skips
        # the hooks that delete TensorFlow's autograph files (one per traced step) and kept replicas' folder.
        self.tmp = tempfile.TemporaryDirectory(prefix="paradnn-worker-")
        env = {**worker_environment(framework, gated), "TMPDIR": self.tmp.name}
        self.identity = worker_identity(target, framework, python, gated)
        # ``python``: another environment's interpreter (a software stack, see paradnn.sweeps.stacks). Older
        # TensorFlows log to stderr whatever TF_CPP_MIN_LOG_LEVEL says: their stderr goes to the
        # environment's worker.log, which a failed start names.
        log = open(Path(python).parents[1] / "worker.log", "ab") if python else None  # noqa: SIM115 - closed below
        self.process = popen([python or sys.executable, "-c", code], pass_fds=[child.fileno()], env=env, stderr=log)
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

    def _first_message(self, log: str | None, where: str) -> Ready | StartFailed:
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


_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="paradnn-spawn")


def popen(*args: Any, **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen`` from a thread that lives as long as this process. A worker asks Linux
    to kill it when its parent dies (``die_with_parent``), and Linux means the parent *thread*: a
    worker started in a sweep lane's thread was killed when that pass's threads ended (a sweep
    in rounds lost its second lane's worker between rounds)."""
    return _SPAWNER.submit(lambda: subprocess.Popen(*args, **kwargs)).result()


def worker_environment(framework: str, gated: bool = False) -> dict[str, str]:
    """A worker's environment: Keras's backend (chosen when the worker imports it) and, for the
    workers of a multi-worker sweep, the machine's timing gate (:mod:`paradnn.engine.gate`)."""
    env = frameworks.worker_environment(framework)
    env.pop(GATE_ENV, None)
    if gated:
        env[GATE_ENV] = str(cache_dir() / "timing-gate.lock")
        Path(env[GATE_ENV]).parent.mkdir(parents=True, exist_ok=True)
    return env


def worker_identity(target: Target, framework: str = frameworks.DEFAULT, python: str | None = None, gated: bool = False) -> tuple:
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
        keep = (
            getattr(worker, "identity", None) is not None
            and worker.alive()
            and worker.rss() <= IDLE_RSS_MAX_SHARE * psutil.virtual_memory().total
        )
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


def reuse_or_start(
    target: Target, framework: str = frameworks.DEFAULT, python: str | None = None, gated: bool = False
) -> ProcessWorker:
    """An idle worker of this process started with the same identity, or a new one."""
    return IDLE.take(worker_identity(target, framework, python, gated)) or ProcessWorker(target, framework, python, gated)


def finish(workers: Sequence[Worker | None], ended_normally: bool) -> None:
    """At a sweep's end: park its workers if it ended normally, stop them otherwise."""
    for worker in workers:
        if worker is None:
            continue
        if ended_normally:
            IDLE.park(worker)
        else:
            worker.stop()


def check_name_here(store: Store, target: Target) -> None:
    """Refuse a CPU sweep's platform name that the store gives another machine before any worker starts
    (a worker takes seconds to import TensorFlow); an accelerator's name is checked once its worker has
    described the device (:func:`register`)."""
    if target.kind == "cpu":
        from paradnn.engine.machine import cpu_identity

        store.check_name(target.platform, cpu_identity(target))


def register(store: Store, target: Target, worker: Started) -> None:
    """Record a started worker's platform (its identity and ceilings) in the store."""
    store.put_platform(fingerprint(worker.info), target.platform, worker.info, worker.ceilings, "measured")


# ---------------------------------------------------------------------------- measuring one configuration


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
        return {**base, "state": "skipped", "error": f"predicted {gigabytes(predicted)} > budget {gigabytes(budget)}"}, True
    kills_before = oom_kills()
    worker.send(Measure(config.family, config.label, asdict(s)))
    started = time.monotonic()
    while not worker.poll(POLL_S):
        rss = worker.rss()
        if budget and rss > budget:
            grew = f"worker grew to {gigabytes(rss)} > budget {gigabytes(budget)}; stopped"
            return {**base, "state": "oom", "error": grew}, False
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
    return record, record["state"] != OOM  # after a real OOM the worker's heap is suspect


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


# ---------------------------------------------------------------------------- profiles for projection


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


def oom_kills() -> int:
    """How many processes the kernel's OOM killer has killed since boot (-1 if unknown)."""
    try:
        match = re.search(r"^oom_kill (\d+)$", Path("/proc/vmstat").read_text(), re.MULTILINE)
    except OSError:
        return -1
    return int(match.group(1)) if match else -1


# ---------------------------------------------------------------------------- the worker process
