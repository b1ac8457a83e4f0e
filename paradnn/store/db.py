"""The results store: one SQLite file with every measurement and its provenance.

Tables
  ``meta``       application name and schema version (checked on every open);
  ``results``    one row per measurement attempt: configuration (every hyperparameter a
                 column), family version, run settings, platform, software stack, state,
                 error text, all figures, the raw samples (JSON), timestamps and ``source``
                 (``measured`` or ``legacy:<file>``);
  ``platforms``  identity and ceilings of each platform (one row per fingerprint);
  ``traces``     op-category breakdowns: the original study's TPU traces and this machine's
                 profiles (schema 3 adds each category's matrix-product size);
  ``claims``     configurations being measured right now, so two sweeps never measure one
                 twice (a claim dies with its process, or expires).

Every write is one transaction; WAL journaling and a busy timeout let several sweeps
write one store at once. A file that is not a paradnn store, a damaged or read-only one,
or one written by a newer paradnn raises :class:`StoreError` before anything is written:
nothing is ever overwritten or truncated.

The store grows instead of breaking: opening an older store adds every column this
paradnn knows and it lacks (new hyperparameters, metrics, run settings) and runs the
schema's versioned migrations, all in one transaction. Nothing is rewritten or dropped;
a store from a newer paradnn is refused. Writing a result with a key the store has no
column for is an error, never a silent drop.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import socket
import sqlite3
import time
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from paradnn.families import hyperparameter_columns
from paradnn.identity import LATER_IDENTITY, SOFTWARE, run_key
from paradnn.settings import FRAMEWORK_VERSION_COLUMNS, ORIGINAL_INPUT, stored
from paradnn.store.errors import StoreError
from paradnn.store.names import FoldError, check_writes, machine, records, row_machine
from paradnn.store.peaks import PEAK_COLUMNS, current_peaks, current_utilisation, platform_ceilings
from paradnn.vocabulary import LEGACY, MEASURED, OK, STATES

__all__ = ["STATES", "SCHEMA_VERSION", "Store", "StoreError", "export", "run_key"]

APP = "paradnn"
# Version 2: the ``claims`` table (leases on configurations being measured); version 3: the
# traces' ``op_size`` (a profile's matrix-product size per category). Results columns are
# not versioned: every column this paradnn knows is added to an older store when it opens.
SCHEMA_VERSION = 4

# (column, SQL type) of the results table, in order; the hyperparameter columns (one per
# axis of every family) follow ``label``. Adding a column here is all a new metric needs.
CORE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_key", "TEXT NOT NULL"),
    ("family", "TEXT NOT NULL"),
    ("label", "TEXT NOT NULL"),
)
RESULT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("family_version", "INTEGER"),
    *((s.column, s.sql) for s in stored()),  # the declared run settings (paradnn.settings)
    ("compute_dtype", "TEXT"),
    ("xla_auto", "INTEGER"),  # 1: the XLA setting was chosen by --xla auto's probe
    ("replica_batch", "INTEGER"),  # batch / devices: each replica's share
    ("steps_per_call", "INTEGER"),
    ("max_seconds", "REAL"),
    ("platform_id", "TEXT"),  # a named platform's id (cpu, gpu:0); NULL: ``platform`` is the id
    ("platform_fingerprint", "TEXT"),
    ("device_name", "TEXT"),
    ("host", "TEXT"),
    ("threads", "INTEGER"),
    *((f"sw_{s}", "TEXT") for s in SOFTWARE),
    ("sw_jax", "TEXT"),  # JAX's version, for JAX runs only
    ("sw_torch", "TEXT"),  # PyTorch's version, for PyTorch runs only
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
    ("contention_cores", "REAL"),  # other processes' CPU in the standing timed window, in cores (paradnn.engine.contention)
    ("steal_cores", "REAL"),  # the hypervisor's steal in that window, in cores
    ("refused_windows", "INTEGER"),  # windows timed again because others took more than the limit
    ("contended", "INTEGER"),  # 1: no quiet window was had (never pooled with quiet rows); NULL: not readable
    ("final_loss", "REAL"),
    ("examples_per_sec", "REAL"),
    ("flops_per_sec", "REAL"),
    ("peak_flops", "REAL"),
    ("peak_source", "TEXT"),
    ("utilization", "REAL"),
    ("peak_memory_bytes", "REAL"),
    ("energy_per_step_j", "REAL"),  # joules per step over the timed calls, where a counter is readable
    ("energy_source", "TEXT"),  # rapl (CPU packages) or nvml (GPU)
    ("examples_per_joule", "REAL"),
    ("device_step_time_s", "REAL"),  # host input modes: the device-resident step, sampled alternately
    ("infeed_share", "REAL"),  # 1 - device_step_time_s / step_time_s
    ("replica_step_time_s", "REAL"),  # data-parallel: one replica's own step at replica_batch, sampled alternately
    ("comm_share", "REAL"),  # 1 - replica_step_time_s / step_time_s
    ("allreduce_share", "REAL"),  # the profiler's all-reduce time over one profiled step
    ("scaling_efficiency", "REAL"),  # replica_step_time_s / step_time_s (weak scaling)
    ("wall_time_s", "REAL"),
    ("samples_s", "TEXT"),
    ("warmup_s", "TEXT"),
    ("extra", "TEXT"),
    ("started_at", "REAL"),
    ("finished_at", "REAL"),
    ("source", "TEXT NOT NULL"),
    ("origin", "TEXT"),  # the store a row was merged from (paradnn merge); NULL: written here
)
_JSON_COLUMNS = ("uncounted_ops", "samples_s", "warmup_s", "extra")
# Columns whose NOT NULL constraint an ALTER TABLE cannot add: given a default instead.
_ADDED_DEFAULTS = {**LATER_IDENTITY}
TRACE_COLUMNS = (
    "source",
    "platform",
    "label",
    "category",
    "flops_perc",
    "flops_perc_mean",
    "flops_perc_std",
    "memory_bandwidth",
    "intensity",
    "raw_mb",
    "time_perc",
    "infeed",
    "infeed_mean",
    "infeed_std",
    "op_size",
)
_TRACE_TYPES = {"source": "TEXT", "platform": "TEXT", "label": "TEXT", "category": "TEXT"}


def result_columns() -> tuple[tuple[str, str], ...]:
    """Every column of the results table this paradnn writes, hyperparameters included."""
    hyper = tuple((name, a.sql_type) for name, a in hyperparameter_columns().items())
    return CORE_COLUMNS + hyper + RESULT_COLUMNS


def hyperparameter_names() -> tuple[str, ...]:
    return tuple(hyperparameter_columns())


_CLAIMS = """CREATE TABLE IF NOT EXISTS claims (run_key TEXT PRIMARY KEY, label TEXT, host TEXT NOT NULL, pid INTEGER NOT NULL,
                                     pid_started REAL, expires_at REAL NOT NULL)"""


def _schema() -> list[str]:
    columns = ", ".join(f"{c} {t}" for c, t in result_columns())
    traces = ", ".join(f"{c} {_TRACE_TYPES.get(c, 'REAL')}" for c in TRACE_COLUMNS)
    return [
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, {columns})",
        "CREATE INDEX results_run_key ON results(run_key)",
        "CREATE INDEX results_platform ON results(platform, family)",
        f"CREATE UNIQUE INDEX results_imported_once ON results(source, platform, label, state) WHERE source != '{MEASURED}'",
        "CREATE TABLE platforms (fingerprint TEXT PRIMARY KEY, platform TEXT NOT NULL, name TEXT, info TEXT NOT NULL, "
        "ceilings TEXT, source TEXT NOT NULL, measured_at REAL)",
        f"CREATE TABLE traces ({traces}, UNIQUE (source, label, category))",
        _CLAIMS,
    ]


def fed_as_measured(row: dict) -> dict:
    """``row`` with the input mode it was measured in: an original study's row written before
    schema 4 said device-resident, where the study fed its chips through the host; its run key
    follows. Other rows as they are."""
    if not str(row.get("source") or "").startswith(LEGACY + ":") or row.get("input_mode") == ORIGINAL_INPUT:
        return row
    fixed = {**row, "input_mode": ORIGINAL_INPUT}
    return {**fixed, "run_key": run_key(fixed)}


def _original_input_mode(c: sqlite3.Connection) -> None:
    """Version 4: the original study's rows read their input through the host (:func:`fed_as_measured`)."""
    rows = [fed_as_measured(dict(r)) for r in c.execute("SELECT * FROM results WHERE source LIKE ?", (LEGACY + ":%",))]
    c.executemany(
        "UPDATE results SET input_mode = ?, run_key = ? WHERE id = ?", [(r["input_mode"], r["run_key"], r["id"]) for r in rows]
    )


