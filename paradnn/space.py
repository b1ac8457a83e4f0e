"""Hyperparameter grids: the presets every family declares, and per-axis overrides.

Presets are data on each family's declaration (``Family.grids``: preset -> axis -> list
of values). A grid is the Cartesian product of its axes; users override any axis with a
list of their own.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from paradnn import families
from paradnn.config import ConfigError
from paradnn.families import Config
from paradnn.families.base import PRESETS, Grid


def preset_names() -> tuple[str, ...]:
    """The preset names, smallest first (``smoke``, ``quick``, ``paper``)."""
    return PRESETS


def grid(family: str, preset: str = "smoke", overrides: Mapping[str, Iterable] | None = None) -> Grid:
    """The axes of ``preset`` for ``family``, with ``overrides`` replacing whole axes."""
    fam = families.get(family)
    if preset not in PRESETS:
        raise ConfigError("preset", preset, ", ".join(PRESETS))
    result = {a.name: list(fam.grids[preset][a.name]) for a in fam.axes}
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
