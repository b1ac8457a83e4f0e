"""Nothing lost, nothing folded (issue 62): outputs never overwrite what they did not write,
a legacy file is filed under its own device, contradictory options are refused."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from paradnn.analysis.results import Results
from paradnn.cli import main
from paradnn.config import ConfigError
from paradnn.store import Store


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=True)


def refused(result, needle: str) -> None:
    """Exit 2 with one line on stderr holding ``needle``."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr


def damaged_copy(store: Path, folder: Path) -> Path:
    """A copy of ``store`` whose header and meta table are intact and whose middle pages are overwritten."""
    damaged = folder / "damaged.sqlite"
    shutil.copy(store, damaged)
    with open(damaged, "r+b") as f:
        f.seek(damaged.stat().st_size // 2)
        f.write(b"\xff" * 8192)
    return damaged


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def store(tmp_path_factory, reference) -> Path:
    path = tmp_path_factory.mktemp("lost") / "s.sqlite"
    assert cli("import-legacy", str(reference / "gpu_fc.json"), "--store", str(path)).exit_code == 0
    return path


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet", "table"])
def test_an_export_onto_its_own_store_is_refused_however_spelt(store, fmt):
    before = digest(store)
    for spelt in (str(store), str(store.parent / "." / store.name), os.path.relpath(store)):
        refused(cli("results", "--store", str(store), "--format", fmt, "--output", spelt, "--force"), "--output")
    assert digest(store) == before


def test_an_export_never_replaces_a_sqlite_file_or_an_existing_file_unasked(store, tmp_path):
    other = tmp_path / "other.sqlite"
    shutil.copy(store, other)
    refused(cli("results", "--store", str(store), "--format", "csv", "--output", str(other), "--force"), "SQLite")
    assert digest(other) == digest(store)
    kept = tmp_path / "notes.csv"
    kept.write_text("mine\n")
    refused(cli("results", "--store", str(store), "--format", "csv", "--output", str(kept)), "--force to replace")
    assert kept.read_text() == "mine\n"
    assert cli("results", "--store", str(store), "--format", "csv", "--output", str(kept), "--force").exit_code == 0
    assert kept.read_text().startswith("id,") and not list(tmp_path.glob(".*partial"))  # replaced whole, nothing left


def test_an_export_has_the_permissions_the_umask_gives_a_new_file(store, tmp_path):
    before = os.umask(0o022)
    try:
        out = tmp_path / "rows.csv"
        assert cli("results", "--store", str(store), "--format", "csv", "--output", str(out)).exit_code == 0
    finally:
        os.umask(before)
    assert out.stat().st_mode & 0o777 == 0o644  # readable by others, as any file written there would be


def test_an_export_onto_a_fifo_is_refused_before_it_blocks(store, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refused(cli("results", "--store", str(store), "--format", "json", "--output", str(fifo), "--force"), "FIFO")


def test_an_export_that_fails_leaves_the_file_as_it_was(store, tmp_path, monkeypatch):
    import paradnn.store.db as db

    kept = tmp_path / "rows.json"
    kept.write_text("[]")

    def broken(df, fmt, path):
        Path(path).write_text("half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(db, "export", broken)
    monkeypatch.setattr("paradnn.store.export", broken)
    refused(cli("results", "--store", str(store), "--format", "json", "--output", str(kept), "--force"), "No space")
    assert kept.read_text() == "[]" and not list(tmp_path.glob(".*partial"))


def test_a_filter_that_selects_nothing_is_refused_and_writes_nothing(store, tmp_path):
    refused(cli("results", "--store", str(store), "--platform", "nope"), "a platform of the store's rows (v100)")
    out = tmp_path / "rows.csv"
    refused(cli("results", "--store", str(store), "--family", "rnn", "--output", str(out)), "--family: 'rnn'")
    assert not out.exists()
    refused(cli("results", "--store", str(store), "--state", "oom"), "--state: 'oom' is not valid; allowed: a state of")
    assert cli("results", "--store", str(store), "--family", "fc").exit_code == 0


def test_a_legacy_file_is_filed_only_under_its_own_device(reference, tmp_path):
    target = tmp_path / "t.sqlite"
    refused(
        cli("import-legacy", str(reference / "tpu_fc.json"), "--platform", "v100", "--store", str(target)),
        "not this file's device; expected tpu-v2-8",
    )
    assert not target.exists()


@pytest.mark.parametrize("key,value", [("example_per_sec", -5.0), ("flops", -1.0), ("flops", 0.0), ("params", -1.0)])
def test_a_legacy_file_with_a_negative_rate_or_count_is_refused(reference, tmp_path, key, value):
    data = json.loads((reference / "gpu_fc.json").read_text())
    data[key][3] = value
    bad = tmp_path / "gpu_fc.json"
    bad.write_text(json.dumps(data))
    refused(cli("import-legacy", str(bad), "--store", str(tmp_path / "t.sqlite")), f"{key}[3] is {value}")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--hold", "dtype", "--free", "dtype"], "--hold: 'dtype'"),
        (["--free", "platform"], "settings other than --by platform"),
        (["--by", "xla", "--baseline", "off", "--target", "on", "--hold", "xla"], "settings other than --by xla"),
    ],
)
def test_contradictory_compare_options_are_refused(store, args, needle):
    base = ["compare", "--store", str(store)]
    if "--baseline" not in args:
        base += ["--baseline", "v100", "--target", "tpu-v2-8"]
    refused(cli(*base, *args), needle)


def test_an_axis_set_twice_is_refused_before_anything_runs(tmp_path):
    target = tmp_path / "s.sqlite"
    refused(cli("sweep", "fc", "--set", "layers=4", "--set", "layers=8", "--store", str(target)), "each axis once")
    assert not target.exists()


@pytest.mark.parametrize("stack", ["current,current", "current,tensorflow==2.16.2"])
def test_current_inside_a_list_of_requirements_is_refused(stack, tmp_path):
    refused(cli("sweep", "fc", "--stack", stack, "--store", str(tmp_path / "s.sqlite")), "current alone")


def test_matched_takes_one_setting_name_or_several_and_refuses_the_rest(store):
    results = Results.load(store)
    one = results.matched("platform", "v100", "v100-x", free="dtype")
    assert one.n == 0 and "dtype" in one.sides
    with pytest.raises(ConfigError, match="free: 'colour'"):
        results.matched("platform", "v100", "x", free=("colour",))
    with pytest.raises(ConfigError, match="free: 5"):
        results.matched("platform", "v100", "x", free=5)
    with pytest.raises(ConfigError, match="in both"):
        results.matched("platform", "v100", "x", free="dtype", hold="dtype")
    with Store(store, create=False, readonly=True) as s:
        assert s.count() > 0


# Validation before side effects (issue 62, second slice): a report's parameters are checked in
# depth, store paths and YAML are bounded, names are compared case- and width-insensitively.

REPORT_REFUSALS = [
    ("families=[nope]", "-p families: 'nope'"),
    ("families=[fc", "-p families: '[fc'"),  # not YAML: read as the text '[fc', which names no family
    ("workloads=[fc]", "-p workloads: 'fc'"),  # a parameterized family where real workloads are asked for
    ("overrides={fc: {nodes: [0]}}", "-p overrides: fc: nodes: 0"),
    ("overrides={fc: {nodez: [64]}}", "-p overrides: fc: 'nodez'"),
    ("overrides={nope: {nodes: [64]}}", "-p overrides: 'nope'"),
    ("fill_overrides={batch: [-1]}", "-p fill_overrides: batch: -1"),
    ("xla=maybe", "-p xla: 'maybe'"),
    ("dtype=float8", "-p dtype: 'float8'"),
    ("preset=huge", "-p preset: 'huge'"),
    ("infeed_inputs=[device]", "-p infeed_inputs: 'device'"),
    ("replay_fractions=[0.5, 2]", "-p replay_fractions: 2"),
    ("stacks=['tensorflow==2.16.2,current']", "-p stacks: 'tensorflow==2.16.2,current'"),
    ("reference_dir=/no/such/folder", "-p reference_dir: '/no/such/folder'"),
    ("backend=cloud", "-p backend: 'cloud'"),
    ("seed=" + "9" * 5000, "numbers of at most 40 characters"),
    ("families=" + "[" * 3000 + "]" * 3000, "-p families"),
    ("overrides=" + "{a: " * 40 + "1" + "}" * 40, "nested at most 16 deep"),
]


@pytest.mark.parametrize("parameter,needle", REPORT_REFUSALS, ids=[p[:30] for p, _ in REPORT_REFUSALS])
def test_a_report_parameter_wrong_inside_is_refused_before_anything_runs(parameter, needle, tmp_path):
    outputs = tmp_path / "outputs"
    refused(cli("report", "smoke", "-p", parameter, "--outputs", str(outputs)), needle)
    assert not outputs.exists()  # nothing imported, measured or written


def test_a_platform_parameter_must_name_this_machine_the_store_or_the_original_study(store, tmp_path):
    outputs = tmp_path / "outputs"
    refused(cli("report", "smoke", "-p", "baseline=nope", "--outputs", str(outputs)), "parameter baseline: 'nope'")
    refused(
        cli("report", "study", "--store", str(store), "-p", "target=laptop", "--outputs", str(outputs)),
        "the store or the original study: tpu-v2-8, v100",
    )
    assert not outputs.exists()


@pytest.mark.skipif(Path("/proc/driver/nvidia/gpus").exists(), reason="this machine has a GPU")
def test_a_report_on_a_gpu_this_machine_lacks_is_refused_before_anything_runs(tmp_path):
    outputs = tmp_path / "outputs"
    refused(cli("report", "smoke", "-p", "platform=gpu:0", "--outputs", str(outputs)), "parameter platform: 'gpu:0'")
    assert not outputs.exists()


def test_every_declared_report_parameter_is_checked_inside():
    """A parameter a notebook declares has a check of its content, bounds, or is plain (a flag, the store)."""
    from paradnn.parameters import PARAMETER_BOUNDS, PLAIN, VALUE_CHECKS, declared

    notebooks = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))
    names = {name for notebook in notebooks for name in declared(notebook)}
    unchecked = names - set(VALUE_CHECKS) - set(PARAMETER_BOUNDS) - set(PLAIN)
    assert not unchecked, f"declared but not checked: {sorted(unchecked)}"
    assert set(VALUE_CHECKS) - names == set()  # no check for a parameter nothing declares


