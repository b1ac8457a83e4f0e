"""The results store: one SQLite file with every measurement and its provenance.

Tables
  ``meta``       application name and schema version (checked on every open);
  ``results``    one row per measurement attempt: configuration (every hyperparameter a
                 column), run settings, platform, software stack, state, error text, all
                 figures, the raw samples (JSON), timestamps and ``source``
                 (``measured`` or ``legacy:<file>``);
  ``platforms``  identity and ceilings of each platform (one row per fingerprint);
  ``traces``     profiler-trace figures imported from the original study.

Every write is one transaction; WAL journaling and a busy timeout let several sweeps
write one store at once. A file that is not a paradnn store, or a damaged one, raises
:class:`StoreError` before anything is written: nothing is ever overwritten or truncated.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import time
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

APP = "paradnn"
SCHEMA_VERSION = 1
STATES = ("ok", "oom", "error", "timeout", "skipped")
HYPERPARAMETERS = ("layers", "nodes", "input", "output", "batch", "blocks", "filters", "image", "block", "maxlength",
                   "vocab", "embedding", "cell")  # fmt: skip
SOFTWARE = ("tensorflow", "keras", "python", "numpy", "cuda", "cudnn", "paradnn", "git")

# (column, SQL type) of the results table, in order.
RESULT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_key", "TEXT NOT NULL"),
    ("family", "TEXT NOT NULL"),
    ("label", "TEXT NOT NULL"),
    *((h, "TEXT" if h in ("block", "cell") else "INTEGER") for h in HYPERPARAMETERS),
    ("dtype", "TEXT"),
    ("compute_dtype", "TEXT"),
    ("xla", "INTEGER"),
    ("steps_per_call", "INTEGER"),
    ("max_seconds", "REAL"),
    ("platform", "TEXT NOT NULL"),
    ("platform_fingerprint", "TEXT"),
    ("device_name", "TEXT"),
    ("host", "TEXT"),
    ("threads", "INTEGER"),
    *((f"sw_{s}", "TEXT") for s in SOFTWARE),
    ("state", "TEXT NOT NULL"),
    ("error", "TEXT"),
    ("params", "INTEGER"),
    ("flops_model", "REAL"),
    ("flops_graph", "REAL"),
    ("uncounted_ops", "TEXT"),
    ("bytes_estimate", "REAL"),
    ("memory_estimate_bytes", "REAL"),
    ("compile_time_s", "REAL"),
    ("warmup_calls", "INTEGER"),
    ("step_time_s", "REAL"),
    ("step_time_mad_s", "REAL"),
    ("step_time_mean_s", "REAL"),
    ("step_time_std_s", "REAL"),
    ("step_time_min_s", "REAL"),
    ("step_time_p5_s", "REAL"),
    ("step_time_p95_s", "REAL"),
    ("step_time_cv", "REAL"),
    ("n_samples", "INTEGER"),
    ("unstable", "INTEGER"),
    ("final_loss", "REAL"),
    ("examples_per_sec", "REAL"),
    ("flops_per_sec", "REAL"),
    ("peak_flops", "REAL"),
    ("peak_source", "TEXT"),
    ("utilization", "REAL"),
    ("peak_memory_bytes", "REAL"),
    ("wall_time_s", "REAL"),
    ("samples_s", "TEXT"),
    ("extra", "TEXT"),
    ("started_at", "REAL"),
    ("finished_at", "REAL"),
    ("source", "TEXT NOT NULL"),
)
_JSON_COLUMNS = ("uncounted_ops", "samples_s", "extra")
TRACE_COLUMNS = ("source", "platform", "label", "category", "flops_perc", "flops_perc_mean", "flops_perc_std",
                 "memory_bandwidth", "intensity", "raw_mb", "time_perc", "infeed", "infeed_mean", "infeed_std")  # fmt: skip

_TRACE_TYPES = {"source": "TEXT", "platform": "TEXT", "label": "TEXT", "category": "TEXT"}
_SCHEMA = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, {", ".join(f"{c} {t}" for c, t in RESULT_COLUMNS)});
CREATE INDEX results_run_key ON results(run_key);
CREATE INDEX results_platform ON results(platform, family);
CREATE UNIQUE INDEX results_imported_once ON results(source, platform, label, state) WHERE source != 'measured';
CREATE TABLE platforms (fingerprint TEXT PRIMARY KEY, platform TEXT NOT NULL, name TEXT, info TEXT NOT NULL,
                        ceilings TEXT, source TEXT NOT NULL, measured_at REAL);
CREATE TABLE traces ({", ".join(f"{c} {_TRACE_TYPES.get(c, 'REAL')}" for c in TRACE_COLUMNS)},
                     UNIQUE (source, label, category));
"""

