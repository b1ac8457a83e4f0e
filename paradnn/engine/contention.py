"""What else used the machine while a window was timed: other processes' CPU and the hypervisor's steal.

On a 2-core machine one other busy process makes a TensorFlow step 1.7-1.9x slower, and
nothing in the step's own timings says so. So every timed window of the protocol
(:func:`paradnn.engine.protocol.run_protocol`) is bracketed by two readings of

- the machine's busy CPU time (``/proc/stat``: user, nice, system, irq, softirq of every
  core) and its steal time (what the hypervisor gave to other guests while a core of
  this VM wanted to run),
- this process's own CPU time and that of its children (a data-parallel run's replicas),

and the window's **contention** is the CPU the others used, in cores: (busy - own) over the
window's wall time; its **steal** likewise. Two file reads a window, and unambiguous, unlike
a timed control workload (which on two cores measures scheduling jitter, not speed).

A window whose others took more than ``max_contention`` cores (default a tenth of one core;
steal counts as others) is refused: the protocol waits, bounded, for the machine to be
quiet and times it again. Where ``/proc/stat`` cannot be read (macOS), nothing is refused
and the rows say contention was not measured.

``PARADNN_MAX_CONTENTION`` sets the default limit (cores, or ``off`` to record contention
without refusing: the test suite runs measurements side by side on purpose).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

CONTENTION_ENV = "PARADNN_MAX_CONTENTION"
MAX_CONTENTION = 0.1  # cores the others may use during a timed window
PROC_STAT = Path("/proc/stat")
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
# /proc/stat counts in ticks (10 ms): a window's reading is good to about two ticks a core.
QUANTUM_TICKS = 2


def declared_limit() -> float:
    """The contention limit in cores: ``PARADNN_MAX_CONTENTION`` if set (``off``: infinite), else the default."""
    text = os.environ.get(CONTENTION_ENV, "").strip().lower()
    if not text:
        return MAX_CONTENTION
    if text in ("off", "none", "inf"):
        return math.inf
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0):
        raise ValueError(f"{CONTENTION_ENV}={text!r}; allowed: a positive number of cores, or off")
    return value


@dataclass(frozen=True)
class Reading:
    """The machine's and this process tree's CPU counters at one moment (seconds of CPU)."""

    wall: float
    busy: float
    steal: float
    own: float


@dataclass(frozen=True)
class Usage:
    """What the others used over one window, in cores (CPU seconds per wall second)."""

    others: float
    steal: float
    seconds: float

    @property
    def total(self) -> float:
        """Others and steal together: the CPU this window did not have."""
        return self.others + self.steal

    def quiet(self, limit: float) -> bool:
        return self.total <= limit

    def as_dict(self) -> dict[str, float]:
        return {"others": round(self.others, 4), "steal": round(self.steal, 4), "seconds": round(self.seconds, 3)}


def readable() -> bool:
    """Whether this machine's counters can be read (Linux's ``/proc/stat``)."""
    return _machine() is not None


def _machine() -> tuple[float, float] | None:
    """Busy and steal seconds of every core since boot, or None without ``/proc/stat``."""
    try:
        with PROC_STAT.open() as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(v) for v in fields[1:]] + [0] * 8
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
    return (user + nice + system + irq + softirq) * TICK_S, steal * TICK_S


def _own(partners: tuple[int, ...] = ()) -> float:
    """CPU seconds of this process, its living children and ``partners`` (the other processes of
    one measurement: a data-parallel run's replicas)."""
    me = psutil.Process()
    processes = {p.pid: p for p in (me, *me.children(recursive=True))}
    for pid in partners:
        try:
            processes.setdefault(pid, psutil.Process(pid))
        except psutil.Error:  # one that ended
            continue
    total = 0.0
    for process in processes.values():
        try:
            times = process.cpu_times()
        except psutil.Error:  # a child that ended meanwhile
            continue
        total += times.user + times.system
    return total


def read(partners: tuple[int, ...] = ()) -> Reading | None:
    """The counters now (``partners``: other processes whose CPU is this measurement's own), or None
    where the machine's cannot be read."""
    machine = _machine()
    if machine is None:
        return None
    own = _own(partners)
    return Reading(time.monotonic(), machine[0], machine[1], own)


def between(start: Reading | None, end: Reading | None) -> Usage | None:
    """The others' CPU and the steal over the window from ``start`` to ``end``, in cores; None unread.

    A reading is good to about two ticks a core (:data:`QUANTUM_TICKS`): that much is
    forgiven, so a quiet machine reads 0, not a tick's noise."""
    if start is None or end is None:
        return None
    seconds = end.wall - start.wall
    if seconds <= 0:
        return None
    slack = QUANTUM_TICKS * TICK_S * (os.cpu_count() or 1)
    others = max(0.0, (end.busy - start.busy) - (end.own - start.own) - slack)
    steal = max(0.0, end.steal - start.steal - slack)
    return Usage(others / seconds, steal / seconds, seconds)


def wait_for_quiet(limit: float, longest_s: float, probe_s: float = 0.5) -> tuple[bool, float]:
    """Sleep in probes of ``probe_s`` until one reads the others under ``limit`` cores, at most
    ``longest_s``; returns whether it did and the seconds waited. While this process sleeps,
    whatever the machine does is the others'."""
    began = time.monotonic()
    while True:
        start = read()
        time.sleep(probe_s)
        usage = between(start, read())
        waited = time.monotonic() - began
        if usage is None or usage.quiet(limit):
            return True, waited
        if waited + probe_s > longest_s:
            return False, waited
