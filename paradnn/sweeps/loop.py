"""One loop for every sweep: plan the jobs, claim, measure, store, show progress.

A sweep is a plan of jobs (one configuration under one run on one slot's workers) that
:func:`sweep` runs. The loop alone owns the summary, the deadline, the progress bar, the
claims, the rounds and Ctrl-C; a backend (:mod:`paradnn.sweeps.backends`: this
machine or its software stacks; :mod:`paradnn.sweeps.cluster`: a Ray cluster) only starts
workers and measures one job on one, and declares what it supports
(:class:`Backend`), which :func:`check_supported` checks once, before anything starts.

A slot is a set of workers that measure under one platform identity: this machine (one
slot), one software stack (a slot per stack), one kind of Ray node (a slot per platform
fingerprint). A lane is one place a job runs at a time: a slot's worker, started when
first needed and replaced when it dies.

Every result is written to the store in its own transaction the moment it arrives, so
``kill -9`` loses nothing that had finished and a rerun resumes. Before measuring a
configuration the sweep claims it in the store; a second sweep over an overlapping grid
skips what the first one is measuring (two sweeps on one device would disturb each
other's timings anyway). A claim dies with its process.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Protocol

from paradnn.config import ConfigError
from paradnn.engine.protocol import RunSettings
from paradnn.families import Config
from paradnn.store import CLAIM_MARGIN_S, Store
from paradnn.sweeps.plan import (
    Progress,
    SweepOptions,
    SweepSummary,
    check_devices_present,
    check_settings,
    default_memory_budget,
    identity_record,
    ordered,
    round_options,
    round_order,
    rounds_of,
    run_key_of,
    skip_states,
)
from paradnn.sweeps.worker import POLL_S, Started, register
from paradnn.vocabulary import OK, OOM, SKIPPED

RETRIES = 1  # a job whose lane was lost (a Ray node died) is tried once more on another lane of its slot

# What a backend may support beyond one plain run, and the option that asks for it.
FEATURES = {
    "workers": "--workers",
    "runs": "variants",
    "devices": "--devices",
    "frameworks": "--framework",
    "adaptive": "--adaptive",
}


@dataclass
class Lane:
    """One place a job runs at a time: a worker of ``slot`` (None until started, or after it died)."""

    slot: str
    name: str = ""
    worker: Started | None = None
    measured: set[str] = field(default_factory=set)  # run keys its worker measured: it may keep their compiled steps


@dataclass
class Job:
    """One configuration under one run on one slot in one round; ``turn``: the configuration's place
    in the sweep's order; ``alone``: measured while no other lane runs."""

    config: Config
    key: str
    slot: str
    options: SweepOptions
    turn: int = 0
    round: int = 1
    position: int = 0  # its place among the configuration's alternatives in this round
    alone: bool = False
    attempts: int = 0


class LaneLost(Exception):
    """A lane can measure nothing more (its Ray node died): its job is tried on another lane of its slot.

    ``extra``: what the job's record keeps of the lost lane if no other lane takes it."""

    def __init__(self, message: str, extra: dict | None = None) -> None:
        super().__init__(message)
        self.extra = extra or {}


class Backend(Protocol):
    """Where a sweep's workers run. It starts them and measures one job on one; the loop does the rest.

    ``label``: how an error names it. ``where``: its words in the progress bar ("on ray"; empty for
    this machine). ``supports``: which of :data:`FEATURES` it can serve. ``together``: a configuration missing
    under one slot is measured again under every slot, side by side (software stacks: no
    version ratio rests on rows measured apart). ``shares_machine``: its lanes share this
    machine's cores and memory (each lane gets a share of the memory budget; a configuration
    XLA compiles is measured alone). ``cap``: how many lanes measure at once. ``lanes``: set
    by :meth:`open`. ``skipped``: slots that could not start, with why (shown in the summary).
    """

    label: str
    where: str
    supports: frozenset[str]
    together: bool
    shares_machine: bool
    cap: int
    lanes: list[Lane]
    skipped: dict[str, str]

    def open(self, store: Store, plans: Sequence[SweepOptions], configs: list[Config]) -> dict[str, dict]:
        """Start what the sweep's runs (``plans``, the first the sweep's own options) need; each slot's
        platform info by slot name."""

    def serves(self, slot: str, plan: SweepOptions) -> bool:
        """Whether ``slot``'s workers can measure ``plan`` (a framework's slot measures its own runs only)."""

    def choose_xla(self, slot: str, family: str, dtype: str) -> bool:
        """``--xla auto``'s choice for ``family`` on ``slot``'s platform (probed there once, then cached)."""

    def start(self, slot: str) -> Started:
        """A fresh worker for a lane of ``slot`` (run in the lane's thread: it must not use the store)."""

    def measure(self, lane: Lane, job: Job, budget: float | None, deadline: float | None) -> tuple[dict | None, bool]:
        """One job's record on the lane's worker (None: the deadline passed mid-way) and whether
        the worker may measure again; LaneLost when the lane can run nothing more."""

    def close(self, clean: bool) -> None:
        """Keep (``clean``) or stop every worker the sweep started."""