# What brings a store from the version before to this version (columns aside): SQL statements,
# or functions of the open transaction.
MIGRATIONS: dict[int, list] = {2: [_CLAIMS], 3: ["ALTER TABLE traces ADD COLUMN op_size REAL"], 4: [_original_input_mode]}

SQLITE_MAGIC = b"SQLite format 3\x00"
# A claim on a configuration outlives its sweep's process by this much on another host
# (on the same host a claim dies with its process).
CLAIM_MARGIN_S = 60.0


class Store:
    """A paradnn results store (see the module docstring). Use as a context manager.

    ``create``: make a new store if the file is missing (or empty); ``readonly``: open for
    reading only (no migration, nothing written; missing columns read as empty). ``snapshot``
    (with ``readonly``): leave nothing beside the file either (a WAL store opened read-only
    otherwise gains ``-shm``/``-wal`` files), for a store no process has open (no ``-wal``
    file beside it); a store in use is opened as with ``readonly`` alone.
    """

    def __init__(self, path: str | Path, create: bool = True, readonly: bool = False, snapshot: bool = False) -> None:
        check_store_path(path)
        self.path = Path(path)
        self.readonly = readonly
        _check_file(self.path, create and not readonly)
        if not readonly and self.path.exists() and not os.access(self.path, os.W_OK):
            raise StoreError(f"{self.path}: read-only; paradnn needs to write this store (check its permissions)")
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        idle = snapshot and not Path(f"{self.path}-wal").exists()  # no writer: nothing can change under the reader
        target = f"{self.path.resolve().as_uri()}?mode=ro" + ("&immutable=1" if idle else "") if readonly else str(self.path)
        try:
            self.conn = sqlite3.connect(target, timeout=60, isolation_level=None, uri=readonly)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot be opened ({exc})") from None
        self.conn.row_factory = sqlite3.Row
        try:
            self.conn.execute("PRAGMA busy_timeout = 60000")
            self._open(create and not readonly)
            if not readonly:
                self._enable_wal()
        except sqlite3.OperationalError as exc:
            self.conn.close()
            raise _operational(self.path, exc) from None
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise StoreError(f"{self.path}: damaged or not a paradnn store ({exc})") from None
        except StoreError:
            self.conn.close()
            raise

    def _meta(self) -> dict[str, str] | None:
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "meta" not in tables:
            return None if not tables else {}
        return dict(self.conn.execute("SELECT key, value FROM meta").fetchall())

    def _open(self, create: bool) -> None:
        meta = self._meta()
        if meta is None:  # an empty database: create the schema (unless another process just did)
            if not create:
                raise StoreError(f"{self.path}: an empty file, not a paradnn store")
            with self.transaction() as c:  # BEGIN IMMEDIATE serialises concurrent creators
                if self._meta() is None:
                    for statement in _schema():
                        c.execute(statement)
                    c.executemany("INSERT INTO meta VALUES (?, ?)", [("app", APP), ("schema_version", str(SCHEMA_VERSION))])
            meta = self._meta()
        if not meta or meta.get("app") != APP:
            raise StoreError(f"{self.path}: an SQLite database, but not a paradnn store")
        written = meta.get("schema_version", "")
        if not re.fullmatch(r"[0-9]{1,6}", written):  # missing or not a number: nothing to migrate from, nothing written
            raise StoreError(f"{self.path}: a paradnn store with a damaged schema version ({written[:40] or 'none'!r})")
        version = int(written)
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: written by a newer paradnn (store schema version {version}; this paradnn "
                f"reads up to version {SCHEMA_VERSION}): upgrade paradnn to use it"
            )
        if not self.readonly and (version < SCHEMA_VERSION or self._missing_columns()):
            self._migrate()

    def _enable_wal(self, timeout_s: float = 60.0) -> None:
        """Switch to WAL journaling (once per store). The switch takes an exclusive lock without
        waiting on SQLite's busy handler, so when several processes open a new store at once
        the losers retry until the winner is done."""
        end = time.monotonic() + timeout_s
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > end:
                    raise
                time.sleep(0.05)

    def _columns(self) -> set[str]:
        return {r[1] for r in self.conn.execute("PRAGMA table_info(results)")}

    def _missing_columns(self) -> list[tuple[str, str]]:
        present = self._columns()
        return [(c, t) for c, t in result_columns() if c not in present]

    def _migrate(self) -> None:
        """Add what this paradnn knows and the store lacks; one transaction, nothing dropped."""
        with self.transaction() as c:  # re-read inside: a concurrent opener may have migrated already
            version = int(dict(c.execute("SELECT key, value FROM meta").fetchall())["schema_version"])
            for column, sql_type in self._missing_columns():
                default = _ADDED_DEFAULTS.get(column)
                sql_type = sql_type.replace(" NOT NULL", "")
                suffix = f" DEFAULT {default!r}" if default is not None else ""
                c.execute(f"ALTER TABLE results ADD COLUMN {column} {sql_type}{suffix}")
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS.get(step, []):
                    statement(c) if callable(statement) else c.execute(statement)
            c.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(max(version, SCHEMA_VERSION)),))

    @property
    def schema_version(self) -> int:
        return int((self._meta() or {}).get("schema_version", "0"))

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def transaction(self):
        """One write transaction; rolled back on any error."""
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only")
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise _operational(self.path, exc) from None
        try:
            yield self.conn
        except sqlite3.OperationalError as exc:
            self.conn.execute("ROLLBACK")
            raise _operational(self.path, exc) from None
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # ------------------------------------------------------------------ writing

    def add_results(self, records: Iterable[dict], ignore_duplicates: bool = False, release: bool = False) -> int:
        """Insert result records in one transaction; returns how many rows were added.

        A key the store has no column for is a ValueError (nothing is written). With
        ``release`` the records' claims (see :meth:`claim`) are released in the same transaction.
        """
        rows = [_row(r) for r in records]
        if not rows:
            return 0
        names = [c for c, _ in result_columns()]
        unknown = sorted({k for row in rows for k in row} - set(names))
        if unknown:
            raise ValueError(f"result keys without a store column: {', '.join(unknown)} (declare them in paradnn.store)")
        verb = "INSERT OR IGNORE" if ignore_duplicates else "INSERT"
        sql = f"{verb} INTO results ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        with self.transaction() as c:
            _check_rows(c, rows, str(self.path))
            before = c.total_changes
            c.executemany(sql, [[row.get(n) for n in names] for row in rows])
            added = c.total_changes - before
            if release:
                c.executemany("DELETE FROM claims WHERE run_key = ? AND pid = ?", [(row["run_key"], os.getpid()) for row in rows])
            return added

    def add_traces(self, rows: Iterable[dict]) -> int:
        sql = f"INSERT OR IGNORE INTO traces ({', '.join(TRACE_COLUMNS)}) VALUES ({', '.join('?' * len(TRACE_COLUMNS))})"
        with self.transaction() as c:
            before = c.total_changes
            c.executemany(sql, [[r.get(k) for k in TRACE_COLUMNS] for r in rows])
            return c.total_changes - before

    def put_platform(self, fingerprint: str, platform: str, info: dict, ceilings: dict | None, source: str) -> None:
        """Record a platform's identity and ceilings (replacing that fingerprint's row); a name that
        another machine holds, or a measured platform under a datasheet's name, is refused
        (:mod:`paradnn.store.names`)."""
        with self.transaction() as c:
            found = machine(info, platform, info.get("name"))
            check_writes(
                c, {platform: [(found, "this write")]}, [platform] if source == MEASURED else [], str(self.path), name_hint
            )
            _check_not_stranded(c, fingerprint, platform, str(self.path))
            c.execute(
                "INSERT OR REPLACE INTO platforms VALUES (?, ?, ?, ?, ?, ?, ?)",
                (fingerprint, platform, info.get("name"), _dumps(info), _dumps(ceilings), source, time.time()),
            )

    def check_name(self, platform: str, info: dict) -> None:
        """Refuse (:class:`FoldError`), writing nothing, what :meth:`put_platform` would refuse for a
        measured ``platform`` on the machine ``info`` names: a sweep asks before its worker starts."""
        found = machine(info, platform, info.get("name"))
        check_writes(self.conn, {platform: [(found, "this write")]}, [platform], str(self.path), name_hint)

    # ------------------------------------------------------------------ claims

    def claim(self, key: str, label: str, done_states: Iterable[str], ttl_s: float) -> str:
        """Claim configuration ``key`` for this process before measuring it.

        Returns ``claimed``; ``done`` when the store already has a row of ``key`` in one of
        ``done_states``; ``busy`` when another live process holds the claim. A claim held by
        a dead process on this host, or expired, is taken over.
        """
        states = tuple(done_states)
        with self.transaction() as c:
            if states:
                marks = ",".join("?" * len(states))
                sql = f"SELECT 1 FROM results WHERE run_key = ? AND state IN ({marks}) LIMIT 1"
                if c.execute(sql, (key, *states)).fetchone():
                    return "done"
            held = c.execute("SELECT host, pid, pid_started, expires_at FROM claims WHERE run_key = ?", (key,)).fetchone()
            if held is not None and _alive(*held) and held["pid"] != os.getpid():
                return "busy"
            c.execute(
                "INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?, ?)",
                (key, label, socket.gethostname(), os.getpid(), _started(os.getpid()), time.time() + ttl_s),
            )
            return "claimed"

    def release(self, keys: Iterable[str]) -> None:
        """Drop this process's claims on ``keys`` (measured, or given up)."""
        with self.transaction() as c:
            c.executemany("DELETE FROM claims WHERE run_key = ? AND pid = ?", [(k, os.getpid()) for k in keys])

    def claims(self) -> pd.DataFrame:
        return pd.read_sql_query("SELECT * FROM claims", self.conn)

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
            "SELECT info FROM platforms WHERE platform = ? AND source = ? ORDER BY measured_at DESC", (platform, MEASURED)
        )
        return [json.loads(r[0]) for r in rows]

    def xla_choices(self, platform: str) -> dict[str, bool]:
        """``--xla auto``'s choices recorded for a measured platform: ``{"family|dtype": xla}`` (newest stack)."""
        for row in self.conn.execute(
            "SELECT ceilings FROM platforms WHERE platform = ? AND source = ? ORDER BY measured_at DESC", (platform, MEASURED)
        ):
            choices = (json.loads(row[0] or "null") or {}).get("xla")
            if choices:
                return {key: bool(c["xla"]) for key, c in choices.items()}
        return {}

    def platforms(self) -> pd.DataFrame:
        """The platform records as the rows name them: each record under its own name, and again under
        every other name its machine's rows carry (one machine merged under two names, ``cpu`` and
        ``xeon-lab``, has one record by fingerprint; ``xeon-lab``'s ceilings are that record's)."""
        columns = "fingerprint, platform, name, info, ceilings, source, measured_at"
        aliases = (
            "SELECT p.fingerprint, r.platform, p.name, p.info, p.ceilings, p.source, p.measured_at FROM platforms p "
            "JOIN (SELECT DISTINCT platform, platform_fingerprint FROM results) r "
            "ON r.platform_fingerprint = p.fingerprint AND r.platform != p.platform"
        )
        return pd.read_sql_query(f"SELECT {columns} FROM platforms UNION ALL {aliases} ORDER BY platform", self.conn)

    def platform_names(self) -> list[str]:
        """Every platform that has results, sorted."""
        return [r[0] for r in self.conn.execute("SELECT DISTINCT platform FROM results ORDER BY platform")]

    def results(self, family: str | None = None, platform: str | None = None, state: str | None = None) -> pd.DataFrame:
        """Result rows as a DataFrame, JSON columns decoded, optionally filtered; utilisation derived
        against each platform's peak as it stands now (:mod:`paradnn.store.peaks`)."""
        where, args = [], []
        for column, value in (("family", family), ("platform", platform), ("state", state)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT * FROM results" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        df = pd.read_sql_query(sql, self.conn, params=args)
        for column, _ in result_columns():  # an older store opened read-only lacks new columns
            if column not in df:
                df[column] = LATER_IDENTITY.get(column)
        for column, default in LATER_IDENTITY.items():  # rows from before a setting existed ran at its default
            if default is not None:
                df[column] = df[column].fillna(default)
        for column in _JSON_COLUMNS:
            df[column] = [json.loads(v) if isinstance(v, str) and v else None for v in df[column]]
        df["xla"] = df["xla"].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else bool(v))
        return current_utilisation(df, self.peaks())  # against the peak as it stands now

    def peaks(self) -> dict[tuple[str, str], tuple[float, str]]:
        """Every platform's peak per compute dtype as it stands now (:func:`paradnn.store.peaks.current_peaks`)."""
        if not set(PEAK_COLUMNS) <= self._columns():  # an older store opened read-only: as stored
            return {}
        rows = pd.read_sql_query(f"SELECT {', '.join(PEAK_COLUMNS)} FROM results WHERE state = ?", self.conn, params=(OK,))
        return current_peaks(rows, platform_ceilings(self.platforms()))

    def traces(self) -> pd.DataFrame:
        return pd.read_sql_query("SELECT * FROM traces", self.conn)

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM results").fetchone()[0])


