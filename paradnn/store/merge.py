"""Merging stores: a study measured on several machines, brought into one store.

:func:`merge` copies every result, platform (fingerprint, identity, ceilings) and trace of
the source stores into a destination store, in one transaction on the destination:

* **Sources are never written.** Each is opened read-only; a store of an older schema is
  read as it is (the columns it lacks take the values a migration would give them), so its
  file stays byte for byte what it was. Rows are streamed in batches of :data:`BATCH`, so a
  merge's memory is a small multiple of one batch, not of the sources.
* **De-duplicated by run identity.** A measured row is the same row when its run key and
  its ``finished_at`` are (merging a store twice, or two copies of one, adds nothing); the
  same run key finished at another time is a *rerun*, kept beside the other. An imported
  row (``source`` ``legacy:<file>``) is the same row when its source, the platform it was
  measured as (``platform_id``, else its name), label and state are: a renamed store merged back
  adds nothing. Every row merged in records where it came from in ``origin`` (the source
  store as given; a row merged before keeps its first origin); rows written into the
  destination itself have none.
* **One name, one machine.** A platform's name is its rows' ``platform`` (``cpu`` unless
  named: ``sweep --name``, or a rename here). Renaming sets ``platform_id`` to the id the run
  was measured as, so no run key changes (:mod:`paradnn.identity`), and moves everything
  under the name: rows, platform records (ceilings) and profiles. A merge that would put two
  machines under one name, in the destination or among its sources, is refused inside the
  write transaction (:mod:`paradnn.store.names`), so two merges at once cannot both pass.
* **All or nothing.** A refused merge changes nothing; an interrupted one (even ``kill -9``)
  leaves an existing destination as it was. A new destination is written beside itself
  under a hidden name and linked into place at the commit, so a refused or killed merge
  creates nothing (a killed one's hidden file is removed by the next merge into that path).

Columns a source has and the destination lacks (a metric of a newer paradnn) are added to
the destination, as opening an older store adds columns; nothing is dropped.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from paradnn.identity import LATER_IDENTITY, PROFILE_SOURCE, run_key
from paradnn.platform import platform_name
from paradnn.store.db import TRACE_COLUMNS, Store, StoreError, check_store_path, fed_as_measured
from paradnn.store.names import Machine, check_writes, machine, name_problem, same
from paradnn.vocabulary import MEASURED

__all__ = ["BATCH", "MergeError", "MergeSummary", "merge", "parse_rename"]

BATCH = 2_000  # rows read, checked and inserted at a time
REQUIRED = ("family", "label", "platform", "state", "source")  # results columns every paradnn store has had
_IDENTITY = ("platform", "platform_id", "platform_fingerprint", "device_name", "source")


class MergeError(StoreError):
    """A merge refused before anything was written: a bad rename, or two machines under one name."""


@dataclass
class MergeSummary:
    """What a merge added: rows per platform name, reruns among them, rows the destination had
    already, platforms (fingerprints) and traces added."""

    store: str
    sources: tuple[str, ...]
    added: dict[str, int] = field(default_factory=dict)
    reruns: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    platforms: int = 0
    traces: int = 0

    @property
    def rows(self) -> int:
        return sum(self.added.values())

    def lines(self) -> list[str]:
        """The summary in words: one line overall, then one per platform that gained rows."""
        reruns = sum(self.reruns.values())
        head = (
            f"merged {len(self.sources)} store(s) into {self.store}: {self.rows} rows added"
            f"{f' ({reruns} reruns)' if reruns else ''}, {self.duplicates} already there; "
            f"{self.platforms} platforms, {self.traces} traces added"
        )
        width = max((len(_literal(p)) for p in self.added), default=0)
        return [head] + [
            f"  {_literal(p):<{width}}  {n} rows" + (f" ({self.reruns[p]} reruns)" if self.reruns.get(p) else "")
            for p, n in sorted(self.added.items())
        ]

    def as_dict(self) -> dict:
        return {
            "store": self.store,
            "sources": list(self.sources),
            "rows": self.rows,
            "added": self.added,
            "reruns": self.reruns,
            "duplicates": self.duplicates,
            "platforms": self.platforms,
            "traces": self.traces,
        }


@dataclass
class _Source:
    """One source store, open read-only: what its rows are checked against; the rows themselves
    are streamed from ``conn`` by :func:`_write`."""

    label: str  # as given: the rows' origin
    conn: sqlite3.Connection
    columns: dict[str, str]  # results column -> SQL type, as the source has them
    identities: list[dict]  # distinct (platform, platform_id, platform_fingerprint, device_name, source) of its rows
    platforms: list[dict]
    traces: list[dict]

    def names(self) -> set[str]:
        return {r["platform"] for r in self.identities} | {p["platform"] for p in self.platforms}


def parse_rename(texts: Iterable[str]) -> dict[str, str]:
    """``OLD=NEW`` texts (``cpu=xeon-lab``, ``cpu[threads=1]=lab-1t``: split at the last ``=`` outside
    brackets) as a mapping; a name renamed twice is refused."""
    renames: dict[str, str] = {}
    for text in texts:
        old, sep, new = _split_rename(str(text))
        old, new = old.strip(), new.strip()
        if not sep or not old or not new:
            raise MergeError(
                f"--rename {_short(text)}: expected OLD=NEW, e.g. --rename cpu=xeon-lab or --rename 'cpu[threads=1]=lab-1t'"
            )
        if old in renames:
            raise MergeError(
                f"--rename {_short(old)}: given twice ({_short(old)}={_short(renames[old])}, "
                f"{_short(old)}={_short(new)}); rename each platform once"
            )
        other = next((o for o, n in renames.items() if n == new), None)
        if other is not None:  # two platforms under one new name: two machines folded by the options themselves
            raise MergeError(
                f"--rename {_short(old)}={_short(new)}: {_short(new)!r} is already the new name of "
                f"{_short(other)!r}; give each platform a name of its own"
            )
        renames[old] = new
    return renames


def _split_rename(text: str) -> tuple[str, str, str]:
    """``OLD=NEW`` split at the last ``=`` outside brackets (``cpu[threads=1]=lab`` and ``a=cpu[threads=2]``
    both split where a reader would)."""
    depth, at = 0, -1
    for i, c in enumerate(text):
        depth += (c == "[") - (c == "]")
        if c == "=" and depth == 0:
            at = i
    return (text[:at], "=", text[at + 1 :]) if at >= 0 else ("", "", text)


def _literal(text: object) -> str:
    """``text`` as it reads: every character a terminal would act on or hide (a newline, a tab, an
    ANSI escape, a zero-width mark) written as its escape (``\\n``, ``\\x1b``), a backslash doubled."""
    return "".join(
        "\\\\" if ch == "\\" else ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(text)
    )


def _short(text: object, limit: int = 80) -> str:
    """A value for an error line: one line, every control character escaped (:func:`_literal`), at most ``limit`` characters."""
    shown = _literal(text)
    flat = shown if shown.strip() else repr(str(text))
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def merge(sources: Iterable[str | Path], store: str | Path, rename: Mapping[str, str] | None = None) -> MergeSummary:
    """Merge the ``sources`` stores into ``store`` (created if missing), renaming platforms
    ``{old: new}`` on the way in; see the module docstring. Raises :class:`StoreError` (a
    source or the destination is not a readable paradnn store of a schema this paradnn
    reads, a source is damaged, two machines would share a name) or :class:`MergeError` (a
    bad rename) with nothing written."""
    check_store_path(store)
    dst = Path(store)
    given = [str(s) for s in sources]
    if not given:
        raise MergeError("no source store to merge (paradnn merge SRC... --store DST)")
    with contextlib.ExitStack() as stack:
        read = [_open(stack, Path(text), text, dst) for text in given]
        known = sorted(set().union(*(s.names() for s in read)))
        for old in rename or {}:
            if old not in known:
                raise MergeError(
                    f"--rename {_short(old)}=...: no platform {_short(old)!r} in the sources "
                    f"(they have: {_short(', '.join(known) or 'none', 300)})"
                )
        renames = {old: _new_name(old, new, _measured_as(read, old)) for old, new in (rename or {}).items()}
        _remove_stale(dst)
        if dst.exists():
            with Store(dst, create=True) as out, out.transaction() as conn:
                return _write(conn, read, renames, str(dst))
        summary = _into_new(dst, lambda conn: _write(conn, read, renames, str(dst)))
        if summary is not None:
            return summary
        with Store(dst, create=False) as out, out.transaction() as conn:  # another merge created it meanwhile
            return _write(conn, read, renames, str(dst))


def _measured_as(read: list[_Source], name: str) -> set[str]:
    """The platform ids the sources' rows and records of ``name`` were measured as."""
    rows = {r["platform_id"] or r["platform"] for s in read for r in s.identities if r["platform"] == name}
    records = {p["info_parsed"].get("id") or name for s in read for p in s.platforms if p["platform"] == name}
    return rows | records


