"""The timing gate: worker processes on one machine prepare side by side but time one at a time.

Building a model, tracing its step and compiling it keep one core busy for a second (a
small FC) to thirteen (DenseNet-121 under TensorFlow's graph optimiser); on a 2-core CPU the
other core idles meanwhile. A sweep with ``workers`` > 1 (:mod:`paradnn.sweeps.loop`) runs
that many worker processes, and this gate lets their *preparations* overlap while keeping
every *timed* phase alone on the machine, as the protocol requires:

- a worker holds the gate **shared** while it prepares (start-up, building, tracing,
  counting, compiling: everything it does for a message);
- the protocol turns that into **exclusive** from calibration to its last timed call
  (:func:`paradnn.engine.protocol.run_protocol`), so no other gated worker runs anything
  then, and back to shared afterwards.

It is an advisory ``flock`` on one file (``PARADNN_TIMING_GATE`` names it; the driver sets
it for the workers of a multi-worker sweep). Turning shared into exclusive gives the shared
lock up while waiting (Linux ``flock`` semantics), so two workers that both want to time
never deadlock: one times, then the other. A process without the variable has a gate that
does nothing: a single worker needs none.

Measured on a 2 vCPU EPYC Zen 4: a residual CNN and DenseNet-121 prepared in two processes
at once took 2.03 and 12.9 s, alone 1.88 and 13.1 s.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

GATE_ENV = "PARADNN_TIMING_GATE"


class Gate:
    """A shared/exclusive lock on one file, held by this process in nested modes."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._file = None
        self._modes: list[int] = []  # the modes held, innermost last (fcntl.LOCK_SH or LOCK_EX)

    @property
    def active(self) -> bool:
        return self.path is not None

    def _set(self, mode: int) -> None:
        if self._file is None:
            self._file = open(self.path, "a")  # noqa: SIM115 - held for the process's life
        fcntl.flock(self._file, mode)

    @contextmanager
    def _hold(self, mode: int) -> Iterator[None]:
        held = max(self._modes, default=0)  # LOCK_EX (2) covers LOCK_SH (1)
        if not self.active or held >= mode:
            yield
            return
        self._set(mode)
        self._modes.append(mode)
        try:
            yield
        finally:
            self._modes.pop()
            self._set(max(self._modes, default=fcntl.LOCK_UN))

    def shared(self) -> AbstractContextManager[None]:
        """Held while preparing: other gated workers may prepare too, none may time."""
        return self._hold(fcntl.LOCK_SH)

    def exclusive(self) -> AbstractContextManager[None]:
        """Held while timing: no other gated worker runs anything."""
        return self._hold(fcntl.LOCK_EX)


_GATE: Gate | None = None


def gate() -> Gate:
    """This process's gate, from ``PARADNN_TIMING_GATE`` (a gate that does nothing when unset)."""
    global _GATE
    path = os.environ.get(GATE_ENV) or None
    if _GATE is None or _GATE.path != path:
        _GATE = Gate(path)
    return _GATE
