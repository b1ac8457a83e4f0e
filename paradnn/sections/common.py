"""What every report's notebook shares: its parameters prepared, data measured and loaded, figures and tables shown.

``prepare`` is every notebook's first call; ``ensure_measured`` makes sure the store has the
data a notebook needs (measuring what is missing through the one sweep door, within a time
budget); ``load`` reads it back as one row per configuration and run setting; ``show`` and
``caption`` put a figure and its sentence into the report.
"""

from __future__ import annotations

import os
import time
import types
import typing
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pandas as pd

from paradnn.analysis.results import Results, Rows, results_of
from paradnn.config import PROGRESS_ENV, ConfigError, check_number
from paradnn.settings import DEFAULTS
from paradnn.store import Store

if TYPE_CHECKING:
    from paradnn.analysis.observations import Verdict
    from paradnn.analysis.speedup import SpeedupResult


def as_list(value: object) -> list:
    """A list parameter as given to papermill on the command line (``-p families "[fc]"``) or already a list."""
    import yaml

    parsed = yaml.safe_load(value) if isinstance(value, str) else value
    if parsed is None:
        return []
    return list(parsed) if isinstance(parsed, (list, tuple)) else [parsed]


def as_dict(value: object) -> dict:
    """A dict parameter given as YAML text (``-p overrides "{fc: {batch: [64]}}"``) or already a dict."""
    import yaml

    parsed = yaml.safe_load(value) if isinstance(value, str) else value
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise ConfigError("overrides", value, "a mapping, e.g. {fc: {batch: [64, 128]}}")
    return parsed


def setup(backend: str = "local", workers: int = 1) -> None:
    """Plot style and display options shared by every notebook; ``backend`` and ``workers`` (where
    its sweeps run, see :class:`Lanes`) are checked here, before anything is measured."""
    import matplotlib.pyplot as plt

    from paradnn.sweeps.plan import SweepOptions

    ray_address(backend)  # a bad value fails here, before anything is measured
    SweepOptions(workers=workers)  # so does a bad number of workers
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    plt.rcParams.update({"figure.dpi": 90, "savefig.bbox": "tight"})
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.width", 160)
    pd.set_option("display.max_colwidth", None)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="seaborn")


ROLE_OF_EMPTY = {"families": "model", "workloads": "workload"}  # an empty list of these means every registered one
PLATFORM_PARAMETERS = ("platform", "baseline", "target")  # platform ids, made canonical (cpu[threads:1] -> cpu[threads=1])


@dataclass
class Parameters:
    """What every report's parameters hold. Each report declares its own (a dataclass beside its
    section module, ``paradnn.sections.architecture.Parameters``) with every parameter its
    notebook's ``parameters`` cell declares, typed; ``tests/test_notebooks.py`` checks the two agree."""

    store: str
    measure_missing: bool
    budget_minutes: float
    max_seconds: float
    backend: str
    workers: int

    @property
    def lanes(self) -> Lanes:
        """Where this report's sweeps run and with how many local workers (handed to :func:`ensure_measured`)."""
        return Lanes(self.backend, self.workers)


@dataclass(frozen=True)
class Lanes:
    """Where a report's sweeps run: ``backend`` (``local``, ``ray:HOST:PORT``, or ``ray`` with
    $RAY_ADDRESS) and ``workers``, the worker processes of a plain local CPU sweep (the notebook's
    ``backend`` and ``workers``). Passed to :func:`ensure_measured` explicitly: no module global
    or environment variable carries it."""

    backend: str = "local"
    workers: int = 1


LOCAL = Lanes()
P = TypeVar("P", bound=Parameters)


