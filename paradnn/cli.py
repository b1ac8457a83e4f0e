"""The ``paradnn`` command line: a thin layer over the library.

Every bad input (unknown family, malformed label, value out of range, unknown option
value) ends with one line on stderr naming what was wrong and what is allowed, and exit
status 2. TensorFlow is imported only by commands that need it, so errors are instant.
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import sys
from pathlib import Path

import click

from paradnn import families
from paradnn.config import POLICIES, ConfigError, gigabytes, read_bounded
from paradnn.families import Config
from paradnn.store import StoreError
from paradnn.store.guard import damaged, store_errors
from paradnn.sweeps.plan import BACKENDS
from paradnn.vocabulary import OK, STATES

FAMILIES = families.names()
EXAMPLES = {
    "platform": ["paradnn platform", "paradnn platform --platform 'cpu[threads=1]' --json"],
    "describe": [
        "paradnn describe fc layer_4-node_512-input_2000-output_1000-bs_8192",
        "paradnn describe resnet50 image_224-bs_64 --json",
    ],
    "measure": [
        "paradnn measure fc layer_4-node_512-input_2000-output_1000-bs_256",
        "paradnn measure cnn block_1-filter_16-image_64-output_1000-bs_32-residual --no-xla --json",
        "paradnn measure fc layer_4-node_1024-input_2000-output_1000-bs_256 --devices 2 --json",
    ],
    "sweep": [
        "paradnn sweep fc --preset quick --store outputs/my.sqlite",
        "paradnn sweep rnn --set cell=lstm,gru --set batch=64,128 --max-minutes 30",
        "paradnn sweep transformer --preset paper --platform gpu:0",
        "paradnn sweep fc --preset paper --adaptive --budget 60",
        "paradnn sweep cnn --preset smoke --framework jax",
        "paradnn sweep fc --preset smoke --input host-prep",
        "paradnn sweep fc --set layers=4 --set nodes=1024 --set batch=64,256,1024 --devices 2",
        "paradnn sweep fc --preset paper --backend ray --address 10.0.0.1:6379",
        "paradnn sweep fc --preset smoke --stack tensorflow==2.16.2 --stack tensorflow==2.18.1 --stack current",
        "paradnn sweep fc --preset quick --platform cpu --name xeon-lab --store xeon-lab.sqlite",
    ],
    "results": [
        "paradnn results --store outputs/quick/results.sqlite --family fc",
        "paradnn results --store outputs/quick/results.sqlite --format csv --output results.csv",
    ],
    "import_legacy": [
        "paradnn import-legacy --store outputs/my.sqlite",
        "paradnn import-legacy my-copy/tpu_fc.json --platform tpu-v2-8 --store outputs/my.sqlite",
    ],
    "compare": [
        "paradnn compare --baseline v100 --target tpu-v2-8 --family fc --store outputs/quick/results.sqlite",
        "paradnn compare --baseline 'cpu[threads=1]' --target cpu --hold xla --family fc",
        "paradnn compare --by dtype --baseline float32 --target mixed_bfloat16 --json",
        "paradnn compare --by framework --baseline tensorflow --target jax --family fc",
        "paradnn compare --by devices --baseline 1 --target 2 --family fc",
    ],
    "predict": [
        "paradnn predict --store outputs/quick/results.sqlite --platform tpu-v2-8 --family fc "
        "layer_8-node_1024-input_2000-output_1000-bs_2048",
        "paradnn predict --store outputs/quick/results.sqlite --platform cpu --family fc --preset quick --json",
        "paradnn predict --store outputs/quick/results.sqlite --platform tpu-v2-8 --family fc --cv 5",
        "paradnn predict --store outputs/quick/results.sqlite --platform tpu-v2-8 --family fc --replay 0.05,0.1,0.2",
    ],
    "profile": [
        "paradnn profile fc --platform 'cpu[threads=1]' --store outputs/quick/results.sqlite",
        "paradnn profile fc layer_4-node_512-input_2000-output_1000-bs_256 --platform cpu",
    ],
    "project": [
        "paradnn project --from tpu-v2-8 --to tpu-v3-8 --family fc",
        "paradnn project --from 'cpu[threads=1]' --to cpu --family fc --store outputs/quick/results.sqlite",
        "paradnn project --from tpu-v2-8 --to tpu-v3-8 --family fc --batch-scale 2 --json",
        "paradnn project --from tpu-v2-8 --to h100 --dtype bfloat16 --family fc layer_4-node_512-input_2000-output_1000-bs_8192",
    ],
    "scorecard": [
        "paradnn scorecard --store outputs/quick/results.sqlite",
        "paradnn scorecard --store outputs/quick/results.sqlite --json",
    ],
    "merge": [
        "paradnn merge laptop.sqlite xeon-lab.sqlite --store outputs/study/results.sqlite",
        "paradnn merge machine-b.sqlite --rename cpu=xeon-lab --store outputs/study/results.sqlite",
        "paradnn merge a100-vm.sqlite --rename gpu:0=a100-cloud --store outputs/study/results.sqlite --json",
    ],
    "lab": ["paradnn lab", "paradnn lab --port 8890 --no-browser"],
    "report": [
        "paradnn report quick",
        "paradnn report smoke -p budget_minutes=2",
        "paradnn report paper -p platform=gpu:0 -p target=gpu:0 -p baseline=cpu",
        "paradnn report paper --backend ray --address 10.0.0.1:6379",
        "paradnn report study --store outputs/study/results.sqlite -p baseline=laptop -p target=xeon-lab",
    ],
}


def _epilog(command: str, labels: bool = False) -> str:
    """Examples (and, for commands that take a LABEL, every family's label pattern) under a command's help."""
    text = "\b\nExamples:\n" + "".join(f"  {e}\n" for e in EXAMPLES[command])
    if labels:
        text += "\n\b\nLabels (FAMILY LABEL):\n" + "".join(f"  {f.name:<12} {f.label_format}\n" for f in families.all_families())
    return text


def run_options(*names: str):
    """The declared run settings (:mod:`paradnn.settings`; those ``names``, else every setting
    of the step and the device) as a command's options; the command receives them as keywords
    named after them and parses them by their declaration (:func:`paradnn.settings.parse`)."""
    from paradnn.settings import SETTINGS

    def add(function):
        for s in reversed([s for s in SETTINGS if (s.name in names if names else s.scope != "worker")]):
            function = setting_option(s.name)(function)
        return function

    return add


def setting_option(name: str, dest: str = "", **changes: object):
    """One declared run setting as a click option (its option, default and help from
    :mod:`paradnn.settings`); ``dest`` and ``changes`` (help, default, required) where a
    command uses the setting otherwise, as a filter, say."""
    from paradnn.settings import setting

    s = setting(name)
    if s.flag:
        declared: dict = {"default": None, "help": s.help}
    elif s.multiple:
        declared = {"multiple": True, "help": s.help}
    else:
        declared = {"default": s.text, "show_default": True, "help": s.help}
    if "default" in changes and changes["default"] is None:
        declared.pop("show_default", None)
    return click.option(s.option or s.cli, dest or s.name, **{**declared, **changes})


class _StoreCommand(click.Command):
    """A command whose store, damaged past its header, is named in the one error line."""

    def invoke(self, ctx: click.Context):
        with store_errors(ctx.params.get("store_path") or "the store"):
            return super().invoke(ctx)


class _OneLineErrors(click.Group):
    """Report usage errors, ``ConfigError``, ``StoreError`` and a store damaged past its header
    as one line with exit status 2 (the one error policy of every command)."""

    command_class = _StoreCommand

    def main(self, args=None, *rest, **kwargs):  # type: ignore[override]
        if not (sys.argv[1:] if args is None else args):  # bare `paradnn`: the help, and success
            with click.Context(self, info_name="paradnn") as ctx:
                click.echo(self.get_help(ctx))
            sys.exit(0)
        terminated: list[bool] = []
        try:  # SIGTERM (what `timeout` and `kill` send) unwinds like Ctrl-C: temporary files are removed
            with _terminate_as_interrupt() as terminated:
                return super().main(args, *rest, standalone_mode=False, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("paradnn: interrupted", err=True)
            sys.exit(128 + signal.SIGTERM if terminated else 130)
        except click.UsageError as exc:
            _fail(" ".join(exc.format_message().split()))  # click's choice lists span lines: one line of them
        except ConfigError as exc:
            _fail(str(self._as_typed(exc, sys.argv[1:] if args is None else args)))
        except StoreError as exc:
            _fail(str(exc))
        except click.ClickException as exc:
            if exc.exit_code == 2:
                _fail(exc.format_message())
            click.echo(f"paradnn: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except Exception as exc:
            if not damaged(exc):
                raise
            _fail(f"a store is damaged or not a paradnn store ({exc.__cause__ or exc})")
        return None

    def _as_typed(self, exc: ConfigError, args: list[str]) -> ConfigError:
        """``exc`` naming what the user typed: a field that is an option of the command run
        (``max_seconds``) as that option (``--max-seconds``), an axis of ``--set`` as ``--set layers``."""
        command = self.commands.get(args[0]) if args else None
        field = getattr(exc, "field", None)  # a subclass with its own message may not name one
        if command is None or not isinstance(field, str) or field.startswith("-"):
            return exc
        options = {p.name: p.opts[0] for p in command.params if isinstance(p, click.Option)}
        if field in options:
            return ConfigError(options[field], exc.value, exc.allowed)
        if "overrides" in options and field in families.hyperparameter_columns():
            return ConfigError(f"{options['overrides']} {field}", exc.value, exc.allowed)
        return exc


ERROR_CHARS = 1_000  # an error line: whatever a message holds, at most this much of it


def _fail(message: str) -> None:
    """Print ``message`` as one error line (newlines escaped, at most ERROR_CHARS) and exit 2."""
    line = str(message).replace("\r", "\\r").replace("\n", "\\n")
    if len(line) > ERROR_CHARS:
        line = f"{line[: ERROR_CHARS - 30]}... ({len(line):,} characters)"
    click.echo(f"paradnn: error: {line}", err=True)
    sys.exit(2)


def _family(family: str) -> str:
    if family not in FAMILIES:
        raise ConfigError("FAMILY", family, ", ".join(FAMILIES))
    return family


def _config(family: str, label: str) -> Config:
    return families.parse_label(_family(family), label)


def _memory_budget(memory_gb: float | None, target) -> float | None:
    from paradnn.sweeps.plan import default_memory_budget

    if memory_gb is not None and not memory_gb > 0:
        raise ConfigError("--memory-budget", memory_gb, "a positive number of GB")
    return memory_gb * 1e9 if memory_gb else default_memory_budget(target)


# A platform's name is not a run setting (it changes nothing in the step, nor any run key): an
# option of its own beside --platform.
name_option = click.option(
    "--name",
    "platform_name",
    metavar="NAME",
    help="What to call this platform in the store and reports (e.g. xeon-lab; default: its id, "
    "cpu). Name each machine of a study apart before merging their stores.",
)


def _emit(record: dict, as_json: bool, skip: tuple[str, ...] = ("samples_s",)) -> None:
    if as_json:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        click.echo(json.dumps(clean, indent=2, default=str))
        return
    width = max(len(k) for k in record)
    for key, value in record.items():
        if key in skip:
            continue
        click.echo(f"{key:<{width}}  {_fmt(value)}")


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_fmt(v) for v in value) or "-"
    return "-" if value is None else str(value)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="paradnn")
def main() -> None:
    """Parameterized deep-learning training benchmarks after ParaDnn (2019)."""


@main.command(epilog=_epilog("platform"))
@run_options("platform")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--refresh", is_flag=True, help="Measure the ceilings again instead of using the cache.")
def platform(platform: str, as_json: bool, refresh: bool) -> None:
    """Identify this machine and show its peaks and measured ceilings."""
    from paradnn import platform as plat
    from paradnn.engine import ceilings, machine

    target = plat.parse_target(platform)
    machine.apply_threads(target)
    info = machine.describe(target)
    if not refresh and not ceilings.cached_ceilings(info):
        click.echo("measuring this platform's ceilings once (about 30 s)...", err=True)
    info["ceilings"] = ceilings.ceilings(target, info, refresh=refresh)
    info["peaks"] = {p: dict(zip(("flops", "source"), plat.peak(info, info["ceilings"], p))) for p in POLICIES}
    if as_json:
        _emit(info, True)
        return
    _emit({k: v for k, v in info.items() if k not in ("ceilings", "peaks", "software")}, False)
    click.echo("software:   " + _fmt(info["software"]))
    for dtype, rates in info["ceilings"]["matmul_flops"].items():
        click.echo(f"matmul {dtype:<9} " + ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in rates.items()))
        if line := plat.theoretical_sentence(info.get("theoretical"), max(rates.values()), dtype):
            click.echo(" " * 17 + line)
    click.echo("copy bandwidth   " + ", ".join(f"{k} {v / 1e9:.1f} GB/s" for k, v in info["ceilings"]["copy_bandwidth"].items()))


@main.command(epilog=_epilog("describe", labels=True))
@click.argument("family")
@click.argument("label")
@run_options("dtype")
@click.option("--memory-budget", "memory_gb", type=float, help="GB the traced model may take (default: 60% of RAM).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def describe(family: str, label: str, dtype: str, memory_gb: float | None, as_json: bool) -> None:
    """Parameters, FLOPs and bytes of one training step of FAMILY LABEL (whole batch).

    Everything but flops_graph is analytic; flops_graph traces the step with symbolic data
    (no batch is allocated), unless the weights alone exceed the memory budget.
    """
    from paradnn.platform import Target
    from paradnn.settings import setting

    config = _config(family, label)
    setting("dtype").parse(dtype)
    budget = _memory_budget(memory_gb, Target())
    from paradnn.engine.record import describe_config

    _emit(describe_config(config, dtype, memory_budget=budget), as_json)


@main.command(epilog=_epilog("measure", labels=True))
@click.argument("family")
@click.argument("label")
@run_options()
@name_option
@click.option("--max-seconds", default=10.0, show_default=True, type=float, help="Time budget for warm-up and samples.")
@click.option("--memory-budget", "memory_gb", type=float, help="GB the configuration may use (default: 60% of RAM on CPU).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def measure(
    family: str, label: str, max_seconds: float, memory_gb: float | None, as_json: bool, platform_name: str | None, **run: object
) -> None:
    """Time the training step of FAMILY LABEL on this machine.

    A configuration predicted to exceed the memory budget is not run: state skipped, exit 1.
    """
    from paradnn.engine import frameworks, machine
    from paradnn.sweeps.plan import SweepOptions, check_settings
    from paradnn.sweeps.request import run_settings

    config = _config(family, label)
    if not max_seconds > 0:
        raise ConfigError("--max-seconds", max_seconds, "a positive number of seconds")
    parsed, target, settings = run_settings(run, platform_name, max_seconds=max_seconds)
    dtype = settings.dtype
    check_settings([config], SweepOptions(settings=settings, target=target))
    frameworks.activate(settings.framework)  # before anything imports Keras
    budget = _memory_budget(memory_gb, target)
    from paradnn.counting import memory_estimate

    predicted = memory_estimate(config, dtype)
    if budget and predicted > budget:
        from paradnn.engine.record import describe_config

        record = {
            **describe_config(config, dtype, trace=False),
            "state": "skipped",
            "error": f"predicted {gigabytes(predicted)} > budget {gigabytes(budget)}",
        }
        _emit(record, as_json)
        click.echo(f"paradnn: skipped: {record['error']}", err=True)
        sys.exit(1)
    from paradnn.engine import ceilings as ceil

    machine.apply_threads(target)
    from paradnn.engine.record import measure_config

    info = machine.describe(target)
    if not ceil.cached_ceilings(info):
        click.echo("measuring this platform's ceilings once (about 30 s)...", err=True)
    record = measure_config(config, settings, target, info, ceil.ceilings(target, info))
    _emit(record, as_json)
    if record["state"] != OK:
        click.echo(f"paradnn: {record['state']}: {record['error']}", err=True)
        sys.exit(1)


DEFAULT_STORE = "outputs/results.sqlite"
store_option = click.option("--store", "store_path", default=DEFAULT_STORE, show_default=True, help="The results store (SQLite).")


@main.command(epilog=_epilog("sweep", labels=True))
@click.argument("family")
@click.option(
    "--preset",
    default="smoke",
    show_default=True,
    help="smoke, quick or paper; for fc also paper-overlap: the original study's configurations its TPU v2-8 "
    "and V100 both finished (--set keeps the listed values).",
)
@click.option("--set", "overrides", multiple=True, metavar="AXIS=V1,V2", help="Replace one axis of the preset's grid.")
@run_options()
@name_option
@store_option
@click.option("--max-minutes", type=float, help="Stop the whole sweep after this many minutes (resumable).")
@click.option("--max-seconds", default=3.0, show_default=True, type=float, help="Timing budget per configuration.")
@click.option("--timeout", "timeout_s", default=600.0, show_default=True, type=float, help="Seconds per configuration.")
@click.option("--memory-budget", "memory_gb", type=float, help="GB a configuration may use (default: 60% of RAM on CPU).")
@click.option("--retry-failed", is_flag=True, help="Measure again what failed before (oom, error, timeout, skipped).")
@click.option("--force", is_flag=True, help="Measure everything again (old rows are kept).")
@click.option(
    "--rounds",
    type=int,
    help="Time each configuration in this many rounds, a pass over the grid apart, every round a measurement "
    "pooled with the others (default 1; 3 with several --stack, each round timing every stack once in "
    "a shuffled order).",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=int,
    help="Worker processes on this CPU: they build and compile side by side, and time one at a time.",
)
@click.option("--adaptive", is_flag=True, help="Measure part of the grid where the model is least sure; predict the rest.")
@click.option("--budget", help="With --adaptive: configurations to measure (40) or minutes (30m).")
@click.option(
    "--backend",
    default="local",
    show_default=True,
    type=click.Choice(BACKENDS),
    help="Where configurations run: this machine, or a Ray cluster (one configuration per device).",
)
@click.option("--address", envvar="RAY_ADDRESS", help="With --backend ray: HOST:PORT of the cluster (default $RAY_ADDRESS).")
@setting_option("stack", "stack_texts", metavar="REQ[,REQ...]|current")
def sweep(
    family: str,
    preset: str,
    overrides: tuple[str, ...],
    store_path: str,
    max_minutes: float | None,
    max_seconds: float,
    timeout_s: float,
    memory_gb: float | None,
    retry_failed: bool,
    force: bool,
    rounds: int | None,
    workers: int,
    adaptive: bool,
    budget: str | None,
    backend: str,
    address: str | None,
    stack_texts: tuple[str, ...],
    platform_name: str | None,
    **run: object,
) -> None:
    """Measure a preset's grid for FAMILY, skipping what the store already has.

    With --adaptive, measure only --budget configurations, chosen where the performance
    model is least certain, and fill the rest of the grid by prediction (marked
    "predicted"); see `paradnn predict`.
    """
    from paradnn.sweeps import request as req

    echo = lambda text: click.echo(text, err=True)  # noqa: E731
    asked = req.SweepRequest(
        _family(family),
        preset,
        _overrides(family, overrides),
        run,
        stack_texts,
        platform_name,
        max_seconds,
        max_minutes,
        timeout_s,
        memory_gb,
        retry_failed,
        force,
        rounds,
        workers,
        adaptive,
        budget,
        backend,
        address,
    )
    prepared = req.prepare(asked, echo)
    _check_undamaged(store_path)
    with _refused_leaves_nothing(store_path), _open_store(store_path) as store, _terminate_as_interrupt() as terminated:
        summary, outcome = req.run(prepared, store, echo)
    rows = req.rows(prepared, store_path).to_dict("records")
    predicted = outcome.predicted if outcome is not None else None
    if predicted is not None and len(predicted):
        rows += [{"platform": prepared.target.platform, **r, "state": "predicted"} for r in predicted.to_dict("records")]
    settings = prepared.options.settings
    columns = RESULT_COLUMNS + ([("sw_tensorflow", "{}")] if stack_texts else [])
    columns += [("infeed_share", "{:.1%}")] if settings.input != "device" else []
    columns += [("comm_share", "{:.1%}"), ("scaling_efficiency", "{:.1%}")] if settings.devices > 1 else []
    _print_table(rows, columns)
    if outcome is not None:
        click.echo(outcome.line(), err=True)
    click.echo(summary.line(), err=True)
    if summary.interrupted:
        sys.exit(128 + signal.SIGTERM if terminated else 130)


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM stops a sweep the way Ctrl-C does (results kept, summary printed); yields a flag it sets."""
    terminated: list[bool] = []

    def handler(signum, frame):
        terminated.append(True)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield terminated
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _refused_leaves_nothing(path: str):
    """A store this command creates is removed again when the command is refused (ConfigError)
    before anything was written to it: an absent GPU found by the first worker, say."""
    from paradnn.store.db import check_store_path

    check_store_path(path)
    existed = Path(path).exists()
    try:
        yield
    except ConfigError:
        if not existed:
            from paradnn.store import Store

            with Store(path, create=False, readonly=True) as s:
                empty = s.count() == 0 and s.platforms().empty
            if empty:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
        raise


def _overrides(family: str, texts: tuple[str, ...]) -> dict[str, list]:
    """The ``--set AXIS=V1,V2`` options as axis -> values; ConfigError for an axis given twice."""
    from paradnn.space import parse_override

    out: dict[str, list] = {}
    for text in texts:
        name, values = parse_override(family, text)
        if name in out:
            raise ConfigError("--set", text, f"each axis once ({name} is given twice: list its values in one --set)")
        if len(set(values)) < len(values):
            raise ConfigError("--set", text, f"each value of {name} once")
        out[name] = values
    return out


def _check_undamaged(path: str) -> None:
    """ConfigError when the store at ``path`` is damaged: said before anything writes to it."""
    from paradnn.store import StoreError
    from paradnn.store.db import check_undamaged

    try:
        check_undamaged(path)
    except StoreError as exc:
        raise ConfigError("--store", path, f"an undamaged paradnn store ({exc})") from None


def _open_store(path: str, create: bool = True, readonly: bool = False):
    """The store at ``path``; read-only as a snapshot where no process has it open, so reading a store
    (a damaged one included) leaves no ``-wal``/``-shm`` files beside it."""
    from paradnn.store import Store, StoreError

    try:
        return Store(path, create=create, readonly=readonly, snapshot=readonly)
    except StoreError as exc:
        raise ConfigError("--store", path, f"a paradnn store ({exc})") from None


@main.command(epilog=_epilog("results"))
@store_option
@click.option("--family", type=click.Choice(FAMILIES))
@setting_option("platform", "platform_id", default=None, help="Only this platform (e.g. cpu, v100, tpu-v2-8).")
@click.option("--state", type=click.Choice(STATES))
@click.option("--format", "fmt", type=click.Choice(("table", "csv", "json", "parquet")), default="table", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="Write to this file instead of the terminal.")
@click.option("--force", is_flag=True, help="Replace an existing --output file (never a store or any SQLite file).")
def results(
    store_path: str, family: str | None, platform_id: str | None, state: str | None, fmt: str, output: str | None, force: bool
) -> None:
    """Show or export the results in a store.

    --output writes a new file (through a temporary file renamed into place); it refuses the
    store itself, any SQLite file, a FIFO or device, and an existing file unless --force.
    """
    from paradnn.store import export

    if fmt == "parquet" and not output:
        raise ConfigError("--output", None, "a file name for --format parquet")
    if output:
        _check_output(output, store_path, force)
    filters = {"--family": ("family", family), "--platform": ("platform", platform_id), "--state": ("state", state)}
    with _open_store(store_path, create=False, readonly=True) as store:
        df = store.results(family=family, platform=platform_id, state=state)
        if df.empty and any(value is not None for _, value in filters.values()):
            _check_filters_match(store.results(), set(store.platforms()["platform"]), filters)
    try:
        if fmt == "table":
            text = _table(df.to_dict("records"))
            if output:
                _write_new(output, lambda path: path.write_text(text + "\n"))
            else:
                click.echo(text)
            return
        text = export(df, fmt, None) if output is None else None
        if output:
            _write_new(output, lambda path: export(df, fmt, path))
    except OSError as exc:  # a full disk, a read-only folder, ...
        raise ConfigError("--output", output, f"a file that can be written ({exc.strerror or exc})") from None
    if text is not None:
        click.echo(text)


from paradnn.store.db import SQLITE_MAGIC  # noqa: E402


def _check_output(output: str, store: str, force: bool) -> None:
    """ConfigError unless ``output`` is a new file in an existing folder, or (with ``force``) an
    existing regular file that is neither the store nor any SQLite database."""
    path = Path(output)
    try:
        _check_output_path(path, output, store)
    except OSError as exc:  # a name over 255 bytes, a path over 4,096 characters
        raise ConfigError("--output", output, f"a file name the system takes ({exc.strerror})") from None
    if not path.exists() and not path.is_symlink():
        return
    with open(path, "rb") as f:
        if f.read(16) == SQLITE_MAGIC:
            raise ConfigError("--output", output, "a file that is not an SQLite database (an export never replaces one)")
    if not force:
        raise ConfigError("--output", output, "a new file, or --force to replace this one")


SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")  # what SQLite keeps beside a database while it is open


def _check_output_path(path: Path, output: str, store: str) -> None:
    """An export's file is in an existing folder, a regular file if it exists, and neither the store
    nor a file SQLite keeps beside it or beside any other database (``S-wal``, ``S-shm``, ``S-journal``)."""
    if not path.parent.is_dir():
        raise ConfigError("--output", output, "a file in an existing folder")
    side = next((suffix for suffix in SQLITE_SIDE_FILES if path.name.endswith(suffix)), None)
    if side and (path.resolve() == Path(f"{Path(store).resolve()}{side}") or _is_sqlite(path.with_name(path.name[: -len(side)]))):
        raise ConfigError("--output", output, "a file other than the ones SQLite keeps beside a store")
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_file():
        raise ConfigError("--output", output, "a regular file or a new one (this is a folder, FIFO or device)")
    for suffix in ("", *SQLITE_SIDE_FILES):
        other = Path(f"{store}{suffix}")
        if other.exists() and path.samefile(other):
            raise ConfigError("--output", output, "a file other than the store it exports (--store)")


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return path.is_file() and f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _check_filters_match(every, records: set[str], filters: dict[str, tuple[str, str | None]]) -> None:
    """ConfigError for ``results`` filters that select no row of a store (``every``: all its rows;
    ``records``: its platforms' names): the first filter that matches nothing alone, with the values the
    store has, else the filters together. A platform with a record and no rows yet shows an empty table."""
    given = {option: (column, value) for option, (column, value) in filters.items() if value is not None}
    for option, (column, value) in given.items():
        held = set(every[column].dropna().astype(str)) if column in every else set()
        if value not in held and not (column == "platform" and value in records):
            raise ConfigError(option, value, f"a {column} of the store's rows ({', '.join(sorted(held)) or 'none yet'})")
    if len(given) > 1:
        raise ConfigError("/".join(given), ", ".join(str(v) for _, v in given.values()), "filters that match a row together")


def _write_new(output: str, write) -> None:
    """Run ``write(path)`` on a temporary file beside ``output`` and rename it into place: a failed or
    interrupted export leaves ``output`` as it was. The file gets the permissions a plainly created
    one would (the umask's), not the temporary file's owner-only ones."""
    import os
    import tempfile

    target = Path(output)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    os.close(fd)
    try:
        write(Path(name))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(name, 0o666 & ~umask)
        os.replace(name, target)
    finally:
        Path(name).unlink(missing_ok=True)


@main.command("import-legacy", epilog=_epilog("import_legacy"))
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@store_option
@setting_option("platform", "platform_id", default=None, help="Platform name for all files (default: from each file name).")
def import_legacy(files: tuple[str, ...], store_path: str, platform_id: str | None) -> None:
    """Import the original ParaDnn study's JSON files (sweeps and traces) into a store.

    Without FILES, the copies shipped with paradnn (checked against their SHA-256).
    """
    from paradnn.store.legacy import LegacyError, bundled_files, import_files, load_file

    try:
        paths = [Path(f) for f in files] if files else bundled_files()
        for path in paths:  # every file checked before the store is opened (or created)
            load_file(path, platform_id)
    except LegacyError as exc:
        _fail(str(exc))
    with _open_store(store_path) as store:
        try:
            summary = import_files(store, paths, platform=platform_id)
        except LegacyError as exc:
            _fail(str(exc))
    for name, info in summary["files"].items():
        click.echo(f"{name}: {info['kind']} of {info['platform']}, {info['rows']} rows, {info['added']} added")


@main.command(epilog=_epilog("merge"))
@click.argument("sources", nargs=-1, required=True, metavar="SRC...")
@click.option("--store", "store_path", required=True, help="The store to merge into (created if missing).")
@click.option(
    "--rename",
    "renames",
    multiple=True,
    metavar="OLD=NEW",
    help="Rename a platform of the sources on the way in (e.g. cpu=xeon-lab); repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was added as JSON.")
def merge(sources: tuple[str, ...], store_path: str, renames: tuple[str, ...], as_json: bool) -> None:
    """Merge paradnn stores measured elsewhere (SRC...) into one store.

    Sources are only read, never written (an older store's file stays as it is); the merge
    is one transaction, so a refused or interrupted merge leaves the store as it was.
    Rows are de-duplicated by run identity (merging again adds nothing; the same run
    measured at another time is kept as a rerun, with its origin). Platforms keep their
    fingerprints; two machines under one name (both `cpu`) are refused until one is renamed.
    """
    from paradnn.store.merge import merge as merge_stores
    from paradnn.store.merge import parse_rename

    summary = merge_stores(sources, store_path, parse_rename(renames))
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # committed: a SIGTERM now would only turn success into exit 143
    if as_json:
        _emit(summary.as_dict(), True)
        return
    for line in summary.lines():
        click.echo(line)


COMPARE_BY = ("platform", "dtype", "xla", "framework", "input", "devices", "sw_tensorflow")
# What the target's rows say beside the speedup: the infeed share of a host input mode, the
# communication share and scaling efficiency of data-parallel replicas.
COMPARE_CARRY = {
    "input_mode": ("infeed_share",),
    "devices": ("replica_batch", "comm_share", "allreduce_share", "scaling_efficiency"),
}


@main.command(epilog=_epilog("compare"))
@click.option("--baseline", required=True, help="Baseline platform (or value of --by).")
@click.option("--target", required=True, help="Target platform (or value of --by).")
@click.option("--by", default="platform", show_default=True, type=click.Choice(COMPARE_BY))
@click.option(
    "--free",
    "free_text",
    default="",
    metavar="SETTING[,SETTING]",
    help="Run settings each side may keep its own value of, besides those that belong to the side "
    "(--by platform: dtype and xla; --by sw_tensorflow and --by framework: xla).",
)
@click.option(
    "--hold",
    "hold_text",
    default="",
    metavar="SETTING[,SETTING]",
    help="Run settings to hold equal on both sides, even those that belong to the side (e.g. dtype).",
)
@click.option("--family", type=click.Choice(FAMILIES))
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with the per-configuration table).")
def compare(
    baseline: str, target: str, by: str, free_text: str, hold_text: str, family: str | None, store_path: str, as_json: bool
) -> None:
    """Speedup in examples/s of TARGET over BASELINE on the runs both have, like with like.

    A pair agrees in everything of its run identity but --by: the configuration, every run
    setting, the platform and its software stack. Settings that belong to the side are
    freed (each platform at its own precision and automatic XLA setting, as the paper ran
    its TPU in bfloat16 and its V100 in float16); a freed setting is still held wherever
    both sides have a value in common. The summary says what was held, what was freed and
    why; where nothing pairs, it says what differs and which option frees it.
    """
    from paradnn.analysis.results import Results
    from paradnn.analysis.rows import SIDE_OWNED
    from paradnn.settings import BY_NAME

    declared = BY_NAME.get(by)
    column = declared.column if declared else by
    free = _setting_columns(free_text, "--free")
    hold = _setting_columns(hold_text, "--hold")
    both = sorted(set(free) & set(hold))
    if both:
        raise ConfigError("--hold", hold_text, f"settings not also given to --free ({', '.join(both)} in both)")
    if column in free or column in hold:
        option = "--free" if column in free else "--hold"
        raise ConfigError(option, free_text if column in free else hold_text, f"settings other than --by {by} (it varies)")
    if declared and by != "platform":
        baseline, target = _compare_value(declared, "--baseline", baseline), _compare_value(declared, "--target", target)
    if baseline == target:
        raise ConfigError("--target", target, f"a {by} other than the baseline's")
    results = Results.load(_checked_store(store_path)).where(family=family, state=OK)
    present = sorted({v for v in results.frame[column].dropna().unique()}, key=str)
    for option, value in (("--baseline", baseline), ("--target", target)):
        if value not in present:
            shown = ", ".join(map(str, present)) or "nothing (no finished results)"
            among = f"{family} results (--family {family})" if family else "results"
            raise ConfigError(option, value, f"a {by} with finished {among} in the store: {shown}")
    freed = tuple(f for f in dict.fromkeys([*SIDE_OWNED.get(column, {}), *free]) if f not in hold)  # --hold wins a default
    result = results.matched(column, baseline, target, family=family, free=freed, hold=hold, carry=COMPARE_CARRY.get(column, ()))
    summary = result.summary()
    if as_json:
        _emit({**summary, "table": result.table.to_dict("records")}, True)
        return
    if not result.n:
        click.echo(f"nothing pairs {target} with {baseline}: {result.why}")
        return
    if result.carried:  # the infeed or scaling table, configuration by configuration
        shares = [(c, "{}" if c == "replica_batch" else "{:.1%}") for c in result.carried]
        _print_table(result.table.to_dict("records"), [("family", "{}"), ("label", "{}"), ("speedup", "{:.3f}"), *shares])
    _emit({k: v for k, v in summary.items() if k not in ("free", "sides")}, False)
    for line in _sides_lines(result.sides, baseline, target):
        click.echo(line)