def test_a_pipeline_file_nested_too_deep_or_with_a_huge_number_is_refused_at_once(tmp_path):
    head = "name: x\nnotebooks:\n- notebooks/architecture.ipynb\nparameters:\n"
    for body, needle in (
        ("  overrides: " + "{a: " * 3000 + "1" + "}" * 3000, "nested at most 16 deep"),
        ("  seed: " + "1" * 5000, "numbers of at most 40 characters"),
    ):
        pipeline = tmp_path / "p.yaml"
        pipeline.write_text(head + body)
        refused(cli("report", str(pipeline), "--outputs", str(tmp_path / "out")), needle)


@pytest.mark.parametrize("text", ["４", "٣", "1２"])
def test_digits_of_other_scripts_are_not_numbers(text, tmp_path):
    from paradnn.platform import parse_target
    from paradnn.settings import positive_int

    target = tmp_path / "s.sqlite"
    refused(cli("sweep", "fc", "--set", f"layers={text}", "--store", str(target)), "ASCII digits")
    assert not target.exists()
    with pytest.raises(ConfigError):
        parse_target(f"cpu[threads={text}]")
    with pytest.raises(ConfigError):
        positive_int("devices", 8)(text)


@pytest.mark.parametrize("name", ["GPU", "Tpu", "CPU:0", "V100", "H100"])
def test_reserved_names_are_reserved_in_any_case(name, tmp_path):
    from paradnn.platform import platform_name

    with pytest.raises(ConfigError, match="--name"):
        platform_name(name)
    refused(cli("merge", str(tmp_path / "none.sqlite"), "--rename", f"cpu={name}", "--store", str(tmp_path / "d.sqlite")), "")