def check_supported(backend: Backend, plans: Sequence[SweepOptions]) -> None:
    """ConfigError when the sweep asks ``backend`` for a feature it does not declare."""
    first = plans[0]
    frameworks = sorted({p.settings.framework for p in plans})
    asked = {
        "frameworks": len(frameworks),
        "workers": first.workers,
        "runs": len(plans),
        "devices": max(p.settings.devices for p in plans),
    }
    for feature, value in asked.items():
        if value != 1 and feature not in backend.supports:
            if feature == "frameworks":
                raise ConfigError(FEATURES[feature], ", ".join(frameworks), f"one framework with {backend.label}")
            raise ConfigError(FEATURES[feature], value, f"1 with {backend.label} (a plain local sweep only)")


def sweep(
    configs: list[Config],
    store: Store,
    options: SweepOptions,
    backend: Backend,
    runs: Sequence[RunSettings] = (),
    progress: Callable[..., Progress] | None = None,
) -> SweepSummary:
    """Measure every configuration ``store`` lacks of ``configs`` on ``backend``: the one sweep loop.

    ``runs``: several run settings measured in this one sweep (default: ``options.settings``
    alone), on the same workers (runs of another framework on that framework's workers, where the
    backend supports several: :class:`Backend.serves`). Each run is declared whole and keys its own rows; what they
    share is the sweep: its workers, its budget (``max_minutes`` for all of them) and its order.
    A worker times only while no other prepares (:mod:`paradnn.engine.gate`), so two workers gain
    most when they prepare models of one size at once, and one configuration under two runs is that pair.

    Rounds: the sweep times its jobs in ``options.rounds`` passes over the grid (by default one,
    or :data:`~paradnn.sweeps.plan.COMPARE_ROUNDS` where it compares several runs or slots), each
    round with its share of ``max_seconds``. Within a round a configuration's alternatives are
    timed one after another in a shuffled order (:func:`~paradnn.sweeps.plan.round_order`); a
    configuration missing under one alternative is measured again under every one. Every round
    is a row of its own, stamped with its sweep, round and place (``extra``), so a comparison
    pairs the alternatives round by round (:func:`paradnn.analysis.speedup.compare`) and the
    rows pool (:meth:`paradnn.analysis.results.Results.pooled`).
    """
    from tqdm import tqdm

    plans = [replace(options, settings=s) for s in runs] or [options]
    check_supported(backend, plans)
    for plan in plans:
        check_settings(configs, plan)
    summary = SweepSummary(planned=len(configs) * len(plans), left=len(configs) * len(plans))
    deadline = time.monotonic() + options.max_minutes * 60 if options.max_minutes else None
    budget = (options.memory_budget_bytes or default_memory_budget(options.target)) if backend.shares_machine else None
    bar = None
    clean = False
    try:
        slots = backend.open(store, plans, configs)
        summary.skipped_stacks = dict(backend.skipped)
        pairs = [(slot, plan) for slot in slots for plan in plans if backend.serves(slot, plan)]
        rounds = rounds_of(options, len(pairs))
        todo = _plan(configs, slots, pairs, backend, store, rounds)
        summary.planned = len(configs) * len(pairs)
        summary.already_done, summary.left = summary.planned - len(todo), len(todo)
        bar = (progress or tqdm)(
            total=len(todo) * rounds, unit="config", desc=_words(options, backend, plans, rounds), dynamic_ncols=True
        )
        _run_rounds(todo, _Pass(store, summary, bar, backend, slots, budget, deadline), rounds, options.seed)
        clean = True
    except KeyboardInterrupt:
        summary.interrupted = True
    finally:
        if bar is not None:
            bar.close()
        backend.close(clean and not summary.interrupted)
    return summary


