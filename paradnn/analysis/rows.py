"""What makes two rows of a store comparable: the run identity column by column.

The low level of the results object (:mod:`paradnn.analysis.results`): which columns a
comparison holds fixed, what varies with an axis, how software versions order. The
pairing itself is :func:`paradnn.analysis.speedup.compare`.
"""

from __future__ import annotations

import pandas as pd

from paradnn import settings
from paradnn.identity import SOFTWARE

# The software columns of a run's identity (the git revision is kept but never compared).
SOFTWARE_COLUMNS = tuple(f"sw_{s}" for s in SOFTWARE if s != "git") + ("sw_jax",)
# A run's identity, column by column: what it is, how it ran, where, under which software.
IDENTITY = ("family", "family_version", "label", *settings.identity_columns(), "platform_fingerprint",
            *SOFTWARE_COLUMNS)  # fmt: skip
# What varies with an axis because it cannot be held while the axis varies.
COVARY: dict[str, tuple[str, ...]] = {
    "platform": ("platform_fingerprint", *SOFTWARE_COLUMNS),  # another machine has its own stack
    "sw_tensorflow": ("platform_fingerprint", *SOFTWARE_COLUMNS),  # a stack brings its own Keras, NumPy, ...
    "framework": ("sw_jax",),  # JAX's version is recorded on JAX rows only
}
# Run settings that belong to the side being compared, by axis, and why: a comparison of that
# axis frees them unless told to hold them. A freed setting is still held wherever both sides
# have a value in common (like with like first); only where they share none does each side
# keep its own (the original study's TPU in bfloat16 against its V100 in float16).
SIDE_OWNED: dict[str, dict[str, str]] = {
    "platform": {"dtype": "each platform at its own precision, as the paper ran the TPU in bfloat16 and the V100 in "
                          "float16",
                 "xla": "each platform at its own XLA setting (its automatic choice where it made one)"},
    "sw_tensorflow": {"xla": "each software stack at its automatically chosen XLA setting"},
    "framework": {"xla": "each framework with its own compiler (JAX always compiles with XLA)"},
}  # fmt: skip
ANY = "any"  # for_settings: keep every value of this setting
MISSING = "<none>"  # stands for a missing value while pairing (NaN never equals NaN)


def comparison_key(df: pd.DataFrame, vary: str, free: tuple[str, ...] = ()) -> list[str]:
    """The identity columns of ``df`` a comparison of ``vary`` holds fixed (``free`` ones let go)."""
    loose = {vary, *COVARY.get(vary, ()), *free}
    return [c for c in IDENTITY if c in df.columns and c not in loose]


def held_fixed(rows: pd.DataFrame, key: list[str]) -> dict[str, object]:
    """What a comparison held: each run-setting column of ``key`` with its one value among
    ``rows``, or ``"matched per pair"`` when pairs differ in it (each pair still agrees)."""
    held: dict[str, object] = {}
    for column in key:
        if column in ("family", "label", "family_version", "platform_fingerprint") or column.startswith("sw_"):
            continue
        values = rows[column].dropna().unique() if column in rows else []
        held[column] = _plain(values[0]) if len(values) == 1 else ("matched per pair" if len(values) else None)
    return held


def _plain(value: object) -> object:
    """numpy scalars as Python values (for JSON); the store's 0/1 XLA column as a bool."""
    return value.item() if hasattr(value, "item") else value


def newest_rows(df):
    """The rows of ``df`` measured under the newest TensorFlow version of their platform, plus imported
    ones (no version recorded).

    Rows of other stacks in the same store serve version comparisons only; every other
    analysis reads one version per platform, so an older version's rows never mix into it.
    """
    if "sw_tensorflow" not in df or df["sw_tensorflow"].isna().all():
        return df
    measured = df.dropna(subset=["sw_tensorflow"])
    newest = measured.groupby("platform")["sw_tensorflow"].agg(lambda v: max(v.unique(), key=version_key))
    keep = df["sw_tensorflow"].isna() | (df["sw_tensorflow"] == df["platform"].map(newest))
    return df[keep]


def version_key(version: str) -> tuple:
    """Sorts versions numerically (2.9 before 2.16; a part that is not a number sorts first)."""
    return tuple(int(p) if p.isdigit() else -1 for p in str(version).split(".")[:3])


def side_by_side(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """Rows measured side by side with rows of another value of ``column``: those of a sweep
    (``extra["sweep"]``) that measured more than one value of it, with the sweep as a ``sweep``
    column for comparisons to hold (``compare(..., within=("sweep",))``). Rows no sweep stamped
    (imported, measured before sweeps stamped their rows, or reused from another report's sweep)
    are never a side. A table without ``extra`` (built by hand) is taken as one sweep."""
    if "extra" not in df:
        return df.assign(sweep=MISSING)
    sweep = df["extra"].map(lambda e: e.get("sweep") if isinstance(e, dict) else None)
    stamped = df.assign(sweep=sweep)[sweep.notna()]
    several = stamped.groupby("sweep")[column].nunique()
    return stamped[stamped["sweep"].isin(several[several > 1].index)]