def test_a_full_width_lookalike_of_a_datasheet_name_is_reserved():
    from paradnn.store.names import reserved

    assert reserved("ｖ１００") and reserved("V100") and reserved("h100") and not reserved("xeon-lab")


def test_a_renamed_store_merged_back_adds_nothing(store, tmp_path):
    target = tmp_path / "d.sqlite"
    assert cli("merge", str(store), "--store", str(target), "--rename", "v100=mygpu").exit_code == 0
    again = cli("merge", str(store), "--store", str(target), "--json")
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    with Store(store, create=False, readonly=True) as s:
        rows = s.count()
    assert summary["added"] == {} and summary["duplicates"] == rows
    with Store(target, create=False, readonly=True) as s:
        assert s.count() == rows and s.platform_names() == ["mygpu"]


def test_a_refused_merge_leaves_none_of_the_folders_it_made(store, tmp_path):
    target = tmp_path / "a" / "b" / "c" / "d.sqlite"
    other = tmp_path / "other.sqlite"
    assert cli("merge", str(store), "--store", str(other), "--rename", "v100=lab").exit_code == 0
    with Store(other) as s:  # the same name for another machine: the merge below folds, and is refused
        s.conn.execute("UPDATE platforms SET info = json_set(info, '$.name', 'another device')")
        s.conn.execute("UPDATE results SET device_name = 'another device'")
    refused(cli("merge", str(store), str(other), "--rename", "v100=lab", "--store", str(target)), "fold")
    assert not (tmp_path / "a").exists()