def _new_name(old: str, new: str, measured_as: set[str]) -> str:
    """A rename's new name: a name of one's own, or back to the one id every row of ``old`` was measured as."""
    if measured_as == {new}:
        return new
    try:
        return platform_name(new)
    except Exception as exc:  # ConfigError: say it as the rename it came from
        raise MergeError(f"--rename {_short(old)}={_short(new)}: {getattr(exc, 'allowed', exc)}") from None


def _temporary(dst: Path, pid: int) -> Path:
    return dst.with_name(f".{dst.name}.merging-{pid}")


def _remove_stale(dst: Path) -> None:
    """Remove what a killed merge into a new ``dst`` left beside it (its process is gone)."""
    for path in dst.parent.glob(f".{dst.name}.merging-*"):
        pid = re.fullmatch(r".*\.merging-([0-9]+)(-wal|-shm|-journal)?", path.name)
        if pid and not psutil.pid_exists(int(pid.group(1))):
            path.unlink(missing_ok=True)


def _into_new(dst: Path, write) -> MergeSummary | None:
    """Write a new store beside ``dst`` and link it into place at the end, so nothing appears at
    ``dst`` unless the merge commits; None when another writer created ``dst`` meanwhile."""
    made = [folder for folder in (dst.parent, *dst.parent.parents) if not folder.exists()]  # innermost first
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(dst, os.getpid())
    linked = False
    try:
        with Store(tmp) as out, out.transaction() as conn:
            summary = write(conn)
        try:
            os.link(tmp, dst)
        except FileExistsError:
            return None
        linked = True
        return summary
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)
        for folder in made if not linked else ():  # the folders it created, if still empty
            with contextlib.suppress(OSError):
                folder.rmdir()