def _setting_columns(text: str, option: str) -> tuple[str, ...]:
    """The store columns of a comma-separated list of run settings (an unknown name: one error naming the option)."""
    from paradnn.settings import BY_NAME

    if not text.strip():
        return ()
    names = [name.strip() for name in text.split(",")]
    for name in names:
        if name not in BY_NAME:
            raise ConfigError(option, name, ", ".join(BY_NAME) + " (comma-separated, none empty)")
    if len(set(names)) < len(names):
        raise ConfigError(option, text, "each setting once")
    return tuple(BY_NAME[name].column for name in names)


def _sides_lines(sides: dict, baseline: object, target: object) -> list[str]:
    """What a comparison did with each setting that belongs to a side, one line each."""
    lines = []
    for column, side in sides.items():
        if side["held"]:
            lines.append(
                f"held        {column} where both sides have it ({', '.join(side['values'])}); free otherwise: {side['why']}"
            )
        else:
            lines.append(
                f"free        {column}: {baseline} {', '.join(side['baseline'])}, {target} "
                f"{', '.join(side['target'])} ({side['why']})"
            )
    return lines


def _compare_value(declared, option: str, text: str) -> object:
    """A --baseline/--target value of a declared run setting, through its parser (the option named on error)."""
    try:
        return declared.parse(text)
    except ConfigError as exc:
        raise ConfigError(option, text, f"{exc.allowed} when --by {declared.name}") from None


