"""The store: schema, provenance, round trips, exports and refusals."""

from __future__ import annotations

import math
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from paradnn.identity import run_key
from paradnn.store import SCHEMA_VERSION, STATES, Store, StoreError, export

RECORD = {
    "family": "fc",
    "label": "layer_1-node_2-input_3-output_4-bs_5",
    "layers": 1,
    "nodes": 2,
    "input": 3,
    "output": 4,
    "batch": 5,
    "dtype": "float32",
    "xla": True,
    "platform": "cpu",
    "state": "ok",
    "step_time_s": 0.5,
    "samples_s": [0.4, 0.5, 0.6],
    "uncounted_ops": [],
    "software": {"tensorflow": "2.99"},
    "final_loss": float("nan"),
}


def test_round_trip_keeps_every_field(tmp_path):
    with Store(tmp_path / "r.sqlite") as s:
        assert s.add_results([RECORD]) == 1
        df = s.results()
    row = df.iloc[0]
    assert row["label"] == RECORD["label"] and row["nodes"] == 2 and bool(row["xla"]) is True
    assert row["samples_s"] == [0.4, 0.5, 0.6] and row["sw_tensorflow"] == "2.99"
    assert row["source"] == "measured" and pd.isna(row["final_loss"]) and row["finished_at"] > 0
    assert row["run_key"] == run_key({**RECORD, "sw_tensorflow": "2.99"})


def test_run_key_ignores_git_revision_but_not_versions():
    base = {**RECORD, "sw_tensorflow": "2.99", "sw_git": "abc"}
    assert run_key(base) == run_key({**base, "sw_git": "def"})
    assert run_key(base) != run_key({**base, "sw_tensorflow": "3.0"})
    assert run_key(base) != run_key({**base, "xla": False})


def test_bad_state_is_refused_and_nothing_is_written(tmp_path):
    with Store(tmp_path / "r.sqlite") as s:
        with pytest.raises(ValueError, match="state"):
            s.add_results([RECORD, {**RECORD, "state": "finished"}])
        assert s.count() == 0


def test_schema_version_is_checked(tmp_path):
    path = tmp_path / "r.sqlite"
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 999"):
        Store(path)


def test_foreign_sqlite_database_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a paradnn store"):
        Store(path)
    assert path.read_bytes() == before


def test_missing_store_is_an_error_when_reading(tmp_path):
    with pytest.raises(StoreError, match="no such store"):
        Store(tmp_path / "none.sqlite", create=False)
    assert not (tmp_path / "none.sqlite").exists()


def test_filters_and_exports(tmp_path):
    with Store(tmp_path / "r.sqlite") as s:
        s.add_results([RECORD, {**RECORD, "state": "oom", "platform": "gpu:0"}])
        assert len(s.results(state="oom")) == 1 and len(s.results(platform="cpu")) == 1
        df = s.results()
    assert "layer_1-node_2" in export(df, "csv", None)
    export(df, "json", tmp_path / "r.json")
    assert pd.read_json(tmp_path / "r.json").shape[0] == 2
    export(df, "parquet", tmp_path / "r.parquet")
    assert pd.read_parquet(tmp_path / "r.parquet")["state"].tolist() == ["ok", "oom"]


def test_meta_records_the_schema(tmp_path):
    Store(tmp_path / "r.sqlite").close()
    with sqlite3.connect(tmp_path / "r.sqlite") as conn:
        assert dict(conn.execute("SELECT key, value FROM meta")) == {"app": "paradnn", "schema_version": str(SCHEMA_VERSION)}


FIXTURE = Path(__file__).parent / "fixtures" / "store_v1.sqlite"


