"""Adaptive sweeps: measure a space-filling design, then where the model is least sure, up to a budget.

The budget is a number of configurations (``40``) or minutes (``30m``). Half of a
configuration budget (at least :data:`paradnn.analysis.predict.MIN_ROWS`) goes to a maximin design
over the grid's log axes; the rest is spent in rounds, each refitting the model on what
the store holds and measuring where it is least certain (the cells whose measurement
would narrow the most intervals, see :func:`paradnn.analysis.predict.most_informative`). A
minutes budget measures the design, then rounds of a twentieth of the grid until the
time is spent. Every measurement goes through :func:`paradnn.sweeps.backends.run_sweep`,
so claims, failures as results and resuming work as in a full sweep.

Outlier guard: a configuration whose measured step falls outside its predicted interval
by more than the interval's own width (and by 25% at least) is measured once more. Both rows stay in the
store; the later one is the one used (the store's last measurement of a configuration),
and the sweep says whether the second measurement agreed with the model or with the
first (then the model, not the machine, was wrong).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pandas as pd

from paradnn.analysis import predict
from paradnn.analysis.results import Results
from paradnn.config import ConfigError
from paradnn.families import Config
from paradnn.platform import Target
from paradnn.settings import STEP_FIELDS
from paradnn.store import Store
from paradnn.sweeps.backends import run_sweep
from paradnn.sweeps.loop import Backend
from paradnn.sweeps.plan import Progress, SweepOptions, SweepSummary
from paradnn.sweeps.worker import Worker

OUTLIER_WIDTHS = 1.0  # a result this many interval widths outside its interval is measured again,
OUTLIER_MIN = math.log(1.25)  # and at least 25% outside it (a model sure to 1% must not chase 2% noise)
MINUTES_ROUND_SHARE = 20  # a minutes budget measures 1/20 of the grid per round


@dataclass(frozen=True)
class Budget:
    """How much an adaptive sweep may measure: configurations or minutes."""

    configs: int | None = None
    minutes: float | None = None

    def __post_init__(self) -> None:
        if self.configs is not None and self.configs < predict.MIN_ROWS:
            raise ConfigError("--budget", self.configs, f"at least {predict.MIN_ROWS} configurations (the initial design)")

    @staticmethod
    def parse(text: str) -> Budget:
        """``40`` (configurations) or ``30m`` / ``30min`` (minutes); ConfigError otherwise."""
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(m|min|minutes)?\s*", str(text))
        if not match or not float(match.group(1)) > 0 or (not match.group(2) and "." in match.group(1)):
            raise ConfigError("--budget", text, "a number of configurations (40) or minutes (30m)")
        return Budget(minutes=float(match.group(1))) if match.group(2) else Budget(configs=int(match.group(1)))


@dataclass
class AdaptiveResult:
    """What an adaptive sweep measured, what it predicted, and what the outlier guard did."""

    summary: SweepSummary = field(default_factory=SweepSummary)
    measured: int = 0
    rounds: int = 0
    predicted: pd.DataFrame = field(default_factory=pd.DataFrame)  # unmeasured cells, filled by the model
    remeasured: list[str] = field(default_factory=list)  # one line per outlier, saying which row is used and why

    def line(self) -> str:
        text = (
            f"adaptive: {self.measured} of {self.summary.planned} configurations measured in {self.rounds} rounds, "
            f"{len(self.predicted)} predicted"
        )
        return text + (f"; {len(self.remeasured)} outliers measured again" if self.remeasured else "")


def grid_rows(configs: list[Config], dtype: str, xla: str) -> pd.DataFrame:
    """The grid as model rows (label, hyperparameters, dtype, XLA), indexed by label."""
    rows = [{"label": c.label, "family": c.family, **c.hyperparameters(), "dtype": dtype, "xla": xla} for c in configs]
    return pd.DataFrame(rows).drop_duplicates("label").set_index("label", drop=False)


def check_adaptive(options: SweepOptions, backend: Backend) -> None:
    """ConfigError for what adaptive rounds cannot take: they are plain sweeps of this machine,
    one worker and one round each (the design and the fit assume one row per measurement)."""
    if "adaptive" not in backend.supports:
        raise ConfigError("--adaptive", backend.label, "a plain local sweep (adaptive rounds run on this machine)")
    for name, value in (("--rounds", options.rounds or 1), ("--workers", options.workers)):
        if value != 1:
            raise ConfigError(name, value, "1 with --adaptive (each round is one plain sweep)")


def adaptive_sweep(
    configs: list[Config],
    store: Store,
    options: SweepOptions,
    budget: Budget,
    rounds: int = 4,
    seed: int = 0,
    progress: Callable[..., Progress] | None = None,
    echo: Callable[[str], None] = print,
    start_worker: Callable[[Target], Worker] | None = None,
) -> AdaptiveResult:
    """Measure part of ``configs`` adaptively (see the module docstring); predict the rest."""
    by_label = {c.label: c for c in configs}
    xla = "auto" if options.settings.xla is None else str(options.settings.xla).lower()
    grid = grid_rows(configs, options.settings.dtype, xla)
    deadline = time.monotonic() + budget.minutes * 60 if budget.minutes else None
    result = AdaptiveResult(summary=SweepSummary(planned=len(grid)))

    def measure(labels: list[str], force: bool = False) -> None:
        """Measure ``labels`` (again, with ``force``) within the time budget; count them unless repeats."""
        left = (deadline - time.monotonic()) / 60 if deadline else None
        if not labels or (left is not None and left <= 0):
            return
        limits = [x for x in (left, options.max_minutes) if x]
        opts = replace(options, max_minutes=min(limits) if limits else None, force=force)
        part = run_sweep([by_label[x] for x in labels], store, opts, progress=progress, start_worker=start_worker)
        result.summary.states.update(part.states)
        result.summary.interrupted |= part.interrupted
        result.measured += 0 if force else sum(part.states.values())

    before = _tried(store, options, grid)  # this run's rows already in the store count against the budget
    result.summary.already_done = len(before)
    design = max(predict.MIN_ROWS, (budget.configs or 0) // 2)
    picks = [x for x in grid.index[predict.space_filling(grid, _family(grid), design, seed)] if x not in before]
    measure(picks if budget.configs is None else picks[: max(0, budget.configs - len(before))])
    spent = len(_tried(store, options, grid))
    steps = predict.adaptive_steps(budget.configs - spent, rounds) if budget.configs else None
    while not result.summary.interrupted and _time_left(deadline) and (steps is None or result.rounds < len(steps)):
        model, candidates = _fit(store, options, grid, seed)
        if model is None or candidates.empty:
            break
        n = steps[result.rounds] if steps else max(1, len(grid) // MINUTES_ROUND_SHARE)
        picked = predict.most_informative(model, candidates, n)
        expected = model.predict(candidates.loc[picked])
        measure(picked)
        result.rounds += 1
        _guard_outliers(store, options, grid, expected, measure, result, echo)
    model, candidates = _fit(store, options, grid, seed)
    if model is not None and not candidates.empty:
        result.predicted = candidates[["label"]].join(model.predict(candidates))
    if result.summary.interrupted:  # what a rerun would still measure: the budget's rest, or every untried cell
        tried = len(_tried(store, options, grid))
        result.summary.left = max(0, budget.configs - tried) if budget.configs else len(grid) - tried
    return result


def _time_left(deadline: float | None) -> bool:
    return deadline is None or time.monotonic() < deadline


def _mine(store: Store, options: SweepOptions) -> Results:
    """The store's rows of this sweep's run: its platform and every run setting (XLA auto: any XLA)."""
    s = options.settings
    run = {"platform": options.target.platform, **{name: getattr(s, name) for name in STEP_FIELDS}}
    if s.xla is None:
        del run["xla"]
    return Results.read(store, platform=options.target.platform).for_settings(**run)


def _rows(store: Store, options: SweepOptions, grid: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return predict.training_rows(_mine(store, options), _family(grid), options.settings.framework)


def _family(grid: pd.DataFrame) -> str:
    return str(grid["family"].iloc[0])


def _tried(store: Store, options: SweepOptions, grid: pd.DataFrame) -> set[str]:
    """Grid labels the store already has a result for (any state) under this sweep's run settings."""
    df = _mine(store, options).frame
    return set(df.loc[df["label"].isin(grid.index), "label"])


