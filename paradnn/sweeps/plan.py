"""A sweep's plan: its options, the run key of each configuration, the order and the rounds.

Everything here is decided before a worker starts and is the same whichever backend runs
the sweep (:mod:`paradnn.sweeps.backends`): which configurations the store already has
(:func:`run_key_of`, :func:`skip_states`), whether the run settings can serve the grid
(:func:`check_settings`), the order (:func:`ordered`), and the rounds that time each
configuration's alternatives interleaved (:func:`rounds_of`, :func:`round_order`).

Order: the grid is run in a fixed pseudo-random permutation (seed 0), so a sweep cut
short by ``--max-minutes`` or Ctrl-C has covered a uniform sample of the grid, every axis
value in proportion, instead of only the first values of the first axes.
"""

from __future__ import annotations

import math
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

import psutil

from paradnn.config import ConfigError, check_number
from paradnn.engine import frameworks
from paradnn.engine.protocol import RunSettings
from paradnn.engine.record import settings_fields
from paradnn.families import Config, family_of
from paradnn.identity import fingerprint, run_key
from paradnn.platform import Target
from paradnn.settings import FRAMEWORK_VERSION_COLUMNS
from paradnn.store import STATES
from paradnn.vocabulary import OK

MAX_ROUNDS = 5  # rounds per configuration (--rounds)
COMPARE_ROUNDS = 3  # rounds of a sweep that compares alternatives (several runs or stacks), unless told otherwise
# Looks at one comparison: a report measures an undecided comparison again at most once more, and its
# interval's level is split over the looks (Bonferroni), so looking again cannot manufacture a verdict.
MAX_LOOKS = 2
MAX_WORKERS = 4  # worker processes of one local sweep (--workers)
BUSY_ROWS = 3  # contended rows in a row after which a sweep stops refusing windows (SweepSummary.machine_busy)
T = TypeVar("T")
BACKENDS = ("local", "ray")  # where a sweep runs: this machine, or a Ray cluster (--backend)