def _checked_store(path: str) -> str:
    with _open_store(path, create=False, readonly=True):
        return path


@main.command(epilog=_epilog("scorecard"))
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON: principles, hardware metrics, framework rows.")
def scorecard(store_path: str, as_json: bool) -> None:
    """Dai & Berleant's scorecard of a store: the seven principles, each with a rule that can fail,
    the 12 hardware metrics per platform and the framework rows measured here."""
    from paradnn.analysis import scorecard as card

    with _open_store(store_path, create=False, readonly=True) as store:
        results, platforms = store.results(), store.platforms()
    audit = card.principles_audit(results)
    cells = card.hardware_metrics(results, platforms)
    frameworks = card.framework_rows(results).reset_index()
    if as_json:
        _emit(
            {
                "principles": card.principles_json(audit),
                "hardware": cells[["metric", "platform", "value", "source", "evidence"]].to_dict("records"),
                "frameworks": frameworks.to_dict("records"),
            },
            True,
        )
        return
    for name, row in audit.iterrows():
        mark = {True: "pass", False: "FAIL"}.get(row["pass"], "n/a ")  # n/a: inconclusive
        click.echo(f"{mark}  {name:<19} {row['this store']}\n      rule: {row['rule']}")
        if row["effect"]:
            click.echo(f"      {row['outcome']}: {row['effect']}")
    click.echo("")
    _print_table(cells.to_dict("records"), [("metric", "{}"), ("platform", "{}"), ("evidence", "{}"), ("value", "{}")])


