"""Model configurations: frozen, validated value objects with ParaDnn labels.

A configuration says *what* to build (family, hyperparameters, batch size); how to run
it (dtype policy, XLA, device) lives in :class:`paradnn.harness.RunSettings`. Every
configuration has a label in the original ParaDnn format, and ``parse_label`` turns a
label back into the same configuration, so labels can travel through the CLI, the store
and notebooks.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import ClassVar

FAMILIES = ("fc", "cnn", "rnn")
CNN_BLOCKS = ("residual", "bottleneck")
RNN_CELLS = ("rnn", "lstm", "gru")
# Keras dtype policies a run may use (a run setting, not part of the configuration).
POLICIES = ("float32", "bfloat16", "mixed_bfloat16", "mixed_float16")


class ConfigError(ValueError):
    """Bad user input: names the field, the value and what is allowed."""

    def __init__(self, field: str, value: object, allowed: str) -> None:
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}: {value!r} is not valid; allowed: {allowed}")


def _check_positive(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(field, value, "a positive integer")


def _check_choice(field: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(field, value, ", ".join(choices))


@dataclass(frozen=True)
class _Base:
    """Shared behaviour: validation of integer fields, label building, dict view."""

    family: ClassVar[str]
    # (field name, label key) for the integer fields, in label order.
    _label_keys: ClassVar[tuple[tuple[str, str], ...]]

    def __post_init__(self) -> None:
        for name, _ in self._label_keys:
            _check_positive(name, getattr(self, name))

    @property
    def label(self) -> str:
        parts = [f"{key}_{getattr(self, name)}" for name, key in self._label_keys]
        parts += self._label_suffix()
        return "-".join(parts)

    def _label_suffix(self) -> list[str]:
        return []

    def hyperparameters(self) -> dict[str, object]:
        """All fields as a plain dict (batch included), for stores and tables."""
        return asdict(self)

    @classmethod
    def axes(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class FCConfig(_Base):
    """Input of width ``input`` -> ``layers`` x dense(``nodes``, ReLU) -> dense(``output``)."""

    layers: int
    nodes: int
    input: int
    output: int
    batch: int

    family: ClassVar[str] = "fc"
    _label_keys: ClassVar = (
        ("layers", "layer"),
        ("nodes", "node"),
        ("input", "input"),
        ("output", "output"),
        ("batch", "bs"),
    )


# Strides of the CNN's four groups (filters F, 2F, 4F, 8F).
CNN_GROUP_STRIDES = (1, 2, 2, 2)


@dataclass(frozen=True)
class CNNConfig(_Base):
    """ResNet-v1 style network: 4 groups of ``blocks`` blocks, base width ``filters``."""

    blocks: int
    filters: int
    image: int
    output: int
    batch: int
    block: str = "residual"

    family: ClassVar[str] = "cnn"
    _label_keys: ClassVar = (
        ("blocks", "block"),
        ("filters", "filter"),
        ("image", "image"),
        ("output", "output"),
        ("batch", "bs"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_choice("block", self.block, CNN_BLOCKS)

    def _label_suffix(self) -> list[str]:
        return [self.block]


@dataclass(frozen=True)
class RNNConfig(_Base):
    """Embedding -> ``layers`` stacked ``cell`` layers -> dense(``vocab``) per step."""

    layers: int
    maxlength: int
    vocab: int
    embedding: int
    batch: int
    cell: str = "lstm"

    family: ClassVar[str] = "rnn"
    _label_keys: ClassVar = (
        ("layers", "layer"),
        ("maxlength", "maxlength"),
        ("vocab", "vocab"),
        ("embedding", "embedding"),
        ("batch", "bs"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_choice("cell", self.cell, RNN_CELLS)

    def _label_suffix(self) -> list[str]:
        return [self.cell]


Config = FCConfig | CNNConfig | RNNConfig
CONFIG_CLASSES: dict[str, type[_Base]] = {"fc": FCConfig, "cnn": CNNConfig, "rnn": RNNConfig}
_SUFFIX_FIELD = {"cnn": ("block", CNN_BLOCKS), "rnn": ("cell", RNN_CELLS)}


def config_class(family: str) -> type[_Base]:
    """The configuration class of ``family`` (``fc``, ``cnn`` or ``rnn``)."""
    _check_choice("family", family, FAMILIES)
    return CONFIG_CLASSES[family]


def label_format(family: str) -> str:
    """The label pattern of ``family``, for error messages and help texts."""
    cls = config_class(family)
    text = "-".join(f"{key}_<{name}>" for name, key in cls._label_keys)
    if family in _SUFFIX_FIELD:
        name, choices = _SUFFIX_FIELD[family]
        text += "-<" + "|".join(choices) + ">"
    return text


def parse_label(family: str, label: str) -> Config:
    """Turn a ParaDnn label into its configuration; the inverse of ``Config.label``."""
    cls = config_class(family)
    parts = label.strip().split("-")
    keys = cls._label_keys
    suffix = _SUFFIX_FIELD.get(family)
    expected = len(keys) + (1 if suffix else 0)
    if len(parts) != expected:
        raise ConfigError("label", label, label_format(family))
    values: dict[str, object] = {}
    for part, (name, key) in zip(parts, keys):
        match = re.fullmatch(rf"{key}_(\d+)", part)
        if not match:
            raise ConfigError("label", label, label_format(family))
        values[name] = int(match.group(1))
    if suffix:
        values[suffix[0]] = parts[-1]
    return cls(**values)  # type: ignore[arg-type]


def make_config(family: str, **values: object) -> Config:
    """Build a configuration from keyword values, validating every field."""
    cls = config_class(family)
    unknown = set(values) - set(cls.axes())
    if unknown:
        raise ConfigError("axis", sorted(unknown)[0], ", ".join(cls.axes()))
    try:
        return cls(**values)  # type: ignore[arg-type]
    except TypeError:
        missing = [a for a in cls.axes() if a not in values]
        raise ConfigError("axis", missing, f"all of {', '.join(cls.axes())}") from None