def _words(options: SweepOptions, backend: Backend, plans: list[SweepOptions], rounds: int) -> str:
    """The progress bar's description: the target, the backend and what the sweep repeats."""
    words = [f"sweep {options.target.id}" + (f" {backend.where}" if backend.where else "")]
    words += [f"{len(plans)} runs"] if len(plans) > 1 else []
    words += [f"{rounds} rounds"] if rounds > 1 else []
    words += [f"{options.workers} workers"] if options.workers > 1 else []
    return ", ".join(words)


def _plan(
    configs: list[Config],
    slots: dict[str, dict],
    runs: list[tuple[str, SweepOptions]],
    backend: Backend,
    store: Store,
    rounds: int,
) -> list[Job]:
    """The first round's jobs: each configuration the store lacks under every run on every slot that
    serves it (``runs``), its alternatives in the round's shuffled order. A configuration missing under
    one alternative is measured again under every one (side by side: no comparison rests on rows measured apart)."""
    pairs = []
    for slot, plan in runs:
        check_devices_present(plan, slots[slot])
        pairs.append((slot, _with_xla(plan, configs, slots[slot], backend, slot)))
    first = runs[0][1]
    done = store.run_keys(skip_states(first))
    jobs = []
    for turn, config in enumerate(configs if first.keep_order else ordered(configs, first.seed)):
        alternatives = [(slot, plan, run_key_of(config, plan, slots[slot])) for slot, plan in pairs]
        missing = [(slot, plan, key) for slot, plan, key in alternatives if key not in done]
        if missing and (backend.together or len(alternatives) > 1):
            missing = [(slot, replace(plan, force=True), key) for slot, plan, key in alternatives]
        mine = [Job(config, key, slot, round_options(plan, rounds), turn) for slot, plan, key in missing]
        jobs += _in_round(mine, first.seed, 1)
    return jobs


def _in_round(jobs: list[Job], seed: int, round_no: int) -> list[Job]:
    """``jobs`` as round ``round_no`` times them: each configuration's alternatives together, in the
    round's shuffled order, each job knowing its round and place."""
    out: list[Job] = []
    for turn in dict.fromkeys(job.turn for job in jobs):
        mine = round_order([job for job in jobs if job.turn == turn], seed, round_no, turn)
        out += [replace(job, round=round_no, position=i, attempts=0) for i, job in enumerate(mine)]
    return out


def _with_xla(plan: SweepOptions, configs: list[Config], info: dict, backend: Backend, slot: str) -> SweepOptions:
    """``plan`` with its XLA setting per family when it asks for ``--xla auto``: the platform's
    cached choice, else the backend's probe on the slot's platform."""
    from paradnn.engine.ceilings import cached_ceilings

    if plan.settings.xla is not None:
        return plan
    dtype = plan.settings.dtype
    known = (cached_ceilings(info) or {}).get("xla", {})
    choices = {}
    for family in sorted({c.family for c in configs}):
        cached = known.get(f"{family}|{dtype}")
        choices[family] = bool(cached["xla"]) if cached else backend.choose_xla(slot, family, dtype)
    return replace(plan, xla_choices=choices)


def _run_rounds(todo: list[Job], run: _Pass, rounds: int, seed: int) -> None:
    """Every job once; then each further round a whole pass later, for the jobs whose first round finished."""
    first = run.run(todo)
    again = [job for job in todo if (first.get(job.key) or {}).get("state") == OK]
    for round_no in range(2, rounds + 1):
        if run.summary.out_of_time or run.summary.interrupted:
            return
        if round_no == 2:
            run.bar.update((len(todo) - len(again)) * (rounds - 1))  # nothing to time again for what failed
        run.run(_in_round(again, seed, round_no), later=True)