@main.command(epilog=_epilog("predict", labels=True))
@click.argument("labels", nargs=-1)
@store_option
@setting_option(
    "platform", "platform_id", default=None, required=True, help="Platform whose rows train the model (e.g. cpu, tpu-v2-8)."
)
@click.option("--family", required=True, type=click.Choice(FAMILIES))
@click.option("--labels-file", type=click.Path(dir_okay=False), help="Labels to predict, one per line.")
@click.option("--preset", help="Predict a preset's whole grid (smoke, quick or paper).")
@setting_option("dtype", default=None, help="Dtype policy of the predictions (default: the one most rows were measured with).")
@click.option("--cv", "folds", type=int, help="Instead of predicting: K-fold held-out error of the model and the baselines.")
@click.option("--replay", help="Instead: replay the stored grid, adaptive vs random sampling, at these fractions (0.05,0.1).")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, 2**32 - 1), help="Seed of subsampling and folds.")
@click.option(
    "--prior-from",
    "prior_from",
    help="For a platform with few or no rows (a datasheet or measured ceilings): "
    "project this profiled platform's steps onto it and calibrate on its rows.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def predict(
    labels: tuple[str, ...],
    store_path: str,
    platform_id: str,
    family: str,
    labels_file,
    preset: str | None,
    dtype: str | None,
    folds: int | None,
    replay: str | None,
    seed: int,
    prior_from: str | None,
    as_json: bool,
) -> None:
    """Predict step time and examples/s of configurations a platform has not run, with 90% intervals.

    The model (see docs/performance.md) learns from the store's measured rows of one
    platform and family. Each prediction comes with its 90% interval and, where the store
    holds out-of-memory rows, the probability that the configuration fits.

    With --prior-from P, a platform with fewer rows than the model needs (none at all, for a
    datasheet) is predicted from P's steps projected onto it, calibrated on the rows it has
    (README, "Predicting a platform with few rows").
    """
    from paradnn.analysis import predict as pr
    from paradnn.space import expand

    evaluate = folds is not None or replay is not None
    if folds is not None and replay is not None:
        raise ConfigError("--cv/--replay", f"--cv {folds} --replay {replay}", "one of them at a time")
    fractions = [_fraction(x) for x in replay.split(",") if x.strip()] if replay is not None else []
    if replay is not None and not fractions:
        raise ConfigError("--replay", replay, "fractions of the grid between 0 and 1, comma-separated (0.05,0.1,0.2)")
    wanted = list(labels) + (_lines(labels_file) if labels_file else [])
    wanted += [c.label for c in expand(family, preset)] if preset else []
    if evaluate and wanted:
        raise ConfigError("LABEL", wanted[0], "no labels, --labels-file or --preset with --cv or --replay")
    if not evaluate and not wanted:
        raise ConfigError("LABEL", "(none)", "labels, --labels-file, --preset, --cv or --replay")
    for label in wanted:  # every label checked before the model is fitted
        families.parse_label(family, label)
    if prior_from is not None:
        if evaluate:
            raise ConfigError("--prior-from", prior_from, "labels, --labels-file or --preset to predict (not --cv or --replay)")
        _predict_with_prior(store_path, platform_id, family, prior_from, wanted, dtype, seed, as_json)
        return
    with _open_store(store_path, create=False, readonly=True) as store:
        model, rows = pr.fit_store(store, platform_id, family, seed)
    if evaluate:
        _predict_evaluation(rows, model, folds, fractions, seed, as_json)
        return
    out = pr.predict_labels(model, rows, wanted, dtype)
    if as_json:
        click.echo(
            json.dumps([{k: _finite(v) for k, v in r.items() if k != "relative_width"} for r in out.to_dict("records")], indent=2)
        )
        return
    columns = [
        ("label", "{}"),
        ("step_time_s", "{:.4g}"),
        ("step_time_low_s", "{:.4g}"),
        ("step_time_high_s", "{:.4g}"),
        ("examples_per_sec", "{:.4g}"),
        ("fits_probability", "{:.0%}"),
        ("extrapolated", "{}"),
        ("measured_step_time_s", "{:.4g}"),
    ]
    _print_table(out.to_dict("records"), columns)
    click.echo(f"model: {model.n} measured {family} configurations on {platform_id}; 90% intervals", err=True)


