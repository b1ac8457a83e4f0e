"""The vocabulary of what to run: input errors and dtype policies.

Configurations themselves (what to build) are declared per family in
:mod:`paradnn.families`; run settings (how to run one) live in
:class:`paradnn.engine.protocol.RunSettings`. This module holds what both share: the one error
type for bad input, and the one table that maps a Keras dtype policy to its arithmetic.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

# The largest integer an axis may take: shapes beyond it do not fit TensorFlow's int32
# dimensions (and would overflow nothing, but no machine could run them).
MAX_INT = 2**31 - 1


class ConfigError(ValueError):
    """Bad user input: names the field, the value (at most a few hundred characters of it, on
    one line) and what is allowed."""

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}: {shown(value)} is not valid; allowed: {allowed}")


def shown(value: object, limit: int = 200) -> str:
    """A value as an error line shows it: its repr (one line: newlines escaped), cut to ``limit``
    characters with its full length said."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text):,} characters)"


def read_bounded(path: str | Path, field: str, limit: int) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes; ConfigError (naming ``field``
    and the file) for anything else: a missing or unreadable file, a FIFO or device (which
    would block or never end), a larger file, a binary one."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(field, str(path), "a regular file (not a folder, FIFO or device)")
        if info.st_size > limit:
            raise ConfigError(field, str(path), f"a file of at most {limit:,} bytes (this one has {info.st_size:,})")
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise ConfigError(field, str(path), f"a readable file ({exc.strerror})") from None
    if len(data) > limit:
        raise ConfigError(field, str(path), f"a file of at most {limit:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(field, str(path), "a UTF-8 text file (this one is binary)") from None


def gigabytes(n: float) -> str:
    """Bytes as an error line shows them: three significant digits, so a tiny budget is not "0.0 GB"."""
    return f"{n / 1e9:.3g} GB"


YAML_DEPTH = 16  # the deepest nesting paradnn reads: a mapping of families of axes of values is 3
YAML_NUMBER_DIGITS = 40  # no number paradnn takes is longer (and int() of a huge text is slow)


def load_yaml(text: str, field: str, where: object) -> object:
    """YAML (safe types) without aliases, nested at most :data:`YAML_DEPTH` deep, numbers of at most
    :data:`YAML_NUMBER_DIGITS` characters: an alias (``*name``) can expand a few lines into
    gigabytes, thousands of nested brackets exhaust the parser's recursion, and nothing paradnn
    reads needs either. ConfigError for those; yaml.YAMLError for text that is not YAML."""
    import re

    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise ConfigError(field, where, "YAML without aliases (*name): write each value out")
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > YAML_DEPTH:
                raise ConfigError(field, where, f"YAML nested at most {YAML_DEPTH} deep")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
        elif (
            isinstance(event, yaml.ScalarEvent)
            and event.style is None
            and len(event.value) > YAML_NUMBER_DIGITS
            and re.fullmatch(r"[-+]?[0-9_.,:eExXoObBa-fA-F]+", event.value)
        ):
            raise ConfigError(field, where, f"numbers of at most {YAML_NUMBER_DIGITS} characters")
    return yaml.safe_load(text)


def check_positive(field: str, value: object, most: int = MAX_INT) -> None:
    """A positive integer up to ``most`` (at most 2^31 - 1), else ConfigError."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= min(most, MAX_INT):
        raise ConfigError(field, value, f"a positive integer up to {min(most, MAX_INT):,}")


def check_number(field: str, value: object, *, positive: bool = True, most: float = math.inf, integer: bool = False) -> float:
    """A finite number (never a bool, NaN or infinity), above 0 when ``positive`` (else at
    least 0), at most ``most``, whole when ``integer``; returns it, else ConfigError."""
    kind = "whole number" if integer else "number"
    allowed = f"a finite {kind} {'above 0' if positive else 'from 0'}" + (f" up to {most:g}" if math.isfinite(most) else "")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or (integer and not float(value).is_integer()):  # type: ignore[arg-type]
        raise ConfigError(field, value, allowed)
    if not (value > 0 if positive else value >= 0) or value > most:  # type: ignore[operator]
        raise ConfigError(field, value, allowed)
    return value  # type: ignore[return-value]


def check_choice(field: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(field, value, ", ".join(choices))


@dataclass(frozen=True)
class Policy:
    """A Keras dtype policy: its arithmetic dtype and bytes per activation / weight element."""

    name: str
    compute_dtype: str
    compute_bytes: int
    param_bytes: int


# The one table of dtype policies a run may use (a run setting, not part of the configuration).
POLICY_TABLE: dict[str, Policy] = {
    p.name: p
    for p in (
        Policy("float32", "float32", 4, 4),
        Policy("bfloat16", "bfloat16", 2, 2),
        Policy("mixed_bfloat16", "bfloat16", 2, 4),
        Policy("mixed_float16", "float16", 2, 4),  # with loss scaling; meant for GPUs
    )
}
POLICIES = tuple(POLICY_TABLE)


def policy(name: str) -> Policy:
    """The :class:`Policy` called ``name``, or ConfigError naming the allowed ones."""
    check_choice("dtype", name, POLICIES)
    return POLICY_TABLE[name]


def compute_dtype(name: str) -> str:
    """The arithmetic dtype of a Keras dtype policy (``mixed_bfloat16`` -> ``bfloat16``)."""
    return policy(name).compute_dtype


# The environment variables paradnn reads, each named once.
CACHE_ENV = "PARADNN_CACHE_DIR"  # where ceilings and layer counts are cached
PROGRESS_ENV = "PARADNN_PROGRESS_FILE"  # set by `paradnn report`: where a notebook's sweeps write their progress


def cache_dir() -> Path:
    """Where measured ceilings and walked layer counts are cached (``PARADNN_CACHE_DIR``, default ``~/.cache/paradnn``)."""
    return Path(os.environ.get(CACHE_ENV, Path.home() / ".cache" / "paradnn"))
