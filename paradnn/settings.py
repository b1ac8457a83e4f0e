"""The run, declared once: every setting that says *how* a configuration is run.

A configuration says what to build (:mod:`paradnn.families`); a run setting says how to
run it: the dtype policy, XLA, the framework, the input mode, the number of data-parallel
replicas, the platform (with its thread limit) and the software stack. Each is declared
here, once, with its type, allowed values and their one text parser, default, command-line
option and help, Python API argument and notebook parameter (both its ``name``), store
column, whether it belongs to a result's run identity and what it chooses (its ``scope``:
the step, the device, or the worker's environment). The command line's options, the Python
API, the notebooks' parameters, :class:`paradnn.engine.protocol.RunSettings`,
:mod:`paradnn.identity`, the engine's records and the store read this table; none restates
a setting or its default (``tests/test_settings_declared.py`` fails when one does).

Adding a run setting is a :class:`Setting` here plus what it changes in the step (README,
"Adding a run setting").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from paradnn.config import POLICIES, ConfigError


def on_off_auto(value: object) -> bool | None:
    """XLA's one parser: ``auto`` (None: the faster setting, probed per family and dtype) or on/off."""
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "auto":
        return None
    if text in ("true", "on", "1", "yes"):
        return True
    if text in ("false", "off", "0", "no"):
        return False
    raise ConfigError("xla", value, "auto, on (true) or off (false)")


def positive_int(name: str, most: int) -> Callable[[object], int]:
    """A parser of whole numbers from 1 to ``most`` (text or int; never a bool or a fraction)."""

    def parse(value: object) -> int:
        if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):
            value = int(value)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
            raise ConfigError(name, value, f"a whole number from 1 to {most}")
        return value

    return parse


def platform_id(value: object) -> str:
    """A platform id as stored: ``cpu``, ``cpu[threads=N]``, ``gpu:N``; other names (imported
    platforms such as ``tpu-v2-8``) are kept as given for reading, and refused for measuring
    by :func:`paradnn.platform.parse_target`."""
    from paradnn.platform import parse_target

    if not isinstance(value, str) or not value.strip():
        raise ConfigError("platform", value, "a platform id such as cpu, cpu[threads=N] or gpu:N")
    try:
        return parse_target(value).id
    except ConfigError:
        return value.strip()


def stack_text(value: object) -> str:
    """A software stack as written: ``current`` (this environment) or comma-separated pip
    requirements (``tensorflow==2.16.2``); ConfigError for a malformed requirement."""
    from packaging.requirements import InvalidRequirement, Requirement

    text = value.strip() if isinstance(value, str) else ""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ConfigError("--stack", value, "current, or requirements such as tensorflow==2.16.2 (comma separated)")
    if parts == [CURRENT_STACK]:
        return CURRENT_STACK
    if CURRENT_STACK in parts:
        raise ConfigError("--stack", value, "current alone (this environment), or pip requirements without it")
    for part in parts:
        if len(part) > REQUIREMENT_CHARS:  # no real requirement is this long; uv would answer it in kilobytes
            raise ConfigError("--stack", part, f"a pip requirement of at most {REQUIREMENT_CHARS} characters")
        try:
            Requirement(part)
        except InvalidRequirement:
            raise ConfigError("--stack", part, "a pip requirement such as tensorflow==2.16.2, or current") from None
    return ",".join(parts)


CURRENT_STACK = "current"
REQUIREMENT_CHARS = 200


@dataclass(frozen=True)
class Setting:
    """One run setting: how it is written, checked, stored and whether it makes a result different."""

    name: str  # the Python API argument, the notebook parameter and the RunSettings field
    default: object
    help: str
    column: str  # the store's column
    sql: str = "TEXT"  # its SQL type
    choices: tuple[str, ...] = ()  # the allowed values of a setting that is one of a few words
    parser: Callable[[object], object] | None = None  # for any other: text or value -> value, or ConfigError
    identity: bool = True  # part of a result's run identity
    schema: int = 1  # the store schema whose run key first held it (1: since the start)
    option: str = ""  # the command-line option; "" = --NAME
    flag: bool = False  # an on/off option pair (--xla/--no-xla) whose absence means the default
    # What it chooses: "step" (how the step runs: a RunSettings field), "target" (the device),
    # "worker" (the worker's environment; stored as the software versions it holds, sw_*).
    scope: str = "step"
    multiple: bool = False  # the option may be given several times (measured side by side)
    # What the engine runs with when given no value, where the front ends' default is resolved
    # later (XLA auto: probed per family by a sweep; the engine alone compiles).
    engine_default: object = None

    @property
    def text(self) -> str:
        """The default as the command line and the notebooks write it (``auto`` for XLA's None)."""
        return "auto" if self.default is None else str(self.default)

    @property
    def cli(self) -> str:
        return self.option or f"--{self.name.replace('_', '-')}"

    def parse(self, value: object) -> object:
        """``value`` (text from a command line or notebook, or a Python value) checked and converted."""
        if self.parser is not None:
            return self.parser(value)
        if not isinstance(value, str) or value not in self.choices:
            raise ConfigError(self.name, value, ", ".join(self.choices))
        return value


