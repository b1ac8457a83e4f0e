"""One door to every sweep backend: this machine, its software stacks side by side, a Ray cluster.

The command line, the Python API and the notebooks measure a grid through
:func:`run_sweep`, which picks a backend (:func:`backend_for`) and hands it to the one
sweep loop (:func:`paradnn.sweeps.loop.sweep`). A backend starts workers and measures one
job on one; the loop does the rest, so a result is the same record whichever ran it.
"""

from __future__ import annotations

import platform as pyplatform
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import cast

from paradnn.config import ConfigError
from paradnn.engine import frameworks
from paradnn.engine.protocol import RunSettings
from paradnn.families import Config
from paradnn.platform import Target
from paradnn.settings import FRAMEWORK_VERSION_COLUMNS
from paradnn.store import Store
from paradnn.sweeps.loop import Backend, Job, Lane, sweep
from paradnn.sweeps.messages import ChooseXLA, Result
from paradnn.sweeps.plan import Progress, SweepOptions, SweepSummary
from paradnn.sweeps.worker import (
    IDLE,
    WORKER_START_TIMEOUT_S,
    ProcessWorker,
    Worker,
    check_name_here,
    finish,
    register,
    reuse_or_start,
    run_one,
    worker_identity,
)
from paradnn.version import __version__


def run_sweep(
    configs: list[Config],
    store: Store,
    options: SweepOptions,
    *,
    stacks: Sequence = (),
    address: str = "",
    runs: Sequence[RunSettings] = (),
    progress: Callable[..., Progress] | None = None,
    echo: Callable[[str], None] = lambda line: None,
    start_worker: Callable[..., Worker] | None = None,
) -> SweepSummary:
    """Measure what ``store`` lacks of ``configs`` under ``options`` (and each of ``runs``, if given):
    on this machine, under each of ``stacks`` (:class:`paradnn.sweeps.stacks.Stack`, side by side),
    or on the Ray cluster at ``address``. Returns the summary of what was done (stacks that could
    not run are named in it). ``start_worker`` replaces how a worker starts (tests): called with
    the target, and a software stack's interpreter for stacks."""
    return sweep(configs, store, options, backend_for(stacks, address, echo, start_worker), runs, progress)


def backend_for(
    stacks: Sequence = (),
    address: str = "",
    echo: Callable[[str], None] = lambda line: None,
    start_worker: Callable[..., Worker] | None = None,
) -> Backend:
    """The backend a sweep runs on; ConfigError for stacks on a cluster (each node would build its own environments)."""
    if stacks and address:
        raise ConfigError("--stack", stacks[0].name, "a local sweep (not with --backend ray)")
    if address:
        from paradnn.sweeps.cluster import RayBackend

        return RayBackend(address)
    if stacks:
        return StacksBackend(list(stacks), echo, start_worker)
    return LocalBackend(start_worker)


class LocalBackend:
    """This machine: worker processes of this environment, a slot per framework the sweep's runs use
    (TensorFlow, JAX, PyTorch: Keras picks its backend once per process), ``--workers`` lanes each.

    Runs of several frameworks in one sweep are timed in the same shuffled rounds, each on its own
    framework's workers, so a framework comparison rests on rows measured side by side.
    ``start_worker(target)`` starts a worker (default: an idle worker of this process, else a
    new :class:`paradnn.sweeps.worker.ProcessWorker` running the slot's framework)."""

    label = "a local sweep"
    where = ""
    supports = frozenset({"workers", "runs", "devices", "frameworks", "adaptive"})
    together = False
    shares_machine = True

    def __init__(self, start_worker: Callable[[Target], Worker] | None = None) -> None:
        self.start_worker = start_worker
        self.lanes: list[Lane] = []
        self.skipped: dict[str, str] = {}
        self.cap = 1
        self.gated = False

    def open(self, store: Store, plans: Sequence[SweepOptions], configs: list[Config]) -> dict[str, dict]:
        """``--workers`` lanes per framework; each framework's platform as an earlier sweep recorded it,
        else as a first worker describes it."""
        options = plans[0]
        self.store, self.target, self.cap, self.gated = store, options.target, options.workers, options.workers > 1
        if self.start_worker is None:  # this machine's own workers (a test's double describes another)
            check_name_here(store, options.target)
        used = list(dict.fromkeys(plan.settings.framework for plan in plans))
        slots = {}
        for framework in used:
            lanes = [Lane(framework, _lane_name(framework if len(used) > 1 else "", i)) for i in range(1, options.workers + 1)]
            self.lanes += lanes
            info = known_platform(store, options.target, framework)
            if info is None:  # first sweep of this platform, framework and stack: ask a worker
                lanes[0].worker = self._registered(framework)
                info = lanes[0].worker.info
            slots[framework] = info
        return slots

    def serves(self, slot: str, plan: SweepOptions) -> bool:
        return slot == plan.settings.framework

    def _registered(self, slot: str) -> Worker:
        worker = self.start(slot)
        register(self.store, self.target, worker)
        return worker

    def choose_xla(self, slot: str, family: str, dtype: str) -> bool:
        """Asked of the slot's first worker, which probes once and caches the choice with the ceilings."""
        lane = next(lane for lane in self.lanes if lane.slot == slot)
        if lane.worker is None or not lane.worker.alive():
            lane.worker = self._registered(slot)
        worker = _local(lane)
        worker.send(ChooseXLA(family, dtype))
        answer = worker.recv() if worker.poll(WORKER_START_TIMEOUT_S) else None
        if not isinstance(answer, Result):
            return False  # TensorFlow's default path
        worker.ceilings = answer.record["ceilings"]  # with the probe's choice: a later sweep may reuse it
        register(self.store, self.target, worker)
        return bool(answer.record["xla"])

    def start(self, slot: str) -> Worker:
        if self.start_worker is not None:
            return self.start_worker(self.target)
        return reuse_or_start(self.target, framework=slot, gated=self.gated)

    def measure(self, lane: Lane, job: Job, budget: float | None, deadline: float | None) -> tuple[dict | None, bool]:
        return run_one(job.config, _local(lane), job.options, budget, deadline)

    def close(self, clean: bool) -> None:
        finish([_local(lane) for lane in self.lanes if lane.worker is not None], clean)