def _damaged(label: str, what: str) -> StoreError:
    return StoreError(f"{_short(label, 200)}: damaged ({what})")


def _open(stack: contextlib.ExitStack, path: Path, label: str, dst: Path) -> _Source:
    """Open one source read-only and read what is checked before the write: its columns, its
    rows' identities, platform records and traces (not its rows)."""
    if path.exists() and dst.exists() and os.path.samefile(path, dst):
        raise MergeError(f"{_short(label, 200)}: is the destination store itself; merge other stores into it")
    conn = stack.enter_context(Store(path, create=False, readonly=True, snapshot=True)).conn
    try:
        columns = {r[1]: r[2] for r in conn.execute("PRAGMA table_info(results)") if r[1] != "id"}
        missing = [c for c in REQUIRED if c not in columns]
        if missing:
            raise _damaged(label, f"its results table has no column {missing[0]!r}")
        present = [c if c in columns else f"NULL AS {c}" for c in _IDENTITY]
        identities = [dict(r) for r in conn.execute(f"SELECT DISTINCT {', '.join(present)} FROM results")]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        platforms = [dict(r) for r in conn.execute("SELECT * FROM platforms")] if "platforms" in tables else []
        traces = [dict(r) for r in conn.execute("SELECT * FROM traces")] if "traces" in tables else []
    except sqlite3.DatabaseError as exc:
        raise _damaged(label, str(exc)) from None
    for name in {r["platform"] for r in identities} | {p.get("platform") for p in platforms}:
        problem = name_problem(name)
        if problem:
            raise _damaged(label, f"{problem}: {_short(repr(name))}")
    for p in platforms:
        p["info_parsed"] = _info(label, p)
    return _Source(label, conn, columns, identities, platforms, traces)


