"""The results object: rows of a store that analyses may compare, and only like with like.

``paradnn.load(store)`` returns :class:`Results`. A comparison varies one axis of the run
identity (the platform, a run setting, the software stack) and holds every other part of
it fixed: the configuration (family, family version, label), every declared run setting
(:mod:`paradnn.settings`), the platform's fingerprint and the software stack. Axes that
cannot be held while another varies move with it (a platform brings its fingerprint and
stack; a framework its version), and a comparison may free more on purpose (each platform
at its own best precision, say); every comparison says what it held and what it freed.

Every analysis selects rows through this module (:meth:`Results.for_settings`,
:meth:`Results.matched`, :meth:`Results.reruns`, :meth:`Results.newest_stack`), so one
definition of "the same run" serves them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from paradnn import settings
from paradnn.analysis.rows import ANY, newest_rows
from paradnn.analysis.speedup import compare
from paradnn.identity import run_key


def _column(df: pd.DataFrame, declared: settings.Setting) -> pd.Series:
    """A run setting's column of ``df``; rows (or tables) from before the setting existed hold its default."""
    if declared.column not in df:
        return pd.Series([declared.default] * len(df), index=df.index, dtype=object)
    return df[declared.column].fillna(declared.default) if declared.schema > 1 else df[declared.column]


def one_row_per_attempt(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``df`` less those a later timing window superseded. A sweep with ``--windows``
    stores a row per window pass, each with the configuration's first start (``started_at``) and
    the later ones with ``extra.windows``; of such a group the last row is the attempt's record."""
    if "extra" not in df or "started_at" not in df:
        return df
    windowed = {(key, start) for key, start, extra in zip(df["run_key"], df["started_at"], df["extra"])
                if isinstance(extra, dict) and extra.get("windows")}  # fmt: skip
    if not windowed:
        return df
    grouped = np.array([(k, t) in windowed for k, t in zip(df["run_key"], df["started_at"])], dtype=bool)
    rows = df[grouped].sort_values("id") if "id" in df else df[grouped]
    return pd.concat([df[~grouped], rows.drop_duplicates(["run_key", "started_at"], keep="last")])


@dataclass(frozen=True)
class Results:
    """Rows of a store (``frame``: pandas, one row per measurement or import) with the
    platforms' ``--xla auto`` choices, read so that comparisons pair like with like."""

    frame: pd.DataFrame
    xla_choices: dict[str, dict[str, bool]] = field(default_factory=dict)

    @classmethod
    def load(cls, store: str | Path) -> Results:
        """Every row of ``store`` (read-only) and its platforms' XLA choices."""
        from paradnn.store import Store

        with Store(store, create=False, readonly=True) as s:
            frame = s.results()
            choices = {p: s.xla_choices(p) for p in frame["platform"].unique()}
        return cls(frame, choices)

    def __len__(self) -> int:
        return len(self.frame)

    def _with(self, frame: pd.DataFrame) -> Results:
        return Results(frame, self.xla_choices)

    def where(self, **values: object) -> Results:
        """Rows whose columns equal ``values`` (a list or tuple: any of them; None: no filter)."""
        df = self.frame
        for column, value in values.items():
            if value is None:
                continue
            df = df[df[column].isin(value) if isinstance(value, (list, tuple, set)) else df[column] == value]
        return self._with(df)

    def for_settings(self, **run: object) -> Results:
        """Rows run with these settings (declared names: ``dtype``, ``xla``, ``platform``,
        ``framework``, ``input``, ``devices``; each value parsed by its declaration; ``ANY``
        keeps every value). ``xla="auto"`` keeps, per platform, family and dtype, the setting
        ``--xla auto`` chose there (platforms without a probe keep every row)."""
        df = self.frame
        for name, value in run.items():
            if isinstance(value, str) and value == ANY:
                continue
            declared = settings.setting(name)
            if name == "xla" and (value is None or str(value).lower() == "auto"):
                df = df[self._auto_xla(df)]
                continue
            df = df[_column(df, declared) == declared.parse(value)]
        return self._with(df)

    def _auto_xla(self, df: pd.DataFrame) -> pd.Series:
        chosen = [self.xla_choices.get(p, {}).get(f"{f}|{d}") for p, f, d in zip(df["platform"], df["family"], df["dtype"])]
        return pd.Series([c is None or bool(c) == bool(x) for c, x in zip(chosen, df["xla"])], index=df.index, dtype=bool)

    def newest_stack(self) -> Results:
        """Rows of the newest TensorFlow version measured on each platform, and imported rows."""
        return self._with(newest_rows(self.frame))

    def latest(self, per_stack: bool = False) -> Results:
        """One row per configuration (family version included) and run settings: the latest
        attempt; with ``per_stack``, one per TensorFlow version as well."""
        key = [c for c in ("family", "family_version", "label", *settings.identity_columns()) if c in self.frame]
        key += ["sw_tensorflow"] if per_stack else []
        df = self.frame.sort_values("id") if "id" in self.frame else self.frame
        return self._with(df.drop_duplicates(key, keep="last").reset_index(drop=True))

    def reruns(self, metric: str = "step_time_s") -> pd.DataFrame:
        """Run identities measured more than once (state ``ok``), one row each: ``run_key``,
        family, label, ``n`` and the relative difference of ``metric`` between the fastest
        and slowest of them (``max / min - 1``). Rows that merely share a label but differ in
        anything else of the run identity are never reruns of each other."""
        ok = self.frame[(self.frame["state"] == "ok") & (pd.to_numeric(self.frame[metric], errors="coerce") > 0)]
        ok = ok[~ok["source"].fillna("").str.startswith("legacy")] if "source" in ok else ok
        if "run_key" not in ok:  # a table built by hand: the key its rows would have in a store
            ok = ok.assign(run_key=[run_key(r) for r in ok.to_dict("records")])
        ok = one_row_per_attempt(ok)
        groups = ok.groupby("run_key")
        out = pd.DataFrame({"family": groups["family"].first(), "label": groups["label"].first(), "n": groups.size(),
                            "difference": groups[metric].max() / groups[metric].min() - 1})  # fmt: skip
        return out[out["n"] > 1].reset_index()

    def matched(self, vary: str, baseline: object, target: object, *, free: tuple[str, ...] = (),
                family: str | None = None, metric: str = "examples_per_sec", carry: tuple[str, ...] = ()):  # fmt: skip
        """Pairs of ``baseline`` and ``target`` values of ``vary`` whose run identity is equal in
        everything else (``free`` columns let go on purpose); their speedups, with ``held_fixed``
        and ``n``. ``vary`` is a store column or a declared setting's name (``input``). Platforms
        are compared at their newest TensorFlow version each."""
        column = settings.BY_NAME[vary].column if vary in settings.BY_NAME else vary
        # Across platforms the stack varies with the platform, but one side never mixes stacks: each
        # platform is read at its newest TensorFlow version.
        frame = newest_rows(self.frame) if column == "platform" else self.frame
        return compare(frame, baseline, target, by=column, family=family, metric=metric, carry=carry, free=free)