def test_a_v1_store_migrates_and_keeps_every_row(tmp_path):
    path = tmp_path / "v1.sqlite"
    shutil.copy(FIXTURE, path)
    with sqlite3.connect(path) as conn:
        conn.row_factory = sqlite3.Row
        before = [dict(r) for r in conn.execute("SELECT * FROM results ORDER BY id")]
        traces, platforms = (conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("traces", "platforms"))
    assert len(before) == 275
    with Store(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        df = s.results()
        assert len(s.traces()) == traces and len(s.platforms()) == platforms and s.claims().empty
        assert "op_size" in s.traces().columns  # schema 3: a profile's matrix-product size per category
    after = df.set_index("id")
    for row in before:  # every old value is still there, unchanged, but what schema 4 corrected
        new = after.loc[row["id"]]
        original = row["source"].startswith("legacy:")  # schema 4: the 2019 rows were fed through the host
        for column, value in row.items():
            if column in ("id", "xla") or column in ("uncounted_ops", "samples_s", "extra"):
                continue
            if original and column in ("input_mode", "run_key"):
                plain = {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in new.to_dict().items()}
                assert new[column] == ("host" if column == "input_mode" else run_key(plain))
                continue
            assert (pd.isna(value) and pd.isna(new[column])) or new[column] == value, (row["id"], column)
    assert (after["family_version"] == 1).all()  # every v1 row was made by version-1 families
    assert after["warmup_s"].isna().all()  # a new metric: empty for old rows
    # Run identity is stable: an old row's key is what today's definition gives it.
    for row in before:
        if not row["source"].startswith("legacy:"):
            assert run_key({**row, "family_version": 1}) == row["run_key"]
    assert sum(r["source"].startswith("legacy:") for r in before) > 0  # the fixture holds 2019 rows to correct
    with Store(path) as s:  # a second open migrates nothing more
        assert len(s.results()) == 275


def test_a_v1_store_reads_without_migrating_when_opened_read_only(tmp_path):
    path = tmp_path / "v1.sqlite"
    shutil.copy(FIXTURE, path)
    before = path.read_bytes()
    with Store(path, readonly=True) as s:
        df = s.results()
    assert len(df) == 275 and "family_version" in df and path.read_bytes() == before


def test_a_store_from_a_newer_paradnn_is_refused(tmp_path):
    path = tmp_path / "r.sqlite"
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    before = path.read_bytes()
    with pytest.raises(StoreError, match="newer paradnn"):
        Store(path)
    assert path.read_bytes() == before


def test_a_result_key_without_a_column_is_an_error(tmp_path):
    with Store(tmp_path / "r.sqlite") as s:
        with pytest.raises(ValueError, match="speed_of_light"):
            s.add_results([{**RECORD, "speed_of_light": 3e8}])
        assert s.count() == 0


def _open_new_store(path: str) -> str:
    try:
        Store(path).close()
        return "ok"
    except StoreError as exc:
        return str(exc)


def test_concurrent_creation_of_a_new_store_is_safe(tmp_path):
    import multiprocessing as mp

    for trial in range(4):
        path = str(tmp_path / f"new{trial}.sqlite")
        with mp.get_context("spawn").Pool(8) as pool:
            assert pool.map(_open_new_store, [path] * 8) == ["ok"] * 8


def test_claims(tmp_path):
    with Store(tmp_path / "r.sqlite") as s:
        assert s.claim("k1", "label", STATES, 60) == "claimed"
        assert s.claim("k1", "label", STATES, 60) == "claimed"  # the same process may claim again
        s.conn.execute("UPDATE claims SET pid = 1, pid_started = NULL")  # held by a live process (init)
        assert s.claim("k1", "label", STATES, 60) == "busy"
        s.conn.execute("UPDATE claims SET pid = 999999999")  # held by a process that is gone
        assert s.claim("k1", "label", STATES, 60) == "claimed"
        s.conn.execute("UPDATE claims SET host = 'elsewhere', expires_at = 0")  # another host's lease, expired
        assert s.claim("k1", "label", STATES, 60) == "claimed"
        s.add_results([{**RECORD, "run_key": "k1"}], release=True)
        assert s.claims().empty
        assert s.claim("k1", "label", STATES, 60) == "done"
        assert s.claim("k1", "label", (), 60) == "claimed"  # --force


def test_an_empty_file_is_not_a_store_when_reading(tmp_path):
    path = tmp_path / "empty.sqlite"
    path.touch()
    with pytest.raises(StoreError, match="empty file"):
        Store(path, create=False)
    assert path.read_bytes() == b""
