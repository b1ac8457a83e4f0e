"""Software stacks: environments built once and reused, interleaved measurement, stacks that fail to install."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from importlib import metadata

import pytest
from test_sweep_driver import CONFIGS, INFO, FakeWorker

from paradnn.config import ConfigError
from paradnn.engine.protocol import RunSettings
from paradnn.store import Store
from paradnn.sweeps import stacks
from paradnn.sweeps.backends import run_sweep
from paradnn.sweeps.plan import COMPARE_ROUNDS, SweepOptions


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PARADNN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(stacks, "_check_imports", lambda python: None)  # the fake environments hold no Python
    monkeypatch.setattr(stacks, "release_time", lambda name, version: RELEASED)  # no index asked
    return tmp_path / "cache" / "stacks"


RELEASED = "2024-06-28T18:53:41Z"


def fake_uv(calls: list, fail_on: str = ""):
    """Stands in for uv: records each call, makes the venv's python, fails on a requirement named ``fail_on``."""

    def run(*args: str) -> None:
        calls.append(args)
        if fail_on and fail_on in args:
            raise stacks.StackFailed(f"no wheels for {fail_on}")
        if args[0] == "venv":
            (stacks.Path(args[-1]) / "bin").mkdir(parents=True, exist_ok=True)
            (stacks.Path(args[-1]) / "bin" / "python").write_text("")

    return run


def test_a_stack_is_built_once_and_then_reused(cache, monkeypatch):
    calls: list = []
    monkeypatch.setattr(stacks, "_uv", fake_uv(calls))
    stack = stacks.parse("tensorflow==2.16.2")
    python = stacks.ensure(stack)
    assert python == cache / stack.key / "bin" / "python" and (cache / stack.key / ".complete").exists()
    assert [c[:2] for c in calls] == [("venv", "--quiet"), ("pip", "install"), ("pip", "install")]
    assert "tensorflow==2.16.2" in calls[1] and "-e" in calls[2]
    assert calls[1][calls[1].index("--exclude-newer") + 1] == RELEASED  # the rest resolved as of its release
    assert stacks.ensure(stack) == python and len(calls) == 3  # reused: uv not called again
    assert stacks.ensure(stacks.parse("current")) == stacks.Path(sys.executable)


def test_a_failed_build_leaves_nothing_and_an_incomplete_one_is_never_reused(cache, monkeypatch):
    monkeypatch.setattr(stacks, "_uv", fake_uv([], fail_on="tensorflow==1.0"))
    stack = stacks.parse("tensorflow==1.0")
    with pytest.raises(stacks.StackFailed, match="no wheels for tensorflow==1.0"):
        stacks.ensure(stack)
    assert list(cache.iterdir()) == []
    (cache / stack.key / "bin").mkdir(parents=True)  # a build interrupted before it completed
    assert stacks.python_of(stack) is None