@main.command(epilog=_epilog("profile", labels=True))
@click.argument("family")
@click.argument("labels", nargs=-1)
@setting_option("platform", "platform_id", help="A platform of this machine: cpu, cpu[threads=N] or gpu:N.")
@setting_option("dtype")
@store_option
def profile(family: str, labels: tuple[str, ...], platform_id: str, dtype: str, store_path: str) -> None:
    """Profile configurations op by op on this machine and keep the profiles in the store, so that
    `paradnn project --from PLATFORM` can project them onto hardware not at hand.

    Without LABEL: every configuration of FAMILY the store has measured on --platform at
    --dtype. TensorFlow's profiler runs in a worker with the platform's threads, XLA off;
    what the store already holds is skipped.
    """
    from paradnn.analysis.results import Results
    from paradnn.engine.protocol import RunSettings
    from paradnn.platform import parse_target
    from paradnn.sweeps.plan import SweepOptions
    from paradnn.sweeps.profiles import profile_local

    if dtype not in POLICIES:
        raise ConfigError("--dtype", dtype, ", ".join(POLICIES))
    target = parse_target(platform_id)
    configs = [_config(family, label) for label in labels]
    with _open_store(store_path, create=False) as store:
        if not configs:
            rows = Results.read(store, platform=target.platform).where(family=_family(family), dtype=dtype).ok().frame
            configs = [_config(family, label) for label in dict.fromkeys(rows["label"])] if not rows.empty else []
            if not configs:
                raise ConfigError(
                    "FAMILY",
                    family,
                    f"a family the store has measured on {target.platform} at {dtype} (or name the labels to profile)",
                )
        done = profile_local(configs, store, SweepOptions(settings=RunSettings(dtype=dtype), target=target))
    for label, error in done["failed"].items():
        click.echo(f"paradnn: {label}: {error}", err=True)
    click.echo(
        f"{done['profiled']} profiled on {target.platform}, {done['already']} already in the store, {len(done['failed'])} failed",
        err=True,
    )
    if done["failed"]:
        sys.exit(1)