def _fit(store: Store, options: SweepOptions, grid: pd.DataFrame, seed: int):
    """The model fitted on the grid's measured rows, and the grid's untried cells; (None, ...) if too few rows."""
    ok, failed = _rows(store, options, grid)
    ok = ok[ok["label"].isin(grid.index)]
    candidates = grid.drop(index=list(_tried(store, options, grid)), errors="ignore")
    if len(ok) < predict.MIN_ROWS:
        return None, candidates
    ceilings = predict.platform_ceilings(store.platforms(), options.target.platform)
    # model rows carry the XLA setting the sweep asked for, so measured and predicted cells compare like with like
    ok = ok.assign(xla=grid["xla"].iloc[0])
    failed = failed[failed["label"].isin(grid.index)].assign(xla=grid["xla"].iloc[0])
    model = predict.PerformanceModel.fit(ok, predict.Featurizer(_family(grid), ceilings), seed, failed)
    return model, candidates


def _guard_outliers(
    store: Store,
    options: SweepOptions,
    grid: pd.DataFrame,
    expected: pd.DataFrame,
    measure,
    result: AdaptiveResult,
    echo: Callable[[str], None],
) -> None:
    """Measure again each new result far outside its predicted interval; say which row is used and why."""
    ok, _ = _rows(store, options, grid)
    measured = ok.set_index("label")["step_time_s"]
    for label, row in expected.iterrows():
        if label not in measured.index:
            continue
        first = float(measured[label])
        if not _far_outside(first, row):
            continue
        measure([label], force=True)
        ok_again, _ = _rows(store, options, grid)
        second = float(ok_again.set_index("label")["step_time_s"].get(label, math.nan))
        agrees = "the model" if not _far_outside(second, row) else "the first measurement"
        line = (
            f"{label}: measured {first:.4g} s, predicted {row['step_time_low_s']:.4g}-{row['step_time_high_s']:.4g} s; "
            f"measured again {second:.4g} s, which agrees with {agrees}; the second row is used, both are kept"
        )
        result.remeasured.append(line)
        echo(line)


def _far_outside(step_s: float, row: pd.Series) -> bool:
    """True when ``step_s`` lies beyond the interval by more than OUTLIER_WIDTHS of its (log) width."""
    if not step_s > 0:
        return False
    low, high = math.log(row["step_time_low_s"]), math.log(row["step_time_high_s"])
    margin = max(OUTLIER_WIDTHS * (high - low), OUTLIER_MIN)
    value = math.log(step_s)
    return value > high + margin or value < low - margin