def prepare(namespace: Mapping[str, object], kind: type[P]) -> P:
    """Every report notebook's first call: its parameters, prepared and checked against the report's
    declaration ``kind``, and the kernel set up.

    ``namespace``: the notebook's globals, where its parameters cell declared each parameter
    with a type (``families: list = []``) and papermill left the values given. Lists and
    mappings given as text (``-p families fc,cnn``) become lists and dicts; an empty
    ``families`` or ``workloads`` means every registered family of that role; an empty
    ``X_overrides`` means ``overrides``; platform ids are made canonical. A parameter ``kind``
    does not declare, one it declares that the notebook lacks, or a value of another type is a
    ConfigError here, when the notebook starts. Then the plot style, where sweeps run and with
    how many workers (:func:`setup`). Returns the parameters as ``kind``."""
    from paradnn.families import of_role

    values = {}
    for name, annotated in namespace.get("__annotations__", {}).items():
        value = namespace[name]
        values[name] = as_list(value) if annotated is list else as_dict(value) if annotated is dict else value
    for name, role in ROLE_OF_EMPTY.items():
        if name in values and not values[name]:
            values[name] = list(of_role(role))
    for name in values:
        if name.endswith("_overrides") and not values[name] and "overrides" in values:
            values[name] = values["overrides"]
    for name in PLATFORM_PARAMETERS:
        if name in values:
            values[name] = canonical(str(values[name]))
    prepared = typed(kind, values)
    setup(prepared.backend, prepared.workers)
    return prepared


def typed(kind: type[P], values: Mapping[str, object]) -> P:
    """``values`` as the dataclass ``kind``: every field given, nothing else, each of its declared type
    (a ``float`` takes an int, never a bool); ConfigError naming the first that is not."""
    hints = typing.get_type_hints(kind)
    unknown, missing = sorted(set(values) - set(hints)), sorted(set(hints) - set(values))
    if unknown:
        raise ConfigError("parameter", unknown[0], f"a parameter of {kind.__module__}.{kind.__qualname__}: " + ", ".join(hints))
    if missing:
        raise ConfigError("parameter", missing[0], f"declared in the notebook's parameters cell ({kind.__qualname__} needs it)")
    for name, hint in hints.items():
        accepted = tuple(
            typing.get_origin(t) or t
            for t in (typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,))
        )
        value = values[name]
        loose = float in accepted and isinstance(value, int)  # a whole number where a float is asked
        if (isinstance(value, bool) and bool not in accepted) or not (isinstance(value, accepted) or loose):
            raise ConfigError(name, value, f"a {getattr(hint, '__name__', str(hint))} ({kind.__qualname__}.{name})")
    return kind(**values)


def ray_address(backend: str) -> str:
    """The Ray cluster address of a ``backend`` parameter (``ray:HOST:PORT``, or ``ray`` with $RAY_ADDRESS);
    '' for ``local``; ConfigError for anything else."""
    if backend == "local":
        return ""
    if backend == "ray" and os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    if backend.startswith("ray:") and backend.count(":") == 2:
        return backend[4:]
    raise ConfigError("backend", backend, "local, ray:HOST:PORT, or ray with RAY_ADDRESS set")


def is_local(platform: str) -> bool:
    """True for a platform this machine can measure (``cpu``, ``cpu[threads=1]``, ``gpu:0``)."""
    from paradnn.platform import parse_target

    try:
        parse_target(platform)
        return True
    except ConfigError:
        return False


def canonical(platform: str) -> str:
    """The stored id of a platform (``cpu[threads:1]`` -> ``cpu[threads=1]``); others as given."""
    from paradnn.platform import parse_target

    return parse_target(platform).id if is_local(platform) else platform