def _info(label: str, record: dict) -> dict:
    try:
        info = json.loads(record.get("info") or "{}")
    except (json.JSONDecodeError, TypeError):
        info = None
    if not isinstance(info, dict):
        raise _damaged(label, f"the record of platform {_short(record.get('platform'))!r} holds info that is not a JSON object")
    return info


def _machines(source: _Source, renames: Mapping[str, str]) -> tuple[dict[str, list[tuple[Machine, str]]], set[str]]:
    """Name -> (machine, source) of a source's rows and records, renamed; and the names measured rows take."""
    known = {p["fingerprint"]: machine(p["info_parsed"], p["platform"], p.get("name")) for p in source.platforms}
    out: dict[str, list[tuple[Machine, str]]] = {}
    measured = set()
    for r in source.identities:
        found = known.get(r["platform_fingerprint"]) or machine({}, r["platform_id"] or r["platform"], r["device_name"])
        name = renames.get(r["platform"], r["platform"])
        out.setdefault(name, []).append((found, source.label))
        if (r["source"] or MEASURED) == MEASURED:
            measured.add(name)
    for p in source.platforms:
        name = renames.get(p["platform"], p["platform"])
        out.setdefault(name, []).append((known[p["fingerprint"]], source.label))
        if p.get("source") == MEASURED:
            measured.add(name)
    return out, measured


def _check(conn: sqlite3.Connection, read: list[_Source], renames: Mapping[str, str], dst: str) -> None:
    """One name, one machine, over the destination and every source (inside the write)."""
    incoming: dict[str, list[tuple[Machine, str]]] = {}
    measured: set[str] = set()
    for source in read:
        named, names = _machines(source, renames)
        for name, found in named.items():
            incoming.setdefault(name, []).extend(found)
        measured |= names

    def hint(name: str, where: str) -> str:
        own = [m for m, w in incoming.get(name, []) if w == where]
        if any(not same(a, b) for a in own for b in own):  # the fold is inside one source
            return (
                f"{shlex.quote(where)} itself holds two machines under {name!r} (a rename would move both): merge "
                "the other sources, and measure that store's machines again under names of their own"
            )
        rename = shlex.quote(f"{name}=NEW-NAME")
        return (
            f"name them apart: paradnn merge {shlex.quote(where)} --rename {rename} --store {shlex.quote(dst)}"
            " (merge the stores one at a time to rename each)"
        )

    check_writes(conn, incoming, measured, dst, hint)


def _renamed(row: dict, renames: Mapping[str, str]) -> dict:
    """A source row under its new name; ``platform_id`` keeps the id the run was measured as."""
    new = renames.get(row["platform"])
    if new is not None:
        measured_as = row.get("platform_id") or row["platform"]
        row["platform"], row["platform_id"] = new, None if new == measured_as else measured_as
    return row


def _renamed_trace(trace: dict, renames: Mapping[str, str]) -> dict:
    """A trace under its platform's new name, a profile's ``source`` (profile:NAME:DTYPE) too."""
    old = str(trace.get("platform"))
    if old in renames:
        trace["platform"] = renames[old]
        prefix = f"{PROFILE_SOURCE}:{old}:"
        if str(trace.get("source") or "").startswith(prefix):
            trace["source"] = f"{PROFILE_SOURCE}:{renames[old]}:{trace['source'][len(prefix) :]}"
    return trace


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _rows(source: _Source) -> Iterator[list[dict]]:
    """A source's result rows, a batch at a time."""
    try:
        cursor = source.conn.execute("SELECT * FROM results ORDER BY id")
        names = [d[0] for d in cursor.description]
        while batch := cursor.fetchmany(BATCH):
            yield [dict(zip(names, values)) for values in batch]
    except sqlite3.DatabaseError as exc:
        raise _damaged(source.label, str(exc)) from None


def _write(conn: sqlite3.Connection, read: list[_Source], renames: Mapping[str, str], dst: str) -> MergeSummary:
    """Everything of ``read`` that ``conn``'s store lacks, inside the caller's transaction."""
    _check(conn, read, renames, dst)
    summary = MergeSummary(dst, tuple(s.label for s in read))
    have = {r[1]: r[2] for r in conn.execute("PRAGMA table_info(results)")}
    for s in read:  # a newer paradnn's columns: added, as an older store gains this one's
        for column, sql_type in s.columns.items():
            if column not in have:
                conn.execute(f"ALTER TABLE results ADD COLUMN {_quoted(column)} {sql_type.replace('NOT NULL', '').strip()}")
                have[column] = sql_type
    names = [c for c in have if c != "id"]
    sql = f"INSERT INTO results ({', '.join(map(_quoted, names))}) VALUES ({', '.join('?' * len(names))})"
    seen = _Seen(conn)
    for s in read:
        for batch in _rows(s):
            values = []
            for row in batch:
                row.pop("id", None)
                row = fed_as_measured(_renamed(row, renames))  # an older store's 2019 rows as schema 4 has them
                key = row.get("run_key") or run_key(row)
                if not seen.add(row, key, summary):
                    continue
                row.update(run_key=key, origin=row.get("origin") or s.label)
                values.append([row[c] if c in row else LATER_IDENTITY.get(c) for c in names])
            conn.executemany(sql, values)
    summary.platforms = _write_platforms(conn, read, renames)
    trace_sql = f"INSERT OR IGNORE INTO traces ({', '.join(TRACE_COLUMNS)}) VALUES ({', '.join('?' * len(TRACE_COLUMNS))})"
    for s in read:
        before = conn.total_changes
        conn.executemany(
            trace_sql, [[t.get(c) for c in TRACE_COLUMNS] for t in (_renamed_trace(dict(t), renames) for t in s.traces)]
        )
        summary.traces += conn.total_changes - before
    return summary


class _Seen:
    """What the destination holds (and the merge has added): measured rows by run key and finish
    time, imported rows by source, the platform they were measured as, label and state, and every
    run key (for reruns). Neither depends on the name a row now carries, so a renamed store merged
    back adds nothing."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.measured: set[tuple] = {
            (r[0], r[1]) for r in conn.execute("SELECT run_key, finished_at FROM results WHERE source = ?", (MEASURED,))
        }
        self.keys = {r[0] for r in conn.execute("SELECT DISTINCT run_key FROM results")}
        self.imported: set[tuple] = {
            tuple(r)
            for r in conn.execute(
                "SELECT source, COALESCE(platform_id, platform), label, state FROM results WHERE source != ?", (MEASURED,)
            )
        }

    def add(self, row: dict, key: str, summary: MergeSummary) -> bool:
        """True (and counted in ``summary``) for a row not seen before; a duplicate is counted as one."""
        mark: tuple
        if (row.get("source") or MEASURED) == MEASURED:
            marks, mark = self.measured, (key, row.get("finished_at"))
        else:
            measured_as = row.get("platform_id") or row["platform"]
            marks, mark = self.imported, (row.get("source"), measured_as, row.get("label"), row.get("state"))
        if mark in marks:
            summary.duplicates += 1
            return False
        marks.add(mark)
        platform = row["platform"]
        if key in self.keys:
            summary.reruns[platform] = summary.reruns.get(platform, 0) + 1
        self.keys.add(key)
        summary.added[platform] = summary.added.get(platform, 0) + 1
        return True


def _write_platforms(conn: sqlite3.Connection, read: list[_Source], renames: Mapping[str, str]) -> int:
    """The sources' platform records the destination lacks (its own record of a fingerprint stands)."""
    fingerprints = {r[0] for r in conn.execute("SELECT fingerprint FROM platforms")}
    added = 0
    for s in read:
        for p in s.platforms:
            if p["fingerprint"] in fingerprints:
                continue
            fingerprints.add(p["fingerprint"])
            record = {**p, "platform": renames.get(p["platform"], p["platform"])}
            if record["platform"] != p["platform"] and "id" not in p["info_parsed"]:  # the id it was measured as stays
                record["info"] = json.dumps({**p["info_parsed"], "id": p["platform"]})
            columns = ("fingerprint", "platform", "name", "info", "ceilings", "source", "measured_at")
            conn.execute(
                f"INSERT INTO platforms ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                [record.get(c) for c in columns],
            )
            added += 1
    return added
