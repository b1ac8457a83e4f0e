"""Hyperparameter grids: the presets (``presets.yaml``) and per-axis overrides.

Presets are data: a mapping preset -> family -> axis -> list of values. A grid is the
Cartesian product of its axes; users override any axis with a list of their own.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources

import yaml

from paradnn import families
from paradnn.config import ConfigError
from paradnn.families import Config

Grid = dict[str, list]


@cache
def _presets() -> dict[str, dict[str, Grid]]:
    text = resources.files("paradnn").joinpath("presets.yaml").read_text()
    return yaml.safe_load(text)


def preset_names() -> tuple[str, ...]:
    """The preset names, in file order (``paper``, ``quick``, ``smoke``)."""
    return tuple(_presets())


def grid(family: str, preset: str = "smoke", overrides: Mapping[str, Iterable] | None = None) -> Grid:
    """The axes of ``preset`` for ``family``, with ``overrides`` replacing whole axes."""
    fam = families.get(family)
    if preset not in _presets():
        raise ConfigError("preset", preset, ", ".join(preset_names()))
    declared = (_presets()[preset] or {}).get(family)
    if declared is None:
        raise ConfigError("preset", preset, f"a preset with a grid for {family} (add one to paradnn/presets.yaml)")
    result = {a.name: list(declared[a.name]) for a in fam.axes if a.name in declared}
    missing = [a.name for a in fam.axes if a.name not in declared and a.name not in (overrides or {})]
    if missing:
        raise ConfigError("preset", preset, f"a grid for {family} with every axis; missing {', '.join(missing)}")
    for name, values in (overrides or {}).items():
        fam.axis(name)  # an unknown axis is a ConfigError naming the family's axes
        values = list(values)
        if not values:
            raise ConfigError(name, values, "at least one value")
        result[name] = values
    return result


def expand(family: str, preset: str = "smoke", overrides: Mapping[str, Iterable] | None = None) -> list[Config]:
    """Every configuration of the grid, validated, in grid order."""
    axes = grid(family, preset, overrides)
    make = families.get(family).make
    return [make(**dict(zip(axes, combo))) for combo in itertools.product(*axes.values())]


def parse_override(family: str, text: str) -> tuple[str, list]:
    """Parse one ``AXIS=V1,V2,...`` override, each value checked against the axis now."""
    fam = families.get(family)
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not values.strip():
        raise ConfigError("--set", text, "AXIS=V1,V2,... with AXIS one of " + ", ".join(fam.config.axes()))
    axis = fam.axis(name)
    items = [v.strip() for v in values.split(",") if v.strip()]
    return name, [axis.parse(v) for v in items]
