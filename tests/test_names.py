"""One name, one machine: the platform names of a store checked inside every write (sweep rows,
platform records, merges, imports), reserved datasheet names, renames that move everything
(rows, records, profiles) and round trip, and two merges racing for one name."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

import paradnn
from paradnn.store import Store, StoreError
from paradnn.store.legacy import bundled_files, import_files
from paradnn.store.merge import merge, parse_rename
from paradnn.store.names import FoldError, name_problem
from tests.test_merge import ROOT, cli, machine_store, one_line_refusal, sha
from tests.test_projection import local_store


def platforms_of(path) -> dict[str, set[tuple]]:
    """Name -> the (device, cores) its rows and records hold."""
    with Store(path, create=False, readonly=True) as s:
        rows = s.results()
        out: dict[str, set] = {}
        for name, device in zip(rows["platform"], rows["device_name"]):
            out.setdefault(name, set()).add(device)
    return out


def test_a_sweep_row_under_a_name_another_machine_holds_is_refused_inside_the_write(tmp_path):
    store = machine_store(tmp_path / "s.sqlite")
    other = machine_store(tmp_path / "o.sqlite", device="Intel Xeon", cores=64)
    with Store(other, create=False, readonly=True) as s:
        rows = [dict(r) for r in s.conn.execute("SELECT * FROM results")]
    for r in rows:
        r.pop("id")
    with Store(store) as s, pytest.raises(FoldError, match="'cpu' would fold two machines.*EPYC.*Xeon"):
        s.add_results(rows)
    assert platforms_of(store) == {"cpu": {"AMD EPYC 7B13"}}
    with Store(store, create=False, readonly=True) as s:
        assert s.count() == 3


def test_measured_rows_never_take_a_datasheet_name(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        with pytest.raises(FoldError, match="'v100' is reserved"):
            s.put_platform("fp", "v100", {"id": "cpu", "name": "AMD EPYC", "cores": 2}, None, "measured")
        with pytest.raises(FoldError, match="'H100' is reserved"):
            s.add_results([{"family": "fc", "label": "x", "platform": "H100", "state": "ok"}])
        assert s.count() == 0 and s.platforms().empty
    line = one_line_refusal(cli("sweep", "fc", "--name", "v100", "--store", str(tmp_path / "n.sqlite")))
    assert "--name" in line and "datasheet" in line and not (tmp_path / "n.sqlite").exists()


@pytest.mark.parametrize("rename", ["cpu=v100", "cpu=h100", "cpu=TPU-V2-8"])
def test_a_rename_onto_a_datasheet_or_the_imported_study_is_refused(tmp_path, rename):
    dst = tmp_path / "study.sqlite"
    with Store(dst) as s:
        import_files(s, bundled_files())
    before = sha(dst)
    a = machine_store(tmp_path / "a.sqlite")
    line = one_line_refusal(cli("merge", str(a), "--rename", rename, "--store", str(dst)))
    assert "datasheet" in line and sha(dst) == before


def test_imported_rows_under_a_measured_name_are_a_fold(tmp_path):
    old = machine_store(tmp_path / "old.sqlite")  # a store of before the rule: this CPU's rows named v100
    with sqlite3.connect(old) as conn:
        conn.execute("UPDATE results SET platform = 'v100', platform_id = 'cpu'")
        conn.execute("UPDATE platforms SET platform = 'v100'")
    with Store(tmp_path / "s.sqlite") as s:
        import_files(s, bundled_files())
    line = one_line_refusal(cli("merge", str(old), "--store", str(tmp_path / "s.sqlite")))
    assert "reserved" in line and "--rename v100=NEW-NAME" in line
    assert cli("merge", str(old), "--rename", "v100=epyc-lab", "--store", str(tmp_path / "s.sqlite")).returncode == 0
    assert "epyc-lab" in platforms_of(tmp_path / "s.sqlite")


def test_two_machines_inside_one_source_are_refused(tmp_path):
    src = machine_store(tmp_path / "src.sqlite")
    with sqlite3.connect(src) as conn:  # one row of another machine slipped under cpu
        conn.execute("UPDATE results SET device_name = 'Intel Xeon', platform_fingerprint = 'other' WHERE id = 1")
    line = one_line_refusal(cli("merge", str(src), "--store", str(tmp_path / "dst.sqlite")))
    assert "fold two machines" in line and "Xeon" in line and "EPYC" in line
    assert not (tmp_path / "dst.sqlite").exists()


def test_two_merges_at_once_of_two_machines_under_one_name_leave_one_machine_and_one_refusal(tmp_path):
    a = machine_store(tmp_path / "a.sqlite")
    b = machine_store(tmp_path / "b.sqlite", device="Intel Xeon", cores=64)
    for existing in (False, True):
        dst = tmp_path / f"study-{existing}.sqlite"
        if existing:
            Store(dst).close()
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "paradnn.cli", "merge", str(src), "--store", str(dst)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
            for src in (a, b)
        ]
        results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
        assert sorted(code for code, _ in results) == [0, 2], results
        assert "fold two machines" in next(err for code, err in results if code == 2)
        held = platforms_of(dst)
        assert list(held) == ["cpu"] and len(held["cpu"]) == 1
        assert not list(tmp_path.glob(".*merging*"))


def test_parse_rename_splits_at_the_last_equals_and_refuses_a_name_renamed_twice():
    assert parse_rename(["cpu[threads=1]=lab-1t", "cpu=lab"]) == {"cpu[threads=1]": "lab-1t", "cpu": "lab"}
    with pytest.raises(StoreError, match="given twice"):
        parse_rename(["cpu=a", "cpu=b"])
    with pytest.raises(StoreError, match="OLD=NEW"):
        parse_rename(["cpu"])


def test_every_platform_can_be_renamed_even_one_with_an_equals_sign(tmp_path):
    src = machine_store(tmp_path / "src.sqlite", platform="cpu[threads=1]")
    with sqlite3.connect(src) as conn:
        conn.execute("UPDATE results SET platform_id = NULL")
        info = conn.execute("SELECT info FROM platforms").fetchone()[0].replace('"id": "cpu"', '"id": "cpu[threads=1]"')
        conn.execute("UPDATE platforms SET info = ?", (info,))
    dst = tmp_path / "dst.sqlite"
    done = cli("merge", str(src), "--rename", "cpu[threads=1]=lab-1t", "--store", str(dst))
    assert done.returncode == 0, done.stderr
    with Store(dst, create=False, readonly=True) as s:
        assert set(s.results()["platform"]) == {"lab-1t"} and set(s.results()["platform_id"]) == {"cpu[threads=1]"}
        assert set(s.platforms()["platform"]) == {"lab-1t"}
    assert "given twice" in one_line_refusal(
        cli("merge", str(src), "--rename", "cpu=a", "--rename", "cpu=b", "--store", str(dst))
    )


def test_a_rename_moves_profiles_and_records_and_the_projection_is_unchanged_both_ways(tmp_path):
    src = local_store(tmp_path)
    rows, summary = paradnn.project("p1", "p2", "fc", store=src)
    renamed = tmp_path / "renamed.sqlite"
    merge([src], renamed, {"p1": "lab-1"})
    moved, moved_summary = paradnn.project("lab-1", "p2", "fc", store=renamed)
    with Store(renamed, create=False, readonly=True) as s:
        assert set(s.traces()["platform"]) == {"lab-1"} and all(t.startswith("profile:lab-1:") for t in s.traces()["source"])
        assert "p1" not in set(s.platforms()["platform"])
    assert moved_summary["held_fixed"] == summary["held_fixed"] != {}
    assert moved.drop(columns=["source"], errors="ignore").equals(rows.drop(columns=["source"], errors="ignore"))
    back = tmp_path / "back.sqlite"
    merge([renamed], back, {"lab-1": "p1"})
    again, again_summary = paradnn.project("p1", "p2", "fc", store=back)
    assert again.equals(rows) and again_summary == summary


@pytest.mark.parametrize("name, needle", [("", "empty"), ("a\nb", "newline"), (" cpu", "padded"), ("x" * 10_000, "10000")])
def test_a_source_with_a_platform_name_no_store_could_hold_is_damaged(tmp_path, name, needle):
    assert needle in name_problem(name)
    src = machine_store(tmp_path / "src.sqlite")
    with sqlite3.connect(src) as conn:
        conn.execute("UPDATE results SET platform = ?", (name,))
    line = one_line_refusal(cli("merge", str(src), "--store", str(tmp_path / "dst.sqlite")))
    assert f"{src}: damaged" in line and needle in line and len(line) < 400
    assert not (tmp_path / "dst.sqlite").exists()


def test_a_sweep_named_as_another_machine_is_refused_before_a_worker_starts(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from paradnn.cli import main
    from paradnn.sweeps import worker

    def started(*args, **kwargs):
        raise AssertionError("a worker started")

    monkeypatch.setattr(worker.ProcessWorker, "__init__", started)
    store = machine_store(tmp_path / "s.sqlite", device="Intel Xeon", cores=64, platform="xeon-lab")
    before = sha(store)
    args = ["sweep", "fc", "--set", "layers=1", "--set", "nodes=8", "--set", "batch=8", "--name", "xeon-lab"]
    for stack in ([], ["--stack", "current"]):  # the stacks' environments are not even looked for
        result = CliRunner().invoke(main, [*args, *stack, "--store", str(store)])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "'xeon-lab' would fold two machines" in lines[0], result.stderr
        assert "Intel Xeon (64 cores, 8 GiB)" in lines[0]
    assert platforms_of(store) == {"xeon-lab": {"Intel Xeon"}} and sha(store) == before


def test_two_hosts_of_one_cpu_model_and_core_count_are_told_apart_by_memory_and_vector_units(tmp_path):
    """Cloud VMs say "AMD EPYC" for every generation: a 4 GiB host with AVX2 only is not a 24 GiB one with AVX-512."""
    big = machine_store(tmp_path / "big.sqlite", device="AMD EPYC", memory_bytes=24 * 2**30, isa=["avx2", "avx512f", "fma"])
    small = machine_store(
        tmp_path / "small.sqlite", device="AMD EPYC", memory_bytes=4 * 2**30, isa=["avx2", "fma"], finished=5_000.0
    )
    dst = tmp_path / "study.sqlite"
    line = one_line_refusal(cli("merge", str(big), str(small), "--store", str(dst)))
    assert "'cpu' would fold two machines" in line and "24 GiB, avx2+avx512f+fma" in line and "4 GiB, avx2+fma" in line
    assert not dst.exists()
    one_isa = machine_store(tmp_path / "isa.sqlite", device="AMD EPYC", memory_bytes=24 * 2**30, isa=["avx2", "fma"])
    assert "would fold" in one_line_refusal(cli("merge", str(big), str(one_isa), "--store", str(dst)))


def test_one_host_matches_itself_across_stacks_and_records_of_an_older_paradnn(tmp_path):
    here = machine_store(tmp_path / "here.sqlite", memory_bytes=24 * 2**30, isa=["avx2", "fma"])
    older = machine_store(tmp_path / "older.sqlite", memory_bytes=24 * 2**30 - 2**20, finished=5_000.0)  # no isa kept
    summary = merge([here, older], tmp_path / "study.sqlite")  # one machine: no fold
    assert summary.added == {"cpu": 6} and summary.platforms == 2  # the vector units are part of the fingerprint
    assert platforms_of(tmp_path / "study.sqlite") == {"cpu": {"AMD EPYC 7B13"}}


@pytest.mark.parametrize("name", ["GPU", "ｇｐｕ", "ＴＰＵ", "Cpu"])
def test_a_source_naming_a_cpu_by_another_device_id_or_spelling_is_refused(tmp_path, name):
    source = machine_store(tmp_path / "s.sqlite")
    with sqlite3.connect(source) as conn:  # a store no paradnn would write (a sweep is refused the same way)
        conn.execute("UPDATE results SET platform = ?", (name,))
        conn.execute("UPDATE platforms SET platform = ?", (name,))
    dst = tmp_path / "d.sqlite"
    with pytest.raises(FoldError, match="is a device id, but"):
        merge([source], dst)
    assert not dst.exists()
    with pytest.raises(FoldError, match="is a device id, but"):
        machine_store(tmp_path / "swept.sqlite", platform=name)


def test_two_names_that_differ_only_in_case_or_width_are_refused(tmp_path):
    a = machine_store(tmp_path / "a.sqlite", platform="lab-x")
    b = machine_store(tmp_path / "b.sqlite", device="Intel Xeon", cores=64, platform="ＬＡＢ-x")
    dst = tmp_path / "d.sqlite"
    merge([a], dst)
    before = sha(dst)
    with pytest.raises(FoldError, match="'lab-x' and 'ＬＡＢ-x' differ only in case or width"):
        merge([b], dst)
    assert sha(dst) == before
    merge([b], dst, {"ＬＡＢ-x": "xeon-lab"})  # named apart, it goes in
    assert platforms_of(dst) == {"lab-x": {"AMD EPYC 7B13"}, "xeon-lab": {"Intel Xeon"}}
