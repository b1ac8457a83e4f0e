"""The registry of model families: one module per family, found by looking.

Every module in this package that defines ``FAMILY`` (a :class:`Family`) is a family;
:func:`register` adds one from elsewhere. Everything else in paradnn asks this registry
(:func:`get`, :func:`family_of`, :func:`of_role`, :func:`parse_label`,
:func:`hyperparameter_columns`), so no other module keeps a per-family table, and an
unknown family or configuration type is one clear :class:`~paradnn.config.ConfigError`
wherever it turns up. :func:`application` declares a ``keras.applications`` model as a
workload family. The conformance suite every family passes is :func:`paradnn.checks.check_family`
(above the engine and the store, which it exercises; the registry never imports it).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from paradnn.config import ConfigError
from paradnn.families._common import application
from paradnn.families.base import PRESETS, ROLES, Axis, Config, Family, Layer, axis, choice

__all__ = [
    "PRESETS",
    "ROLES",
    "Axis",
    "Config",
    "Family",
    "Layer",
    "application",
    "axis",
    "choice",
    "all_families",
    "family_of",
    "get",
    "hyperparameter_columns",
    "label_format",
    "make_config",
    "names",
    "of_role",
    "parse_label",
    "register",
]

_EXTRA: dict[str, Family] = {}


@cache
def _discovered() -> dict[str, Family]:
    found = {}
    for module in pkgutil.iter_modules(__path__):
        if module.name == "base" or module.name.startswith("_"):  # declarations and helpers
            continue
        family = getattr(importlib.import_module(f"{__name__}.{module.name}"), "FAMILY", None)
        if isinstance(family, Family):
            found[family.name] = family
    return found


def _registry() -> dict[str, Family]:
    merged = {**_discovered(), **_EXTRA}
    return dict(sorted(merged.items(), key=lambda item: (item[1].order, item[0])))


def register(family: Family) -> Family:
    """Add a family defined outside this package (a notebook's or a plug-in's)."""
    if family.name in _discovered():
        raise ValueError(f"family {family.name!r} is already defined by paradnn")
    _check_columns({**_registry(), family.name: family})
    _EXTRA[family.name] = family
    return family


def all_families() -> tuple[Family, ...]:
    """Every family, the paper's first."""
    return tuple(_registry().values())


def names() -> tuple[str, ...]:
    return tuple(_registry())


def of_role(role: str) -> tuple[str, ...]:
    """The names of every registered family of ``role`` (``model`` or ``workload``), in listing order."""
    if role not in ROLES:
        raise ConfigError("role", role, ", ".join(ROLES))
    return tuple(name for name, family in _registry().items() if family.role == role)


def get(name: str) -> Family:
    """The family called ``name``, or ConfigError listing the known ones."""
    registry = _registry()
    if not isinstance(name, str) or name not in registry:
        raise ConfigError("family", name, ", ".join(registry))
    return registry[name]


def family_of(config: object) -> Family:
    """The family of a configuration object; ConfigError for anything else."""
    family = _registry().get(getattr(config, "family", None))  # type: ignore[arg-type]
    if family is None or not isinstance(config, family.config):
        raise ConfigError("configuration", type(config).__name__, "a configuration of " + ", ".join(names()))
    return family


def parse_label(family: str, label: str) -> Config:
    """Turn a ParaDnn label into its configuration; the inverse of ``Config.label``."""
    return get(family).parse_label(label)


def make_config(family: str, **values: object) -> Config:
    """A configuration of ``family`` from keyword values, every field validated."""
    return get(family).make(**values)


def label_format(family: str) -> str:
    """The label pattern of ``family``, for error messages and help texts."""
    return get(family).label_format


def hyperparameter_columns() -> dict[str, Axis]:
    """Every axis of every family by name: the store's hyperparameter columns."""
    return _check_columns(_registry())


def _check_columns(registry: dict[str, Family]) -> dict[str, Axis]:
    columns: dict[str, Axis] = {}
    for family in registry.values():
        for a in family.axes:
            known = columns.setdefault(a.name, a)
            if known.kind is not a.kind:
                raise TypeError(
                    f"axis {a.name!r} of {family.name} is {a.kind.__name__}; another family has it as {known.kind.__name__}"
                )
    return columns