def ensure_measured(
    store: str | Path,
    families: list[str],
    *,
    preset: str = "smoke",
    overrides: dict | None = None,
    stacks: list[str] | None = None,
    measure_missing: bool = True,
    budget_minutes: float = 10.0,
    max_seconds: float = 2.0,
    variants: list[dict] | None = None,
    configs: list | None = None,
    rounds: int | None = None,
    look: int = 1,
    lanes: Lanes = LOCAL,
    **run: object,
) -> list[str]:
    """Measure what the store lacks for ``families`` on a local platform; returns a summary line.

    ``run``: the notebook's run-setting parameters (``dtype``, ``xla``, ``platform``,
    ``framework``, ``input``, ``devices``; :mod:`paradnn.settings`), defaults for the rest.

    All families run in one sweep, in the sweep's mixed order, so a budget that runs out
    leaves every family partly covered; the rest is measured on the next run (sweeps
    resume). ``stacks`` (``tensorflow==2.16.2``, ``current``, ...): measure under each
    software stack, side by side (:class:`paradnn.sweeps.backends.StacksBackend`). ``lanes``:
    where the sweep runs (the notebook's ``backend``) and, for a plain local sweep of one device on
    a CPU, its worker processes (the notebook's ``workers``); every other sweep runs one.

    ``configs``: these configurations instead of the preset's grid of ``families`` (the original
    study's, from :func:`paradnn.store.legacy.overlap_configs`, say). ``rounds``: the sweep's rounds
    (default: three where it compares variants or stacks, else one; :mod:`paradnn.sweeps.loop`).
    ``look`` > 1: a further look at an undecided comparison (:func:`look_again`): every configuration
    measured again, in the order given, its rows stamped with the look.

    ``variants``: several runs, each ``run`` with some settings changed (``[{"dtype":
    "float32"}, {"dtype": "mixed_bfloat16"}]``), measured within ``budget_minutes`` in all. A
    plain local sweep measures them in one sweep on the same workers
    (:func:`paradnn.sweeps.request.measure_runs`), with one line naming every run; a
    backend that does not support several runs measures them one after the other, with a line each.
    """
    from paradnn.platform import parse_target
    from paradnn.settings import describe, parse
    from paradnn.space import expand
    from paradnn.sweeps import request as req
    from paradnn.sweeps import stacks as stk
    from paradnn.sweeps.backends import backend_for

    check_number("budget_minutes", budget_minutes)
    runs = [parse({**run, **variant}) for variant in variants or [{}]]
    platform, devices = str(runs[0]["platform"]), runs[0]["devices"]
    if not measure_missing or not is_local(platform):
        return [f"{platform}: using the data in the store (measure_missing={measure_missing})"]
    target = parse_target(platform)
    if configs is None:
        configs = [c for family in families for c in expand(family, preset, (overrides or {}).get(family))]
    families = sorted({c.family for c in configs}) if configs else families
    # Replicas and software stacks are measured on this machine (its cores or GPUs, its environments).
    address = ray_address(lanes.backend) if devices == 1 and not stacks else ""
    supports = backend_for([stk.parse(text) for text in stacks or []], address).supports
    several_workers = "workers" in supports and target.kind == "cpu" and all(r["devices"] == 1 for r in runs)
    prepared = req.prepare(
        req.SweepRequest(
            family=families[0] if families else "",
            configs=configs,
            run=run,
            variants=variants or (),
            stacks=tuple(stacks or ()),
            max_seconds=max_seconds,
            max_minutes=budget_minutes,
            workers=lanes.workers if several_workers else 1,
            rounds=rounds,
            look=look,
            backend="ray" if address else "local",
            address=address or None,
        ),
        echo=lambda line: None,
    )
    if os.environ.get(PROGRESS_ENV):  # run by `paradnn report`: it shows the progress
        progress = ProgressFile
    else:  # a notebook opened by hand: a progress bar in the notebook itself
        from tqdm.auto import tqdm as progress
    with Store(store) as s:
        summaries = req.measure_runs(prepared, s, progress=progress, echo=lambda line: None)
    lines = []
    for r, one in zip(runs, prepared.runs, strict=True):
        words = describe({**r, "xla": one.xla})
        if one.xla is None and one.framework == "tensorflow" and one.devices == 1:
            words = words.replace("XLA auto", "XLA " + xla_words(store, target.id, str(one.dtype), None))
        words += f", stacks {', '.join(stacks)}" if stacks else ""
        lines.append(f"{', '.join(families)} on {target.id}, {words}")
    if len(summaries) < len(lines):  # one sweep of several runs
        return [" | ".join(lines) + f": {summaries[0].line()}"]
    return [f"{line}: {summary.line()}" for line, summary in zip(lines, summaries, strict=True)]