def _check_not_stranded(conn: sqlite3.Connection, fingerprint: str, platform: str, store: str) -> None:
    """Refuse a record that would take a machine's record from the name its rows carry (``sweep --name
    lab-b`` on a machine measured as ``lab-a``: ``lab-a``'s rows would be left without a record, and the
    sweep would measure nothing, since a name is no part of a run's identity)."""
    held = conn.execute("SELECT platform FROM platforms WHERE fingerprint = ?", (fingerprint,)).fetchone()
    if held is None or held[0] == platform:
        return
    if conn.execute(
        "SELECT 1 FROM results WHERE platform = ? AND platform_fingerprint = ? LIMIT 1", (held[0], fingerprint)
    ).fetchone():
        rename = shlex.quote(f"{held[0]}={platform}")
        raise FoldError(
            f"this machine is named {held[0]!r} in {store} (its rows carry that name); to call it {platform!r}, "
            f"rename it on the way into a new store: paradnn merge {shlex.quote(store)} --rename {rename} "
            "--store NEW.sqlite"
        )


def name_hint(name: str, where: str) -> str:
    """How to name a machine apart, for a write refused by :func:`paradnn.store.names.check_writes`."""
    return f"give this machine a name of its own (sweep --name NEW-NAME; merge --rename {shlex.quote(name + '=NEW-NAME')})"