class Progress(Protocol):
    """What a sweep calls on its progress bar: tqdm's methods (or a report's own bar, or a silent one)."""

    def update(self, n: int = 1, /) -> object: ...
    def set_postfix_str(self, text: str, /) -> object: ...
    def close(self) -> object: ...


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
    rounds: int | None = None  # rounds per configuration, a pass apart (None: 1, or COMPARE_ROUNDS when comparing)
    look: int = 1  # the how-many-th look at an undecided comparison this sweep is (stamped on its rows; see MAX_LOOKS)
    keep_order: bool = False  # measure the configurations in the order given (most informative first), not shuffled
    workers: int = 1  # worker processes preparing side by side, timing one at a time (see paradnn.sweeps.loop)

    def __post_init__(self) -> None:  # every bound checked here, whichever front end made the options
        # Each named as its option, then as the API's keyword (the same request from both front ends).
        for name, value, top in (
            ("--rounds (rounds)", self.rounds, MAX_ROUNDS),
            ("--workers (workers)", self.workers, MAX_WORKERS),
            ("look", self.look, MAX_LOOKS),
        ):
            if value is None and name.startswith("--rounds"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ConfigError(name, value, f"a whole number from 1 to {top}")
        for name, number in (
            ("--max-minutes (max_minutes)", self.max_minutes),
            ("--timeout (timeout_s)", self.timeout_s),
            ("--memory-budget (memory_gb, in bytes)", self.memory_budget_bytes),
        ):
            if number is not None:
                check_number(name, number)

    def settings_for(self, config: Config) -> RunSettings:
        """The run settings of one configuration: with ``--xla auto``, its family's chosen XLA setting."""
        if self.settings.xla is not None:
            return self.settings
        return replace(self.settings, xla=self.xla_choices.get(config.family, False))


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
    # What else used the machine while this sweep timed (paradnn.engine.contention): windows refused and timed
    # again, rows stored without a quiet window (flagged ``contended``), the most steal a window read, rows
    # whose contention could not be read, and the contended rows stored one after another (see machine_busy).
    refused: int = 0
    contended: int = 0
    steal: float = 0.0
    unread: int = 0
    contended_in_a_row: int = 0
    # Stamped on every row this sweep stores (``extra["sweep"]``): rows of one sweep were measured side by side.
    sweep_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def stamp(self, record: dict, round_no: int = 1, position: int = 0, look: int = 1) -> dict:
        """``record`` marked as measured by this sweep, in round ``round_no`` at ``position`` among its
        alternatives, in the ``look``-th look at its comparison."""
        extra = {**(record.get("extra") or {}), "sweep": self.sweep_id, "round": round_no, "position": position}
        return {**record, "extra": {**extra, **({"look": look} if look > 1 else {})}}

    def account(self, record: dict) -> None:
        """Count what a stored row says of the machine's contention."""
        if record.get("state") != OK:
            return
        self.refused += int(record.get("refused_windows") or 0)
        if record.get("contended") is None:
            self.unread += 1
            return
        self.steal = max(self.steal, float(record.get("steal_cores") or 0.0))
        self.contended += bool(record["contended"])
        self.contended_in_a_row = self.contended_in_a_row + 1 if record["contended"] else 0

    @property
    def machine_busy(self) -> bool:
        """Whether the machine stayed busy through :data:`BUSY_ROWS` rows in a row, each refused
        as often as allowed: the sweep then records windows with their contention, without waiting."""
        return self.contended_in_a_row >= BUSY_ROWS

    def contention_line(self) -> str:
        """What the sweep saw of the machine's contention, in words ('' when it saw none)."""
        words = []
        if self.refused:
            words.append(f"{self.refused} timing window(s) refused for contention and timed again")
        if self.contended:
            words.append(f"{self.contended} row(s) never had a quiet window (flagged contended)")
        if self.steal > 0:
            words.append(f"steal up to {self.steal:.2f} cores")
        if self.unread:
            words.append("contention not readable on this system (no /proc/stat)")
        return "; ".join(words)

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
        text += "".join(f"; stack {name} skipped: {why}" for name, why in self.skipped_stacks.items())
        return text + (f"; {self.contention_line()}" if self.contention_line() else "")


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


def identity_record(config: Config, options: SweepOptions, info: dict) -> dict:
    """What a configuration's record holds before any counting: configuration, settings, platform."""
    family = family_of(config)
    record = {"family": family.name, "family_version": family.version, "label": config.label, **config.hyperparameters()}
    record.update(
        settings_fields(options.settings_for(config), config), **options.target.fields(), threads=options.target.threads
    )
    record["xla_auto"] = options.settings.xla is None
    record.update(_platform_fields(info, options.settings.framework))
    return record


def _platform_fields(info: dict, framework: str) -> dict:
    """The platform's part of a record; JAX's and PyTorch's versions only in their own runs (see paradnn.identity)."""
    software = {k: v for k, v in info["software"].items() if k not in FRAMEWORK_VERSION_COLUMNS or k == framework}
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
    return (OK,) if options.retry_failed else STATES


def check_settings(configs: list[Config], options: SweepOptions) -> None:
    """ConfigError before anything runs when the run settings cannot serve the grid: a framework
    the platform or a family cannot take, or a host-prep pipeline a family's inputs do not fit."""
    framework = options.settings.framework
    frameworks.check_target(framework, options.target)
    for family in sorted({c.family for c in configs}):
        frameworks.check_framework(family, framework)
    if options.settings.input == "host-prep":  # a family host-prep cannot feed is bad input, not an error row
        from paradnn.engine import inputs

        for config in {c.family: c for c in configs}.values():
            inputs.check_input_mode("host-prep", family_of(config), config)
    devices = options.settings.devices
    if options.workers > 1 and (options.target.kind != "cpu" or devices > 1):
        why = (
            "1 with --devices > 1 (the replicas are processes of their own)"
            if devices > 1
            else f"1 on {options.target.kind} (two processes would share one device's memory)"
        )
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


def rounds_of(options: SweepOptions, alternatives: int) -> int:
    """How many rounds a sweep times: as asked, else :data:`COMPARE_ROUNDS` where it compares
    ``alternatives`` (runs x slots) > 1, else one."""
    return options.rounds or (COMPARE_ROUNDS if alternatives > 1 else 1)


def round_options(options: SweepOptions, rounds: int) -> SweepOptions:
    """The options of one round: the configuration's ``max_seconds`` and minimum of timed samples
    shared among the rounds (at least two samples a round), so a slow step's rounds together take
    about what one measurement of it would."""
    if rounds == 1:
        return options
    s = options.settings
    return replace(
        options, settings=replace(s, max_seconds=s.max_seconds / rounds, min_samples=max(2, math.ceil(s.min_samples / rounds)))
    )


def round_order(turn: list[T], seed: int, round_no: int, position: int) -> list[T]:
    """The order in which round ``round_no`` times the alternatives of the ``position``-th
    configuration: a shuffle of its own (seeded, so a rerun of the plan repeats it), so no
    alternative always goes first and a slow spell reaches every one alike."""
    order = list(turn)
    random.Random(f"{seed}:{round_no}:{position}").shuffle(order)
    return order
