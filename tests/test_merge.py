"""Merging stores measured apart: de-duplication, reruns, names and fingerprints, refusals, atomicity,
and the docs' walk-through (two stores measured in separate processes, merged, compared, reported)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from paradnn.analysis.results import Results
from paradnn.identity import fingerprint, run_key
from paradnn.store import Store, StoreError
from paradnn.store.merge import merge

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "store_v1.sqlite"
SOFTWARE = {
    "tensorflow": "2.18.0",
    "keras": "3.6.0",
    "python": "3.12.0",
    "numpy": "2.0.0",
    "cuda": "",
    "cudnn": "",
    "paradnn": "0.1.0",
    "git": "abc",
}
LABELS = [f"layer_1-node_{n}-input_2000-output_1000-bs_4" for n in (8, 16, 32)]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "paradnn.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=900,
    )


def machine_store(
    path: Path,
    device: str = "AMD EPYC 7B13",
    cores: int = 2,
    finished: float = 1_000.0,
    platform: str = "cpu",
    memory_bytes: int = 2**33,
    isa: list[str] | None = None,
) -> Path:
    """A store as a sweep on one machine leaves it (no TensorFlow): three FC rows and the platform's record
    (``isa``: the vector units a record of this paradnn holds; None: a record written before it kept them)."""
    info = {
        "id": "cpu",
        "name": device,
        "host": f"host-{cores}",
        "cores": cores,
        "memory_bytes": memory_bytes,
        "software": SOFTWARE,
        **({"isa": isa} if isa is not None else {}),
    }
    fp = fingerprint(info)
    records = [
        {
            "family": "fc",
            "family_version": 1,
            "label": label,
            "layers": 1,
            "nodes": 8 * 2**i,
            "input": 2000,
            "output": 1000,
            "batch": 4,
            "dtype": "float32",
            "xla": False,
            "platform": platform,
            "platform_id": None if platform == "cpu" else "cpu",
            "platform_fingerprint": fp,
            "device_name": device,
            "host": info["host"],
            "software": SOFTWARE,
            "state": "ok",
            "step_time_s": 0.01 * (i + 1) * (2 if cores > 2 else 1),
            "examples_per_sec": 400 / (i + 1),
            "finished_at": finished + i,
        }
        for i, label in enumerate(LABELS)
    ]
    with Store(path) as s:
        s.add_results(records)
        s.put_platform(fp, platform, info, {"matmul_flops": {"float32": {"xla_off": 1e11}}}, "measured")
    return path


def one_line_refusal(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("paradnn: error: "), result.stderr
    return lines[0]


def test_the_same_row_twice_is_one_row_and_a_second_occasion_a_rerun_with_its_origin(tmp_path):
    a = machine_store(tmp_path / "a.sqlite")
    again = machine_store(tmp_path / "again.sqlite", finished=2_000.0)  # the same runs, measured later
    dst = tmp_path / "study.sqlite"
    summary = merge([a, a, again], dst)
    assert summary.added == {"cpu": 6} and summary.reruns == {"cpu": 3} and summary.duplicates == 3
    assert summary.platforms == 1  # one machine, one stack: one fingerprint
    with Store(dst, create=False, readonly=True) as s:
        rows = s.results()
    assert sorted(rows["origin"]) == sorted([str(a)] * 3 + [str(again)] * 3)
    reruns = Results.load(dst).reruns()
    assert len(reruns) == 3 and set(reruns["n"]) == {2}
    before = sha(dst)
    assert merge([a, again], dst).rows == 0 and sha(dst) == before  # idempotent
    with Store(dst, create=False, readonly=True) as s:
        assert s.count() == 6


def test_a_merged_row_keeps_its_first_origin(tmp_path):
    a = machine_store(tmp_path / "a.sqlite")
    merge([a], tmp_path / "mid.sqlite")
    merge([tmp_path / "mid.sqlite"], tmp_path / "top.sqlite")
    with Store(tmp_path / "top.sqlite", create=False, readonly=True) as s:
        assert set(s.results()["origin"]) == {str(a)}


def test_two_machines_named_cpu_are_refused_until_renamed_then_two_platforms(tmp_path):
    a = machine_store(tmp_path / "a.sqlite")
    b = machine_store(tmp_path / "b.sqlite", device="Intel Xeon Platinum 8480", cores=64)
    dst = tmp_path / "study.sqlite"
    line = one_line_refusal(cli("merge", str(a), str(b), "--store", str(dst)))
    assert "'cpu'" in line and "Xeon" in line and "EPYC" in line and "--rename cpu=" in line
    assert not dst.exists()
    assert cli("merge", str(a), "--store", str(dst)).returncode == 0
    before = sha(dst)
    line = one_line_refusal(cli("merge", str(b), "--store", str(dst)))  # the clash is with DST now
    assert "--rename cpu=" in line and sha(dst) == before
    result = cli("merge", str(b), "--rename", "cpu=xeon-lab", "--store", str(dst))
    assert result.returncode == 0, result.stderr
    assert "xeon-lab  3 rows" in result.stdout
    with Store(dst, create=False, readonly=True) as s:
        rows, platforms = s.results(), s.platforms()
        raw = [dict(r) for r in s.conn.execute("SELECT * FROM results")]
    assert sorted(rows["platform"].unique()) == ["cpu", "xeon-lab"]
    assert set(rows.loc[rows["platform"] == "xeon-lab", "platform_id"]) == {"cpu"}
    assert rows.loc[rows["platform"] == "cpu", "platform_id"].isna().all()
    assert sorted(platforms["platform"]) == ["cpu", "xeon-lab"] and platforms["fingerprint"].nunique() == 2
    assert all(r["run_key"] == run_key(r) for r in raw)  # naming changes no run key
    result = Results.load(dst).matched("platform", "cpu", "xeon-lab", family="fc")
    assert result.n == 3


def test_a_name_that_is_a_device_id_or_a_missing_platform_is_refused(tmp_path):
    a = machine_store(tmp_path / "a.sqlite")
    dst = tmp_path / "study.sqlite"
    assert "not a device id" in one_line_refusal(cli("merge", str(a), "--rename", "cpu=gpu", "--store", str(dst)))
    assert "a platform name" in one_line_refusal(cli("merge", str(a), "--rename", "cpu=my gpu:0", "--store", str(dst)))
    assert "no platform 'tpu'" in one_line_refusal(cli("merge", str(a), "--rename", "tpu=x", "--store", str(dst)))
    assert "OLD=NEW" in one_line_refusal(cli("merge", str(a), "--rename", "cpu", "--store", str(dst)))
    assert "is the destination" in one_line_refusal(cli("merge", str(a), "--store", str(a)))
    assert "--name" in one_line_refusal(cli("sweep", "fc", "--name", "gpu:1", "--store", str(dst)))
    assert not dst.exists()


def test_a_schema_v1_store_merges_and_its_file_stays_as_it_was(tmp_path):
    source = tmp_path / "v1.sqlite"
    shutil.copy(FIXTURE, source)
    before = sha(source)
    dst = tmp_path / "study.sqlite"
    summary = merge([source], dst)
    assert sha(source) == before and sorted(p.name for p in tmp_path.iterdir()) == ["study.sqlite", "v1.sqlite"]
    assert summary.added == {"cpu": 5, "v100": 270} and summary.traces == 230
    migrated = tmp_path / "migrated.sqlite"
    shutil.copy(FIXTURE, migrated)
    with Store(migrated) as old, Store(dst, create=False, readonly=True) as new:  # as opening it in place would
        assert old.run_keys() == new.run_keys()
        assert set(new.results()["framework"]) == {"tensorflow"}
    assert merge([source], dst).rows == 0 and sha(source) == before


def future_store(path: Path) -> Path:
    machine_store(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    return path


def foreign_sqlite(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    return path


@pytest.mark.parametrize(
    "make, needle",
    [
        (lambda p: (p.write_text("a,b\n1,2\n"), p)[1], "not an SQLite database"),
        (lambda p: (p.write_bytes(b""), p)[1], "an empty file"),
        (future_store, "newer paradnn"),
        (foreign_sqlite, "not a paradnn store"),
        (lambda p: p, "no such store"),
    ],
)
def test_a_bad_source_is_refused_with_dst_byte_identical(tmp_path, make, needle):
    dst = machine_store(tmp_path / "study.sqlite")
    good = machine_store(tmp_path / "good.sqlite", device="Other", finished=5_000.0, platform="other")
    before = sha(dst)
    bad = make(tmp_path / "bad.sqlite")
    assert needle in one_line_refusal(cli("merge", str(good), str(bad), "--store", str(dst)))
    assert sha(dst) == before and not (tmp_path / "study.sqlite-wal").exists()
    assert needle in one_line_refusal(cli("merge", str(bad), "--store", str(tmp_path / "new.sqlite")))
    assert not (tmp_path / "new.sqlite").exists()
    with pytest.raises(StoreError):
        merge([bad], tmp_path / "new.sqlite")


def test_a_dst_that_is_not_a_store_is_refused_untouched(tmp_path):
    a = machine_store(tmp_path / "a.sqlite")
    dst = tmp_path / "notes.txt"
    dst.write_text("my notes\n")
    assert "not an SQLite database" in one_line_refusal(cli("merge", str(a), "--store", str(dst)))
    assert dst.read_text() == "my notes\n"


def large_store(path: Path, rows: int) -> Path:
    """A store of ``rows`` rows (copies of one measured row, each its own run), written with plain SQL for speed."""
    machine_store(path, device="Big", finished=10_000.0, platform="big")
    with sqlite3.connect(path) as conn:
        row = dict(
            zip(
                [d[0] for d in conn.execute("SELECT * FROM results LIMIT 1").description],
                conn.execute("SELECT * FROM results LIMIT 1").fetchone(),
            )
        )
        row.pop("id")
        row["samples_s"] = json.dumps([0.01] * 200)  # rows as heavy as real ones
        names = list(row)
        at = names.index("finished_at"), names.index("run_key")
        values = [list(row.values()) for _ in range(rows)]
        for i, v in enumerate(values):
            v[at[0]], v[at[1]] = 20_000.0 + i, f"k{i:019d}"
        conn.executemany(f"INSERT INTO results ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", values)
    return path


def a_store(folder: Path) -> Path:
    return machine_store(folder / "small.sqlite", device="Small", platform="small")


def kill_merge_midway(source: Path, dst: Path, wal: Callable[[int], Path]) -> None:
    """Start merging ``source`` into ``dst`` in another process and SIGKILL it once its write-ahead
    log (``wal(pid)``) holds a megabyte: well inside its transaction."""
    code = f"import paradnn; paradnn.merge([{str(source)!r}], {str(dst)!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)})
    log = wal(proc.pid)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not (log.exists() and log.stat().st_size > 1_000_000):
        time.sleep(0.01)
    assert proc.poll() is None, "the merge finished before it could be interrupted"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_a_merge_killed_midway_leaves_dst_as_it_was(tmp_path):
    source = large_store(tmp_path / "big.sqlite", 30_000)  # a merge of 4-10 s: killed well before its end
    dst = machine_store(tmp_path / "study.sqlite")
    before = sha(dst)
    kill_merge_midway(source, dst, lambda pid: Path(f"{dst}-wal"))
    assert sha(dst) == before  # nothing reached the store file
    with Store(dst) as s:  # and the half-written transaction is gone
        assert s.count() == 3 and set(s.results()["platform"]) == {"cpu"}
    assert merge([source], dst).rows == 30_003  # the same merge, let finish, adds it all
    new = tmp_path / "new.sqlite"  # killed while merging into a new store: nothing appears
    kill_merge_midway(source, new, lambda pid: tmp_path / f".new.sqlite.merging-{pid}-wal")
    assert not new.exists()
    assert merge([a_store(tmp_path)], new).rows == 3 and not list(tmp_path.glob(".new.sqlite.merging-*"))  # left-overs gone


# ------------------------------------------------------------------ the docs' walk-through, measured for real


def walkthrough_commands() -> list[list[str]]:
    page = (ROOT / "docs" / "sweeps-and-store.md").read_text()
    block = re.search(r"### A study across machines.*?```\n(.*?)```", page, re.S).group(1)
    lines = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert all(line.startswith("paradnn ") for line in lines)
    return [shlex.split(line)[1:] for line in lines]


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory):
    """Every command of the walk-through in docs/sweeps-and-store.md, run as written in one folder (machines A and B are
    this machine, measured in separate processes); their results by command name."""
    folder = tmp_path_factory.mktemp("study")
    done = {}
    for n, args in enumerate(walkthrough_commands()):
        result = cli(*args, cwd=folder)
        assert result.returncode == 0, f"{args}: {result.stderr[-3000:]}"
        done[f"{args[0]}{n}" if args[0] == "sweep" else args[0]] = result
    return folder, done


@pytest.mark.slow
def test_the_docs_walkthrough_merges_compares_and_reports(walkthrough):
    folder, done = walkthrough
    assert "cpu       4 rows" in done["merge"].stdout and "xeon-lab  4 rows" in done["merge"].stdout
    assert re.search(r"^n\s+4$", done["compare"].stdout, re.M)
    page = (folder / "outputs" / "study" / "platform_comparison.html").read_text()
    assert "platforms</strong> cpu: " in page and "; xeon-lab: " in page  # one machine, two names: each with its record
    assert "ok" in done["report"].stdout.split()[0]


@pytest.mark.slow
def test_stores_measured_apart_are_compared_like_with_like_and_kept_as_reruns(walkthrough):
    folder, _ = walkthrough
    results = Results.load(folder / "study.sqlite")
    assert results.matched("platform", "cpu", "xeon-lab", family="fc").n == 4
    reruns = results.reruns()  # one machine measured twice: the same identities on two occasions
    assert len(reruns) == 4 and set(reruns["n"]) == {2}
    measured = results.where(source="measured").frame  # the report imported the original study's rows here
    assert set(measured["origin"]) == {"machine-a.sqlite", "machine-b.sqlite"}
    for name in ("machine-a.sqlite", "machine-b.sqlite"):
        with Store(folder / name, create=False, readonly=True) as s:
            assert s.count() == 4


@pytest.mark.slow
def test_a_second_machine_whose_cpu_has_another_fingerprint_is_kept_apart(walkthrough, tmp_path):
    folder, _ = walkthrough
    other = tmp_path / "machine-c.sqlite"
    shutil.copy(folder / "machine-a.sqlite", other)
    with sqlite3.connect(other) as conn:  # simulate another machine: another CPU, another core count
        conn.row_factory = sqlite3.Row
        old, info = conn.execute("SELECT fingerprint, info FROM platforms").fetchone()
        info = {**json.loads(info), "name": "Simulated Xeon", "cores": 96}
        new = fingerprint(info)
        conn.execute("UPDATE platforms SET fingerprint = ?, info = ?, name = ?", (new, json.dumps(info), info["name"]))
        rows = [dict(r) for r in conn.execute("SELECT * FROM results")]
        assert all(r["run_key"] == run_key(r) for r in rows)
        for r in rows:
            r.update(platform_fingerprint=new, device_name=info["name"])
            conn.execute(
                "UPDATE results SET platform_fingerprint = ?, device_name = ?, run_key = ? WHERE id = ?",
                (new, info["name"], run_key(r), r["id"]),
            )
    dst = tmp_path / "study.sqlite"
    assert cli("merge", str(folder / "machine-a.sqlite"), "--store", str(dst)).returncode == 0
    line = one_line_refusal(cli("merge", str(other), "--store", str(dst)))
    assert "Simulated Xeon (96 cores, " in line and "--rename cpu=" in line
    assert cli("merge", str(other), "--rename", "cpu=xeon-96", "--store", str(dst)).returncode == 0
    results = Results.load(dst)
    assert sorted(results.frame["platform"].unique()) == ["cpu", "xeon-96"]
    assert results.matched("platform", "cpu", "xeon-96", family="fc").n == 4
    assert results.reruns().empty  # two machines: nothing measured twice


def test_a_merge_summary_shows_control_characters_in_a_name_escaped_never_acted_on():
    """An ANSI escape or a newline in a (renamed) platform name is written out, so the line reads as the name is stored."""
    from paradnn.store.merge import MergeSummary

    lines = MergeSummary("s.sqlite", ("a.sqlite",), added={"\x1b[31mred": 3, "two\nlines": 1}).lines()
    assert lines[1:] == ["  \\x1b[31mred  3 rows", "  two\\nlines   1 rows"]
    assert all("\x1b" not in line and "\n" not in line for line in lines)


def test_one_machine_merged_under_two_names_gives_both_names_its_record(tmp_path):
    """The record is the machine's (one fingerprint): its second name's rows read their ceilings from it."""
    a = machine_store(tmp_path / "a.sqlite")
    b = machine_store(tmp_path / "b.sqlite", platform="xeon-lab", finished=2_000.0)  # the same machine, named apart
    dst = tmp_path / "study.sqlite"
    merge([a, b], dst)
    with Store(dst, create=False, readonly=True) as s:
        stored = [r[0] for r in s.conn.execute("SELECT platform FROM platforms")]
        platforms = s.platforms()
    assert stored == ["cpu"]  # one record, under the name met first
    assert sorted(platforms["platform"]) == ["cpu", "xeon-lab"] and platforms["fingerprint"].nunique() == 1
    assert set(platforms["ceilings"]) == {'{"matmul_flops": {"float32": {"xla_off": 100000000000.0}}}'}
    with Store(a, create=False, readonly=True) as s:  # a store of one name: its records as they are
        assert list(s.platforms()["platform"]) == ["cpu"]