SQLITE_MAGIC = b"SQLite format 3\x00"


class StoreError(Exception):
    """The file is not a paradnn store, is damaged, or has another schema version."""


def run_key(record: dict) -> str:
    """Identity of a measurement: configuration, run settings, platform, software stack.

    The git revision and time budget are kept in the row but are not part of the key, so a
    rerun from a new commit with the same versions skips what is already measured.
    """
    parts = [record.get(k) for k in ("family", "label", "dtype", "xla", "platform", "platform_fingerprint")]
    parts += [record.get(f"sw_{s}") for s in SOFTWARE if s != "git"]
    return hashlib.sha1(json.dumps(parts, default=str).encode()).hexdigest()[:20]


class Store:
    """A paradnn results store (see the module docstring). Use as a context manager."""

    def __init__(self, path: str | Path, create: bool = True) -> None:
        self.path = Path(path)
        _check_file(self.path, create)
        new = not self.path.exists() or self.path.stat().st_size == 0
        if new:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        try:
            self.conn.execute("PRAGMA busy_timeout = 60000")
            if new:
                self._create()
            else:
                self._check_schema()
            self.conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise StoreError(f"{self.path}: damaged or not a paradnn store ({exc})") from None

    def _create(self) -> None:
        with self.transaction() as c:
            if c.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise StoreError(f"{self.path}: an SQLite database, but not a paradnn store")
            for statement in filter(str.strip, _SCHEMA.split(";")):
                c.execute(statement)
            c.executemany("INSERT INTO meta VALUES (?, ?)", [("app", APP), ("schema_version", str(SCHEMA_VERSION))])

    def _check_schema(self) -> None:
        try:
            meta = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError:
            raise StoreError(f"{self.path}: an SQLite database, but not a paradnn store") from None
        if meta.get("app") != APP:
            raise StoreError(f"{self.path}: an SQLite database, but not a paradnn store")
        if meta.get("schema_version") != str(SCHEMA_VERSION):
            raise StoreError(
                f"{self.path}: store schema version {meta.get('schema_version')}; this paradnn reads version {SCHEMA_VERSION}"
            )

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self):
        """One write transaction; rolled back on any error."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # ------------------------------------------------------------------ writing

    def add_results(self, records: Iterable[dict], ignore_duplicates: bool = False) -> int:
        """Insert result records in one transaction; returns how many rows were added."""
        rows = [_row(r) for r in records]
        if not rows:
            return 0
        names = [c for c, _ in RESULT_COLUMNS]
        verb = "INSERT OR IGNORE" if ignore_duplicates else "INSERT"
        sql = f"{verb} INTO results ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        with self.transaction() as c:
            before = c.total_changes
            c.executemany(sql, [[row.get(n) for n in names] for row in rows])
            return c.total_changes - before

    def add_traces(self, rows: Iterable[dict]) -> int:
        sql = f"INSERT OR IGNORE INTO traces ({', '.join(TRACE_COLUMNS)}) VALUES ({', '.join('?' * len(TRACE_COLUMNS))})"
        with self.transaction() as c:
            before = c.total_changes
            c.executemany(sql, [[r.get(k) for k in TRACE_COLUMNS] for r in rows])
            return c.total_changes - before

    def put_platform(self, fingerprint: str, platform: str, info: dict, ceilings: dict | None, source: str) -> None:
        """Record a platform's identity and ceilings (replacing that fingerprint's row)."""
        with self.transaction() as c:
            c.execute(
                "INSERT OR REPLACE INTO platforms VALUES (?, ?, ?, ?, ?, ?, ?)",
                (fingerprint, platform, info.get("name"), _dumps(info), _dumps(ceilings), source, time.time()),
            )

    # ------------------------------------------------------------------ reading

    def run_keys(self, states: Iterable[str] = STATES) -> set[str]:
        states = tuple(states)
        marks = ",".join("?" * len(states))
        rows = self.conn.execute(f"SELECT DISTINCT run_key FROM results WHERE state IN ({marks})", states)
        return {r[0] for r in rows}

    def platform(self, fingerprint: str) -> dict | None:
        row = self.conn.execute("SELECT * FROM platforms WHERE fingerprint = ?", (fingerprint,)).fetchone()
        if row is None:
            return None
        return {**dict(row), "info": json.loads(row["info"]), "ceilings": json.loads(row["ceilings"] or "null")}

    def platform_infos(self, platform: str) -> list[dict]:
        """Identity records of measured ``platform`` rows, newest first."""
        rows = self.conn.execute(
            "SELECT info FROM platforms WHERE platform = ? AND source = 'measured' ORDER BY measured_at DESC", (platform,)
        )
        return [json.loads(r[0]) for r in rows]

    def platforms(self) -> pd.DataFrame:
        return pd.read_sql_query("SELECT * FROM platforms ORDER BY platform", self.conn)

    def results(self, family: str | None = None, platform: str | None = None, state: str | None = None) -> pd.DataFrame:
        """Result rows as a DataFrame, JSON columns decoded, optionally filtered."""
        where, args = [], []
        for column, value in (("family", family), ("platform", platform), ("state", state)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT * FROM results" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        df = pd.read_sql_query(sql, self.conn, params=args)
        for column in _JSON_COLUMNS:
            df[column] = [json.loads(v) if isinstance(v, str) and v else None for v in df[column]]
        df["xla"] = df["xla"].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else bool(v))
        return df

    def traces(self) -> pd.DataFrame:
        return pd.read_sql_query("SELECT * FROM traces", self.conn)

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM results").fetchone()[0])


def _check_file(path: Path, create: bool) -> None:
    """Refuse anything that is not an SQLite file before SQLite touches it."""
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, not a paradnn store")
    if not path.exists():
        if not create:
            raise StoreError(f"{path}: no such store")
        return
    if path.stat().st_size == 0:
        return
    with open(path, "rb") as f:
        if f.read(16) != SQLITE_MAGIC:
            raise StoreError(f"{path}: not a paradnn store (not an SQLite database)")


def _dumps(value) -> str | None:
    return None if value is None else json.dumps(value, default=str)


def _row(record: dict) -> dict:
    """A record as result-table values: JSON for lists, 0/1 for booleans, NULL for NaN."""
    row = dict(record)
    software = row.pop("software", None) or {}
    for name in SOFTWARE:
        row.setdefault(f"sw_{name}", software.get(name))
    row.setdefault("source", "measured")
    row.setdefault("finished_at", time.time())
    if row.get("state") not in STATES:
        raise ValueError(f"state {row.get('state')!r} is not one of {', '.join(STATES)}")
    row.setdefault("run_key", run_key(row))
    for column in _JSON_COLUMNS:
        if column in row and not isinstance(row[column], str) and row[column] is not None:
            row[column] = json.dumps(row[column], default=str)
    for key, value in row.items():
        if isinstance(value, float) and not math.isfinite(value):
            row[key] = None
        elif isinstance(value, bool):
            row[key] = int(value)
    return row


def export(df: pd.DataFrame, fmt: str, path: str | Path | None) -> str | None:
    """Write ``df`` as csv, json or parquet to ``path`` (csv/json to a string if no path)."""
    if fmt == "parquet":
        if path is None:
            raise ValueError("parquet needs --output FILE")
        flat = df.copy()
        for column in _JSON_COLUMNS:
            if column in flat:
                flat[column] = flat[column].map(lambda v: None if v is None else json.dumps(v))
        flat.to_parquet(path, index=False)
        return None
    text = df.to_csv(index=False) if fmt == "csv" else df.to_json(orient="records", indent=1)
    if path is None:
        return text
    Path(path).write_text(text)
    return None