def test_an_environment_that_cannot_import_keras_is_refused_with_the_import_error(tmp_path, monkeypatch):
    """uv installs fine, but the worker could not start (a TensorFlow without Keras 3): never marked complete."""

    def uv_with_broken_python(*args: str) -> None:
        if args[0] == "venv":
            python = stacks.Path(args[-1]) / "bin" / "python"
            python.parent.mkdir(parents=True, exist_ok=True)
            python.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'keras'\" >&2\nexit 1\n")
            python.chmod(0o755)

    monkeypatch.setenv("PARADNN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(stacks, "_uv", uv_with_broken_python)
    cache = tmp_path / "cache" / "stacks"
    stack = stacks.parse("tensorflow==2.12.0")
    with pytest.raises(stacks.StackFailed, match="cannot run a sweep worker: ModuleNotFoundError: No module named 'keras'"):
        stacks.ensure(stack)
    assert stacks.python_of(stack) is None and list(cache.iterdir()) == []


@pytest.mark.parametrize("text", ["tensorflow===", "tensor flow==2", ",", "tensorflow==2.16; python_version >"])
def test_a_malformed_requirement_is_one_clear_error(text):
    with pytest.raises(ConfigError, match="--stack"):
        stacks.parse(text)


def test_the_key_changes_with_the_requirements():
    assert stacks.parse("tensorflow==2.16.2").key != stacks.parse("tensorflow==2.18.1").key
    assert stacks.parse("tensorflow==2.16.2,numpy<2").name == "tensorflow==2.16.2,numpy<2"


class StackWorker(FakeWorker):
    """A fake worker reporting the TensorFlow version of the environment it was started from."""

    order: list[tuple[str, str]] = []

    def __init__(self, target, python: str) -> None:
        super().__init__(target, {})
        self.version = python.rsplit("-", 1)[-1]
        self.info = {**INFO, "software": {**INFO["software"], "tensorflow": self.version}}

    def send(self, message) -> None:
        if message is not None and hasattr(message, "settings"):
            StackWorker.order.append((message.label, self.version))
        super().send(message)


def test_each_configuration_runs_on_every_stack_in_alternating_order(tmp_path, monkeypatch):
    monkeypatch.setattr(stacks, "ensure", lambda stack, echo=None: stacks.Path(f"/envs/python-{stack.name.split('==')[-1]}"))
    StackWorker.order = []
    options = SweepOptions(settings=RunSettings(max_seconds=0.1), timeout_s=0.2, memory_budget_bytes=1e12)
    chosen = [stacks.parse("tensorflow==2.16.2"), stacks.parse("tensorflow==2.21.0")]
    with Store(tmp_path / "r.sqlite") as store:
        summary = run_sweep(CONFIGS, store, options, stacks=chosen, start_worker=StackWorker)
        skipped = summary.skipped_stacks
        rows = store.results()
    assert summary.states["ok"] == 2 * len(CONFIGS) and not skipped
    each = ["2.16.2"] * COMPARE_ROUNDS + ["2.21.0"] * COMPARE_ROUNDS
    assert sorted(rows.groupby("label")["sw_tensorflow"].apply(sorted).tolist()) == [each] * len(CONFIGS)
    turns = [StackWorker.order[i : i + 2] for i in range(0, len(StackWorker.order), 2)]
    assert len(turns) == COMPARE_ROUNDS * len(CONFIGS)
    assert all(a[0] == b[0] and a[1] != b[1] for a, b in turns)  # a configuration on both stacks, one after the other
    firsts = [t[0][1] for t in turns]
    assert set(firsts) == {"2.16.2", "2.21.0"}  # the rounds' shuffled orders put each stack first somewhere
    stamped = rows.sort_values("id")["extra"].map(lambda e: (e["round"], e["position"])).tolist()
    assert [r for r, _ in stamped] == sorted(r for r, _ in stamped)  # each round a pass over the grid
    with Store(tmp_path / "r.sqlite") as store:  # a rerun measures nothing
        again = run_sweep(CONFIGS, store, options, stacks=chosen, start_worker=StackWorker)
    assert again.already_done == 2 * len(CONFIGS) and not again.states


def test_a_configuration_one_stack_measured_before_is_measured_again_beside_the_other(tmp_path, monkeypatch):
    from paradnn.analysis.results import Results

    monkeypatch.setattr(stacks, "ensure", lambda stack, echo=None: stacks.Path(f"/envs/python-{stack.name.split('==')[-1]}"))
    options = SweepOptions(settings=RunSettings(max_seconds=0.1), timeout_s=0.2, memory_budget_bytes=1e12)
    newer, older = stacks.parse("tensorflow==2.21.0"), stacks.parse("tensorflow==2.16.2")
    with Store(tmp_path / "r.sqlite") as store:
        run_sweep(CONFIGS, store, options, stacks=[newer], start_worker=StackWorker)  # another report's rows
        StackWorker.order = []
        summary = run_sweep(CONFIGS, store, options, stacks=[older, newer], start_worker=StackWorker)
        rows = store.results()
    # Every configuration again under both stacks, not only under the one that lacked it.
    assert summary.states["ok"] == 2 * len(CONFIGS) and summary.already_done == 0
    assert sorted(StackWorker.order) == sorted(
        (c.label, v) for c in CONFIGS for v in ("2.16.2", "2.21.0") for _ in range(COMPARE_ROUNDS)
    )
    sweeps = rows["extra"].map(lambda e: e["sweep"])
    assert sweeps.nunique() == 2 and set(rows.loc[sweeps == sweeps.iloc[-1], "sw_tensorflow"]) == {"2.16.2", "2.21.0"}
    # A version comparison pairs the rows of the sweep that measured both, never the earlier report's.
    pairs = (
        Results(rows)
        .side_by_side("sw_tensorflow")
        .matched("sw_tensorflow", "2.16.2", "2.21.0", within=("sweep",), metric="step_time_s")
    )  # the fake records have no throughput
    assert pairs.n == len(CONFIGS) and pairs.table["sweep"].nunique() == 1
    assert pairs.table["rounds"].eq(COMPARE_ROUNDS).all()  # each pair the median of its per-round ratios


def test_a_stack_that_cannot_install_is_skipped_and_the_others_run(tmp_path, monkeypatch):
    def ensure(stack, echo=None):
        if stack.name == "tensorflow==1.0":
            raise stacks.StackFailed("no wheels with a matching Python ABI tag")
        return stacks.Path("/envs/python-2.21.0")

    monkeypatch.setattr(stacks, "ensure", ensure)
    options = SweepOptions(settings=RunSettings(max_seconds=0.1), timeout_s=0.2, memory_budget_bytes=1e12)
    chosen = [stacks.parse("tensorflow==1.0"), stacks.parse("tensorflow==2.21.0")]
    with Store(tmp_path / "r.sqlite") as store:
        summary = run_sweep(CONFIGS, store, options, stacks=chosen, start_worker=StackWorker)
        skipped = summary.skipped_stacks
    assert skipped == {"tensorflow==1.0": "no wheels with a matching Python ABI tag"}
    assert summary.states["ok"] == len(CONFIGS)
    with Store(tmp_path / "s.sqlite") as store, pytest.raises(ConfigError, match="a stack that installs and starts here"):
        run_sweep(CONFIGS, store, options, stacks=chosen[:1], start_worker=StackWorker)


@pytest.mark.slow
def test_the_oldest_and_the_newest_tensorflow_fill_one_store(tmp_path):
    """Real environments: TensorFlow 2.16 (the oldest with Keras 3) beside this environment's, at smoke size."""
    store = tmp_path / "r.sqlite"
    args = [
        sys.executable,
        "-m",
        "paradnn.cli",
        "sweep",
        "fc",
        "--preset",
        "smoke",
        "--set",
        "nodes=16",
        "--set",
        "batch=8,16",
        "--set",
        "layers=1",
        "--set",
        "input=32",
        "--set",
        "output=10",
        "--max-seconds",
        "0.2",
        "--store",
        str(store),
        "--stack",
        "tensorflow==2.16.2",
        "--stack",
        "current",
    ]
    result = subprocess.run(args, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    with sqlite3.connect(store) as db:
        versions = db.execute("SELECT sw_tensorflow, COUNT(*) FROM results WHERE state = 'ok' GROUP BY 1").fetchall()
        kerases = dict(db.execute("SELECT DISTINCT sw_tensorflow, sw_keras FROM results").fetchall())
        infos = [json.loads(row[0]) for row in db.execute("SELECT info FROM platforms")]
    assert dict(versions) == {"2.16.2": 2 * COMPARE_ROUNDS, metadata.version("tensorflow"): 2 * COMPARE_ROUNDS}
    # TensorFlow 2.16.2 (released 2024-06-28) ran with the Keras 3 of its day, not this environment's
    assert kerases["2.16.2"] == "3.4.1" and kerases[metadata.version("tensorflow")] == metadata.version("keras")
    # each stack's full package list is kept in its platform record
    old = next(i for i in infos if i["software"]["tensorflow"] == "2.16.2")
    assert old["packages"]["keras"] == "3.4.1" and old["packages"]["numpy"] == "1.26.4" and len(old["packages"]) > 20


def _version_rows(version: str, scale: float, noise: float, seed: int) -> list[dict]:
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for i, step in enumerate((0.01, 0.02, 0.04, 0.08)):
        samples = list(step * scale * (1 + noise * rng.standard_normal(20)))
        rows.append(
            {
                "family": "fc",
                "label": f"c{i}",
                "platform": "cpu",
                "dtype": "float32",
                "xla": True,
                "state": "ok",
                "sw_tensorflow": version,
                "step_time_s": float(np.median(samples)),
                "samples_s": samples,
                "examples_per_sec": 64 / float(np.median(samples)),
            }
        )
    return rows


def test_version_speedups_carry_a_bootstrap_interval_and_flag_the_noise():
    import pandas as pd

    from paradnn.analysis.speedup import version_speedups

    same = pd.DataFrame(_version_rows("2.16.2", 1.0, 0.05, 0) + _version_rows("2.21.0", 1.0, 0.05, 1))
    table = version_speedups(same)
    assert len(table) == 1 and table.loc[0, "n"] == 4 and table.loc[0, "against"] == "previous"
    assert table.loc[0, "low"] < 1 < table.loc[0, "high"] and table.loc[0, "within_noise"]
    faster = pd.DataFrame(
        _version_rows("2.16.2", 1.0, 0.05, 0) + _version_rows("2.18.1", 0.8, 0.05, 1) + _version_rows("2.21.0", 0.5, 0.05, 2)
    )
    table = version_speedups(faster).set_index(["baseline", "target"])
    assert table.loc[("2.16.2", "2.21.0"), "against"] == "oldest"
    assert table.loc[("2.16.2", "2.21.0"), "geomean"] == pytest.approx(2.0, rel=0.05)
    assert table.loc[("2.16.2", "2.21.0"), "low"] > 1.8 and not table["within_noise"].any()


def test_a_worker_that_dies_while_starting_reports_its_own_exit_code_and_error(tmp_path):
    """Not the kill's -9: the worker's status and the last line it wrote to its environment's log."""
    from paradnn.platform import Target
    from paradnn.sweeps.worker import ProcessWorker

    python = tmp_path / "env" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'keras'\" >&2\nexit 3\n")
    python.chmod(0o755)
    with pytest.raises(RuntimeError) as info:
        ProcessWorker(Target(), python=str(python))
    assert "died while starting (exit code 3): ModuleNotFoundError: No module named 'keras'" in str(info.value)
    assert str(tmp_path / "env" / "worker.log") in str(info.value)


def test_a_stack_of_its_own_era_takes_its_pins_as_written(cache):
    assert stacks.era_options(stacks.parse("tensorflow==2.16.2")) == ["--exclude-newer", RELEASED]
    assert stacks.era_options(stacks.parse("tensorflow==2.16.2,keras==3.15.1")) == [
        "--exclude-newer",
        RELEASED,
        "--exclude-newer-package",
        f"keras={stacks.NO_LIMIT}",
    ]
    assert stacks.era_options(stacks.parse("tensorflow>=2.16")) == []  # nothing pinned: no era to take


def test_a_release_time_is_the_last_upload_of_that_version():
    files = [
        {"filename": "tensorflow-2.16.2-cp311-cp311-manylinux_2_17_x86_64.whl", "upload-time": "2024-06-28T18:53:41Z"},
        {"filename": "tensorflow-2.16.2-cp312-cp312-macosx_12_0_arm64.whl", "upload-time": "2024-06-28T18:40:00Z"},
        {"filename": "tensorflow-2.16.1-cp311-cp311-manylinux_2_17_x86_64.whl", "upload-time": "2024-03-08T00:00:00Z"},
        {"filename": "tensorflow_cpu-2.16.2-cp311-cp311-manylinux_2_17_x86_64.whl", "upload-time": "2025-01-01T00:00:00Z"},
    ]  # another project's wheel of that version
    assert stacks.release_of(files, "tensorflow", "2.16.2", "index") == "2024-06-28T18:53:41Z"
    with pytest.raises(stacks.StackFailed, match="lists no upload time for tensorflow 2.99.0"):
        stacks.release_of(files, "tensorflow", "2.99.0", "index")
