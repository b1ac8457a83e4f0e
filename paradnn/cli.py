"""The ``paradnn`` command line: a thin layer over the library.

Every bad input (unknown family, malformed label, value out of range, unknown option
value) ends with one line on stderr naming what was wrong and what is allowed, and exit
status 2. TensorFlow is imported only by commands that need it, so errors are instant.
"""

from __future__ import annotations

import json
import math
import sys

import click

from paradnn.config import FAMILIES, POLICIES, Config, ConfigError, parse_label


class _OneLineErrors(click.Group):
    """Report usage errors and ``ConfigError`` as one line with exit status 2."""

    def main(self, *args, **kwargs):  # type: ignore[override]
        try:
            return super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("paradnn: interrupted", err=True)
            sys.exit(130)
        except click.UsageError as exc:
            _fail(exc.format_message())
        except ConfigError as exc:
            _fail(str(exc))
        except click.ClickException as exc:
            click.echo(f"paradnn: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        return None


def _fail(message: str) -> None:
    click.echo(f"paradnn: error: {message}", err=True)
    sys.exit(2)


def _config(family: str, label: str) -> Config:
    if family not in FAMILIES:
        raise ConfigError("FAMILY", family, ", ".join(FAMILIES))
    return parse_label(family, label)


def _json_default(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def _emit(record: dict, as_json: bool, skip: tuple[str, ...] = ("samples_s",)) -> None:
    if as_json:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        click.echo(json.dumps(clean, indent=2, default=_json_default))
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


@main.command()
@click.option("--platform", "platform_id", default="cpu", show_default=True, help="cpu, cpu[threads=N], gpu:N or tpu:N.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--refresh", is_flag=True, help="Measure the ceilings again instead of using the cache.")
def platform(platform_id: str, as_json: bool, refresh: bool) -> None:
    """Identify this machine and show its peaks and measured ceilings."""
    from paradnn import platform as plat

    target = plat.parse_target(platform_id)
    plat.apply_threads(target)
    info = plat.describe(target)
    if not refresh and not plat.cached_ceilings(info):
        click.echo("measuring this platform's ceilings once (about 20 s)...", err=True)
    info["ceilings"] = plat.ceilings(target, info, refresh=refresh)
    info["peaks"] = {p: dict(zip(("flops", "source"), plat.peak(info, info["ceilings"], p))) for p in POLICIES}
    if as_json:
        _emit(info, True)
        return
    _emit({k: v for k, v in info.items() if k not in ("ceilings", "peaks", "software")}, False)
    click.echo("software:   " + _fmt(info["software"]))
    for dtype, rates in info["ceilings"]["matmul_flops"].items():
        click.echo(f"matmul {dtype:<9} " + ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" for k, v in rates.items()))
    click.echo("copy bandwidth   " + ", ".join(f"{k} {v / 1e9:.1f} GB/s" for k, v in info["ceilings"]["copy_bandwidth"].items()))


@main.command()
@click.argument("family")
@click.argument("label")
@click.option("--dtype", default="float32", show_default=True, help="|".join(POLICIES))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def describe(family: str, label: str, dtype: str, as_json: bool) -> None:
    """Parameters, FLOPs and bytes of one training step of FAMILY LABEL (whole batch)."""
    config = _config(family, label)
    if dtype not in POLICIES:
        raise ConfigError("--dtype", dtype, ", ".join(POLICIES))
    from paradnn.record import describe_config

    _emit(describe_config(config, dtype), as_json)


@main.command()
@click.argument("family")
@click.argument("label")
@click.option("--dtype", default="float32", show_default=True, help="|".join(POLICIES))
@click.option("--xla/--no-xla", default=True, show_default=True, help="Compile the step with XLA.")
@click.option("--max-seconds", default=10.0, show_default=True, type=float, help="Time budget for warm-up and samples.")
@click.option("--platform", "platform_id", default="cpu", show_default=True, help="cpu, cpu[threads=N], gpu:N or tpu:N.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def measure(family: str, label: str, dtype: str, xla: bool, max_seconds: float, platform_id: str, as_json: bool) -> None:
    """Time the training step of FAMILY LABEL on this machine."""
    from paradnn.harness import RunSettings

    config = _config(family, label)
    if not max_seconds > 0:
        raise ConfigError("--max-seconds", max_seconds, "a positive number of seconds")
    from paradnn import platform as plat

    target = plat.parse_target(platform_id)
    settings = RunSettings(dtype=dtype, xla=xla, device=target.tf_device, max_seconds=max_seconds)
    plat.apply_threads(target)
    from paradnn.record import measure_config

    info = plat.describe(target)
    if not plat.cached_ceilings(info):
        click.echo("measuring this platform's ceilings once (about 20 s)...", err=True)
    ceilings = plat.ceilings(target, info)
    record = measure_config(config, settings, target, info, ceilings)
    _emit(record, as_json)
    if record["state"] != "ok":
        click.echo(f"paradnn: {record['state']}: {record['error']}", err=True)
        sys.exit(1)


@main.command()
@click.argument("family")
@click.option("--preset", default="smoke", show_default=True, help="smoke, quick or paper.")
@click.option("--set", "overrides", multiple=True, metavar="AXIS=V1,V2", help="Replace one axis of the preset's grid.")
@click.option("--dtype", default="float32", show_default=True, help="|".join(POLICIES))
@click.option("--xla/--no-xla", default=True, show_default=True, help="Compile the step with XLA.")
@click.option("--max-seconds", default=3.0, show_default=True, type=float, help="Time budget per configuration.")
@click.option("--platform", "platform_id", default="cpu", show_default=True, help="cpu, cpu[threads=N], gpu:N or tpu:N.")
def sweep(
    family: str, preset: str, overrides: tuple[str, ...], dtype: str, xla: bool, max_seconds: float, platform_id: str
) -> None:
    """Measure every configuration of a preset's grid for FAMILY and print a table."""
    from paradnn import platform as plat
    from paradnn.harness import RunSettings
    from paradnn.space import expand, parse_override

    if family not in FAMILIES:
        raise ConfigError("FAMILY", family, ", ".join(FAMILIES))
    configs = expand(family, preset, dict(parse_override(family, o) for o in overrides))
    target = plat.parse_target(platform_id)
    settings = RunSettings(dtype=dtype, xla=xla, device=target.tf_device, max_seconds=max_seconds)
    plat.apply_threads(target)
    from tqdm import tqdm

    from paradnn.record import measure_config

    info = plat.describe(target)
    ceilings = plat.ceilings(target, info)
    rows = []
    bar = tqdm(configs, unit="config", desc=f"{family} {preset}")
    for config in bar:
        bar.set_postfix_str(config.label)
        rows.append(measure_config(config, settings, target, info, ceilings))
    _print_table(rows)


def _print_table(rows: list[dict]) -> None:
    columns = [("label", "{}"), ("state", "{}"), ("step_time_s", "{:.4g}"), ("examples_per_sec", "{:.4g}"),
               ("flops_per_sec", "{:.3g}"), ("utilization", "{:.1%}"), ("step_time_cv", "{:.1%}")]  # fmt: skip
    cells = [[name for name, _ in columns]]
    for row in rows:
        cells.append([("-" if row.get(n) is None else fmt.format(row[n])) for n, fmt in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    for r in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