MIN_LOOK_MINUTES = 0.5  # a further look needs at least this much of a report's budget left


def look_again(
    store: str | Path,
    comparisons: list[tuple[SpeedupResult, Verdict, list[dict]]],
    *,
    started: float,
    budget_minutes: float,
    max_seconds: float,
    platform: str,
    **run: object,
) -> list[str]:
    """Spend what is left of a report's budget on its undecided comparisons: each ``(result, verdict,
    variants)`` whose verdict is inconclusive on two or more configurations, looked at fewer than
    :data:`~paradnn.sweeps.plan.MAX_LOOKS` times, is measured once more (its two sides as ``variants``,
    in fresh interleaved rounds), the configurations whose rounds disagree most first, within the
    minutes left since ``started`` (a monotonic time). The rows carry the look, and every interval
    drawn from them is at the level the looks leave (95% split over them), so looking again cannot
    manufacture a verdict. Returns the sweeps' lines."""
    from paradnn.families import parse_label
    from paradnn.sweeps.plan import MAX_LOOKS
    from paradnn.vocabulary import INCONCLUSIVE

    undecided = [
        (r, v, variants)
        for r, v, variants in comparisons
        if v.verdict == INCONCLUSIVE and (v.n or 0) >= 2 and r.looks < MAX_LOOKS
    ]
    left = budget_minutes - (time.monotonic() - started) / 60
    if not undecided:
        return []
    if left < MIN_LOOK_MINUTES:
        return [f"{len(undecided)} undecided comparison(s) not measured again: {max(left, 0):.1f} min of the budget left"]
    lines = []
    for result, verdict, variants in undecided:
        table = result.table.assign(spread=result.table["replicates"].map(_spread)).sort_values("spread", ascending=False)
        configs = [parse_label(f, label) for f, label in zip(table["family"], table["label"])]
        found = ensure_measured(
            store,
            sorted(set(table["family"])),
            configs=configs,
            variants=variants,
            platform=platform,
            budget_minutes=left / len(undecided),
            max_seconds=max_seconds,
            look=result.looks + 1,
            **run,
        )
        lines += [
            f"look {result.looks + 1} at '{verdict.observation}' ({verdict.figure or verdict.evidence}): {line}" for line in found
        ]
    return lines


def _spread(replicates: list[float]) -> float:
    """How far a pair's rounds disagree: largest / smallest - 1 (0 for fewer than two)."""
    return max(replicates) / min(replicates) - 1 if len(replicates) > 1 and min(replicates) > 0 else 0.0


def rerun_sample(
    store: str | Path,
    platform: str = DEFAULTS["platform"],
    count: int = 4,
    *,
    measure_missing: bool = True,
    max_seconds: float = 1.0,
    budget_minutes: float = 2.0,
) -> list[str]:
    """Measure ``count`` of this platform's measured configurations once more, with the same run
    identity, in a fresh worker (as ``sweep --force`` does), so repeatability rests on true reruns.
    Picks device-resident single-device TensorFlow rows of the newest stack not yet measured twice,
    spread over families; returns the sweeps' summary lines."""
    from paradnn.families import parse_label
    from paradnn.platform import parse_target
    from paradnn.sweeps import request as req

    if not measure_missing or not is_local(platform) or count < 1:
        return [f"{platform}: no reruns measured (measure_missing={measure_missing})"]
    target = parse_target(platform)
    results = Results.load(store)
    once = set(results.frame["run_key"]) - set(results.reruns()["run_key"])
    rows = results.where(run_key=list(once)).measured().ok().newest_stack()
    rows = rows.for_settings(platform=target.id, framework="tensorflow", input="device", devices=1).frame
    rows = rows.sort_values("id")
    picks = rows.assign(turn=rows.groupby("family").cumcount()).sort_values(["turn", "id"]).head(count)  # a family each in turn
    lines = []
    for (dtype, xla), group in picks.groupby(["dtype", "xla"]):
        configs = [parse_label(f, label) for f, label in zip(group["family"], group["label"])]
        asked = req.SweepRequest(
            family=configs[0].family,
            configs=configs,
            run={"dtype": dtype, "xla": bool(xla), "platform": platform},
            max_seconds=max_seconds,
            max_minutes=budget_minutes,
            force=True,
        )
        prepared = req.prepare(asked, echo=lambda line: None)
        with Store(store) as s:
            (summary,) = req.measure_runs(prepared, s, progress=ProgressFile if os.environ.get(PROGRESS_ENV) else None)
        lines.append(f"reruns on {target.id}, {dtype}, XLA {'on' if xla else 'off'}: {summary.line()}")
    return lines or [f"{platform}: no measured configuration to rerun"]


