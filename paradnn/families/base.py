"""What a model family declares: configuration, axes, builder, data, counter, grids and role.

A family module (``fc.py``, ``cnn.py``, ...) holds a frozen configuration dataclass whose
fields are its *axes*, declared with :func:`axis` or :func:`choice`, and one
:class:`Family` value with everything else the package needs to know about it, its
grids for every preset (:data:`PRESETS`) and its role (:data:`ROLES`) included. Every
other module reads these declarations generically, so adding a family touches its own
module and the docs, nothing else (docs/adding-a-family.md).

Labels follow the original ParaDnn format: numeric axes as ``key_value`` in field order,
then text axes as bare values, joined by ``-``
(``block_2-filter_32-image_200-output_1000-bs_64-bottleneck``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

from paradnn.config import ConfigError, check_choice, check_positive

# The grid presets every family declares: ``smoke`` (seconds per family; CI), ``quick``
# (minutes on a 2-core CPU) and ``paper`` (the paper's Table 2 grids and workload sizes).
PRESETS = ("smoke", "quick", "paper")
# The largest value a numeric axis takes unless its declaration says otherwise (``axis(...,
# maximum=N)``): every size the analytic counters walk stays small enough to count in
# milliseconds, and every tensor shape within TensorFlow's int32 dimensions. A configuration
# within the bounds may still not fit a machine: its memory estimate decides that.
DEFAULT_MAXIMUM = 2**20
# What a family is in the study: a parameterized ``model`` swept over its axes (FC, CNN,
# RNN) or a real ``workload`` (ResNet-50, Transformer, ...) measured at a few sizes.
ROLES = ("model", "workload")
Grid = dict[str, list]


@dataclass(frozen=True)
class Axis:
    """One hyperparameter of a family: its label key, value type and how to show it."""

    name: str  # the configuration field and the store column
    key: str  # label key (``node`` in ``node_512``); empty for a text axis (a bare suffix)
    title: str  # display name, e.g. "nodes per layer"
    unit: str = ""  # e.g. "examples", "pixels"; empty for plain counts
    kind: type = int  # int, float or str
    choices: tuple[str, ...] = ()  # the allowed values of a text axis
    log2: bool = False  # values are powers of two: drawn on a log2 scale
    maximum: float = DEFAULT_MAXIMUM  # the largest value the axis accepts (numeric axes)

    @property
    def numeric(self) -> bool:
        return self.kind is not str

    @property
    def sql_type(self) -> str:
        return {int: "INTEGER", float: "REAL", str: "TEXT"}[self.kind]

    @property
    def display(self) -> str:
        """Axis label for figures: title, unit and scale, e.g. 'batch size (examples, log2 scale)'."""
        notes = [n for n in (self.unit, "log2 scale" if self.log2 else "") if n]
        return self.title + (f" ({', '.join(notes)})" if notes else "")

    def check(self, value: object) -> None:
        """ConfigError naming this axis unless ``value`` is allowed."""
        if self.kind is str:
            check_choice(self.name, value, self.choices)
        elif self.kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if not ok or not 0 < value <= self.maximum:
                raise ConfigError(self.name, value, self.allowed)
        else:
            check_positive(self.name, value, int(self.maximum))

    def parse(self, text: str) -> object:
        """A value of this axis from text (CLI overrides, labels); ConfigError if malformed."""
        text = text.strip()
        if len(text) > 32:  # no number an axis takes is this long (and int() of a huge text is slow)
            raise ConfigError(self.name, text[:40] + "...", self.allowed)
        if not text.isascii():  # int() reads other scripts' digits ('４' is 4); a label never holds them
            raise ConfigError(self.name, text, self.allowed + " (ASCII digits)")
        try:
            value = self.kind(text) if self.kind is not int else int(text, 10)
        except ValueError:
            raise ConfigError(self.name, text, self.allowed) from None
        self.check(value)
        return value

    @property
    def allowed(self) -> str:
        if self.kind is str:
            return ", ".join(self.choices)
        if self.kind is float:
            return f"a positive number up to {self.maximum:g}"
        return f"a positive integer up to {int(self.maximum):,}"


def axis(key: str, title: str, unit: str = "", kind: type = int, log2: bool = False, maximum: float = DEFAULT_MAXIMUM) -> Any:
    """Declare a numeric axis as a configuration field (no default: every value is given).

    ``maximum`` bounds it (default :data:`DEFAULT_MAXIMUM`): values above it are refused
    wherever a configuration is made (labels, ``--set``, overrides, imported files) before
    anything is counted or built.
    """
    if not (isinstance(maximum, (int, float)) and math.isfinite(maximum) and 0 < maximum):
        raise TypeError(f"axis {key!r}: maximum must be a positive finite number")
    return field(metadata={"axis": dict(key=key, title=title, unit=unit, kind=kind, log2=log2, maximum=maximum)})


def choice(choices: tuple[str, ...], default: str, title: str) -> Any:
    """Declare a text axis (a label suffix such as ``bottleneck`` or ``lstm``)."""
    return field(default=default, metadata={"axis": dict(key="", title=title, kind=str, choices=tuple(choices))})


@dataclass(frozen=True)
class Config:
    """Base of every family's configuration: validated, immutable, with a ParaDnn label."""

    family: ClassVar[str] = ""
    if TYPE_CHECKING:  # every family declares a batch axis (checked when it registers)
        batch: int

    def __post_init__(self) -> None:
        for ax in self.axis_specs():
            ax.check(getattr(self, ax.name))

    @classmethod
    def axis_specs(cls) -> tuple[Axis, ...]:
        return _axis_specs(cls)

    @classmethod
    def axes(cls) -> tuple[str, ...]:
        return tuple(a.name for a in cls.axis_specs())

    @property
    def label(self) -> str:
        specs = self.axis_specs()
        parts = [f"{a.key}_{getattr(self, a.name)}" for a in specs if a.numeric]
        return "-".join(parts + [str(getattr(self, a.name)) for a in specs if not a.numeric])

    def hyperparameters(self) -> dict[str, object]:
        """Every axis value (batch included), for stores and tables."""
        return asdict(self)


