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

from paradnn.config import Config, ConfigError, config_class, make_config

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
    axes = config_class(family).axes()
    if preset not in _presets():
        raise ConfigError("preset", preset, ", ".join(preset_names()))
    result = {axis: list(values) for axis, values in _presets()[preset][family].items()}
    for axis, values in (overrides or {}).items():
        if axis not in axes:
            raise ConfigError("axis", axis, f"one of {', '.join(axes)} for {family}")
        values = list(values)
        if not values:
            raise ConfigError(axis, values, "at least one value")
        result[axis] = values
    return result


def expand(family: str, preset: str = "smoke", overrides: Mapping[str, Iterable] | None = None) -> list[Config]:
    """Every configuration of the grid, validated, in grid order."""
    axes = grid(family, preset, overrides)
    names = list(axes)
    return [make_config(family, **dict(zip(names, combo))) for combo in itertools.product(*axes.values())]


def parse_override(family: str, text: str) -> tuple[str, list]:
    """Parse one ``AXIS=V1,V2,...`` override; integers where the axis is numeric."""
    axes = config_class(family).axes()
    axis, sep, values = text.partition("=")
    axis = axis.strip()
    if not sep or not values.strip():
        raise ConfigError("--set", text, "AXIS=V1,V2,... with AXIS one of " + ", ".join(axes))
    if axis not in axes:
        raise ConfigError("axis", axis, f"one of {', '.join(axes)} for {family}")
    items = [v.strip() for v in values.split(",") if v.strip()]
    if axis in ("block", "cell"):
        parsed: list = items
    else:
        try:
            parsed = [int(v) for v in items]
        except ValueError:
            raise ConfigError(axis, values, "comma-separated positive integers") from None
    # Validate each value now, so a typo fails before any work starts.
    base = {a: v[0] for a, v in grid(family, "smoke").items()}
    for value in parsed:
        make_config(family, **{**base, axis: value})
    return axis, parsed