SETTINGS: tuple[Setting, ...] = (
    Setting("dtype", "float32", "Keras dtype policy: " + "|".join(POLICIES) + ".", "dtype", choices=POLICIES),
    Setting(
        "xla",
        None,
        "Compile the step with XLA: --xla forces it on, --no-xla off; default auto (per family and "
        "dtype the faster setting on this platform, probed once).",
        "xla",
        "INTEGER",
        parser=on_off_auto,
        option="--xla/--no-xla",
        flag=True,
        engine_default=True,
    ),
    Setting("platform", "cpu", "cpu, cpu[threads=N] or gpu:N.", "platform", "TEXT NOT NULL", parser=platform_id, scope="target"),
    Setting(
        "framework",
        "tensorflow",
        "tensorflow, jax (Keras 3's JAX backend; always compiled by XLA) or torch "
        "(Keras 3's PyTorch backend; --xla turns torch.compile on).",
        "framework",
        choices=("tensorflow", "jax", "torch"),
        schema=2,
    ),
    Setting(
        "input",
        "device",
        "device (data resident on the device), host (a tf.data pipeline feeds every step) "
        "or host-prep (plus the workload's data preparation).",
        "input_mode",
        choices=("device", "host", "host-prep"),
        schema=2,
    ),
    Setting(
        "devices",
        1,
        "Data-parallel replicas; the batch is global and split evenly (CPU: local processes; GPU: MirroredStrategy).",
        "devices",
        "INTEGER",
        parser=positive_int("devices", 1024),
        schema=2,
    ),
    Setting(
        "stack",
        CURRENT_STACK,
        "Measure under this software stack (an environment built with uv), side by side "
        "with the others given; repeatable. current: this environment.",
        "",
        "",
        parser=stack_text,
        identity=False,
        scope="worker",
        multiple=True,
    ),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
DEFAULTS: dict[str, object] = {s.name: s.default for s in SETTINGS}
TEXTS: dict[str, str] = {s.name: s.text for s in SETTINGS}  # the defaults as a command line or notebook writes them
# How the step runs: RunSettings' fields, with the engine's defaults.
STEP_FIELDS: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.scope == "step")
ENGINE_DEFAULTS: dict[str, object] = {
    s.name: s.default if s.engine_default is None else s.engine_default for s in SETTINGS if s.scope == "step"
}
# The input mode of the original study's rows: it fed its chips from the host (tf.data into the
# GPU, the TPU's infeed), so they are never stored as device-resident (paradnn.store.bounds).
ORIGINAL_INPUT = "host"
# What every column of a run setting held before the setting existed (older store rows).
# Frameworks beside TensorFlow (which every stack has): each one's version is stored in its own
# column (``sw_jax``, ``sw_torch``) on its own rows only, so installing one changes no other row's identity.
FRAMEWORK_VERSION_COLUMNS: dict[str, str] = {"jax": "sw_jax", "torch": "sw_torch"}
# Each framework as reports name it.
FRAMEWORK_TITLES: dict[str, str] = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}
LEGACY: dict[str, object] = {s.column: s.default for s in SETTINGS if s.identity and s.schema > 1}


def setting(name: str) -> Setting:
    """The declaration of ``name``; ConfigError naming the run settings for anything else."""
    if name not in BY_NAME:
        raise ConfigError("run setting", name, ", ".join(BY_NAME))
    return BY_NAME[name]


def parse(values: Mapping[str, object], defaults: bool = True) -> dict[str, object]:
    """Every setting of ``values`` through its parser (an unknown name is a ConfigError), with
    the defaults filled in for the rest of the stored settings when ``defaults`` (a software
    stack is given only when asked for: several are measured side by side)."""
    parsed = {s.name: s.default for s in SETTINGS if s.column} if defaults else {}
    for name, value in values.items():
        parsed[name] = setting(name).parse(value)
    return parsed


def columns(values: Mapping[str, object]) -> dict[str, object]:
    """Parsed settings keyed by their store columns (``input`` -> ``input_mode``)."""
    return {BY_NAME[name].column: value for name, value in values.items()}


def identity_columns(schema: int | None = None) -> tuple[str, ...]:
    """The store columns of the settings in a run's identity (of one schema, or all)."""
    return tuple(s.column for s in SETTINGS if s.identity and (schema is None or s.schema == schema))


def stored() -> tuple[Setting, ...]:
    """The settings with a store column of their own (a software stack is stored as its versions, sw_*)."""
    return tuple(s for s in SETTINGS if s.column)


def describe(values: Mapping[str, object]) -> str:
    """Settings in words, for summaries: ``float32, XLA auto, framework jax, input host, devices 2`` (a
    framework, input or device count at its default is left out)."""
    xla = values.get("xla")
    words = [str(values.get("dtype", DEFAULTS["dtype"])), "XLA " + ("auto" if xla is None else "on" if xla else "off")]
    for name in ("framework", "input", "devices", "stack"):
        if name in values and values[name] != DEFAULTS[name]:
            words.append(f"{name} {values[name]}")
    return ", ".join(words)