@cache
def _axis_specs(cls: type[Config]) -> tuple[Axis, ...]:
    specs = []
    for f in fields(cls):
        meta = f.metadata.get("axis")
        if meta is None:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with axis() or choice()")
        specs.append(Axis(name=f.name, **meta))
    if not any(s.name == "batch" for s in specs):
        raise TypeError(f"{cls.__name__} has no batch axis")
    return tuple(specs)


@dataclass(frozen=True)
class Layer:
    """One layer of a model as the analytic counters see it (sizes per example)."""

    name: str
    params: int  # trainable parameters (weights, biases, normalisation scale and offset)
    macs: int  # multiply-adds of the forward pass: 1 per weight or bias use
    activations: int  # elements the layer writes (the model input counts as a layer)


@dataclass(frozen=True)
class Family:
    """Everything the package knows about one model family (see the module docstring).

    ``build(config, policy)`` returns an uncompiled ``keras.Model`` whose output is logits;
    ``data(config, seed)`` returns ``(inputs, labels)`` built from stateless random ops (so
    their shapes can be traced without allocating them). ``loss(config)`` returns the
    training loss ``fn(labels, outputs) -> scalar`` (outputs cast to float32); the default
    is softmax cross-entropy on integer labels. ``layers(config)`` is the analytic
    counter; a family without one is counted by walking its built Keras model.
    ``version`` changes whenever the model's definition changes, so stored results of
    the old definition are never mistaken for the new one. ``role`` is one of
    :data:`ROLES`; ``grids`` maps every preset of :data:`PRESETS` to a list of values
    for every axis (the grid is their Cartesian product).
    """

    name: str
    title: str  # short display name: "FC", "CNN", "ResNet-50"
    description: str  # one line: what the model is
    config: type[Config]
    version: int
    width: str | None  # the width axis the paper's observations talk about (nodes, filters, ...), if any
    depth: str | None  # the depth axis (layers, blocks), if any
    heatmap: tuple[str, str, str | None]  # axes of heatmap rows, columns and panels (None: one panel)
    build: Callable[[Any, str], Any]
    data: Callable[[Any, int], tuple]
    role: str  # "model" (parameterized) or "workload" (a real model)
    grids: dict[str, Grid] = field(hash=False)  # preset -> axis -> values (a dict: kept out of the hash)
    layers: Callable[[Any], list[Layer]] | None = None
    loss: Callable[[Any], Callable] | None = None
    order: int = 100  # position in listings: the paper's families first
    notes: str = ""  # where the model departs from its reference, and why
    # Frameworks whose training step this family's builder, data and loss run under
    # (see paradnn.engine.frameworks); a builder made of Keras layers alone runs under every backend.
    frameworks: tuple[str, ...] = ("tensorflow",)

    def __post_init__(self) -> None:
        names = self.config.axes()
        if self.config.family != self.name:
            raise TypeError(f"family {self.name!r}: its config class says family {self.config.family!r}")
        if self.version < 1:
            raise TypeError(f"family {self.name!r}: version must be a positive integer")
        if self.role not in ROLES:
            raise TypeError(f"family {self.name!r}: role {self.role!r} is not one of {ROLES}")
        if set(self.grids) != set(PRESETS):
            raise TypeError(f"family {self.name!r}: grids for presets {sorted(self.grids)}; declare exactly {PRESETS}")
        for preset, grid in self.grids.items():
            if set(grid) != set(names) or not all(grid.values()):
                raise TypeError(
                    f"family {self.name!r}: the {preset} grid must give values for exactly the axes {names}; "
                    f"it gives {', '.join(grid) or 'none'}"
                )
        for preset, grid in self.grids.items():  # a family's own grids stay within its declared bounds
            for a in self.axes:
                for value in grid[a.name]:
                    try:
                        a.check(value)
                    except ConfigError as exc:
                        raise TypeError(f"family {self.name!r}: the {preset} grid: {exc}") from None
        heatmap_roles = ("heatmap rows", "heatmap columns", "heatmap panels")
        roles = [("width", self.width), ("depth", self.depth), *zip(heatmap_roles, self.heatmap)]
        for role, name in roles:
            if name is not None and name not in names or name is None and role in ("heatmap rows", "heatmap columns"):
                raise TypeError(f"family {self.name!r}: {role} axis {name!r} is not one of its axes {names}")

    @property
    def axes(self) -> tuple[Axis, ...]:
        return self.config.axis_specs()

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name:
                return a
        raise ConfigError("axis", name, f"one of {', '.join(self.config.axes())} for {self.name}")

    @property
    def numeric_axes(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes if a.numeric)

    @property
    def label_format(self) -> str:
        parts = [f"{a.key}_<{a.name}>" for a in self.axes if a.numeric]
        return "-".join(parts + ["<" + "|".join(a.choices) + ">" for a in self.axes if not a.numeric])

    def parse_label(self, label: str) -> Config:
        """The configuration a label names; the inverse of ``Config.label``."""
        specs = self.axes
        parts = str(label).strip().split("-")
        if len(parts) != len(specs):
            raise ConfigError("label", label, self.label_format)
        numeric = [a for a in specs if a.numeric]
        values: dict[str, object] = {}
        for part, a in zip(parts, numeric):
            match = re.fullmatch(rf"{a.key}_([0-9.]+)", part)
            if not match:
                raise ConfigError("label", label, self.label_format)
            values[a.name] = a.parse(match.group(1))
        for part, a in zip(parts[len(numeric) :], [a for a in specs if not a.numeric]):
            values[a.name] = part
        return self.make(**values)

    def make(self, **values: object) -> Config:
        """A configuration from keyword values, every field validated."""
        names = self.config.axes()
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ConfigError("axis", unknown[0], f"one of {', '.join(names)} for {self.name}")
        required = [f.name for f in fields(self.config) if f.default is MISSING]
        missing = [n for n in required if n not in values]
        if missing:
            raise ConfigError("axis", missing, f"all of {', '.join(names)} for {self.name}")
        return self.config(**values)