def test_sigterm_during_a_merge_removes_its_temporary_file(store, tmp_path, monkeypatch):
    import signal

    import paradnn.store.merge as merge_module

    written = merge_module._write

    def terminated(conn, *args):
        summary = written(conn, *args)
        os.kill(os.getpid(), signal.SIGTERM)  # as `timeout` sends it, in the middle of the transaction
        return summary

    monkeypatch.setattr(merge_module, "_write", terminated)
    result = cli("merge", str(store), "--store", str(tmp_path / "d.sqlite"))
    assert result.exit_code == 128 + signal.SIGTERM, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "path,needle",
    [
        ("x" * 300 + ".sqlite", "each folder and file name takes at most 255"),
        ("file/s.sqlite", "is a file, not a folder"),
        ("newdir/", "is a folder name; a store is a file"),
        ("fifo", "not a regular file"),
        ("y/" * 2100 + "s.sqlite", "at most 4,096"),
    ],
)
@pytest.mark.parametrize("command", [["sweep", "fc", "--set", "layers=1"], ["results"], ["import-legacy"], ["merge", "SRC"]])
def test_a_store_path_no_file_can_have_is_one_line_and_creates_nothing(store, tmp_path, monkeypatch, path, needle, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("")
    os.mkfifo(tmp_path / "fifo")
    before = sorted(p.name for p in tmp_path.iterdir())
    refused(cli(*[str(store) if c == "SRC" else c for c in command], "--store", path), needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_overlap_filter_that_keeps_nothing_is_refused_and_creates_no_store(tmp_path):
    target = tmp_path / "s.sqlite"
    refused(
        cli("sweep", "fc", "--preset", "paper-overlap", "--set", "nodes=3", "--store", str(target)), "which hold nodes 32, 128"
    )
    assert not target.exists()


def test_the_scorecard_of_an_imported_store_says_its_rows_are_not_judged(store):
    result = cli("scorecard", "--store", str(store))
    assert result.exit_code == 0, result.output
    assert "imported rows of the original study are not judged" in result.stdout and "no ok rows" not in result.stdout


def test_a_batch_scale_without_rows_says_which_batches_there_are():
    refused(cli("project", "--from", "tpu-v2-8", "--to", "h100", "--family", "fc", "--batch-scale", "3"), "their batches: ")


def test_a_projection_takes_one_label_as_a_string_not_its_letters():
    import paradnn

    label = "layer_4-node_2048-input_2000-output_1000-bs_512"
    rows, _ = paradnn.project("tpu-v2-8", "h100", "fc", label)
    assert list(rows["label"]) == [label]


def test_the_original_study_is_not_set_beside_itself(store, capsys):
    from paradnn.sections.platform_comparison import original_beside_section

    assert original_beside_section(store, "v100") == []
    assert "one of the original study's platforms" in capsys.readouterr().out


@pytest.mark.parametrize(
    "call,needle",
    [
        (lambda p, s: p.describe(["fc"], "layer_1-node_16-input_10-output_10-bs_8"), "family: ['fc']"),
        (lambda p, s: p.sweep("fc", store=None), "store: None"),
        (lambda p, s: p.sweep("fc", overrides=[1], store=s), "overrides: [1] is not valid; allowed: a mapping"),
        (lambda p, s: p.load(123), "store: 123"),
        (lambda p, s: p.merge(None, "x.sqlite"), "sources: None"),
        (lambda p, s: p.merge([s], None), "store: None"),
        (lambda p, s: p.merge([s], "x.sqlite", rename="cpu=lab"), "rename: 'cpu=lab'"),
        (lambda p, s: p.load(s).matched("nope", "a", "b"), "column: 'nope'"),
        (lambda p, s: p.load(s).where(nope=1), "column: 'nope'"),
        (lambda p, s: p.load(s).matched("platform", "v100", "v100"), "other than the baseline's"),
        (lambda p, s: p.project("tpu-v2-8", "h100", "fc", store=1), "store: 1"),
    ],
)
def test_the_python_api_raises_its_own_errors(store, call, needle):
    import paradnn

    with pytest.raises(ConfigError) as raised:
        call(paradnn, str(store))
    assert needle in str(raised.value)


# Messages that say what is wrong (issue 62): the value as given, the option as typed.


def test_a_newline_in_a_rename_is_shown_as_one(tmp_path, store):
    line = cli("merge", str(store), "--rename", "nope\nx=lab", "--store", str(tmp_path / "d.sqlite")).stderr
    assert "nope\\nx" in line and len(line.strip().splitlines()) == 1


def test_a_fold_inside_one_source_does_not_suggest_a_rename_that_moves_both(tmp_path):
    from tests.test_merge import machine_store

    source = machine_store(tmp_path / "two.sqlite")
    other = machine_store(tmp_path / "other.sqlite", device="Intel Xeon", cores=64)
    with Store(other, create=False, readonly=True) as s:
        rows = [dict(r) for r in s.conn.execute("SELECT * FROM results")]
    with Store(source) as s:  # two machines under one name, as no paradnn write would leave them
        columns = [c for c in rows[0] if c != "id"]
        s.conn.executemany(
            f"INSERT INTO results ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            [[r[c] for c in columns] for r in rows],
        )
    line = cli("merge", str(source), "--store", str(tmp_path / "d.sqlite")).stderr
    assert "itself holds two machines under 'cpu'" in line and "--rename" not in line


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_an_original_study_file_that_is_no_regular_file_is_refused_before_it_blocks(kind, tmp_path):
    path = tmp_path / "tpu_fc.json"
    os.mkfifo(path) if kind == "fifo" else path.symlink_to("/dev/zero")
    refused(cli("import-legacy", str(path), "--store", str(tmp_path / "s.sqlite")), "not a folder, FIFO or device")
    assert not (tmp_path / "s.sqlite").exists()


def test_a_requirement_no_index_holds_is_refused_in_one_short_line(tmp_path):
    result = cli("sweep", "fc", "--stack", "tensorflow==" + "9" * 5000, "--store", str(tmp_path / "s.sqlite"))
    refused(result, "a pip requirement of at most 200 characters")
    assert len(result.stderr) < 500


def test_an_empty_side_of_a_comparison_names_the_family_filter(store):
    refused(
        cli("compare", "--store", str(store), "--baseline", "v100", "--target", "x", "--family", "rnn"),
        "finished rnn results (--family rnn)",
    )


def test_sizes_and_options_are_said_as_given():
    from paradnn.config import gigabytes
    from paradnn.sweeps.plan import SweepOptions

    assert gigabytes(1.0) == "1e-09 GB" and gigabytes(12.3e9) == "12.3 GB"
    with pytest.raises(ConfigError, match=r"--timeout \(timeout_s\): -1"):
        SweepOptions(timeout_s=-1)


def test_a_machine_measured_under_one_name_is_not_renamed_by_a_sweep(tmp_path):
    """`sweep --name lab-b` on a machine measured as lab-a would move its record and measure nothing."""
    from paradnn.store.names import FoldError
    from tests.test_merge import machine_store

    store = machine_store(tmp_path / "s.sqlite", platform="lab-a")
    with Store(store, create=False, readonly=True) as s:
        fp, info = s.conn.execute("SELECT fingerprint, info FROM platforms").fetchone()
    before = digest(store)
    with Store(store) as s, pytest.raises(FoldError, match="named 'lab-a'.*--rename lab-a=lab-b"):
        s.put_platform(fp, "lab-b", json.loads(info), None, "measured")
    assert digest(store) == before


def test_the_original_study_imported_into_a_renamed_store_adds_nothing(store, tmp_path, reference):
    target = tmp_path / "renamed.sqlite"
    assert cli("merge", str(store), "--store", str(target), "--rename", "v100=gpu-2019").exit_code == 0
    again = cli("import-legacy", str(reference / "gpu_fc.json"), "--store", str(target))
    assert again.exit_code == 0, again.output
    with Store(target, create=False, readonly=True) as s, Store(store, create=False, readonly=True) as original:
        assert s.count() == original.count() and s.platform_names() == ["gpu-2019"]
        assert s.platforms()["platform"].tolist() == ["gpu-2019"]


@pytest.mark.parametrize("command", [["results"], ["scorecard"], ["compare", "--baseline", "v100", "--target", "x"]])
def test_reading_a_damaged_store_leaves_nothing_beside_it(store, tmp_path, command):
    damaged = damaged_copy(store, tmp_path)
    refused(cli(*command, "--store", str(damaged)), "damaged")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.sqlite"]


# The hostile rerun's findings (issue 62): each class once more.


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_an_export_onto_a_file_sqlite_keeps_beside_a_store_is_refused(store, suffix):
    refused(cli("results", "--store", str(store), "--format", "json", "--output", f"{store}{suffix}"), "beside a store")
    assert not Path(f"{store}{suffix}").exists() or suffix != "-journal"


def test_an_export_name_no_file_can_have_is_one_line(store, tmp_path):
    refused(cli("results", "--store", str(store), "--format", "csv", "--output", str(tmp_path / ("a" * 300))), "--output")


def test_the_original_studys_file_under_another_devices_name_is_refused(reference, tmp_path):
    swapped = tmp_path / "gpu_fc.json"
    shutil.copy(reference / "tpu_fc.json", swapped)
    refused(cli("import-legacy", str(swapped), "--store", str(tmp_path / "s.sqlite")), "measured on the tpu-v2-8")
    mine = tmp_path / "mine.json"
    shutil.copy(reference / "gpu_fc.json", mine)
    refused(cli("import-legacy", str(mine), "--platform", "tpu-v2-8", "--store", str(tmp_path / "s.sqlite")), "--platform v100")
    assert not (tmp_path / "s.sqlite").exists()
    assert cli("import-legacy", str(mine), "--platform", "v100", "--store", str(tmp_path / "s.sqlite")).exit_code == 0


@pytest.mark.parametrize(
    "text,needle",
    [
        ('{"labels": ' + "[" * 100_000 + "]" * 100_000 + "}", "RecursionError"),
        ('{"labels": [' + "9" * 100_000 + "]}", "ValueError"),
    ],
)
def test_legacy_json_no_study_holds_is_one_line(text, needle, tmp_path):
    path = tmp_path / "tpu_hostile.json"
    path.write_text(text)
    refused(cli("import-legacy", str(path), "--store", str(tmp_path / "s.sqlite")), needle)


def test_a_projection_leaves_nothing_beside_its_store(store):
    before = sorted(p.name for p in store.parent.iterdir())
    cli("project", "--from", "v100", "--to", "h100", "--family", "fc", "--store", str(store))
    assert sorted(p.name for p in store.parent.iterdir()) == before


@pytest.mark.parametrize(
    "args,needle",
    [
        (["-p", "baseline=v100", "-p", "target=v100"], "a platform other than the baseline"),
        (["-p", "reference_dir=/etc"], "the original study's JSON files: tpu_fc.json"),
        (["--reference", "/etc"], "--reference: '/etc'"),
        (["-p", "stacks=[current, current]"], "each stack once"),
        (["-p", "families=[fc]", "-p", "families=[cnn]"], "each parameter once"),
    ],
)
def test_report_options_that_contradict_or_name_nothing_are_refused_before_anything_runs(args, needle, tmp_path):
    outputs = tmp_path / "outputs"
    refused(cli("report", "smoke", *args, "--outputs", str(outputs)), needle)
    assert not outputs.exists()


def test_two_renames_to_one_new_name_say_so(store, tmp_path):
    refused(
        cli("merge", str(store), "--rename", "v100=foo", "--rename", "cpu=foo", "--store", str(tmp_path / "d.sqlite")),
        "'foo' is already the new name of 'v100'",
    )


def test_a_missing_option_lists_its_choices_on_one_line(store):
    result = cli("predict", "--store", str(store))
    refused(result, "Choose from: fc, cnn, rnn")


def test_a_sweep_into_a_damaged_store_is_refused_whole_and_writes_nothing(store, tmp_path):
    import paradnn
    from paradnn.store import StoreError

    damaged = damaged_copy(store, tmp_path)
    before = digest(damaged)
    grid = ["--set", "layers=1", "--set", "nodes=8", "--set", "batch=8", "--set", "input=16", "--set", "output=4"]
    refused(cli("sweep", "fc", *grid, "--store", str(damaged)), "an undamaged paradnn store")
    with pytest.raises(StoreError, match="damaged"):
        paradnn.sweep("fc", store=damaged, overrides={"layers": [1], "nodes": [8], "batch": [8], "input": [16], "output": [4]})
    assert digest(damaged) == before and sorted(p.name for p in tmp_path.iterdir()) == ["damaged.sqlite"]


def test_a_report_on_a_damaged_store_is_one_line_and_writes_nothing(store, tmp_path):
    damaged = damaged_copy(store, tmp_path)
    refused(
        cli(
            "report",
            "study",
            "--store",
            str(damaged),
            "-p",
            "baseline=v100",
            "-p",
            "target=x",
            "--outputs",
            str(tmp_path / "out"),
        ),
        "undamaged paradnn store",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.sqlite"]


def test_a_rename_splits_at_the_last_equals_sign_outside_brackets(store, tmp_path):
    from paradnn.store.merge import parse_rename

    assert parse_rename(["cpu[threads=1]=lab-1t", "a=b=c"]) == {"cpu[threads=1]": "lab-1t", "a=b": "c"}
    refused(
        cli("merge", str(store), "--rename", "v100=cpu[threads=2]", "--store", str(tmp_path / "d.sqlite")),
        "--rename v100=cpu[threads=2]",
    )


def test_a_sigterm_after_the_merge_committed_leaves_success_and_exit_0(tmp_path, monkeypatch):
    """Once the merge has committed, a SIGTERM (from `timeout`, say) no longer turns its summary into exit 143."""
    import signal

    from paradnn.store.merge import MergeSummary

    summary = MergeSummary(str(tmp_path / "dst.sqlite"), ("a.sqlite",), added={"cpu": 2})
    monkeypatch.setattr("paradnn.store.merge.merge", lambda sources, store, rename=None: summary)
    echoed: list[str] = []

    def echo(line: object = "", **kwargs) -> None:
        if not echoed:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while the summary is printed
        echoed.append(str(line))

    monkeypatch.setattr("click.echo", echo)
    try:
        result = cli("merge", str(tmp_path / "a.sqlite"), "--store", str(tmp_path / "dst.sqlite"))
    except KeyboardInterrupt:  # what the SIGTERM handler raises
        pytest.fail("a SIGTERM after the commit interrupted the merge command")
    assert result.exit_code == 0 and echoed == summary.lines()


def test_the_damage_check_lets_a_store_being_created_through(store, tmp_path):
    """An empty file or an SQLite file without tables (another sweep creating the store) is for the
    writer's own open to make a store of; only damage past a paradnn store's header is refused here."""
    import sqlite3

    from paradnn.store import StoreError
    from paradnn.store.db import check_undamaged

    empty = tmp_path / "empty.sqlite"
    empty.touch()
    bare = tmp_path / "bare.sqlite"
    sqlite3.connect(bare).execute("PRAGMA user_version = 0").connection.close()
    for path in (empty, bare, tmp_path / "absent.sqlite", store):
        check_undamaged(path)
    with pytest.raises(StoreError, match="damaged"):
        check_undamaged(damaged_copy(store, tmp_path))