@dataclass
class _Pass:
    """One pass over a sweep's jobs: claim, measure on a free lane of the job's slot, store.

    With ``backend.cap`` > 1 that many jobs are in flight at once, each in a thread of its
    own that waits on its lane's worker. On a backend whose lanes share this machine, a
    configuration compiled by XLA is measured alone (XLA's compiler already keeps about 1.5-1.7
    of two cores busy, so preparing another beside it gains nothing), each lane has its share
    of the memory budget, and a configuration that does not fit in a share (predicted over
    it, grown past it, or out of memory beside another) is measured again alone with the
    whole budget; only that measurement is recorded.
    """

    store: Store
    summary: SweepSummary
    bar: Progress
    backend: Backend
    slots: dict[str, dict]
    budget: float | None
    deadline: float | None
    later: bool = False  # a further round: its jobs' configurations are in the store already
    queue: deque = field(default_factory=deque)
    running: dict[Future, tuple[Job, Lane]] = field(default_factory=dict)
    claimed: set[str] = field(default_factory=set)
    stored: dict[str, dict] = field(default_factory=dict)

    def run(self, jobs: list[Job], later: bool = False) -> dict[str, dict]:
        """Measure ``jobs`` (a further round, if ``later``); the records stored, by key."""
        self.later, self.stored, self.claimed = later, {}, set()
        self.queue = deque(replace(job, alone=self._alone(job)) for job in jobs)
        cap = self.backend.cap
        pool = ThreadPoolExecutor(cap, thread_name_prefix="paradnn-lane") if cap > 1 else _Inline()
        ended = threading.Event()  # set when this pass ends: a worker a lane starts after that is stopped
        try:
            while self.queue or self.running:
                self._dispatch(pool, ended)
                if self.queue and not self.running:  # no lane of their slot is left (a cluster that lost its nodes)
                    self.summary.stranded += len(self.queue)
                    self.queue.clear()
                finished, _ = wait(list(self.running), timeout=POLL_S, return_when=FIRST_COMPLETED) if self.running else ((), ())
                for future in finished:
                    self._collect(future)
        finally:
            ended.set()
            pool.shutdown(wait=False, cancel_futures=True)
            if self.claimed:  # interrupted: what was in flight is not measured
                self.store.release(sorted(self.claimed))
        return self.stored

    def _alone(self, job: Job) -> bool:
        if not self.backend.shares_machine:
            return False
        settings = job.options.settings_for(job.config)
        return self.backend.cap == 1 or settings.framework == "jax" or bool(settings.xla)

    def _dispatch(self, pool, ended: threading.Event) -> None:
        """Start the next jobs on free lanes, in order, while the backend's cap and ``alone`` allow."""
        while self.queue and len(self.running) < self.backend.cap and not any(j.alone for j, _ in self.running.values()):
            if self.deadline and time.monotonic() >= self.deadline:
                self.summary.out_of_time = True
                self.queue.clear()
                return
            chosen = self._next()
            if chosen is None or (chosen[0].alone and self.running):  # wait for a lane, or until the others are idle
                return
            job, lane = chosen
            self.queue.remove(job)
            if job.key not in self.claimed and not self._claim(job):
                continue
            self.claimed.add(job.key)
            failed = sum(n for s, n in self.summary.states.items() if s != "ok")
            self.bar.set_postfix_str(f"failed {failed} | {lane.name + ' | ' if lane.name else ''}{job.config.label}")
            if lane.worker is not None and not lane.worker.alive():
                lane.worker = None
            share = self.budget / self.backend.cap if self.budget and not job.alone else self.budget
            if self.summary.machine_busy:  # the machine stays busy: time without waiting for it, rows flagged
                job = replace(job, options=replace(job.options, settings=replace(job.options.settings, contention_retries=0)))
            self.running[pool.submit(self._on_lane, job, lane, ended, share)] = (job, lane)

    def _next(self) -> tuple[Job, Lane] | None:
        """The first queued job with a free lane of its slot, and that lane: the one that measured it in an
        earlier round (its worker keeps the compiled step), else one with a worker."""
        busy = {id(lane) for _, lane in self.running.values()}
        free = [lane for lane in self.backend.lanes if id(lane) not in busy]
        for job in self.queue:
            mine = [lane for lane in free if lane.slot == job.slot]
            if mine:
                return job, min(mine, key=lambda lane: (job.key not in lane.measured, lane.worker is None))
        return None

    def _on_lane(self, job: Job, lane: Lane, ended: threading.Event, budget: float | None) -> tuple[dict | None, bool, bool]:
        """Measure ``job`` on ``lane``, starting its worker here first if it has none: two lanes
        start their workers side by side (importing TensorFlow takes about 5 s of one core). Returns
        the record, whether the worker may measure again, and whether it is new (the loop records
        its platform: the store is not this thread's)."""
        fresh = lane.worker is None
        if fresh:
            worker = self.backend.start(job.slot)
            if ended.is_set():  # the sweep was interrupted meanwhile: no worker outlives it, nothing is measured
                worker.stop()
                return None, False, False
            lane.worker = worker
        record, reusable = self.backend.measure(lane, job, budget, self.deadline)
        return record, reusable, fresh

    def _collect(self, future: Future) -> None:
        """Store a finished job's record; requeue it alone if it did not fit beside another lane."""
        job, lane = self.running.pop(future)
        try:
            record, reusable, fresh = future.result()
        except LaneLost as lost:
            self._lost(job, lane, lost)
            return
        if fresh and lane.worker is not None:
            register(self.store, job.options.target, lane.worker)
            lane.measured.clear()
        lane.measured.add(job.key)
        if not reusable and lane.worker is not None:
            lane.worker.kill()
            lane.worker = None
        if record is None:  # the sweep's own time ran out mid-configuration: not a result
            self.summary.out_of_time = True
            self.queue.clear()
        elif not job.alone and self.backend.shares_machine and record["state"] in (OOM, SKIPPED):
            self.queue.appendleft(replace(job, alone=True))  # did not fit beside another lane
        else:
            self._settle(job, record)

    def _lost(self, job: Job, lane: Lane, lost: LaneLost) -> None:
        """A lane that can run nothing more: its job goes to another lane of its slot once, else is an error row.
        The slot's other jobs wait for its other lanes; with none left they are stranded (see :meth:`run`)."""
        self.backend.lanes.remove(lane)
        job.attempts += 1
        left = any(other.slot == job.slot for other in self.backend.lanes)
        if job.attempts <= RETRIES and left:
            self.queue.appendleft(job)  # the claim is still ours
            return
        why = "twice" if job.attempts > RETRIES else "and no other worker of its platform is left"
        record = identity_record(job.config, job.options, self.slots[job.slot])
        self._settle(job, {**record, "state": "error", "error": f"{lost}, {why}", "started_at": time.time(), "extra": lost.extra})

    def _claim(self, job: Job) -> bool:
        """Claim ``job`` in the store for measuring; False (counted) if it is done or being measured meanwhile."""
        done_states = () if self.later else skip_states(job.options)
        status = self.store.claim(job.key, job.config.label, done_states, job.options.timeout_s + CLAIM_MARGIN_S)
        if status == "claimed":
            return True
        if not self.later:  # finished or being measured by another sweep meanwhile
            self.summary.already_done += status == "done"
            self.summary.busy += status == "busy"
            self.summary.left -= 1
        self.bar.update(1)
        return False

    def _settle(self, job: Job, record: dict) -> None:
        """Store one job's record, stamped with its sweep, round and place; the claim ends either way."""
        self.claimed.discard(job.key)
        record = self.summary.stamp({**record, "run_key": job.key}, job.round, job.position, job.options.look)
        self.summary.account(record)
        self.store.add_results([record], release=True)
        self.stored[job.key] = record
        if not self.later:
            self.summary.states[record["state"]] += 1
            self.summary.left -= 1
        self.bar.update(1)


class _Inline:
    """An executor for one lane: runs each call at once in this thread, as a plain loop would
    (an interrupt stops it where it is)."""

    def submit(self, fn: Callable, *args: object) -> Future:
        future: Future = Future()
        future.set_result(fn(*args))
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass
