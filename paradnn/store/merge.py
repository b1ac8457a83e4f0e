"""Merging stores: a study measured on several machines, brought into one store.

:func:`merge` copies every result, platform (fingerprint, identity, ceilings) and trace of
the source stores into a destination store, in one transaction on the destination:

* **Sources are never written.** Each is opened read-only and read into memory; a store of
  an older schema is read as it is (the columns it lacks take the values a migration would
  give them), so its file stays byte for byte what it was.
* **De-duplicated by run identity.** A measured row is the same row when its run key and
  its ``finished_at`` are (merging a store twice, or two copies of one, adds nothing); the
  same run key finished at another time is a *rerun*, kept beside the other. An imported
  row (``source`` ``legacy:<file>``) is the same row when its source, platform, label and
  state are. Every row merged in records where it came from in ``origin`` (the source
  store as given; a row merged before keeps its first origin); rows written into the
  destination itself have none.
* **Platforms named for people, kept apart by fingerprint.** A platform's name is its rows'
  ``platform`` (``cpu`` unless named: ``sweep --name``, or ``rename`` here). Renaming sets
  ``platform_id`` to the id the run was measured as, so no run key changes
  (:mod:`paradnn.identity`). A merge that would put two machines (platform id, device,
  core count: the fingerprint less its software stack) under one name is refused before
  anything is written, saying how to rename; one machine's several software stacks under
  one name are fine (``compare --by sw_tensorflow``).
* **All or nothing.** Sources, renames and names are checked before the destination is
  opened for writing; a refused merge creates and changes nothing, an interrupted one (even
  ``kill -9``) leaves the destination as it was.

Columns a source has and the destination lacks (a metric of a newer paradnn) are added to
the destination, as opening an older store adds columns; nothing is dropped.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from paradnn.identity import LATER_IDENTITY, run_key
from paradnn.platform import platform_name
from paradnn.store.db import TRACE_COLUMNS, Store, StoreError

__all__ = ["MergeError", "MergeSummary", "merge", "parse_rename"]


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
        head = (f"merged {len(self.sources)} store(s) into {self.store}: {self.rows} rows added"
                f"{f' ({reruns} reruns)' if reruns else ''}, {self.duplicates} already there; "
                f"{self.platforms} platforms, {self.traces} traces added")  # fmt: skip
        width = max((len(p) for p in self.added), default=0)
        return [head] + [f"  {p:<{width}}  {n} rows" + (f" ({self.reruns[p]} reruns)" if self.reruns.get(p) else "")
                         for p, n in sorted(self.added.items())]  # fmt: skip

    def as_dict(self) -> dict:
        return {"store": self.store, "sources": list(self.sources), "rows": self.rows, "added": self.added,
                "reruns": self.reruns, "duplicates": self.duplicates, "platforms": self.platforms,
                "traces": self.traces}  # fmt: skip


@dataclass
class _Source:
    """One source store, read into memory (renames applied by :func:`_rename`)."""

    path: Path
    label: str  # as given: the rows' origin
    columns: dict[str, str]  # results column -> SQL type, as the source has them
    rows: list[dict]
    platforms: list[dict]
    traces: list[dict]


def parse_rename(texts: Iterable[str]) -> dict[str, str]:
    """``OLD=NEW`` texts (``cpu=xeon-lab``) as a mapping, each new name checked."""
    renames: dict[str, str] = {}
    for text in texts:
        old, sep, new = str(text).partition("=")
        if not sep or not old.strip() or not new.strip():
            raise MergeError(f"--rename {text!r}: expected OLD=NEW, e.g. --rename cpu=xeon-lab")
        renames[old.strip()] = new.strip()
    return renames


def merge(sources: Iterable[str | Path], store: str | Path, rename: Mapping[str, str] | None = None) -> MergeSummary:
    """Merge the ``sources`` stores into ``store`` (created if missing), renaming platforms
    ``{old: new}`` on the way in; see the module docstring. Raises :class:`StoreError` (a
    source or the destination is not a readable paradnn store of a schema this paradnn
    reads) or :class:`MergeError` (a bad rename, two machines under one name) before
    anything is written."""
    dst = Path(store)
    given = [str(s) for s in sources]
    if not given:
        raise MergeError("no source store to merge (paradnn merge SRC... --store DST)")
    renames = {old: _new_name(old, new) for old, new in (rename or {}).items()}
    read = [_read(Path(text), text, dst) for text in given]
    known = sorted({r["platform"] for s in read for r in s.rows} | {p["platform"] for s in read for p in s.platforms})
    for old in renames:
        if old not in known:
            raise MergeError(f"--rename {old}=...: no platform {old!r} in the sources (they have: {', '.join(known) or 'none'})")
    machines = _machines(read, renames)
    if dst.exists() and dst.stat().st_size:
        with Store(dst, create=False, readonly=True, snapshot=True) as existing:  # refuses a non-store, a newer schema
            machines[str(dst)] = _store_machines(existing.conn, {})
    _check_names(machines, str(dst))
    for source in read:
        _rename(source, renames)
    with Store(dst) as out, out.transaction() as conn:
        return _write(conn, read, str(dst))


def _new_name(old: str, new: str) -> str:
    try:
        return platform_name(new)
    except Exception as exc:  # ConfigError: say it as the rename it came from
        raise MergeError(f"--rename {old}={new}: {getattr(exc, 'allowed', exc)}") from None


def _read(path: Path, label: str, dst: Path) -> _Source:
    if path.exists() and dst.exists() and os.path.samefile(path, dst):
        raise MergeError(f"{label}: is the destination store itself; merge other stores into it")
    with Store(path, create=False, readonly=True, snapshot=True) as s:  # refuses a non-store, an empty file, a newer schema
        try:
            conn = s.conn
            columns = {r[1]: r[2] for r in conn.execute("PRAGMA table_info(results)") if r[1] != "id"}
            rows = [dict(r) for r in conn.execute("SELECT * FROM results ORDER BY id")]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            platforms = [dict(r) for r in conn.execute("SELECT * FROM platforms")] if "platforms" in tables else []
            traces = [dict(r) for r in conn.execute("SELECT * FROM traces")] if "traces" in tables else []
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{label}: damaged or unreadable ({exc})") from None
    for row in rows:
        row.pop("id", None)
    return _Source(path, label, columns, rows, platforms, traces)


def _machine(info: dict, platform_id: str, device: object) -> tuple:
    """A machine: platform id, device name and core count (its fingerprint without the software stack)."""
    return (info.get("id") or platform_id, info.get("name") or device, info.get("cores"))


def _describe(machine: tuple) -> str:
    platform_id, device, cores = machine
    return f"{device or 'an unnamed device'}" + (f" ({cores} cores)" if cores else "") + f" as {platform_id}"


def _store_machines(conn: sqlite3.Connection, renames: Mapping[str, str]) -> dict[str, set[tuple]]:
    """Name -> machines of one store (an open connection), ``renames`` applied."""
    columns = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    platform_id = "platform_id" if "platform_id" in columns else "NULL"
    rows = [dict(r) for r in conn.execute(
        f"SELECT DISTINCT platform, {platform_id} AS platform_id, platform_fingerprint, device_name FROM results")]  # fmt: skip
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    platforms = [dict(r) for r in conn.execute("SELECT * FROM platforms")] if "platforms" in tables else []
    return _named_machines(rows, platforms, renames)


def _named_machines(rows: list[dict], platforms: list[dict], renames: Mapping[str, str]) -> dict[str, set[tuple]]:
    by_fingerprint = {}
    for p in platforms:
        info = json.loads(p.get("info") or "{}")
        by_fingerprint[p["fingerprint"]] = _machine(info, p["platform"], p.get("name"))
    out: dict[str, set[tuple]] = {}
    for r in rows:
        machine = by_fingerprint.get(r["platform_fingerprint"]) or _machine({}, r.get("platform_id") or r["platform"],
                                                                            r.get("device_name"))  # fmt: skip
        out.setdefault(renames.get(r["platform"], r["platform"]), set()).add(machine)
    for p in platforms:
        out.setdefault(renames.get(p["platform"], p["platform"]), set()).add(by_fingerprint[p["fingerprint"]])
    return out


def _machines(read: list[_Source], renames: Mapping[str, str]) -> dict[str, dict[str, set[tuple]]]:
    """Store label -> name -> machines, for every source (renames applied)."""
    out: dict[str, dict[str, set[tuple]]] = {}
    for s in read:
        named = _named_machines(s.rows, s.platforms, renames)
        for name, machines in named.items():
            out.setdefault(s.label, {}).setdefault(name, set()).update(machines)
    return out


def _same(a: tuple, b: tuple) -> bool:
    """One machine: same id and device, and the same cores where both say (a row without its
    platform's record does not)."""
    return a[:2] == b[:2] and (a[2] is None or b[2] is None or a[2] == b[2])


def _check_names(machines: dict[str, dict[str, set[tuple]]], dst: str) -> None:
    """Refuse a name that two stores give to different machines (one store's own mix is its own)."""
    seen: dict[str, list[tuple[str, tuple]]] = {}  # name -> (store, machine) met so far
    order = ([dst] if dst in machines else []) + [label for label in machines if label != dst]
    for label in order:
        for name, found in sorted(machines[label].items()):
            before = seen.get(name, [])
            for machine in sorted(found, key=str):
                if before and not any(_same(machine, m) for _, m in before):
                    where, first = before[0]
                    raise MergeError(
                        f"platform {name!r} would fold two machines into one: {_describe(first)} in {where} and "
                        f"{_describe(machine)} in {label}; name them apart: paradnn merge {label} --rename "
                        f"{name}=NEW-NAME --store {dst} (merge the stores one at a time to rename each)")  # fmt: skip
            seen.setdefault(name, []).extend((label, m) for m in found)


def _rename(source: _Source, renames: Mapping[str, str]) -> None:
    """Rename platforms of ``source`` in memory; ``platform_id`` keeps the id each run was measured as."""
    for row in source.rows:
        new = renames.get(row["platform"])
        if new is not None:
            measured_as = row.get("platform_id") or row["platform"]
            row["platform"], row["platform_id"] = new, None if new == measured_as else measured_as
    for p in source.platforms:
        p["platform"] = renames.get(p["platform"], p["platform"])
    for t in source.traces:
        t["platform"] = renames.get(t.get("platform"), t.get("platform"))


def _write(conn: sqlite3.Connection, read: list[_Source], dst: str) -> MergeSummary:
    """Everything of ``read`` that ``conn``'s store lacks, inside the caller's transaction."""
    summary = MergeSummary(dst, tuple(s.label for s in read))
    have = {r[1]: r[2] for r in conn.execute("PRAGMA table_info(results)")}
    for s in read:  # a newer paradnn's columns: added, as an older store gains this one's
        for column, sql_type in s.columns.items():
            if column not in have:
                conn.execute(f"ALTER TABLE results ADD COLUMN {column} {sql_type.replace('NOT NULL', '').strip()}")
                have[column] = sql_type
    names = [c for c in have if c != "id"]
    measured = {(r[0], r[1]) for r in conn.execute("SELECT run_key, finished_at FROM results WHERE source = 'measured'")}
    keys = {r[0] for r in conn.execute("SELECT DISTINCT run_key FROM results")}
    imported = {tuple(r) for r in conn.execute(
        "SELECT source, platform, label, state FROM results WHERE source != 'measured'")}  # fmt: skip
    new_rows = []
    for s in read:
        for row in s.rows:
            key = row.get("run_key") or run_key(row)
            if row.get("source", "measured") == "measured":
                mark = (key, row.get("finished_at"))
                if mark in measured:
                    summary.duplicates += 1
                    continue
                measured.add(mark)
            else:
                mark = (row.get("source"), row["platform"], row.get("label"), row.get("state"))
                if mark in imported:
                    summary.duplicates += 1
                    continue
                imported.add(mark)
            platform = row["platform"]
            if key in keys:
                summary.reruns[platform] = summary.reruns.get(platform, 0) + 1
            keys.add(key)
            summary.added[platform] = summary.added.get(platform, 0) + 1
            values = {**row, "run_key": key, "origin": row.get("origin") or s.label}
            new_rows.append([values[c] if c in values else LATER_IDENTITY.get(c) for c in names])
    conn.executemany(f"INSERT INTO results ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", new_rows)
    fingerprints = {r[0] for r in conn.execute("SELECT fingerprint FROM platforms")}
    for s in read:
        for p in s.platforms:
            if p["fingerprint"] in fingerprints:  # the destination's record of a fingerprint stands
                continue
            fingerprints.add(p["fingerprint"])
            conn.execute("INSERT INTO platforms (fingerprint, platform, name, info, ceilings, source, measured_at) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)", [p.get(c) for c in ("fingerprint", "platform", "name", "info",
                                                                           "ceilings", "source", "measured_at")])  # fmt: skip
            summary.platforms += 1
    sql = f"INSERT OR IGNORE INTO traces ({', '.join(TRACE_COLUMNS)}) VALUES ({', '.join('?' * len(TRACE_COLUMNS))})"
    for s in read:
        before = conn.total_changes
        conn.executemany(sql, [[t.get(c) for c in TRACE_COLUMNS] for t in s.traces])
        summary.traces += conn.total_changes - before
    return summary