def _check_rows(conn: sqlite3.Connection, rows: list[dict], store: str) -> None:
    """Refuse rows whose platform name another machine holds (checked inside the write)."""
    known = records(conn)
    incoming: dict[str, set] = {}
    for row in rows:
        incoming.setdefault(str(row.get("platform")), set()).add(row_machine(row, known))
    measured = {str(row.get("platform")) for row in rows if row.get("source", MEASURED) == MEASURED}
    check_writes(conn, {name: [(m, "this write") for m in found] for name, found in incoming.items()}, measured, store, name_hint)


def _alive(host: str, pid: int, pid_started: float | None, expires_at: float) -> bool:
    """Is a claim's process still at work? On this host ask the OS; elsewhere trust the lease."""
    if host != socket.gethostname():
        return expires_at > time.time()
    started = _started(pid)
    return started is not None and (pid_started is None or abs(started - pid_started) < 1.0)


def _started(pid: int) -> float | None:
    """When process ``pid`` started (tells a reused pid from the original), or None if it is gone."""
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def _operational(path: Path, exc: sqlite3.OperationalError) -> StoreError:
    text = str(exc)
    if "readonly" in text or "read-only" in text:
        return StoreError(f"{path}: read-only; paradnn needs to write this store (check its permissions)")
    if "unable to open" in text:
        return StoreError(f"{path}: cannot be opened ({text}; check the folder's permissions)")
    return StoreError(f"{path}: {text}")