@main.command(epilog=_epilog("project", labels=True))
@click.argument("labels", nargs=-1)
@click.option("--from", "source", required=True, help="Platform measured and profiled (e.g. tpu-v2-8, the original study's).")
@click.option(
    "--to",
    "target",
    required=True,
    help="Platform to project onto: a datasheet (tpu-v3-8, v100, a100, h100, "
    "h200) or a platform with measured ceilings in the store.",
)
@click.option("--family", required=True, type=click.Choice(FAMILIES))
@click.option(
    "--store",
    "store_path",
    help="A results store to read profiles, steps and ceilings from "
    "(default: none; the original study's data ships with paradnn).",
)
@click.option(
    "--batch-scale",
    default=1,
    show_default=True,
    type=int,
    help="Project each configuration at K times its batch, from --from's row at that batch.",
)
@setting_option("dtype", default=None, help="Compute dtype on --to (default: the one --from was measured in).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: the summary and one row per configuration.")
def project(
    labels: tuple[str, ...],
    source: str,
    target: str,
    family: str,
    store_path: str | None,
    batch_scale: int,
    dtype: str | None,
    as_json: bool,
) -> None:
    """Project step times measured on one platform onto another that is not at hand.

    Each operation category of a measured step keeps its FLOPs and bytes: compute-bound ones
    (intensity at or above the source's ridge point) scale by the two peaks' ratio, memory-bound
    ones by the bandwidths', and infeed, barriers and untraced time stay as measured. See
    docs/performance.md ("Projection").
    """
    from paradnn.analysis.projection import projection

    if store_path is not None:
        _checked_store(store_path)
    rows, summary = projection(store_path, source, target, family, list(labels) or None, batch_scale, dtype)
    if as_json:
        _emit({"summary": summary, "rows": [{k: _finite(v) for k, v in r.items()} for r in rows.to_dict("records")]}, True)
        return
    rows = rows.assign(**{f"{b}_share": [r[b] for r in rows["bound"]] for b in ("compute", "memory", "overhead")})
    _print_table(
        rows.to_dict("records"),
        [
            ("projected_label", "{}"),
            ("source_step_time_s", "{:.4g}"),
            ("projected_step_time_s", "{:.4g}"),
            ("speedup", "{:.2f}"),
            ("compute_share", "{:.0%}"),
            ("memory_share", "{:.0%}"),
            ("overhead_share", "{:.0%}"),
            ("measured_step_time_s", "{:.4g}"),
        ],
    )
    low, high = summary["speedup_interval"]
    click.echo(
        f"{summary['n']} {family} configurations of {source} projected onto {target} ({summary['to']['source']}); "
        f"median speedup {summary['median_speedup']:.2f}x (bracket {low:.2f}-{high:.2f}, range "
        f"{summary['min_speedup']:.2f}-{summary['max_speedup']:.2f}); peak ratio {summary['peak_ratio']:.2f}x, "
        f"bandwidth ratio {summary['bandwidth_ratio']:.2f}x",
        err=True,
    )
    for line in _projection_notes(summary, target, rows):
        click.echo(line, err=True)
    if store_path is not None and family == "fc":
        click.echo(_validation_line(store_path, source), err=True)


