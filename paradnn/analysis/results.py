"""The results object: rows of a store that analyses may compare, and only like with like.

``paradnn.load(store)`` returns :class:`Results`. A comparison varies one axis of the run
identity (the platform, a run setting, the software stack) and holds every other part of
it fixed: the configuration (family, family version, label), every declared run setting
(:mod:`paradnn.settings`), the platform's fingerprint and the software stack. Axes that
cannot be held while another varies move with it (a platform brings its fingerprint and
stack; a framework its version). Settings that belong to the side being compared (each
platform's precision and XLA setting; each stack's and framework's XLA setting) are freed:
held wherever both sides share a value, each side's own where they share none; every
comparison says what it held, what it freed and why, and, where nothing pairs, what differs.

Every analysis selects rows through this module (:meth:`Results.ok`, :meth:`Results.measured`,
:meth:`Results.for_settings`, :meth:`Results.dominant_run`, :meth:`Results.matched`,
:meth:`Results.side_by_side`, :meth:`Results.reruns`, :meth:`Results.newest_stack`), so one
definition of "the same run" serves them all; a test fails where another module filters a
run field by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
import pandas as pd

from paradnn import settings
from paradnn.analysis.rows import (
    ANY,
    MISSING,
    NEVER_SHARED,
    SIDE_OWNED,
    finished_with,
    newest_rows,
    pool,
    quiet_first,
    side_by_side,
)
from paradnn.analysis.speedup import SpeedupResult, compare, side_rows
from paradnn.config import ConfigError
from paradnn.identity import run_key
from paradnn.store.bounds import CHIP, INPUT, row_bounds
from paradnn.vocabulary import is_finished, is_imported

if TYPE_CHECKING:
    from paradnn.store import Store

# The run settings a dominant run names (the platform is chosen by the caller).
RUN_NAMES = tuple(s.name for s in settings.SETTINGS if s.identity and s.name != "platform")


def _column_name(name: str) -> str:
    """A store column from a declared setting's name (``input`` -> ``input_mode``) or a column."""
    return settings.BY_NAME[name].column if name in settings.BY_NAME else name


def _plain_value(value: object) -> object:
    return value.item() if hasattr(value, "item") else value


def _keys(column: pd.Series) -> pd.Series:
    """A column's values as comparable keys (missing values as one marker, numbers as Python values)."""
    return column.astype(object).where(column.notna(), MISSING).map(_plain_value)


def _values(column: pd.Series) -> set:
    return set(_keys(column))


def _shown(values: set) -> list[str]:
    """Values as a comparison's summary lists them (a missing value: "not recorded")."""
    return sorted("not recorded" if v == MISSING else str(v) for v in values)


def _fastest(rows: pd.DataFrame, column: str, metric: str) -> object:
    """The value of ``column`` whose rows have the higher geometric-mean ``metric`` on the labels
    measured at every value; the value with the most labels where no label is."""
    by_value = {v: g.groupby("label")[metric].median() for v, g in rows.groupby(_keys(rows[column]), sort=True)}
    common = set.intersection(*(set(m.index) for m in by_value.values()))
    if not common:
        return max(by_value, key=lambda v: (len(by_value[v]), str(v)))
    labels = sorted(common)
    return max(by_value, key=lambda v: float(np.mean(np.log(by_value[v][labels].to_numpy(dtype=float)))))


def _names(option: str, names: object) -> tuple[str, ...] | None:
    """Setting names given to ``matched``'s ``free``/``hold``: one name or several; ConfigError for anything else."""
    if names is None:
        return None
    names = (names,) if isinstance(names, str) else names
    if not isinstance(names, (tuple, list, set)) or not all(isinstance(n, str) for n in names):
        raise ConfigError(option, names, "a setting name or a list of them (e.g. 'dtype' or ('dtype', 'xla'))")
    unknown = [n for n in names if n not in settings.BY_NAME and n not in {s.column for s in settings.stored()}]
    if unknown:
        raise ConfigError(option, unknown[0], ", ".join(settings.BY_NAME))
    return tuple(names)


