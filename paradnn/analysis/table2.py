"""Table 2 of the paper: the ParaDnn grids as printed, as the ``paper`` preset runs them, and
as a report ran them, with every departure of the preset from the print marked and explained.

The printed ranges are those of the published table (Wang, Wei, Brooks 2019); the reference
scripts differ from it in places (RNN vocabularies 1, 5, 9; CNN images 100, 200, 300), and
README's "Where paradnn departs" section says which reading the ``paper`` preset follows.
"""

from __future__ import annotations

import pandas as pd

from paradnn import space

# family -> axis -> (first, last, step) as printed; step "x2" doubles, "+50" adds, None: the
# table gives the range only. Categorical axes are tuples of their printed choices.
PRINTED: dict[str, dict[str, tuple]] = {
    "fc": {
        "layers": (4, 128, "x2"),
        "nodes": (32, 8192, "x2"),
        "input": (2000, 8000, "+2000"),
        "output": (200, 1000, "+200"),
        "batch": (64, 16384, "x2"),
    },
    "cnn": {
        "blocks": (1, 8, "+1"),
        "filters": (16, 64, "x2"),
        "image": (200, 300, "+50"),
        "output": (500, 1500, "+500"),
        "batch": (64, 1024, "x2"),
        "block": ("residual", "bottleneck"),
    },
    "rnn": {
        "layers": (1, 13, "+4"),
        "maxlength": (10, 90, "+40"),
        "vocab": (2, 1024, None),
        "embedding": (100, 900, "+400"),
        "batch": (16, 1024, "x4"),
        "cell": ("rnn", "lstm", "gru"),
    },
}

# Why the paper preset departs from the print, per (family, axis); a departure without a reason is a defect.
REASONS: dict[tuple[str, str], str] = {
    ("rnn", "vocab"): "the reference scripts pass 1, 5, 9; read as thousands so the output projection matters",
    ("rnn", "batch"): "the reference scripts' batches, 64-1024 (x2)",
}


def printed_values(spec: tuple) -> list | None:
    """The values a printed range stands for; None where the table gives no step."""
    if not isinstance(spec[0], int):
        return list(spec)
    first, last, step = spec
    if step is None:
        return None
    values, value, amount = [], first, int(step[1:])
    while value <= last:
        values.append(value)
        value = value * amount if step[0] == "x" else value + amount
    return values


def printed_text(spec: tuple) -> str:
    """A printed range as the table writes it: ``4-128 (x2)``, ``2-1024``, ``rnn, lstm, gru``."""
    if not isinstance(spec[0], int):
        return ", ".join(spec)
    first, last, step = spec
    return f"{first}-{last}" + (f" ({step})" if step else "")


def _values_text(values: list) -> str:
    return ", ".join(str(v) for v in values)


def departure(family: str, axis: str, preset_values: list) -> str:
    """Empty where the paper preset runs the axis as printed, else the reason it does not."""
    spec = PRINTED[family][axis]
    expected = printed_values(spec)
    same = preset_values == expected if expected is not None else (min(preset_values), max(preset_values)) == (spec[0], spec[1])
    return "" if same else REASONS.get((family, axis), "differs from the print (no reason recorded)")


def table2(families: list[str], preset: str, overrides: dict | None = None) -> pd.DataFrame:
    """One row per axis of each of ``families`` that Table 2 prints: the printed range, the paper
    preset's values, the values this run used (``preset`` with ``overrides``) and the departure."""
    rows = []
    for family in (f for f in families if f in PRINTED):
        paper = space.grid(family, "paper")
        ran = space.grid(family, preset, (overrides or {}).get(family))
        for axis, spec in PRINTED[family].items():
            rows.append(
                {
                    "family": family,
                    "axis": axis,
                    "Table 2 (printed)": printed_text(spec),
                    "paper preset": _values_text(paper[axis]),
                    f"this run ({preset})": _values_text(ran[axis]),
                    "departure from the print": departure(family, axis, paper[axis]),
                }
            )
    return pd.DataFrame(rows)
