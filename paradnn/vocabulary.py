"""The values that travel between the layers, each named once: a result's state, a row's source
and a verdict's outcome.

The store writes them, the sweeps and the analysis filter on them and the reports count them;
every layer imports them from here (this module imports nothing of paradnn), and
``tests/test_vocabulary.py`` finds a literal state, source or outcome compared anywhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    import pandas as pd

# A result row's state: measured (ok), or why not.
State = Literal["ok", "oom", "error", "timeout", "skipped"]
STATES: tuple[State, ...] = get_args(State)
OK, OOM, ERROR, TIMEOUT, SKIPPED = STATES

# Where a row (or a platform record) comes from: measured by paradnn, or imported from the original
# study (a result row's source is ``legacy:FILE``, a platform record's ``legacy``).
MEASURED = "measured"
LEGACY = "legacy"


def legacy_source(file: str) -> str:
    """A result row's source when it was imported from the original study's ``file``."""
    return f"{LEGACY}:{file}"


def is_imported(rows: pd.DataFrame) -> pd.Series:
    """Which of ``rows`` were imported from the original study (their source is ``legacy:FILE``):
    the one test of it, for every layer (a table without sources was measured here)."""
    if "source" not in rows:
        import pandas as pd

        return pd.Series(False, index=rows.index)
    return rows["source"].fillna("").astype(str).str.startswith(LEGACY)


def is_finished(rows: pd.DataFrame) -> pd.Series:
    """Which of ``rows`` finished (state ``ok``): the one definition of "ok" every selection uses."""
    return rows["state"] == OK


# A verdict's outcome on one of the paper's observations.
HOLDS, FAILS, INCONCLUSIVE = "holds", "does not hold", "inconclusive"
# Verdicts on what the study measured and no platform here can: drawn by projection.
PROJECTED_HOLDS, PROJECTED_FAILS = "holds (projected)", "does not hold (projected)"
Outcome = Literal["holds", "does not hold", "inconclusive", "holds (projected)", "does not hold (projected)"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
DECIDED = (HOLDS, FAILS)


def plain_outcome(outcome: str) -> str:
    """An outcome without its ``(projected)`` mark: a projected verdict counts as the outcome it projects."""
    return {PROJECTED_HOLDS: HOLDS, PROJECTED_FAILS: FAILS}.get(outcome, outcome)
