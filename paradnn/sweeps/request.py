"""One sweep request: what the command line (``paradnn sweep``) and the Python API
(:func:`paradnn.sweep`) ask of the one sweep loop, declared once and checked whole before a
store is opened.

A :class:`SweepRequest` names what to measure (a family's preset grid, with overrides, or the
configurations given), the run settings (one run, or several as variants of it), the backend and
its options, the budget, the timeout, ``force`` and ``adaptive``; :func:`prepare` checks every
value and the backend's declared features (:func:`paradnn.sweeps.loop.check_supported`) and
returns the :class:`Prepared` sweep; :func:`run` measures it in a store (the command line and the
API), :func:`measure_runs` measures every run of it (the reports); :func:`rows` reads its rows
back, as both front ends show them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from paradnn.config import ConfigError
from paradnn.engine.protocol import RunSettings
from paradnn.families import Config
from paradnn.platform import Target
from paradnn.store import Store
from paradnn.sweeps import stacks as stk
from paradnn.sweeps.loop import Backend
from paradnn.sweeps.plan import BACKENDS, Progress, SweepOptions, SweepSummary

if TYPE_CHECKING:  # adaptive sweeps load scikit-learn: imported when one is asked for
    from paradnn.sweeps.adaptive import Budget


@dataclass(frozen=True)
class SweepRequest:
    """A sweep as a front end asks for it (every field as the command line's option of that name).

    ``run``: the run settings (``dtype``, ``xla``, ``platform``, ``framework``, ``input``,
    ``devices``; :mod:`paradnn.settings`), defaults for the rest; ``stacks``: software stacks
    (``tensorflow==2.16.2``, ``current``), measured side by side; ``name``: what to call the
    platform in the store; ``backend``/``address``: this machine or a Ray cluster at HOST:PORT;
    ``budget``: with ``adaptive``, configurations (``40``) or minutes (``30m``) to measure."""

    family: str
    preset: str = "smoke"
    overrides: Mapping[str, Iterable] | None = None
    run: Mapping[str, object] = field(default_factory=dict)
    stacks: tuple[str, ...] = ()
    name: str | None = None
    max_seconds: float = 3.0
    max_minutes: float | None = None
    timeout_s: float = 600.0
    memory_gb: float | None = None
    retry_failed: bool = False
    force: bool = False
    rounds: int | None = None
    workers: int = 1
    adaptive: bool = False
    budget: str | None = None
    backend: str = "local"
    address: str | None = None
    configs: Sequence[Config] | None = None  # these instead of ``family``'s grid (a report's families, the study's)
    variants: Sequence[Mapping[str, object]] = ()  # several runs: ``run`` with these settings changed, in one sweep
    look: int = 1  # > 1: a further look at an undecided comparison (every configuration again, in the order given)


@dataclass
class Prepared:
    """A checked request: its configurations, parsed run settings (of its first run), target, options
    and backend; ``runs``: the settings of every run, ``together``: whether one sweep measures them all."""

    request: SweepRequest
    configs: list[Config]
    parsed: dict[str, object]
    target: Target
    options: SweepOptions
    backend: Backend
    budget: Budget | None = None  # with ``adaptive``
    runs: list[RunSettings] = field(default_factory=list)
    together: bool = True


def _where(request: SweepRequest) -> tuple[list[stk.Stack], str]:
    """The request's software stacks (parsed) and its Ray cluster's address ('' for this machine)."""
    return [stk.parse(text) for text in request.stacks], (request.address or "") if request.backend == "ray" else ""


def run_settings(run: Mapping[str, object], name: str | None = None, **knobs: object) -> tuple[dict, Target, RunSettings]:
    """The parsed run settings (defaults filled in), the target (called ``name``) and the RunSettings they make."""
    from paradnn.platform import parse_target
    from paradnn.settings import parse

    parsed = parse(run)
    target = parse_target(str(parsed["platform"])).named(name)
    return parsed, target, RunSettings.of(parsed, target, **knobs)


def prepare(request: SweepRequest, echo: Callable[[str], None] = print) -> Prepared:
    """Check every value of ``request`` and what its backend supports; ConfigError (one line: what
    was wrong, what is allowed) before any store is opened or any worker started."""
    from paradnn.store.legacy import grid_of
    from paradnn.sweeps.backends import backend_for
    from paradnn.sweeps.loop import check_supported
    from paradnn.sweeps.plan import check_settings

    if request.overrides is not None and not isinstance(request.overrides, Mapping):
        raise ConfigError("overrides", request.overrides, "a mapping of axis to values, e.g. {'nodes': [8, 16]}")
    if request.configs is not None:
        configs = list(request.configs)
    else:
        configs = grid_of(request.family, request.preset, dict(request.overrides or {}))
    each = [run_settings({**request.run, **v}, request.name, max_seconds=request.max_seconds) for v in request.variants or [{}]]
    parsed, target, settings = each[0]
    if any(t.platform != target.platform for _, t, _ in each):
        raise ConfigError("variants", list(request.variants), "runs of one platform (measure each platform on its own)")
    runs = [one for _, _, one in each]
    for option, value in (
        ("--max-minutes", request.max_minutes),
        ("--timeout", request.timeout_s),
        ("--memory-budget", request.memory_gb),
    ):
        if value is not None and not value > 0:
            raise ConfigError(option, value, "a positive number")
    if request.backend not in BACKENDS:
        raise ConfigError("--backend", request.backend, ", ".join(BACKENDS))
    if request.backend == "ray" and not request.address:
        raise ConfigError("--address", "(none)", "HOST:PORT of a running Ray cluster, or $RAY_ADDRESS")
    if request.adaptive != (request.budget is not None):
        raise ConfigError("--adaptive/--budget", request.budget or "(none)", "both together: --adaptive --budget N (or Nm)")
    stacks, address = _where(request)
    names = [stack.name for stack in stacks]
    if len(set(names)) < len(names):
        twice = next(name for name in names if names.count(name) > 1)
        raise ConfigError("--stack", twice, "each software stack once")
    backend = backend_for(stacks, address, echo=echo)
    memory = request.memory_gb * 1e9 if request.memory_gb else None
    options = SweepOptions(
        settings=settings,
        target=target,
        memory_budget_bytes=memory,
        timeout_s=request.timeout_s,
        max_minutes=request.max_minutes,
        retry_failed=request.retry_failed,
        rounds=request.rounds,
        workers=request.workers,
        look=request.look,
        force=request.force or request.look > 1,
        keep_order=request.look > 1,
    )
    budget = None
    if request.adaptive:
        from paradnn.sweeps.adaptive import Budget, check_adaptive

        check_adaptive(options, backend)
        budget = Budget.parse(request.budget or "")
    plans = [replace(options, settings=one) for one in runs]
    frameworks = {one.framework for one in runs}
    together = len(runs) == 1 or ("runs" in backend.supports and ("frameworks" in backend.supports or len(frameworks) == 1))
    for group in [plans] if together else [[plan] for plan in plans]:
        check_supported(backend, group)
    if address:
        from paradnn.sweeps.cluster import check_reachable

        check_reachable(address)
    for plan in plans:
        check_settings(configs, plan)
    return Prepared(request, configs, parsed, target, options, backend, budget, runs, together)


def run(
    prepared: Prepared, store: Store, echo: Callable[[str], None] = print, progress: Callable[..., Progress] | None = None
) -> tuple[SweepSummary, object]:
    """Measure a prepared sweep in ``store``: the loop's summary, and with ``adaptive`` the outcome
    (:class:`paradnn.sweeps.adaptive.AdaptiveResult`: its predictions of the rest), else None."""
    from paradnn.sweeps.loop import sweep

    if prepared.budget is not None:
        from paradnn.sweeps.adaptive import adaptive_sweep

        outcome = adaptive_sweep(prepared.configs, store, prepared.options, prepared.budget, progress=progress, echo=echo)
        return outcome.summary, outcome
    return sweep(prepared.configs, store, prepared.options, prepared.backend, progress=progress), None


def measure_runs(
    prepared: Prepared, store: Store, progress: Callable[..., Progress] | None = None, echo: Callable[[str], None] = print
) -> list[SweepSummary]:
    """Measure every run of a prepared request: in one sweep where its backend takes several runs
    (:attr:`Prepared.together`), else one sweep per run, each with its share of ``max_minutes``
    and a backend of its own. One summary per sweep."""
    from paradnn.sweeps.backends import backend_for
    from paradnn.sweeps.loop import sweep

    options = prepared.options
    if prepared.together:
        return [sweep(prepared.configs, store, options, prepared.backend, runs=prepared.runs, progress=progress)]
    share = options.max_minutes / len(prepared.runs) if options.max_minutes else None
    stacks, address = _where(prepared.request)
    return [
        sweep(
            prepared.configs,
            store,
            replace(options, settings=one, max_minutes=share),
            prepared.backend if i == 0 else backend_for(stacks, address, echo=echo),
            progress=progress,
        )
        for i, one in enumerate(prepared.runs)
    ]


def rows(prepared: Prepared, store: str | Path) -> pd.DataFrame:
    """The request's grid as the store holds it under its run settings (XLA auto: the setting it
    chose): one pooled row per configuration (per TensorFlow version with software stacks)."""
    from paradnn.analysis.results import Results

    mine = Results.load(store).where(family=prepared.request.family, label=[c.label for c in prepared.configs])
    settings = {**prepared.parsed, "platform": prepared.target.platform}
    return mine.for_settings(**settings).pooled(per_stack=bool(prepared.request.stacks)).frame