def _validation_line(store: str, source: str) -> str:
    """The method's score against the 2019 chips from ``source``'s profiles (paradnn.analysis.projection)."""
    from paradnn.analysis.projection import STEP_GOAL, original_validation

    _, scores = original_validation(store, source)
    scored = {k: v for k, v in scores.items() if v["n"]}
    if not scored:
        return (
            f"method not scored: no profiled FC configuration of {source} where a 2019 chip was the bound (profile "
            "some of the paper-overlap preset's to score it)"
        )
    words = "; ".join(
        f"{'TPU/V100 ratio' if k == 'ratio' else k} {v['median_abs_error']:.0%} over {v['n']}" for k, v in scored.items()
    )
    return f"method scored against the 2019 chips (median error, goal {STEP_GOAL:.0%} a step): {words}"


def _projection_notes(summary: dict, target: str, rows) -> list[str]:
    """What a projection's reader must know beside its figures: extrapolation, the step floor, and
    whether a measured step checks it (and at which settings one would)."""
    lo, hi = summary["validated_ratio"]
    notes = []
    if summary["extrapolated"]:
        notes.append(
            f"extrapolated: the method was validated on {summary['validated_on']}; these ratios lie beyond {lo:.2g}-{hi:.2g}x"
        )
    if summary["batch_scale"] != 1:
        notes.append(
            f"speedups are examples/s at {summary['batch_scale']}x the batch on {target} over the source at its "
            f"own batch: they hold the source's own gain from the larger batch, so they may exceed the peak "
            f"ratio ({summary['peak_ratio']:.3g}x), which bounds a speedup at one batch only"
        )
    if summary["floored"]:
        notes.append(
            f"{summary['floored']} projected step(s) held at the floor of {summary['floor_s']:.3g} s ({summary['floor_source']})"
        )
    if len(rows) and rows["measured_step_time_s"].isna().all():
        held = ", ".join(f"{k} {v}" for k, v in summary["held_fixed"].items()) or "the source's settings"
        notes.append(f"no measured step of {target} at the settings the projection holds ({held}) checks it")
    return notes


LABELS_BYTES = 10_000_000  # a labels file: a million labels at most


def _lines(path: str) -> list[str]:
    """The non-empty lines of a text file; ConfigError for a missing, unreadable, binary or endless one."""
    text = read_bounded(path, "--labels-file", LABELS_BYTES)
    return [x.strip() for x in text.splitlines() if x.strip()]