NAME_BYTES, PATH_CHARS = 255, 4096  # the longest file name and path Linux and macOS take


def check_store_path(path: str | Path) -> None:
    """Refuse a store path no file can have, before anything is created: a folder (``newdir/``), a
    name over :data:`NAME_BYTES` bytes, a path over :data:`PATH_CHARS` characters, a parent that is
    a file, or something other than a regular file (a FIFO or device would block or never end)."""
    text = os.fspath(path)
    if text.endswith(("/", os.sep)):
        folder = _cut(text.rstrip("/" + os.sep))
        raise StoreError(f"{_cut(text)}: is a folder name; a store is a file (e.g. {folder}/results.sqlite)")
    long = next((part for part in Path(text).parts if len(part.encode()) > NAME_BYTES), None)
    if long is not None:
        raise StoreError(
            f"{_cut(text)}: holds a name of {len(long.encode()):,} bytes; each folder and file name takes at most {NAME_BYTES}"
        )
    if len(os.path.abspath(text)) > PATH_CHARS:
        raise StoreError(f"{_cut(text)}: a path of {len(os.path.abspath(text)):,} characters; at most {PATH_CHARS:,}")
    found = Path(text)
    if found.exists() and not found.is_dir() and not found.is_file():
        raise StoreError(f"{_cut(text)}: not a regular file (a FIFO, socket or device), not a paradnn store")
    parent = next((p for p in Path(text).absolute().parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise StoreError(f"{_cut(text)}: {_cut(str(parent))} is a file, not a folder")


def check_undamaged(path: str | Path) -> None:
    """StoreError when the store at ``path`` (if there is one) is damaged past its header: checked
    with SQLite's ``quick_check`` on a read-only snapshot before anything writes to it, so a sweep or
    report refuses it whole instead of writing pages into it and failing half way."""
    check_store_path(path)  # a path no file can have: said first, as every command says it
    found = Path(path)
    if not found.is_file() or found.stat().st_size == 0:
        return  # nothing yet, or a file another writer has just created: the writer's own open makes the store
    _check_file(found, create=True)  # not SQLite at all: said in the open's own words
    try:
        with Store(path, create=False, readonly=True, snapshot=True) as store:
            damage = store.conn.execute("PRAGMA quick_check").fetchone()[0]
    except StoreError:
        return  # SQLite without a paradnn schema yet (being created): the writer's own open decides
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{_cut(os.fspath(path))}: damaged ({exc})") from None
    if damage != "ok":
        raise StoreError(f"{_cut(os.fspath(path))}: damaged ({_cut(str(damage))})")


def _cut(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text):,} characters)"


