"""Helpers the notebooks call, so that notebooks stay narrative plus one-line calls.

``ensure_measured`` makes sure the store has the data a notebook needs (measuring what is
missing through the sweep runner, within a time budget); ``load`` reads it back as one
row per configuration and run setting; ``show`` and ``caption`` put a figure and its
sentence into the report.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from paradnn.analysis.results import Results
from paradnn.config import ConfigError, check_number, compute_dtype
from paradnn.platform import theoretical_sentence
from paradnn.store import Store

if TYPE_CHECKING:
    from paradnn.analysis.observations import Verdict
    from paradnn.analysis.roofline import Ceilings


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
    """Plot style and display options shared by every notebook, where its sweeps run (``backend``)
    and with how many worker processes a local CPU sweep measures (``workers``, see
    :func:`ensure_measured`)."""
    import matplotlib.pyplot as plt

    from paradnn.sweeps.plan import SweepOptions

    ray_address(backend)  # a bad value fails here, before anything is measured
    SweepOptions(workers=workers)  # so does a bad number of workers
    os.environ["PARADNN_BACKEND"] = backend
    global SWEEP_WORKERS
    SWEEP_WORKERS = workers
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    plt.rcParams.update({"figure.dpi": 90, "savefig.bbox": "tight"})
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.width", 160)
    pd.set_option("display.max_colwidth", None)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="seaborn")


SWEEP_WORKERS = 1  # worker processes of this kernel's local CPU sweeps (the notebook's ``workers``, set by setup)


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
    **run: object,
) -> list[str]:
    """Measure what the store lacks for ``families`` on a local platform; returns a summary line.

    ``run``: the notebook's run-setting parameters (``dtype``, ``xla``, ``platform``,
    ``framework``, ``input``, ``devices``; :mod:`paradnn.settings`), defaults for the rest.

    All families run in one sweep, in the sweep's mixed order, so a budget that runs out
    leaves every family partly covered; the rest is measured on the next run (sweeps
    resume). ``stacks`` (``tensorflow==2.16.2``, ``current``, ...): measure under each
    software stack, side by side (:class:`paradnn.sweeps.backends.StacksBackend`). A plain
    local sweep of one device on a CPU runs :data:`SWEEP_WORKERS` worker processes (the
    notebook's ``workers``); every other sweep runs one.

    ``configs``: these configurations instead of the preset's grid of ``families`` (the original
    study's, from :func:`paradnn.store.legacy.overlap_configs`, say).

    ``variants``: several runs, each ``run`` with some settings changed (``[{"dtype":
    "float32"}, {"dtype": "mixed_bfloat16"}]``), measured within ``budget_minutes`` in all. A
    plain local sweep measures them in one sweep on the same workers
    (:func:`paradnn.sweeps.backends.run_sweep`'s ``runs``), with one line naming every run; a
    backend that does not support several runs measures them one after the other, with a line each.
    """
    from paradnn.engine.protocol import RunSettings
    from paradnn.platform import parse_target
    from paradnn.settings import describe, parse
    from paradnn.space import expand
    from paradnn.sweeps import stacks as stk
    from paradnn.sweeps.backends import backend_for, run_sweep
    from paradnn.sweeps.plan import SweepOptions

    check_number("budget_minutes", budget_minutes)
    runs = [parse({**run, **variant}) for variant in variants or [{}]]
    parsed = runs[0]
    platform, devices = str(parsed["platform"]), parsed["devices"]
    if not measure_missing or not is_local(platform):
        return [f"{platform}: using the data in the store (measure_missing={measure_missing})"]
    if any(r["platform"] != platform for r in runs):
        raise ConfigError("variants", variants, "runs of one platform (measure each platform on its own)")
    target = parse_target(platform)
    if configs is None:
        configs = [c for family in families for c in expand(family, preset, (overrides or {}).get(family))]
    families = sorted({c.family for c in configs}) if configs else families
    stack_list = [stk.parse(text) for text in stacks or []]
    # Replicas and software stacks are measured on this machine (its cores or GPUs, its environments).
    address = ray_address(os.environ.get("PARADNN_BACKEND", "local")) if devices == 1 and not stack_list else ""
    supports = backend_for(stack_list, address).supports
    several_workers = "workers" in supports and target.kind == "cpu" and all(r["devices"] == 1 for r in runs)
    settings = [RunSettings.of(r, target, max_seconds=max_seconds) for r in runs]
    options = SweepOptions(settings=settings[0], target=target, max_minutes=budget_minutes,
                           workers=SWEEP_WORKERS if several_workers else 1)  # fmt: skip
    if os.environ.get("PARADNN_PROGRESS_FILE"):  # run by `paradnn report`: it shows the progress
        progress = ProgressFile
    else:  # a notebook opened by hand: a progress bar in the notebook itself
        from tqdm.auto import tqdm as progress
    with Store(store) as s:
        if "runs" in supports and len(runs) > 1 and len({r["framework"] for r in runs}) == 1:
            summaries = [run_sweep(configs, s, options, progress=progress, runs=settings)]
        else:
            each = [replace(options, settings=one, max_minutes=budget_minutes / len(runs)) for one in settings]
            summaries = [run_sweep(configs, s, o, stacks=stack_list, address=address, progress=progress) for o in each]
    lines = []
    for r, one in zip(runs, settings, strict=True):
        words = describe({**r, "xla": one.xla})
        if one.xla is None and one.framework == "tensorflow" and one.devices == 1:
            words = words.replace("XLA auto", "XLA " + xla_words(store, target.id, str(one.dtype), None))
        words += f", stacks {', '.join(stacks)}" if stack_list else ""
        lines.append(f"{', '.join(families)} on {target.id}, {words}")
    if len(summaries) < len(lines):  # one sweep of several runs
        return [" | ".join(lines) + f": {summaries[0].line()}"]
    return [f"{line}: {summary.line()}" for line, summary in zip(lines, summaries, strict=True)]


def rerun_sample(store: str | Path, platform: str = "cpu", count: int = 4, *, measure_missing: bool = True,
                 max_seconds: float = 1.0, budget_minutes: float = 2.0) -> list[str]:  # fmt: skip
    """Measure ``count`` of this platform's measured configurations once more, with the same run
    identity, in a fresh worker (as ``sweep --force`` does), so repeatability rests on true reruns.
    Picks device-resident single-device TensorFlow rows of the newest stack not yet measured twice,
    spread over families; returns the sweeps' summary lines."""
    from paradnn.engine.protocol import RunSettings
    from paradnn.families import parse_label
    from paradnn.platform import parse_target
    from paradnn.sweeps.backends import run_sweep
    from paradnn.sweeps.plan import SweepOptions

    if not measure_missing or not is_local(platform) or count < 1:
        return [f"{platform}: no reruns measured (measure_missing={measure_missing})"]
    target = parse_target(platform)
    results = Results.load(store)
    once = set(results.frame["run_key"]) - set(results.reruns()["run_key"])
    rows = results.where(state="ok", source="measured", run_key=list(once)).newest_stack()
    rows = rows.for_settings(platform=target.id, framework="tensorflow", input="device", devices=1).frame
    rows = rows.sort_values("id")
    picks = rows.assign(turn=rows.groupby("family").cumcount()).sort_values(["turn", "id"]).head(count)  # a family each in turn
    lines = []
    for (dtype, xla), group in picks.groupby(["dtype", "xla"]):
        settings = RunSettings(dtype=dtype, xla=bool(xla), device=target.tf_device, max_seconds=max_seconds)
        options = SweepOptions(settings=settings, target=target, max_minutes=budget_minutes, force=True)
        configs = [parse_label(f, label) for f, label in zip(group["family"], group["label"])]
        with Store(store) as s:
            summary = run_sweep(configs, s, options, progress=ProgressFile if os.environ.get("PARADNN_PROGRESS_FILE") else None)
        lines.append(f"reruns on {target.id}, {dtype}, XLA {'on' if xla else 'off'}: {summary.line()}")
    return lines or [f"{platform}: no measured configuration to rerun"]


class ProgressFile:
    """A sweep's progress bar for reports: appends "done/total, failed, time left" lines to the
    file ``paradnn report`` names in ``PARADNN_PROGRESS_FILE``, which it shows on the terminal."""

    def __init__(self, total: int = 0, desc: str = "", **kwargs) -> None:
        self.total, self.desc, self.done, self.note = total, desc, 0, ""
        self.start = time.monotonic()
        self.path = Path(os.environ["PARADNN_PROGRESS_FILE"])
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
    framework: str | None = "tensorflow",
    all_versions: bool = False,
    input: str | None = "device",
    devices: int | None = 1,
) -> pd.DataFrame:
    """Results as one row per configuration and run settings on each platform: the latest attempt.

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
    return results.latest(per_stack=all_versions).frame


def show(fig) -> None:
    """Display a figure in the report (its title as the image's alternative text) and free it."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    display(fig, metadata={"image/png": {"alt": figure_title(fig)}})
    plt.close(fig)


def table(df: pd.DataFrame, digits: int = 3) -> None:
    """Display a table as the reports show them: missing values as "not measured", numbers to
    ``digits`` decimals, and no row numbers (a meaningful index, such as a pivot's, is kept)."""
    from IPython.display import display

    styler = df.style.format(precision=digits, na_rep="not measured", escape="html")  # values users typed stay text
    display(styler.hide(axis="index") if isinstance(df.index, pd.RangeIndex) else styler)


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


def projection_section(store: str | Path, source: str = "tpu-v2-8", target: str = "tpu-v3-8") -> list:
    """Fig. 6b projected: the original study's TPU v2 FC steps, op category by op category,
    onto a TPU v3 datasheet, at each configuration's batch and at twice it. Shows the figure,
    its caption and a table of the bounds; returns observation 5's projected verdict and the
    package's check that no same-batch projection exceeds the datasheets' larger ratio."""

    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.projection import dominant_bound, generation_verdict, projection

    same, summary = projection(str(store), source, target, "fc")
    doubled, _ = projection(str(store), source, target, "fc", batch_scale=2)
    show(plots.projected_speedups(same, doubled, summary, f"FC speedup of {target} over {source}, projected (Fig. 6b)"))
    verdict = generation_verdict(same, doubled, summary)
    caption(f"{verdict.sentence} Projected from the {summary['profiles']} TPU v2 op traces: every operation keeps its "
            "FLOPs and bytes, infeed and untraced time are kept as measured; Fig. 6a and 6c need CNN and RNN traces, "
            "which the original data does not have.")  # fmt: skip
    bounds = same.assign(bound=dominant_bound(same)).groupby("bound")["speedup"].describe()[["count", "min", "50%", "max"]]
    table(bounds.rename(columns={"50%": "median"}), 2)
    limit = max(summary["peak_ratio"], summary["bandwidth_ratio"])
    beyond = int((same["speedup"] > limit * (1 + 1e-9)).sum())
    part = obs.exact_part("beyond", beyond, len(same), obs.Rule(f"projections above {limit:.2f}x", 0.5, "<", min_n=1))
    check = obs.judged("projected speedups stay within the datasheets", f"no projected speedup exceeds {limit:.2f}x",
                       part, f"largest {same['speedup'].max():.2f}x over {len(same)} configurations at their own batch",
                       platform=f"{source} -> {target}")  # fmt: skip
    return [verdict, check]


PROJECTION_TOLERANCE = 0.25  # the validation's median error that counts as reproducing a platform (issue 26)


def projection_picks(store: str | Path, platforms: tuple[str, str], count: int, dtype: str, xla: object) -> list[str]:
    """Up to ``count`` FC configurations measured on both ``platforms`` at these settings, spread
    evenly by model FLOPs from the smallest to the largest."""
    ok = [Results(load(store, platform=p, families=["fc"], dtype=dtype, xla=xla)).ok().frame for p in platforms]
    common = ok[0][ok[0]["label"].isin(set(ok[1]["label"]))].drop_duplicates("label").sort_values("flops_model")
    if common.empty or count < 1:
        return []
    index = sorted({round(i) for i in np.linspace(0, len(common) - 1, min(count, len(common)))})
    return list(common["label"].iloc[index])


def profile_here(store: str | Path, platform: str, labels: list[str], dtype: str) -> str:
    """Profile FC ``labels`` op by op on the local ``platform`` (with its threads) into the store's
    traces table, for projection; returns a summary line."""
    from paradnn.engine.protocol import RunSettings
    from paradnn.families import parse_label
    from paradnn.platform import parse_target
    from paradnn.sweeps.plan import SilentProgress, SweepOptions
    from paradnn.sweeps.profiles import profile_local

    configs = [parse_label("fc", label) for label in labels]
    with Store(store) as s:
        done = profile_local(configs, s, SweepOptions(settings=RunSettings(dtype=dtype), target=parse_target(platform)),
                             progress=SilentProgress)  # fmt: skip
    failed = "".join(f"; {label} failed: {error}" for label, error in done["failed"].items())
    return f"profiles on {platform}: {done['profiled']} taken, {done['already']} already in the store{failed}"


def measure_like_source(store: str | Path, source: str, target: str, labels: list[str], max_seconds: float) -> str:
    """Measure FC ``labels`` on the local ``target`` at the run settings a projection from
    ``source`` takes its steps at (its dtype policy and XLA setting), where the store lacks
    them: ``--xla auto`` may have chosen differently on the two platforms, and a projection is
    checked only against a measurement at the same settings. Returns a summary line."""
    from paradnn.analysis.projection import local_settings
    from paradnn.engine.protocol import RunSettings
    from paradnn.families import parse_label
    from paradnn.platform import parse_target
    from paradnn.sweeps.backends import run_sweep
    from paradnn.sweeps.plan import SilentProgress, SweepOptions

    held = local_settings(str(store), source, "fc")
    if not labels or not held or not is_local(target):
        return f"{target}: nothing to measure for the projection check"
    settings = RunSettings(dtype=held["dtype"], xla=held["xla"], max_seconds=max_seconds)
    with Store(store) as s:
        summary = run_sweep([parse_label("fc", label) for label in labels], s,
                            SweepOptions(settings=settings, target=parse_target(target)), progress=SilentProgress)  # fmt: skip
    return f"{target} at {source}'s settings ({_held_words(held)}): {summary.line()}"


def projection_check_section(store: str | Path, baseline: str, target: str, labels: list[str]) -> Verdict | None:
    """Projection checked where the truth is here: ``baseline``'s profiled FC steps projected onto
    ``target``'s measured ceilings, against what ``target`` measured at the same settings. Shows
    the figure, its caption and the table; returns the package's check (median error within
    :data:`PROJECTION_TOLERANCE`), or None without configurations to check."""

    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.projection import dominant_bound, projection

    if not labels:
        print(f"No FC configuration measured on both {baseline} and {target}: projection not checked.")
        return None
    try:
        rows, summary = projection(str(store), baseline, target, "fc", labels=labels)
    except ConfigError as exc:  # no profiles of an imported baseline, say
        print(f"Projection from {baseline} onto {target} not checked: {exc}")
        return None
    rows = rows.dropna(subset=["measured_step_time_s"])
    if rows.empty:
        print(f"No profiled configuration of {baseline} was measured on {target} at the same settings: not checked.")
        return None
    error = rows["projected_step_time_s"] / rows["measured_step_time_s"] - 1
    bound = dominant_bound(rows)
    median = float(error.abs().median())
    by_bound = error.abs().groupby(bound).median()
    pair = f"{baseline} -> {target}"
    frame = pd.DataFrame({"platform": pair, "predicted_s": rows["projected_step_time_s"],
                          "low_s": rows["interval_s"].str[0], "high_s": rows["interval_s"].str[1],
                          "measured_s": rows["measured_step_time_s"]})  # fmt: skip
    show(plots.predicted_vs_measured(frame, f"FC step on {target} projected from {baseline}, against its measurement",
                                     what="projected"))  # fmt: skip
    evidence = (f"median absolute error {median:.0%} over {len(rows)} FC configurations; by dominant bound: "
                + ", ".join(f"{b} {v:.0%} (n={int((bound == b).sum())})" for b, v in by_bound.items()))  # fmt: skip
    part = obs.median_part("error", error.abs(), obs.Rule("median absolute error", PROJECTION_TOLERANCE, "<", min_n=2))
    verdict = obs.judged("projection reproduces a platform measured here",
                         f"projecting a profiled step op by op onto another platform's ceilings lands within "
                         f"{PROJECTION_TOLERANCE:.0%} of its measured step (median; Habitat: 11.8% across six GPUs)", part,
                         evidence, {"median_abs_error": median, "by_bound": by_bound.to_dict(), "n": int(len(rows))},
                         platform=pair, held_fixed=summary["held_fixed"])  # fmt: skip
    caption(f"{verdict.sentence} Ceilings: {target} {summary['to']['flops'] / 1e9:.0f} GFLOP/s and "
            f"{summary['to']['bandwidth'] / 1e9:.0f} GB/s over {baseline} {summary['from']['flops'] / 1e9:.0f} GFLOP/s and "
            f"{summary['from']['bandwidth'] / 1e9:.0f} GB/s; bars: every scaled category at the smaller and at the "
            f"larger ratio. Held fixed: {_held_words(summary['held_fixed'])} (the profiles themselves run XLA off).")  # fmt: skip
    shown = rows.assign(bound=bound, error=error)[["label", "bound", "source_step_time_s", "projected_step_time_s",
                                                   "measured_step_time_s", "error"]]  # fmt: skip
    table(shown, 4)
    return verdict


def what_if_section(store: str | Path, platform: str, onto: str, labels: list[str], check: Verdict | None) -> None:
    """This machine's profiled FC configurations projected onto a datasheet platform ``onto``:
    table and caption, marked as projections, with the validation error of ``check`` beside them."""

    from paradnn.analysis.projection import dominant_bound, projection

    if not labels:
        return
    try:
        rows, summary = projection(str(store), platform, onto, "fc", labels=labels)
    except ConfigError as exc:
        print(f"Projection from {platform} onto {onto} not shown: {exc}")
        return
    shown = rows.assign(bound=dominant_bound(rows))[["label", "bound", "source_step_time_s", "projected_step_time_s",
                                                     "speedup", "floored", "extrapolated"]]  # fmt: skip
    checked = "the method was not checked on this machine"
    if check is not None:
        error = check.numbers["median_abs_error"]
        checked = f"the same method's median error projecting {check.platform} on this machine was {error:.0%}"
    to = summary["to"]
    low, high = summary["speedup_interval"]
    beyond = (f"Extrapolated: the peak ratio {summary['peak_ratio']:.0f}x lies far beyond the "
              f"{summary['validated_ratio'][1]:.0f}x the method was validated on ({summary['validated_on']}), so read these "
              "as an order of magnitude. " if summary["extrapolated"] else "")  # fmt: skip
    floor = (f"{summary['floored']} of the projected steps were held at the floor of {summary['floor_s'] * 1e3:.2f} ms "
             f"({summary['floor_source']}): a step's fixed cost is not divided by a peak ratio. " if summary["floored"]
             else "")  # fmt: skip
    caption(f"Projected, not measured: {len(rows)} FC configurations of {platform} onto {onto}'s datasheet "
            f"({to['flops'] / 1e12:.1f} TFLOP/s {to['dtype']}, {to['bandwidth'] / 1e12:.2f} TB/s), each operation "
            f"category scaled by the ratio of peaks and the time its profile did not cover kept as on {platform}; "
            f"median projected speedup {summary['median_speedup']:.0f}x (bracket {low:.0f}-{high:.0f}x, every scaled "
            f"category at the smaller and at the larger ratio). {beyond}{floor}{checked[0].upper() + checked[1:]}.")  # fmt: skip
    table(shown, 6)


def platform_section(df: pd.DataFrame, baseline: str, target: str, families: list[str], paper_pair: bool = False) -> list:
    """Throughput maps, speedup maps, scatter, regression and summary of one platform pair.

    Shows the figures and captions in the report; returns the verdicts. With
    ``paper_pair`` (a GPU baseline and a TPU target, as in the paper) the FC speedup is
    judged against observations 7 and 8 (its direction with batch and with width) and
    Fig. 7's throughput trends against observation 6; any other pair (one CPU against
    itself with fewer threads, say) only gets the package's check that the speedup
    depends on the model's shape, labelled as such.
    """
    import numpy as np

    from paradnn import families as registry
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.regression import regress
    verdicts: list = []
    summaries = []
    for family in families:
        title = registry.get(family).title
        for name in (baseline, target):
            sub = df[(df["platform"] == name) & (df["family"] == family)]
            if len(sub):
                show(plots.heatmaps(sub, family, "examples_per_sec", f"{title} throughput on {name}",
                                    "throughput (examples/s, log colour)", log_color=True, fmt="{:.3g}"))  # fmt: skip
        failed = Results(df).where(family=family).failed().frame.groupby(["platform", "state"]).size()
        shown = ", ".join(f"{p} {n} {s}" for (p, s), n in failed.items()) or "none"
        caption("The paper found large models run out of memory first on the platform with less memory; "
                f"here the failed configurations per platform are: {shown}.")  # fmt: skip
        if paper_pair and family == "fc":
            verdicts.append(obs.out_of_memory_first(df, family))
            for name in (baseline, target):
                on = df[df["platform"] == name]
                # Fig. 7's side trends, checked apart from O6's capacity claim (the package's own checks)
                verdicts += [obs.trend(on, "nodes", family, "examples_per_sec", rising=False, id="", platform=name),
                             obs.trend(on, "batch", family, "examples_per_sec", id="", platform=name)]  # fmt: skip
        # Each platform at its own precision and XLA setting where the two share none (as the paper ran
        # its TPU and V100), held like with like where they share one; the caption says which.
        result = Results(df).matched("platform", baseline, target, family=family)
        summaries.append({"family": family, **{k: v for k, v in result.summary().items() if k != "sides"}})
        if not result.n:
            print(f"{title}: nothing pairs {target} with {baseline}: {result.why}.")
            continue
        pairs = result.table.assign(state="ok", log2_speedup=np.log2(result.table["speedup"]))
        show(plots.heatmaps(pairs, family, "speedup", f"{title} speedup of {target} over {baseline}",
                            "speedup (x; red: target faster, blue: baseline faster)", fmt="{:.2f}", center=1.0,
                            cmap="RdBu_r"))  # fmt: skip
        pair = f"{target} vs {baseline}"
        if paper_pair and family == "fc":
            paper7 = "large batches favour the TPU: its speedup over the GPU grows with batch"
            paper8 = "small FC models favour the TPU and large ones the GPU: its speedup shrinks with width"
            held = {**result.held_fixed, "free": list(result.free)}  # each platform at the precision the study ran it
            found = [obs.speedup_direction(pairs, family, "batch", True, "O7", pair, paper7, held),
                     obs.speedup_direction(pairs, family, "nodes", False, "O8", pair, paper8, held)]  # fmt: skip
        else:
            found = [obs.speedup_depends_on(pairs, family, platform=f"{pair} (a local pair, not the paper's TPU and GPU)")]
        where_base_wins = int((pairs["speedup"] < 1).sum())
        caption(f"{target} over {baseline}: median speedup {result.median:.2f}x (geometric mean {result.geomean:.2f}x, "
                f"{result.min:.2f}x to {result.max:.2f}x over {result.n} configurations; {sides_words(result)}); "
                f"{baseline} wins on {where_base_wins}. " + " ".join(v.sentence for v in found))  # fmt: skip
        show(plots.speedup_scatter(pairs, f"{title}: speedup against model size", baseline, target))
        reg = regress(pairs, "log2_speedup", family=family)
        show(plots.coefficients({family: reg}, f"{title}: regression of log2 speedup on hyperparameters",
                                "Δ log2 speedup per s.d. of log2 value"))  # fmt: skip
        top = reg.coefficients["coef"].abs().idxmax() if not reg.coefficients.empty else "none"
        caption(f"The paper found the speedup depends mostly on batch size and layer width; here the largest weight is "
                f"{top} (R² {reg.r_squared:.2f}).")  # fmt: skip
        verdicts += found
    table(pd.DataFrame(summaries), 3)
    return verdicts


def pair_speedup_section(results) -> None:
    """Fig. 11's speedups: every pair of platforms per family on one common set of configurations
    (bars chain), the pairs outside the chain in the table only; figure, table and caption."""
    from paradnn.analysis import plots
    from paradnn.analysis import workloads as wl

    pairs = wl.pair_speedups(results)
    show(plots.pair_speedup_bars(pairs, "Speedup of each pair of platforms per family on a common set (examples/s)"))
    table(pairs, 3)
    chained = pairs[pairs["chained"]]
    outside = pairs[~pairs["chained"]]
    shown = "; ".join(f"{r.target} over {r.baseline} {r.geomean:.2f}x ({r.family}, n {r.n})" for r in chained.itertuples())
    caption("The paper found the TPU's advantage differs by workload (Fig. 11); here each family's pairs are taken over "
            f"the configurations every platform of its chain measured, so their geometric means chain: {shown or 'none'}"
            + (f"; {len(outside)} pair(s) share no configuration with the chain and are listed, not drawn" if len(outside)
               else "") + ".")  # fmt: skip


def original_beside_section(store: str | Path, target: str) -> list:
    """This machine beside the original study on the study's own FC grid (Fig. 8 and 9, three ways):
    the V100 over ``target`` (Fig. 9), the TPU v2-8 over ``target``, and the TPU v2-8 over the V100,
    each platform at its own precision where they share none (said), as heatmaps, scatter plots and
    Fig. 8's regression weights; the three platforms' geometric means on their common set; the
    same pairs at float32 where both sides have it. Returns the checks: examples/s rises with batch
    and falls with width on every platform of the common set, O6 with this machine among them,
    and how much each pair's speedup depends on the model's shape."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis import workloads as wl
    from paradnn.analysis.regression import regress

    here = load(store, platform=target, families=["fc"], dtype=None, xla=None)
    theirs = Results(load(store, families=["fc"])).where(platform=list(REFERENCE_PAIR)).frame
    if Results(here).ok().frame.empty or theirs["platform"].nunique() < 2:
        print(f"This machine beside the original study needs {target}'s FC rows on the study's grid (overlap_count) and "
              "the original sweeps in the store: skipped.")  # fmt: skip
        return []
    results = Results(pd.concat([here, theirs], ignore_index=True))
    chained = wl.pair_speedups(results)
    common = set.intersection(*(set(Results(results.frame).where(platform=p).ok().frame["label"])
                                for p in (target, *REFERENCE_PAIR)))  # fmt: skip
    table(chained, 3)
    caption(f"{len(common)} FC configurations were measured here and by both of the original study's platforms; the "
            "geometric means above are taken over the configurations each family's chain of platforms shares, so they "
            "multiply (V100 over this machine times TPU v2-8 over V100 is TPU v2-8 over this machine).")  # fmt: skip
    verdicts: list = []
    pairs = ((target, "v100", "the V100 over this machine (Fig. 9)"), (target, "tpu-v2-8", "the TPU v2-8 over this machine"),
             ("v100", "tpu-v2-8", "the TPU v2-8 over the V100 (Fig. 8)"))  # fmt: skip
    for baseline, other, what in pairs:
        result = results.matched("platform", baseline, other, family="fc")
        if not result.n:
            print(f"{what}: nothing pairs: {result.why}.")
            continue
        found = result.table.assign(state="ok", log2_speedup=np.log2(result.table["speedup"]))
        show(plots.heatmaps(found, "fc", "speedup", f"FC speedup of {other} over {baseline}",
                            "speedup (x; red: target faster, blue: baseline faster)", fmt="{:.2f}", center=1.0,
                            cmap="RdBu_r"))  # fmt: skip
        show(plots.speedup_scatter(found, f"FC: {what}, against model size", baseline, other))
        reg = regress(found, "log2_speedup", family="fc")
        show(plots.coefficients({"fc": reg}, f"FC: regression of log2 speedup of {other} over {baseline}",
                                "Δ log2 speedup per s.d. of log2 value"))  # fmt: skip
        shape = obs.speedup_depends_on(found, "fc", platform=f"{other} vs {baseline}")
        verdicts.append(shape)
        at_float32 = results.matched("platform", baseline, other, family="fc", hold=("dtype",))
        float32 = (f"At one precision: {at_float32.n} configurations, median {at_float32.median:.2f}x."
                   if at_float32.n else f"At one precision nothing pairs ({at_float32.why}).")  # fmt: skip
        caption(f"{what[0].upper() + what[1:]}: median speedup {result.median:.2f}x (geometric mean {result.geomean:.2f}x, "
                f"{result.min:.2f}x to {result.max:.2f}x over {result.n} configurations; {sides_words(result)}). {float32} "
                + shape.sentence)  # fmt: skip
    three = results.where(label=sorted(common)).frame
    for platform in (target, *REFERENCE_PAIR):
        on = Results(three).where(platform=platform).frame
        verdicts += [obs.trend(on, "batch", "fc", "examples_per_sec", id="", platform=platform),
                     obs.trend(on, "nodes", "fc", "examples_per_sec", rising=False, id="", platform=platform)]  # fmt: skip
    verdicts.append(obs.out_of_memory_first(results.frame, "fc"))
    caption("The paper found FC examples/s rises with batch and falls with width on every platform (Fig. 7-9); on the "
            "configurations all three measured: " + " ".join(v.sentence for v in verdicts[-7:]))  # fmt: skip
    return verdicts


def platforms_section(store: str | Path) -> None:
    """Table 3: every platform of the store beside the paper's, datasheet and measured ceilings side by side."""
    from paradnn.analysis.table3 import table3

    with Store(store, create=False, readonly=True) as s:
        platforms, results = s.platforms(), s.results()
    rows = table3(platforms, results)
    table(rows, 3)
    caption("The paper's Table 3 lists its platforms' peaks, memory and bandwidth from their datasheets; here every platform "
            f"in the store ({len(rows)} rows) stands beside them, with what this machine measured (its matmul ceiling per "
            "precision and its copy bandwidth) next to what a datasheet states. The paper's Skylake CPU has no row: "
            "paradnn holds no cited datasheet for it.")  # fmt: skip


def sides_words(result) -> str:
    """What a comparison did with the settings that belong to a side, in words: "dtype held
    (float32); xla free (cpu False, cpu[threads=1] True: each platform at its automatically
    chosen XLA setting)"."""
    words = []
    for column, side in result.sides.items():
        if side["held"]:
            words.append(f"{column} held ({', '.join(side['values'])})")
        else:
            words.append(f"{column} free ({result.baseline} {', '.join(side['baseline'])}, {result.target} "
                         f"{', '.join(side['target'])}: {side['why']})")  # fmt: skip
    return "; ".join(words) or "every run setting held"


FIG7_LAYERS = 64  # the depth of the paper's Fig. 7 panels
REFERENCE_PAIR = ("v100", "tpu-v2-8")  # the original study's platforms, as imported


def fig7_section(store: str | Path, platform: str, dtype: str, xla: object) -> list:
    """Fig. 7: FC throughput at 64 layers, one panel per platform: ``platform`` as measured here
    beside the original study's V100 and TPU v2-8. Returns the package's checks of the figure's
    side trends on ``platform`` (examples/s rises with batch, falls with width)."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots

    here = load(store, platform=platform, families=["fc"], dtype=dtype, xla=xla)
    theirs = load(store, families=["fc"])
    rows = pd.concat([here, theirs[theirs["platform"].isin(REFERENCE_PAIR)]])
    rows = rows[rows["layers"] == FIG7_LAYERS]
    deep = rows[rows["platform"] == platform]
    if rows.empty:
        print(f"No {FIG7_LAYERS}-layer FC configuration in the store: Fig. 7 skipped.")
        return []
    shown = sorted(rows["platform"].unique())
    show(plots.heatmaps(rows, "fc", "examples_per_sec", f"FC throughput at {FIG7_LAYERS} layers on {', '.join(shown)} (Fig. 7)",
                        "throughput (examples/s, log colour)", log_color=True, panels_by="platform"))  # fmt: skip
    checks = [obs.trend(deep, "batch", "fc", "examples_per_sec", id="", platform=platform),
              obs.trend(deep, "nodes", "fc", "examples_per_sec", rising=False, id="", platform=platform)]  # fmt: skip
    precisions = ", ".join(f"{p} {d}" for p, d in rows.groupby("platform")["dtype"].first().items())
    caption(f"The paper found FC examples/s rises with batch and falls with width on the CPU, GPU and TPU alike (Fig. 7; "
            f"each panel at its own precision: {precisions}); here {len(deep)} {FIG7_LAYERS}-layer configurations "
            f"were measured on {platform}. " + " ".join(c.sentence for c in checks))  # fmt: skip
    return checks


def speedup_maps(result, what: str, platform: str, families: list[str]) -> None:
    """One speedup heatmap per family for a software-stack comparison (red faster, blue slower)."""
    from paradnn import families as registry
    from paradnn.analysis import plots

    for family in families:
        pairs = result.table[result.table["family"] == family].assign(state="ok")
        if len(pairs):
            show(plots.heatmaps(pairs, family, "speedup", f"{registry.get(family).title}: speedup from {what} on {platform}",
                                "speedup (x; red: faster, blue: slower)", fmt="{:.2f}", center=1.0, cmap="RdBu_r"))  # fmt: skip


def stack_summary(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """n, median and geometric-mean speedup of each software-stack comparison."""
    import numpy as np

    rows = [{"comparison": k, "n": len(t), "median": t["speedup"].median() if len(t) else np.nan,
             "geomean": float(np.exp(np.log(t["speedup"]).mean())) if len(t) else np.nan} for k, t in tables.items()]  # fmt: skip
    return pd.DataFrame(rows)


# Architecture report (notebooks/architecture.ipynb): one helper per section. Each shows its
# figures and captions in the report and returns the verdicts the section judges.

WEIGHT_LABEL = "weight (Δ utilisation per s.d. of the hyperparameter;\nin s.d. of utilisation for the paper form)"


def state_counts(df: pd.DataFrame, platform: str) -> str:
    """How many configurations of ``platform`` the store holds, by state, in one line
    ("12 configurations of cpu in the store: 10 ok, 2 oom")."""
    states = ", ".join(f"{n} {s}" for s, n in df["state"].value_counts().items())
    return f"{len(df)} configurations of {platform} in the store: {states}"


def table2_section(families: list[str], preset: str, overrides: dict) -> pd.DataFrame:
    """Table 2: the paper's grids as printed, as the ``paper`` preset runs them and as this
    report ran them (``preset`` with ``overrides``), departures of the preset marked."""
    from paradnn.analysis.table2 import table2

    grids = table2(families, preset, overrides)
    if grids.empty:
        print("None of these families is in Table 2 (fc, cnn, rnn).")
        return grids
    table(grids.set_index(["family", "axis"]))
    departures = grids[grids["departure from the print"] != ""]
    caption(f"The paper's Table 2 prints the grids in the first column; the paper preset runs them with "
            f"{len(departures)} departure(s) ({', '.join(departures['family'] + ' ' + departures['axis']) or 'none'}), "
            f"and this report ran the {preset} grids, a slice small enough for this platform.")  # fmt: skip
    return grids


def utilisation_section(df: pd.DataFrame, families: list[str], platform: str, dtype: str) -> list[Verdict]:
    """Fig. 2a-c: a FLOPS utilisation heatmap per family with rows in ``df``, each captioned with
    its O1 trends (utilisation rises with batch and width); returns those trend verdicts."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.roofline import peak_used
    from paradnn.families import get as family

    verdicts: list = []
    for name in families:
        if (df["family"] == name).any():
            show(plots.heatmaps(df, name, "utilization", f"{family(name).title} FLOPS utilisation on {platform}, {dtype}",
                                "FLOPS utilisation (% of peak)", scale=100))  # fmt: skip
            trends = obs.family_trends(df, name, platform)
            verdicts += trends
            caption(f"Utilisation against the {peak_used(Results(df).ok().frame)}. " + " ".join(v.sentence for v in trends))
    return verdicts


def regression_section(df: pd.DataFrame, families: list[str], platform: str, form: str) -> Verdict:
    """Fig. 2d-f: OLS weights of the hyperparameters on utilisation, one panel per family with
    finished rows; returns O1's verdict on the weights (batch or width first, depth last)."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.regression import regress

    ok = Results(df).ok()
    regressions = {f: regress(ok.where(family=f).frame, "utilization", family=f, form=form)
                   for f in families if len(ok.where(family=f))}  # fmt: skip
    show(plots.coefficients(regressions, f"Regression of FLOPS utilisation on hyperparameters ({platform}, {form} form)",
                            WEIGHT_LABEL))  # fmt: skip
    verdict = obs.weights_verdict(regressions, platform)
    caption(verdict.sentence)
    return verdict


def roofline_caption(points: pd.DataFrame, ceilings: Ceilings) -> str:
    """Fig. 3's sentence: the paper's finding, and the share of ``points`` left of the ridge and
    the best fraction of the compute roof reached."""
    memory_bound = (points["intensity"] < ceilings.ridge).mean()
    return ("The paper found FC and CNN models span the memory- and compute-bound regions while RNNs sit low on the roofline; "
            f"here {memory_bound:.0%} of the {len(points)} models lie left of the ridge point ({ceilings.ridge:.0f} FLOPs/byte), "
            f"reaching up to {points['achieved_flops'].max() / ceilings.peak_flops:.0%} of the compute roof.")  # fmt: skip


def roofline_section(store: str | Path, df: pd.DataFrame, platform: str, dtype: str) -> tuple[Ceilings | None, pd.DataFrame]:
    """Fig. 3: every measured model of ``df`` on ``platform``'s roofline (its ceilings from the
    store). Returns ``(ceilings, points)`` for the sections that judge against the ridge;
    ceilings is None for a platform without measured or datasheet ceilings."""
    from paradnn.analysis import plots
    from paradnn.analysis.roofline import ceilings_for, model_points

    with Store(store, create=False, readonly=True) as s:
        ceilings = ceilings_for(s.platforms(), platform, dtype)
        infos = s.platform_infos(platform)
    points = model_points(df)
    if ceilings is not None and len(points):
        show(plots.roofline(points, ceilings, f"Roofline of every measured model on {platform} ({dtype})"))
        theoretical = infos[0].get("theoretical") if infos and ceilings.source == "measured" else None
        beside = theoretical_sentence(theoretical, ceilings.peak_flops, compute_dtype(dtype))
        caption(roofline_caption(points, ceilings) + (" " + beside if beside else ""))
    else:
        print("No ceilings or no measured models for this platform: roofline skipped.")
    return ceilings, points


def profile_picks(df: pd.DataFrame, count: int) -> pd.DataFrame:
    """The finished FC configurations to profile op by op: the smallest and the largest by
    ``flops_model`` (``count`` 2 or more), the largest alone (``count`` 1), none (0)."""
    fc = Results(df).where(family="fc").ok().frame.sort_values("flops_model")
    if not count or fc.empty:
        return fc.iloc[0:0]
    return fc.iloc[[0, -1]] if count > 1 and len(fc) > 1 else fc.iloc[[-1]]


def op_breakdown_section(df: pd.DataFrame, ceilings: Ceilings | None, points: pd.DataFrame, platform: str, dtype: str,
                         profile_count: int) -> Verdict:  # fmt: skip
    """Fig. 3's per-op breakdown: TensorFlow's profiler on :func:`profile_picks` (on a local
    platform only), figure and table; returns O2's verdict (compute-bound models still spend
    time in memory-bound ops)."""

    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.engine.profiler import op_breakdown
    from paradnn.families import parse_label

    breakdown = pd.DataFrame()
    picks = profile_picks(df, profile_count) if is_local(platform) else df.iloc[0:0]
    if len(picks):
        breakdown = pd.concat([op_breakdown(parse_label("fc", label), dtype) for label in picks["label"]], ignore_index=True)
        show(plots.op_breakdown(breakdown, ceilings, f"Per-op breakdown of FC training steps on {platform}"))
        table(breakdown, 4)
    verdict = obs.compute_bound_memory_time(breakdown, ceilings.ridge if ceilings else float("inf"), points,
                                            platform=platform)  # fmt: skip
    caption(verdict.sentence)
    return verdict


def measure_precision(store: str | Path, families: list[str], dtype: str, low_precision: str, xla: object,
                      **sweep: object) -> list[str]:  # fmt: skip
    """Measure ``families`` in ``low_precision`` at the XLA setting ``dtype`` ran with, so the
    precision comparison changes one thing: with ``xla`` auto, per family the setting
    ``--xla auto`` chose for ``dtype`` on this platform (the low precision's own choice may
    differ). Returns the sweeps' summary lines. ``sweep``: :func:`ensure_measured`'s keywords."""
    from paradnn.settings import on_off_auto

    platform = str(sweep.get("platform", "cpu"))
    with Store(store, create=False, readonly=True) as s:
        choices = s.xla_choices(canonical(platform)) if is_local(platform) else {}
    lines = []
    for family in families:
        held = on_off_auto(xla)
        held = choices.get(f"{family}|{dtype}", held) if held is None else held
        lines += ensure_measured(store, [family], dtype=low_precision, xla="auto" if held is None else held, **sweep)
    return lines


def precision_section(store: str | Path, platform: str, families: list[str], dtype: str, low_precision: str,
                      ceilings: Ceilings | None) -> Verdict:  # fmt: skip
    """``dtype`` against a lower-precision policy on the same configurations at the same XLA
    setting (the results object pairs nothing else): paired utilisation scatter (each against
    its own dtype's peak); returns O13's verdict on the speedup in examples/s of models right
    of the ridge, with what it held fixed."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    both = Results(load(store, platform=platform, families=families))  # every XLA setting; pairs hold it
    util = both.matched("dtype", dtype, low_precision, metric="utilization")
    speed = both.matched("dtype", dtype, low_precision)
    if util.n:
        show(plots.paired_scatter(util.table, f"{dtype} utilisation (% of float32 peak)",
                                  f"{low_precision} utilisation (% of bfloat16 peak)",
                                  f"Utilisation in {dtype} and {low_precision} on {platform}"))  # fmt: skip
    verdict = obs.stack_speedup(speed, f"{low_precision} speeds up models right of the ridge",
                                "16-bit arithmetic speeds up compute-bound models",
                                ridge=ceilings.ridge if ceilings else None, id="O13", platform=platform)  # fmt: skip
    caption(verdict.sentence + f" Held fixed: {_held_words(speed.held_fixed)}.")
    return verdict


def _held_words(held: dict) -> str:
    """What a comparison held fixed, in words: ``xla off, framework tensorflow, ...``."""
    def word(value: object) -> str:
        return {True: "on", False: "off"}.get(value, str(value)) if isinstance(value, bool) else str(value)

    return ", ".join(f"{k} {word(v)}" for k, v in held.items() if k != "platform") or "nothing"


def reference_utilisation_section(tpu: pd.DataFrame, form: str) -> list[Verdict]:
    """Fig. 2 on the original study's TPU v2-8 FC sweep (``tpu``): heatmap, O1 trends and the
    regression weights; returns those verdicts (none, with a note, when the sweep is absent)."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.analysis.regression import regress

    if tpu.empty:
        print("The original study's TPU v2 sweep is not in the store.")
        return []
    show(plots.heatmaps(tpu, "fc", "utilization", "FC FLOPS utilisation on the TPU v2-8 (original study, bfloat16)",
                        "FLOPS utilisation (% of peak)", scale=100))  # fmt: skip
    verdicts = obs.family_trends(tpu, "fc", "tpu-v2-8")
    regression = {"fc": regress(Results(tpu).ok().frame, "utilization", family="fc", form=form)}
    show(plots.coefficients(regression, f"Regression of TPU v2 FLOPS utilisation on FC hyperparameters ({form} form)",
                            WEIGHT_LABEL))  # fmt: skip
    verdicts.append(obs.weights_verdict(regression, "tpu-v2-8"))
    caption(" ".join(v.sentence for v in verdicts))
    return verdicts


def reference_roofline_section(tpu: pd.DataFrame, traces: pd.DataFrame | None = None) -> None:
    """Fig. 3a on the paper's platform: every FC model of the original TPU v2-8 sweep on that
    board's datasheet roofline, at the operational intensity of paradnn's own count of its FLOPs
    and bytes (one replica's, as the traces see a core), cross-checked against the ``traces``."""
    from paradnn.analysis import plots
    from paradnn.analysis.roofline import Ceilings, reference_points, ridge_agreement
    from paradnn.platform import DATASHEETS

    points = reference_points(tpu)
    if points.empty:
        print("No original TPU v2 rows in the store: its roofline is skipped.")
        return
    sheet = DATASHEETS["tpu-v2-8"]
    ceilings = Ceilings(sheet.peak_flops["bfloat16"], sheet.memory_bandwidth, f"datasheet:{sheet.name}")
    show(plots.roofline(points, ceilings, "Roofline of the original study's FC models on the TPU v2-8 (Fig. 3a)", hue="batch"))
    agree, traced = ridge_agreement(points, traces if traces is not None else pd.DataFrame(), ceilings.ridge)
    check = (f" Intensity is paradnn's count of one replica's FLOPs over its bytes (the sweep files' own 'intensity' is "
             f"FLOPs per weight byte, not a roofline intensity); on the {traced} configurations the study traced, it puts "
             f"{agree:.0%} on the same side of the ridge as the profiler's intensity." if traced else "")  # fmt: skip
    caption(roofline_caption(points, ceilings) + check)


def load_traces(store: str | Path) -> pd.DataFrame:
    """The original study's TPU v2 profiler traces in the store (empty if none were imported);
    this machine's own profiles, kept there for projection, are left out."""
    from paradnn.identity import PROFILE_SOURCE

    with Store(store, create=False, readonly=True) as s:
        traces = s.traces()
    return traces[~traces["source"].astype(str).str.startswith(PROFILE_SOURCE + ":")].reset_index(drop=True)


def trace_section(traces: pd.DataFrame, tpu: pd.DataFrame) -> list[Verdict]:
    """The TPU v2 traces: FLOPS against memory-bandwidth utilisation and the op categories on the
    TPU v2 roofline; returns O2's verdicts on them (memory-bound share, bandwidth wall)."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots
    from paradnn.platform import DATASHEETS

    if traces.empty:
        print("No TPU traces in the store.")
        return []
    sheet = DATASHEETS["tpu-v2-8"]
    show(plots.trace_figures(traces, sheet.peak_flops["bfloat16"], sheet.memory_bandwidth,
                             "TPU v2 profiler traces (original study)"))  # fmt: skip
    verdicts = [obs.trace_memory_bound_share(traces), obs.bandwidth_wall(tpu, traces)]
    caption(" ".join(v.sentence for v in verdicts))
    return verdicts


def traced_communication_section(traces: pd.DataFrame) -> Verdict:
    """Fig. 4 from the TPU v2 traces: the all-reduce (``cross-replica-sum``) share of step time by
    batch; returns O3's verdict on it (inconclusive without traces)."""
    from paradnn.analysis import observations as obs

    return _traced_share(traces, obs.communication_share(traces), "cross-replica-sum", "time_perc",
                         "TPU v2-8: all-reduce (cross-replica-sum) share of step time (original traces)")  # fmt: skip


def _traced_share(traces: pd.DataFrame, verdict: Verdict, category: str, column: str, title: str) -> Verdict:
    """A share of step time by batch from the TPU v2 traces' ``category`` rows, with its verdict's sentence."""
    from paradnn.analysis import plots

    if len(traces):
        show(plots.share_by_batch(traces[traces["category"] == category], column, title, "share of step time (%)"))
        caption(verdict.sentence)
    return verdict


def measure_replicas(store: str | Path, families: list[str], devices: int, *, preset: str, overrides: dict,
                     platform: str, measure_missing: bool, budget_minutes: float, max_seconds: float) -> list[str]:  # fmt: skip
    """Measure ``families`` data-parallel on ``devices`` replicas of a local platform (nothing,
    and no line, for fewer than 2 devices, an imported platform or ``measure_missing`` off)."""
    if devices < 2 or not measure_missing or not is_local(platform):
        return []
    return ensure_measured(store, families, preset=preset, overrides=overrides, devices=devices, platform=platform,
                           budget_minutes=budget_minutes, max_seconds=max_seconds)  # fmt: skip


def replicated_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The data-parallel rows of ``df`` (loaded with any number of devices): those with a measured communication share."""
    return df.dropna(subset=["comm_share"])


COMMUNICATION_COLUMNS = ["family", "label", "devices", "replica_batch", "step_time_s", "replica_step_time_s", "comm_share",
                         "allreduce_share", "scaling_efficiency"]  # fmt: skip


def communication_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The data-parallel rows as the report shows them: step times of the parallel step and of
    one replica alone, communication and all-reduce shares, scaling efficiency (4 decimals)."""
    return rows[COMMUNICATION_COLUMNS].round(4)


def replica_section(rows: pd.DataFrame, platform: str) -> Verdict:
    """Fig. 4 on this machine: the communication share of the data-parallel step by batch and
    family, and its table; returns O3's verdict on the measured rows."""

    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots

    verdict = obs.measured_communication(rows, platform)
    if len(rows):
        show(plots.share_by_batch(rows.assign(comm_percent=100 * rows["comm_share"]), "comm_percent",
                                  f"{platform}: communication share of the data-parallel step (all-reduce and waiting)",
                                  "share of step time (%)", hue="family"))  # fmt: skip
        table(communication_table(rows))
    caption(verdict.sentence)
    return verdict


def traced_infeed_section(traces: pd.DataFrame) -> Verdict:
    """Fig. 5 (bottom) from the TPU v2 traces: the share of each FC step spent waiting for infeed,
    by batch; returns O4's verdict on it (inconclusive without traces)."""
    from paradnn.analysis import observations as obs

    return _traced_share(traces, obs.infeed_share(traces), "all", "infeed",
                         "TPU v2-8: share of step time waiting for infeed, FC (original traces)")  # fmt: skip


def measure_inputs(store: str | Path, families: list[str], inputs: list[str], *, preset: str, overrides: dict,
                   platform: str, measure_missing: bool, budget_minutes: float, max_seconds: float,
                   **run: object) -> list[str]:  # fmt: skip
    """Measure ``families`` fed by each host input pipeline in ``inputs`` on a local platform, the
    pipelines' runs in one sweep within ``budget_minutes`` (nothing, and no line, for an imported
    platform or ``measure_missing`` off); ``run`` holds further run settings (``xla``, ``dtype``)."""
    if not measure_missing or not is_local(platform) or not families or not inputs:
        return []
    return ensure_measured(store, families, preset=preset, overrides=overrides, platform=platform,
                           variants=[{"input": mode} for mode in inputs], budget_minutes=budget_minutes,
                           max_seconds=max_seconds, **run)  # fmt: skip


def fed_rows(df: pd.DataFrame, inputs: list[str]) -> pd.DataFrame:
    """The host-fed rows of ``df`` (loaded with every input mode) that the infeed figure groups:
    those of a pipeline in ``inputs`` with a measured infeed share."""
    return Results(df).with_value("infeed_share").where(input_mode=list(inputs)).frame


def infeed_plot_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Host-fed rows with the infeed share in percent and the box each falls in ("fc, host-prep")."""
    return rows.assign(infeed_percent=100 * rows["infeed_share"], pipeline=rows["family"] + ", " + rows["input_mode"])


def infeed_section(rows: pd.DataFrame, platform: str) -> Verdict:
    """Fig. 5 on this machine: the share of step time waiting for the input pipeline, by batch,
    family and pipeline; returns O4's verdict on the measured rows."""
    from paradnn.analysis import observations as obs
    from paradnn.analysis import plots

    verdict = obs.measured_infeed(rows, platform)
    if len(rows):
        show(plots.share_by_batch(infeed_plot_rows(rows), "infeed_percent",
                                  f"{platform}: share of step time waiting for the input pipeline, by family and pipeline",
                                  "share of step time (%)", hue="pipeline"))  # fmt: skip
    caption(verdict.sentence)
    return verdict


def collect(*parts: Verdict | list[Verdict] | None) -> list[Verdict]:
    """The verdicts of a report in order: lists are spread, single verdicts kept, None (a section skipped) dropped."""
    verdicts: list = []
    for part in parts:
        if isinstance(part, (list, tuple)):
            verdicts += [v for v in part if v is not None]
        elif part is not None:
            verdicts.append(part)
    return verdicts