class ProgressFile:
    """A sweep's progress bar for reports: appends "done/total, failed, time left" lines to the
    file ``paradnn report`` names in :data:`~paradnn.config.PROGRESS_ENV`, which it shows on the terminal."""

    def __init__(self, total: int = 0, desc: str = "", **kwargs) -> None:
        self.total, self.desc, self.done, self.note = total, desc, 0, ""
        self.start = time.monotonic()
        self.path = Path(os.environ[PROGRESS_ENV])
        self._write("started")

    def _write(self, state: str) -> None:
        elapsed = time.monotonic() - self.start
        left = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        eta = f", about {left:.0f} s left" if self.done and self.done < self.total else ""
        with open(self.path, "a") as f:
            f.write(f"{state} {self.desc}: {self.done}/{self.total} configurations{eta} {self.note}\n".rstrip() + "\n")

    def update(self, n: int = 1) -> None:
        self.done += n
        self._write("measuring")

    def set_postfix_str(self, text: str) -> None:
        self.note = f"({text})"

    def refresh(self) -> None:
        self._write("measuring")

    def close(self) -> None:
        self._write("finished")


def xla_words(store: str | Path, platform: str, dtype: str, xla: object) -> str:
    """How XLA was set, in words: "on", "off", or "auto (fc: on, cnn: off)"."""
    from paradnn.settings import on_off_auto

    setting = on_off_auto(xla)
    if setting is not None:
        return "on" if setting else "off"
    with Store(store, create=False, readonly=True) as s:
        choices = s.xla_choices(canonical(platform))
    picked = ", ".join(f"{k.split('|')[0]}: {'on' if v else 'off'}" for k, v in choices.items() if k.endswith(f"|{dtype}"))
    return f"auto ({picked or 'not probed yet'})"


def ensure_reference(store: str | Path, reference_dir: str = "") -> str:
    """Import the original study's data into the store (the shipped copies, or ``reference_dir``'s
    JSON files); importing again adds nothing. Returns a summary line."""
    from paradnn.store.legacy import bundled_files, import_files

    paths = sorted(Path(reference_dir).glob("*.json")) if reference_dir else bundled_files()
    if Path(store).exists() and not os.access(store, os.W_OK):  # a study's store to report on, read-only
        return f"original study: not imported ({store} is read-only; its reports use what it holds)"
    with Store(store) as s:
        summary = import_files(s, paths)
    where = reference_dir or "the copies shipped with paradnn"
    return f"original study ({where}): {summary['results_added']} results and {summary['traces_added']} trace rows added"