def _check_file(path: Path, create: bool) -> None:
    """Refuse anything that is not an SQLite file before SQLite touches it."""
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, not a paradnn store")
    if not path.exists():
        if not create:
            raise StoreError(f"{path}: no such store")
        return
    if path.stat().st_size == 0:
        if not create:
            raise StoreError(f"{path}: an empty file, not a paradnn store")
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
    row.setdefault("framework", "tensorflow")
    row.setdefault("input_mode", "device")
    row.setdefault("devices", 1)
    own_version = FRAMEWORK_VERSION_COLUMNS.get(row["framework"])
    if own_version:
        row.setdefault(own_version, software.get(row["framework"]))
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
    """Write ``df`` as csv, json or parquet to ``path`` (csv/json to a string if no path).

    JSON columns (samples, extra, ...) are written as JSON text in CSV and Parquet.
    """
    if fmt in ("parquet", "csv"):
        if fmt == "parquet" and path is None:
            raise ValueError("parquet needs --output FILE")
        flat = df.copy()
        for column in _JSON_COLUMNS:
            if column in flat:
                flat[column] = flat[column].map(lambda v: None if v is None else json.dumps(v))
        if fmt == "parquet":
            flat.to_parquet(path, index=False)
            return None
        text = flat.to_csv(index=False)
    else:
        text = df.to_json(orient="records", indent=1)
    if path is None:
        return text
    Path(path).write_text(text)
    return None