class StacksBackend(LocalBackend):
    """Several software stacks of this machine side by side: a slot per stack, one worker each,
    its environment built once by :func:`paradnn.sweeps.stacks.ensure`; one measures at a time.
    Every stack's worker is an idle one of this process, or every one is fresh (:meth:`_idle_for_all`).

    A stack that cannot be built or started is skipped with its reason and the others go on;
    if none can, ConfigError. ``start_worker(target, python)`` starts a worker (default: an idle
    worker of this process, else a new one)."""

    label = "--stack"
    supports = frozenset()
    together = True

    def __init__(
        self,
        stacks: list,
        echo: Callable[[str], None] = lambda line: None,
        start_worker: Callable[[Target, str], Worker] | None = None,
    ) -> None:
        super().__init__()
        self.stacks, self.echo = stacks, echo
        self.start_stack = start_worker or self._default_start
        self.reuse = start_worker is None
        self.pythons: dict[str, str] = {}

    def open(self, store: Store, plans: Sequence[SweepOptions], configs: list[Config]) -> dict[str, dict]:
        from paradnn.sweeps import stacks as stk

        options = plans[0]
        if options.settings.framework != "tensorflow":
            raise ConfigError(
                "--framework", options.settings.framework, "tensorflow with --stack (stacks are TensorFlow versions)"
            )
        self.store, self.target = store, options.target
        if self.reuse:  # this machine's own workers, checked before any environment is built
            check_name_here(store, options.target)
        slots = {}
        for stack in self.stacks:
            try:
                self.pythons[stack.name] = str(stk.ensure(stack, self.echo))
            except (stk.StackFailed, RuntimeError, ConfigError) as exc:
                self.skipped[stack.name] = str(exc)
                self.echo(f"stack {stack.name}: skipped: {exc}")
        idle = self._idle_for_all()
        for name in self.pythons:
            try:
                worker = idle.get(name) or self.start(name)
                register(self.store, self.target, worker)
                self.lanes.append(Lane(name, name, worker))
                slots[name] = worker.info
            except (RuntimeError, ConfigError) as exc:
                self.skipped[name] = str(exc)
                self.echo(f"stack {name}: skipped: {exc}")
        self.where = f"x {len(slots)} stacks"
        if not slots:
            raise ConfigError(
                "--stack",
                ", ".join(s.name for s in self.stacks),
                "a stack that installs and starts here (" + "; ".join(self.skipped.values()) + ")",
            )
        return slots

    def serves(self, slot: str, plan: SweepOptions) -> bool:
        return True  # every stack measures every run (all of them TensorFlow's)

    def start(self, slot: str) -> Worker:
        return self.start_stack(self.target, self.pythons[slot])

    def _idle_for_all(self) -> dict[str, Worker]:
        """Idle workers of this process for every stack, or none: a worker that measured before and a
        fresh one never stand on opposite sides of a version comparison (one that has not yet run
        a configuration is slower at first), so where one stack has no idle worker every stack
        starts a fresh one. Only with the default way of starting workers."""
        if not self.reuse:
            return {}
        taken: dict[str, Worker | None] = {
            name: IDLE.take(worker_identity(self.target, python=python)) for name, python in self.pythons.items()
        }
        found = {name: worker for name, worker in taken.items() if worker is not None}
        if len(found) == len(taken):
            return found
        for worker in found.values():
            worker.stop()
        return {}

    def _default_start(self, target: Target, python: str) -> Worker:
        return ProcessWorker(target, python=python)


def _local(lane: Lane) -> Worker:
    """A local lane's worker: a process this backend started (or its ``start_worker`` made)."""
    assert lane.worker is not None, "the loop starts a lane's worker before it measures on it"
    return cast(Worker, lane.worker)


def _lane_name(framework: str, number: int) -> str:
    """How the progress bar names a lane: its framework where a sweep has several, its number from the second."""
    return " ".join(part for part in (framework, f"#{number}" if number > 1 else "") if part)


def known_platform(store: Store, target: Target, framework: str = frameworks.DEFAULT) -> dict | None:
    """What an earlier sweep recorded about ``target`` on this host with these versions.

    Lets a sweep with nothing left to measure finish without starting TensorFlow.
    """
    installed = {"python": pyplatform.python_version(), "paradnn": __version__}
    for name in ("tensorflow", "keras", *((framework,) if framework in FRAMEWORK_VERSION_COLUMNS else ())):
        try:
            installed[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            return None
    for info in store.platform_infos(target.platform):
        software = info.get("software", {})
        if info.get("host") == pyplatform.node() and all(software.get(k) == v for k, v in installed.items()):
            return info
    return None