def explain_unpaired(
    base: pd.DataFrame, target: pd.DataFrame, key: list[str], vary: str, baseline: object, target_value: object
) -> str:
    """Why no pair formed, in one line: a side without rows, no configuration in common, or the
    identity columns whose values differ between the sides, with the option that frees each."""
    if base.empty or target.empty:
        empty = [str(v) for v, rows in ((baseline, base), (target_value, target)) if rows.empty]
        return f"no finished rows with {vary} {' or '.join(empty)}"
    common = set(zip(base["family"], base["label"])) & set(zip(target["family"], target["label"]))
    if not common:
        return (
            f"no configuration was measured on both sides ({base['label'].nunique()} with {vary} {baseline}, "
            f"{target['label'].nunique()} with {vary} {target_value}, none in common)"
        )
    differ = []
    for column in (c for c in key if c not in ("family", "label")):
        mine, theirs = _values(base[column]), _values(target[column])
        if mine and theirs and not mine & theirs:
            name = next((s.name for s in settings.stored() if s.column == column), None)
            how = f" (--free {name} lets each side keep its own)" if name else ""
            differ.append(
                f"{column} differs: {baseline} has {', '.join(sorted(map(str, mine)))}, {target_value} has "
                f"{', '.join(sorted(map(str, theirs)))}{how}"
            )
    if differ:
        return "; ".join(differ)
    return (
        f"{len(common)} configuration(s) were measured on both sides, but never with the same run identity in every held column"
    )


def _original(rows: pd.DataFrame) -> bool:
    """Rows all of the original study (imported, not measured here)."""
    return bool(len(rows)) and bool(is_imported(rows).all())


