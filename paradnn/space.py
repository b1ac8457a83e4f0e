"""Hyperparameter grids: the presets every family declares, and per-axis overrides.

Presets are data on each family's declaration (``Family.grids``: preset -> axis -> list
of values). A grid is the Cartesian product of its axes; users override any axis with a
list of their own.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping

from paradnn import families
from paradnn.config import ConfigError
from paradnn.families import Config
from paradnn.families.base import PRESETS, Grid

# The most configurations one grid may hold: the paper's largest grid (FC) has 9,720.
MAX_GRID = 100_000


def grid(family: str, preset: str = "smoke", overrides: Mapping[str, Iterable] | None = None) -> Grid:
    """The axes of ``preset`` for ``family``, with ``overrides`` replacing whole axes."""
    fam = families.get(family)
    if preset not in PRESETS:
        raise ConfigError("preset", preset, ", ".join(PRESETS))
    result = {a.name: list(fam.grids[preset][a.name]) for a in fam.axes}
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError("overrides", overrides, "a mapping of axis -> list of values, e.g. {'batch': [64, 128]}")
    for name, values in (overrides or {}).items():
        fam.axis(name)  # an unknown axis is a ConfigError naming the family's axes
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):  # "abc" is no list of values
            raise ConfigError(name, values, f"a list of values of the {name} axis, e.g. [{fam.grids['smoke'][name][0]!r}]")
        values = list(itertools.islice(values, MAX_GRID + 1))
        if not values:
            raise ConfigError(name, values, "at least one value")
        result[name] = values
    size = math.prod(len(v) for v in result.values())
    if size > MAX_GRID:
        raise ConfigError("grid", f"{size:,} configurations", f"at most {MAX_GRID:,} in one grid (split it)")
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
