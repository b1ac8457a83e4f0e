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


def test_a_platform_the_store_lacks_is_refused(store):
    refused(cli("results", "--store", str(store), "--platform", "nope"), "a platform of the store (v100)")


def test_a_legacy_file_is_filed_only_under_its_own_device(reference, tmp_path):
    target = tmp_path / "t.sqlite"
    refused(cli("import-legacy", str(reference / "tpu_fc.json"), "--platform", "v100", "--store", str(target)),
            "not this file's device; expected tpu-v2-8")  # fmt: skip
    assert not target.exists()


def test_a_legacy_file_with_a_negative_rate_is_refused(reference, tmp_path):
    data = json.loads((reference / "gpu_fc.json").read_text())
    data["example_per_sec"][3] = -5.0
    bad = tmp_path / "gpu_fc.json"
    bad.write_text(json.dumps(data))
    refused(cli("import-legacy", str(bad), "--store", str(tmp_path / "t.sqlite")), "example_per_sec[3] is -5.0")


@pytest.mark.parametrize("args,needle", [
    (["--hold", "dtype", "--free", "dtype"], "--hold: 'dtype'"),
    (["--free", "platform"], "settings other than --by platform"),
    (["--by", "xla", "--baseline", "off", "--target", "on", "--hold", "xla"], "settings other than --by xla"),
])  # fmt: skip
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