def load(
    store: str | Path,
    platform: str | None = None,
    families: list[str] | None = None,
    dtype: str | None = None,
    xla: object = None,
    framework: str | None = DEFAULTS["framework"],
    all_versions: bool = False,
    input: str | None = DEFAULTS["input"],
    devices: int | None = DEFAULTS["devices"],
) -> Results:
    """Results as one row per configuration and run settings on each platform: every measurement of
    it pooled (:meth:`paradnn.analysis.results.Results.pooled`), so every report reads one estimate.
    The results object travels on into every analysis (with the platforms' XLA choices).

    Read through the results object (:class:`paradnn.analysis.results.Results`). ``xla``:
    None keeps every setting; True/False one; "auto" the setting ``--xla auto`` chose for
    each family and dtype on each measured platform (imported platforms keep their rows).
    ``framework``: TensorFlow's rows by default (the paper's framework); ``input``: data
    resident on the device by default; ``devices``: one device by default; None keeps
    every value of any of them. Rows of the newest TensorFlow version on each platform (and
    imported ones) only, unless ``all_versions`` (for version comparisons: the latest row of
    each version).
    """
    from paradnn.analysis.rows import ANY

    results = Results.load(store).where(family=families)
    run = {"platform": platform, "dtype": dtype, "xla": xla, "framework": framework, "input": input, "devices": devices}
    results = results.for_settings(**{k: ANY if v is None else v for k, v in run.items()})
    if not all_versions:
        results = results.newest_stack()
    return results.pooled(per_stack=all_versions)


def show(fig) -> None:
    """Display a figure in the report (its title as the image's alternative text) and free it."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    display(fig, metadata={"image/png": {"alt": figure_title(fig)}})
    plt.close(fig)


def styled(df: pd.DataFrame, digits: int = 3):
    """A table as the reports show it: missing values as "not measured", numbers to ``digits``
    decimals, and no row numbers (an unnamed whole-number index, a filtered frame's included, is
    hidden; a meaningful index, such as a pivot's, is kept)."""
    styler = df.style.format(precision=digits, na_rep="not measured", escape="html")  # values users typed stay text
    styler = styler.format_index(escape="html", axis=0).format_index(escape="html", axis=1)  # so do names in headings
    numbers = df.index.name is None and df.index.nlevels == 1 and pd.api.types.is_integer_dtype(df.index)
    return styler.hide(axis="index") if numbers else styler


def table(df: pd.DataFrame, digits: int = 3) -> None:
    """Display ``df`` as :func:`styled` shows it."""
    from IPython.display import display

    display(styled(df, digits))


def figure_title(fig) -> str:
    """A figure's title: its suptitle, else its axes' titles joined."""
    suptitle = fig._suptitle.get_text() if fig._suptitle is not None else ""
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    return " ".join(suptitle.split()) or "; ".join(" ".join(t.split()) for t in titles) or "figure"


def caption(text: str) -> None:
    """The sentence under a figure: what the paper found and what this data shows.

    The text is shown literally (it may hold platform names and values users typed).
    """
    from IPython.display import Markdown, display

    from paradnn.markup import literal

    display(Markdown(f"*{literal(text)}*"))


# Said where a report would profile op by op with measure_missing off (a profile is not kept in the store).
NOT_PROFILED = "Per-op breakdown not measured: measure_missing is off (profiles are measured live, not kept in the store)."


def state_counts(results: Rows, platform: str) -> str:
    """How many configurations of ``platform`` the store holds, by state, in one line
    ("12 configurations of cpu in the store: 10 ok, 2 oom")."""
    df = results_of(results).frame
    states = ", ".join(f"{n} {s}" for s, n in df["state"].value_counts().items())
    return f"{len(df)} configurations of {platform} in the store: {states}"


def collect(*parts: Verdict | list[Verdict] | None) -> list[Verdict]:
    """The verdicts of a report in order: lists are spread, single verdicts kept, None (a section skipped) dropped."""
    verdicts: list = []
    for part in parts:
        if isinstance(part, (list, tuple)):
            verdicts += [v for v in part if v is not None]
        elif part is not None:
            verdicts.append(part)
    return verdicts


def held_words(held: dict) -> str:
    """What a comparison held fixed, in words: ``xla off, framework tensorflow, ...``."""

    def word(value: object) -> str:
        return {True: "on", False: "off"}.get(value, str(value)) if isinstance(value, bool) else str(value)

    return ", ".join(f"{k} {word(v)}" for k, v in held.items() if k != "platform") or "nothing"