def _predict_with_prior(
    store_path: str, platform_id: str, family: str, source: str, wanted: list[str], dtype: str | None, seed: int, as_json: bool
) -> None:
    """``paradnn predict --prior-from P``: the projection prior of :mod:`paradnn.analysis.prior`."""
    from paradnn.analysis.prior import projection_prior, source_model_from
    from paradnn.analysis.results import Results
    from paradnn.config import compute_dtype

    if dtype is not None and dtype not in POLICIES:
        raise ConfigError("--dtype", dtype, ", ".join(POLICIES))
    if source == platform_id:
        raise ConfigError("--prior-from", source, f"a platform other than --platform {platform_id}")
    with _open_store(store_path, create=False, readonly=True) as store:
        mine = Results.read(store, platform=platform_id).where(family=_family(family))
    if dtype is None and len(mine):
        dtype = str(mine.dominant_run(("dtype",))["dtype"])  # what Q was measured in
    with store_errors(store_path):
        prior, theirs = projection_prior(
            store_path,
            source,
            platform_id,
            _family(family),
            compute_dtype(dtype) if dtype else None,
            source_model_from(store_path, source, _family(family), seed),
        )
        prior = prior.calibrated(theirs)
        out = prior.predict(wanted)
    out["measured_step_time_s"] = out["label"].map(theirs.drop_duplicates("label", keep="last").set_index("label")["step_time_s"])
    if as_json:
        _emit({"prior": prior.describe(), "rows": [{k: _finite(v) for k, v in r.items()} for r in out.to_dict("records")]}, True)
        return
    _print_table(
        out.to_dict("records"),
        [
            ("label", "{}"),
            ("step_time_s", "{:.4g}"),
            ("step_time_low_s", "{:.4g}"),
            ("step_time_high_s", "{:.4g}"),
            ("examples_per_sec", "{:.4g}"),
            ("parts_from", "{}"),
            ("measured_step_time_s", "{:.4g}"),
        ],
    )
    click.echo(prior.describe(), err=True)


def _predict_evaluation(rows, model, folds: int | None, fractions: list[float], seed: int, as_json: bool) -> None:
    """``paradnn predict --cv K`` and ``--replay F1,F2``: held-out figures of the model and its baselines."""
    from paradnn.analysis import predict as pr

    if folds is not None:
        pr.check_folds(folds, len(rows))
        scores = pr.cross_validate(rows, model.featurizer, folds, seed)
        payload = {
            **scores["model"],
            "folds": folds,
            "seed": seed,
            "baselines": {name: scores[name] for name in ("roofline", "paper_regression")},
        }
        if as_json:
            click.echo(json.dumps(payload, indent=2))
            return
        table = [{"model": name, **s} for name, s in (("model", scores["model"]), *payload["baselines"].items())]
        _print_table(
            table,
            [
                ("model", "{}"),
                ("n", "{}"),
                ("mape", "{:.2f}%"),
                ("median_ape", "{:.2f}%"),
                ("p90_ape", "{:.2f}%"),
                ("coverage", "{:.0%}"),
            ],
        )
        return
    table = pr.replay(rows, model.featurizer, fractions, seeds=(seed,))
    if as_json:
        click.echo(table.to_json(orient="records", indent=2))
        return
    _print_table(
        table.to_dict("records"),
        [("fraction", "{:.0%}"), ("budget", "{}"), ("strategy", "{}"), ("n", "{}"), ("mape", "{:.2f}%"), ("coverage", "{:.0%}")],
    )


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise ConfigError("--replay", text, "fractions of the grid between 0 and 1, comma-separated (0.05,0.1,0.2)")
    return value


def _finite(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


@main.command(epilog=_epilog("report"))
@click.argument("pipeline")
@click.option("-p", "--parameter", "parameters", multiple=True, metavar="NAME=VALUE", help="Override a notebook parameter.")
@click.option("--reference", type=click.Path(file_okay=False), help="Folder with the original study's JSON files.")
@click.option("--outputs", default="outputs", show_default=True, type=click.Path(file_okay=False), help="Root output folder.")
@click.option(
    "--backend",
    default="local",
    show_default=True,
    type=click.Choice(BACKENDS),
    help="Where the notebooks' sweeps run: this machine, or a Ray cluster.",
)
@click.option("--address", envvar="RAY_ADDRESS", help="With --backend ray: HOST:PORT of the cluster (default $RAY_ADDRESS).")
@click.option(
    "--store",
    "store_path",
    type=click.Path(dir_okay=False),
    help="Report on this existing store (a merged study, say) instead of the pipeline's own in "
    "outputs/PIPELINE/; with -p measure_missing=false nothing is measured.",
)
def report(
    pipeline: str,
    parameters: tuple[str, ...],
    reference: str | None,
    outputs: str,
    backend: str,
    address: str | None,
    store_path: str | None,
) -> None:
    """Execute PIPELINE's notebooks (smoke, quick, paper, study or a .yaml file) and render HTML reports."""
    from paradnn.parameters import parse_parameter, validate_overrides
    from paradnn.reports import load_pipeline, run_pipeline

    spec = load_pipeline(pipeline)  # bad names and parameters fail before anything runs
    given: dict[str, object] = {}
    for text in parameters:
        name, value = parse_parameter(text)
        if name in given:
            raise ConfigError("-p", text, f"each parameter once ({name} is given twice)")
        given[name] = value
    if backend == "ray":
        from paradnn.sweeps.cluster import check_reachable

        check_reachable(address or "")
        given["backend"] = f"ray:{address}"
    overrides = validate_overrides(spec, given)
    reports = run_pipeline(
        pipeline, overrides, Path(reference) if reference else None, Path(outputs), Path(store_path) if store_path else None
    )
    for r in reports:
        click.echo(f"{r.status:<6} {r.duration_s:6.0f} s  {r.html}" + (f"  ({r.error})" if r.error else ""))
    click.echo(str(reports[0].html.parent / "index.html") if reports else "no notebooks in the pipeline")
    if any(r.status != "ok" for r in reports):
        sys.exit(1)


@main.command(epilog=_epilog("lab"))
@click.option("--port", default=8888, show_default=True, type=click.IntRange(1, 65535), help="The server's port.")
@click.option("--no-browser", is_flag=True, help="Do not open a browser.")
def lab(port: int, no_browser: bool) -> None:
    """Open the notebooks in JupyterLab, on the `paradnn` kernel (registered if needed)."""
    import os

    from paradnn.reports import ROOT, ensure_kernel

    ensure_kernel()
    args = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--notebook-dir={ROOT / 'notebooks'}",
        f"--port={port}",
        "--MultiKernelManager.default_kernel_name=paradnn",
    ]
    if no_browser:
        args.append("--no-browser")
    if os.geteuid() == 0:  # containers often run as root; JupyterLab refuses that unless told
        args.append("--allow-root")
    os.execv(sys.executable, args)


RESULT_COLUMNS = [
    ("platform", "{}"),
    ("label", "{}"),
    ("state", "{}"),
    ("step_time_s", "{:.4g}"),
    ("examples_per_sec", "{:.4g}"),
    ("flops_per_sec", "{:.3g}"),
    ("utilization", "{:.1%}"),
    ("step_time_cv", "{:.1%}"),
]


def _table(rows: list[dict], columns: list[tuple[str, str]] = RESULT_COLUMNS) -> str:
    cells = [[name for name, _ in columns]]
    for row in rows:
        cells.append([_cell(row.get(n), fmt) for n, fmt in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def _cell(value, fmt: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return fmt.format(value)


def _print_table(rows: list[dict], columns: list[tuple[str, str]] = RESULT_COLUMNS) -> None:
    click.echo(_table(rows, columns))


if __name__ == "__main__":
    main()