def _bound_of(rows: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(family, label) -> what bound its step on this side: input where any of its rows was input-bound."""
    known = rows[rows["bound"].notna()]
    return {key: (INPUT if (group["bound"] == INPUT).any() else CHIP) for key, group in known.groupby(["family", "label"])}


def _with_bounds(table: pd.DataFrame, base: pd.DataFrame, targ: pd.DataFrame) -> pd.DataFrame:
    """A pairs table with each side's bound (``baseline_bound``, ``target_bound``) where the rows carry one."""
    if table.empty or "bound" not in base or "bound" not in targ:
        return table
    keys = list(zip(table["family"], table["label"]))
    sides = {"baseline_bound": _bound_of(base), "target_bound": _bound_of(targ)}
    return table.assign(**{name: [bounds.get(k) for k in keys] for name, bounds in sides.items()})


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
    windowed = {
        (key, start)
        for key, start, extra in zip(df["run_key"], df["started_at"], df["extra"])
        if isinstance(extra, dict) and extra.get("windows")
    }
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

        with Store(store, create=False, readonly=True, snapshot=True) as s:  # nothing left beside it
            return cls.read(s)

    @classmethod
    def read(cls, store: Store, platform: str | None = None) -> Results:
        """The rows of an open store (``platform``'s only, if named), with each platform's XLA
        choices and each row's bound: what :meth:`load` reads, for a caller holding the store."""
        frame = store.results(platform=platform)
        choices = {p: store.xla_choices(p) for p in frame["platform"].unique()}
        return cls(frame.join(row_bounds(frame, store.traces())), choices)

    @classmethod
    def concat(cls, parts: list[Results]) -> Results:
        """One results object from several (rows stacked, every part's XLA choices kept)."""
        frames = [part.frame for part in parts if len(part.frame.columns)]
        frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        return cls(frame, {p: c for part in parts for p, c in part.xla_choices.items()})

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def empty(self) -> bool:
        """No rows."""
        return self.frame.empty

    def _with(self, frame: pd.DataFrame) -> Results:
        return Results(frame, self.xla_choices)

    def where(self, **values: object) -> Results:
        """Rows whose columns equal ``values`` (a list or tuple: any of them; None: no filter)."""
        df = self.frame
        for column, value in values.items():
            if value is None:
                continue
            self._known(column)
            df = df[df[column].isin(value) if isinstance(value, (list, tuple, set)) else df[column] == value]
        return self._with(df)

    def _known(self, column: str) -> None:
        """ConfigError naming the columns for one a store does not have (never a bare KeyError)."""
        if column not in self.frame:
            raise ConfigError("column", column, "a column of the results: " + ", ".join(self.frame.columns))

    def for_settings(self, **run: object) -> Results:
        """Rows run with these settings (declared names: ``dtype``, ``xla``, ``platform``,
        ``framework``, ``input``, ``devices``; each value parsed by its declaration; ``ANY``
        keeps every value; the original study's rows, all fed through the host, pass any
        ``input``). ``xla="auto"`` keeps, per platform, family and dtype, the setting ``--xla
        auto`` chose there (platforms without a probe keep every row)."""
        df = self.frame
        for name, value in run.items():
            if isinstance(value, str) and value == ANY:
                continue
            declared = settings.setting(name)
            if not declared.column:
                raise ConfigError(
                    name,
                    value,
                    "a stored run setting (a software stack is stored as the versions it "
                    "holds: select with where(sw_tensorflow=...) or newest_stack())",
                )
            if name == "xla" and (value is None or str(value).lower() == "auto"):
                df = df[self._auto_xla(df)]
                continue
            keep = _column(df, declared) == declared.parse(value)
            if name == "input" and "source" in df:  # the original study's rows were all fed through the host
                keep |= is_imported(df)
            df = df[keep]
        return self._with(df)

    def _auto_xla(self, df: pd.DataFrame) -> pd.Series:
        """Rows at the XLA setting ``--xla auto`` chose for their platform, family and dtype: the
        choice the rows themselves record (``xla_auto``), else the platform's stored choice; rows
        of a platform that never chose are all kept."""
        recorded = {}
        if "xla_auto" in df:
            for (p, f, d), x in df[df["xla_auto"].fillna(0).astype(bool)].groupby(["platform", "family", "dtype"])["xla"]:
                recorded[(p, f, d)] = bool(x.iloc[-1])
        chosen = [
            recorded.get((p, f, d), self.xla_choices.get(p, {}).get(f"{f}|{d}"))
            for p, f, d in zip(df["platform"], df["family"], df["dtype"])
        ]
        return pd.Series([c is None or bool(c) == bool(x) for c, x in zip(chosen, df["xla"])], index=df.index, dtype=bool)

    def side_by_side(self, vary: str) -> Results:
        """Rows measured in one sweep with rows of another value of ``vary`` (a software stack, say),
        with their sweep as a ``sweep`` column: pair them with ``matched(..., within=("sweep",))``."""
        return self._with(side_by_side(self.frame, _column_name(vary)))

    def newest_stack(self) -> Results:
        """Rows of the newest TensorFlow version measured on each platform, and imported rows."""
        return self._with(newest_rows(self.frame))

    def pooled(self, per_stack: bool = False) -> Results:
        """One row per configuration (family version included), run settings and platform, from
        every measurement of it: its figures are the medians over its run identity's finished
        measurements, quiet ones first (:func:`paradnn.analysis.rows.pool`), with ``n_measurements``,
        ``measured_values`` and ``rerun_spread`` beside them; with ``per_stack``, one per TensorFlow
        version as well. No analysis reads "the latest" of several measurements."""
        key = [c for c in ("family", "family_version", "label", *settings.identity_columns()) if c in self.frame]
        key += ["sw_tensorflow"] if per_stack else []
        frame = self.frame
        if "run_key" not in frame:  # a table built by hand: the key its rows would have in a store
            frame = frame.assign(run_key=[run_key(r) for r in frame.to_dict("records")])
        return self._with(pool(one_row_per_attempt(frame), key))

    def reruns(self, metric: str = "step_time_s") -> pd.DataFrame:
        """Run identities measured more than once (state ``ok``), one row each: ``run_key``,
        family, label, ``n`` (the measurements pooled) and ``difference``, the relative difference
        of ``metric`` between the fastest and slowest of them (``max / min - 1``), over the
        measurements a pooled estimate rests on (contended ones left out where quiet ones exist:
        :func:`paradnn.analysis.rows.quiet_first`); ``raw_difference`` over every measurement.
        Rows that merely share a label but differ in anything else of the run identity are never
        reruns of each other."""
        ok = self.measured().ok().positive(metric).frame
        if "run_key" not in ok:  # a table built by hand: the key its rows would have in a store
            ok = ok.assign(run_key=[run_key(r) for r in ok.to_dict("records")])
        ok = one_row_per_attempt(ok)
        raw = ok.groupby("run_key")[metric].agg(lambda v: v.max() / v.min() - 1)
        groups = quiet_first(ok).groupby("run_key")
        out = pd.DataFrame(
            {
                "family": groups["family"].first(),
                "label": groups["label"].first(),
                "n": groups.size(),
                "difference": groups[metric].max() / groups[metric].min() - 1,
            }
        )
        out["raw_difference"] = raw.reindex(out.index)
        return out[out["n"] > 1].reset_index()

    def contention_line(self) -> str:
        """What the measured rows say of the machine while they were timed, in one line: windows
        refused for contention, rows that never had a quiet window, the most steal, and rows from
        before contention was read (:mod:`paradnn.engine.contention`)."""
        rows = self.measured().ok().frame
        if rows.empty:
            return "no measured rows"
        read = rows[rows["contended"].notna()] if "contended" in rows else rows.iloc[:0]
        refused = int(pd.to_numeric(read.get("refused_windows"), errors="coerce").fillna(0).sum()) if len(read) else 0
        contended = int(read["contended"].astype(bool).sum()) if len(read) else 0
        steal = float(pd.to_numeric(read.get("steal_cores"), errors="coerce").max()) if len(read) else math.nan
        words = [
            f"{len(rows)} measured rows: {refused} timing window(s) refused for contention and timed again",
            f"{contended} row(s) never had a quiet window (kept apart, flagged contended)",
        ]
        words += [f"steal up to {steal:.2f} cores"] if math.isfinite(steal) else []
        words += [f"{len(rows) - len(read)} row(s) from before contention was read"] if len(read) < len(rows) else []
        return "; ".join(words)

    def ok(self) -> Results:
        """Rows that finished (state ``ok``)."""
        return self._with(self.frame[is_finished(self.frame)])

    def measured(self) -> Results:
        """Rows measured by paradnn (not imported from the original study)."""
        return self._with(self.frame[~is_imported(self.frame)])

    def subset(self, kept: pd.DataFrame) -> Results:
        """``kept``, a selection pandas made from :attr:`frame` (a groupby's group, a common set),
        as rows of this object: the platforms' XLA choices travel with them."""
        if not isinstance(kept, pd.DataFrame):
            raise ConfigError("kept", kept, "a DataFrame selected from this object's frame")
        return self._with(kept)

    def imported(self) -> Results:
        """Rows imported from the original study (the rows :meth:`measured` leaves out)."""
        return self._with(self.frame[is_imported(self.frame)])

    def failed(self) -> Results:
        """Rows that did not finish (out of memory, timeout, error, skipped)."""
        return self._with(self.frame[~is_finished(self.frame)])

    def with_value(self, column: str) -> Results:
        """Rows with a value in ``column`` (a metric some rows lack, such as ``infeed_share``)."""
        if column not in self.frame:
            return self._with(self.frame.iloc[:0])
        return self._with(self.frame[self.frame[column].notna()])

    def positive(self, column: str) -> Results:
        """Rows whose ``column`` is a number above zero."""
        return self._with(self.frame[pd.to_numeric(self.frame[column], errors="coerce") > 0])

    def held(self, run: dict[str, object]) -> Results:
        """Rows of one run given by store columns (``input_mode``) or setting names (``input``): each
        declared setting through its parser, a missing value read as its default (as
        :meth:`for_settings`); other columns by equality."""
        by_column = {s.column: s.name for s in settings.stored()}
        declared = {by_column.get(k, k): v for k, v in run.items() if by_column.get(k, k) in settings.BY_NAME}
        other = {k: v for k, v in run.items() if by_column.get(k, k) not in settings.BY_NAME}
        return self.for_settings(**declared).where(**other)

    def for_run(self, run: dict[str, object]) -> Results:
        """Rows of one run (a dict of declared settings, as :meth:`dominant_run` gives it)."""
        return self.for_settings(**run)

    def dominant_run(self, names: tuple[str, ...] = RUN_NAMES) -> dict[str, object]:
        """The run settings most finished rows used (``dtype``, ``xla``, ...), as a dict for
        :meth:`for_run`; the declared defaults where no row finished. One setting at a time, each
        among the rows of the ones before it, so the answer is a run that has rows."""
        df, run = self.ok().frame, {}
        for name in names:
            declared = settings.BY_NAME[name]
            values = _column(df, declared)
            if values.dropna().empty:
                run[name] = declared.default
                continue
            counts = values.dropna().map(_plain_value).value_counts(sort=False)
            run[name] = _plain_value(counts.index[int(np.argmax(counts.to_numpy()))])  # ties: the first seen
            df = df[_column(df, declared).map(_plain_value) == run[name]]
        if isinstance(run.get("xla"), (int, np.integer, np.bool_)):  # the store's 0/1 (a table may hold words)
            run["xla"] = bool(run["xla"])
        return run

    def matched(
        self,
        vary: str,
        baseline: object,
        target: object,
        *,
        free: tuple[str, ...] | None = None,
        hold: tuple[str, ...] = (),
        family: str | None = None,
        metric: str = "examples_per_sec",
        carry: tuple[str, ...] = (),
        within: tuple[str, ...] = (),
    ) -> SpeedupResult:
        """Pairs of ``baseline`` and ``target`` values of ``vary`` whose run identity is equal in
        everything else, and their speedups (target over baseline), with what was held and freed.

        ``vary`` is a store column or a declared setting's name (``input``). Some settings belong
        to the side being compared (:data:`~paradnn.analysis.rows.SIDE_OWNED`: each platform at
        its own precision and XLA setting, each stack and framework at its own XLA setting):
        ``free`` (default: those) lets them go and ``hold`` keeps them held. A freed setting is
        still held wherever both sides have a value in common; where they share none, each side
        keeps its own (one value per family: XLA's automatic choice, else the faster). Platforms
        are compared at their newest TensorFlow version each. ``within``: columns beyond the run
        identity a pair must agree in (``sweep``, after :meth:`side_by_side`). Where nothing
        pairs, the result's ``why`` says what differs and how to free it.
        """
        column = _column_name(vary)
        self._known(column)
        if metric not in self.frame:
            raise ConfigError("metric", metric, "a column of the results, e.g. examples_per_sec or step_time_s")
        owned = SIDE_OWNED.get(column, {})
        free, hold = _names("free", free), _names("hold", hold) or ()
        both = sorted(set(free or ()) & set(hold))
        if both:
            raise ConfigError("hold", hold, f"settings not also freed ({', '.join(both)} in both)")
        wanted = [_column_name(f) for f in (tuple(owned) if free is None else free)]
        held_on_purpose = {_column_name(h) for h in hold}
        frame = newest_rows(self.frame) if column == "platform" else self.frame
        rows = finished_with(frame, metric)
        rows = rows[rows["family"] == family] if family is not None else rows
        base, targ = rows[side_rows(rows, column, baseline)], rows[side_rows(rows, column, target)]
        sides, own = {}, []
        for c in (c for c in wanted if c not in held_on_purpose and c in rows):
            why = owned.get(c, "freed on request")
            shared = _values(base[c]) & _values(targ[c])
            apart = c in NEVER_SHARED.get(column, ()) and _original(base) != _original(targ)  # a 2019 chip against one here
            if shared and not apart:  # like with like where both sides have it
                base, targ = base[_keys(base[c]).isin(shared)], targ[_keys(targ[c]).isin(shared)]
                sides[c] = {"why": why, "held": True, "values": _shown(shared)}
                continue
            base, targ = self._own(base, c, metric), self._own(targ, c, metric)
            sides[c] = {"why": why, "held": False, "baseline": _shown(_values(base[c])), "target": _shown(_values(targ[c]))}
            own.append(c)
        paired = pd.concat([base, targ])
        result = compare(
            paired, baseline, target, by=column, family=family, metric=metric, carry=carry, free=tuple(own), within=within
        )
        why = "" if result.n else explain_unpaired(base, targ, list(result.key), column, baseline, target)
        return replace(result, table=_with_bounds(result.table, base, targ), sides=sides, rows=paired, why=why)

    def _own(self, rows: pd.DataFrame, column: str, metric: str) -> pd.DataFrame:
        """One side's rows at its own value of ``column``, one value per family: a platform's
        automatic XLA choice where it made one, device-resident input where it has it (the mode in
        which the chip is the bound), else the value with the higher throughput on the
        configurations measured at every value (the most configurations where none is)."""
        kept = []
        for _, fam in rows.groupby("family", sort=False):
            if column == "xla" and len(_values(fam[column])) > 1:
                fam = fam[self._auto_xla(fam)]
            if column == "input_mode" and settings.DEFAULTS["input"] in _values(fam[column]):
                fam = fam[_keys(fam[column]) == settings.DEFAULTS["input"]]  # device-resident: the chip is the bound
            values = _values(fam[column])
            if len(values) > 1:
                fam = fam[_keys(fam[column]) == _fastest(fam, column, metric)]
            kept.append(fam)
        return pd.concat(kept) if kept else rows


Rows: TypeAlias = "Results | pd.DataFrame"  # what analyses take: the Results a report loaded, or a table built by hand


def results_of(rows: Rows) -> Results:
    """``rows`` as a results object: a :class:`Results` as it is (its platforms' XLA choices kept
    through every analysis), a table built by hand (a test's, a notebook's) as rows without choices."""
    return rows if isinstance(rows, Results) else Results(rows)
