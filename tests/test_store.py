"""The store: schema, provenance, round trips, exports and refusals."""

from __future__ import annotations

import sqlite3

import pandas as pd
import pytest

from paradnn.store import SCHEMA_VERSION, Store, StoreError, export, run_key

RECORD = {
    "family": "fc", "label": "layer_1-node_2-input_3-output_4-bs_5", "layers": 1, "nodes": 2, "input": 3, "output": 4,
    "batch": 5, "dtype": "float32", "xla": True, "platform": "cpu", "state": "ok", "step_time_s": 0.5,
    "samples_s": [0.4, 0.5, 0.6], "uncounted_ops": [], "software": {"tensorflow": "2.99"}, "final_loss": float("nan"),
}  # fmt: skip


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
