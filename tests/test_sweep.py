"""Sweeps, end to end in subprocesses: resume after kill -9, failures as results, bad input."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from paradnn.store import Store, StoreError
from paradnn.sweeps.plan import ordered
from tests.conftest import paradnn_here

pytestmark = pytest.mark.slow

TINY = ["--set", "layers=1", "--set", "nodes=8,16,32", "--set", "input=16", "--set", "output=4", "--set", "batch=8,16"]
FAST = ["--max-seconds", "0.2"]


def paradnn(*args: str, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "paradnn.cli", *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, **kwargs
    )


def _default_sigint() -> None:
    """Give the child Ctrl-C back: a suite started in the background (``make test &``) ignores SIGINT, and so would it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "paradnn.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_default_sigint
    )


def rows(store: Path):
    with Store(store, create=False) as s:
        return s.results()


def wait_for_rows(store: Path, n: int, proc: subprocess.Popen, limit: float = 120) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end and proc.poll() is None:
        try:
            if store.exists() and rows(store).shape[0] >= n:
                return
        except StoreError:  # the sweep is still creating the store
            pass
        time.sleep(0.2)
    raise AssertionError(f"no {n} rows within {limit} s (exit {proc.poll()})")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_killed_sweep_resumes_with_every_configuration_exactly_once(tmp_path):
    store = tmp_path / "r.sqlite"
    proc = start("sweep", "fc", *TINY, *FAST, "--store", str(store))
    wait_for_rows(store, 2, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert 2 <= rows(store).shape[0] < 6
    result = paradnn("sweep", "fc", *TINY, *FAST, "--store", str(store))
    assert result.returncode == 0, result.stderr
    df = rows(store)
    assert sorted(df["label"]) == sorted(set(df["label"])) and len(df) == 6
    assert set(df["state"]) == {"ok"}
    again = paradnn("sweep", "fc", *TINY, *FAST, "--store", str(store))
    assert "6 already in the store; this run: nothing measured" in again.stderr
    assert rows(store).shape[0] == 6


def test_out_of_memory_is_a_result_and_the_sweep_goes_on(tmp_path):
    store = tmp_path / "r.sqlite"
    # A tiny budget: every configuration is predicted not to fit and recorded as skipped.
    result = paradnn("sweep", "fc", *TINY, *FAST, "--store", str(store), "--memory-budget", "0.001")
    assert result.returncode == 0, result.stderr
    df = rows(store)
    assert len(df) == 6 and set(df["state"]) == {"skipped"}
    assert df["error"].str.contains("predicted").all() and (df["memory_estimate_bytes"] > 0).all()
    assert df["error"].str.contains(r"GB > budget 0\.001 GB").all()  # asked in GB, reported in GB (never "0.0 GB")
    # A real allocation failure: a 100,000 x 100,000 float32 weight (40 GB) cannot be allocated.
    huge = ["--set", "layers=2", "--set", "nodes=100000,16", "--set", "input=16", "--set", "output=4", "--set", "batch=8"]
    result = paradnn("sweep", "fc", *huge, *FAST, "--store", str(store), "--memory-budget", "100000")
    assert result.returncode == 0, result.stderr
    df = rows(store).set_index("label")
    assert df.loc["layer_2-node_100000-input_16-output_4-bs_8", "state"] == "oom"
    assert "OOM when allocating" in df.loc["layer_2-node_100000-input_16-output_4-bs_8", "error"]
    assert df.loc["layer_2-node_16-input_16-output_4-bs_8", "state"] == "ok"


def test_a_crashing_worker_is_an_error_and_the_sweep_goes_on(tmp_path):
    store = tmp_path / "r.sqlite"
    crash = "layer_1-node_16-input_16-output_4-bs_8"
    result = paradnn("sweep", "fc", *TINY, *FAST, "--store", str(store), env={"PARADNN_FAULT_CRASH_ON": crash})
    assert result.returncode == 0, result.stderr
    df = rows(store).set_index("label")
    assert len(df) == 6
    assert df.loc[crash, "state"] == "error" and "worker crashed" in df.loc[crash, "error"]
    assert (df.drop(crash)["state"] == "ok").all()
    # --retry-failed measures the failure again (the crash hook is off now), nothing else.
    result = paradnn("sweep", "fc", *TINY, *FAST, "--store", str(store), "--retry-failed")
    assert "5 already in the store; this run: 1 ok" in result.stderr


def test_two_sweeps_share_one_store_without_losing_rows(tmp_path):
    store = tmp_path / "r.sqlite"
    Store(store).close()
    a = start("sweep", "fc", *TINY, *FAST, "--store", str(store), "--xla")
    b = start("sweep", "fc", *TINY, *FAST, "--store", str(store), "--no-xla")
    assert a.wait(300) == 0 and b.wait(300) == 0
    df = rows(store)
    assert len(df) == 12
    assert df.groupby("xla")["label"].nunique().to_dict() == {False: 6, True: 6}


def interrupt_after_first_row(store, signum: int):
    """A tiny sweep stopped by ``signum`` once one result is stored; returns the process and its stderr."""
    proc = start("sweep", "fc", *TINY, "--max-seconds", "1", "--store", str(store))
    wait_for_rows(store, 1, proc)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    return proc, err


def test_ctrl_c_keeps_what_finished_and_exits_cleanly(tmp_path):
    store = tmp_path / "r.sqlite"
    proc, err = interrupt_after_first_row(store, signal.SIGINT)
    assert proc.returncode == 130, err
    assert "interrupted" in err.decode() and "rerun to resume" in err.decode()
    n = rows(store).shape[0]
    assert 1 <= n < 6
    result = paradnn("sweep", "fc", *TINY, *FAST, "--store", str(store))
    assert f"{n} already in the store" in result.stderr
    assert rows(store).shape[0] == 6


def test_max_minutes_bounds_the_sweep(tmp_path):
    store = tmp_path / "r.sqlite"
    result = paradnn("sweep", "fc", *TINY, "--max-seconds", "1", "--store", str(store), "--max-minutes", "0.001")
    assert result.returncode == 0, result.stderr
    assert "time budget spent" in result.stderr
    assert rows(store).shape[0] < 6


@pytest.mark.parametrize(
    "args,needle",
    [
        (["sweep", "fc", "--set", "depth=3"], "axis"),
        (["sweep", "fc", "--set", "nodes=-4"], "nodes"),
        (["sweep", "fc", "--set", "batch=100000000000000000000"], "batch"),
        (["sweep", "fc", "--set", "batch=1e20"], "batch"),
        (["sweep", "fc", "--set", "cell=gru"], "axis"),
        (["sweep", "fc", "--preset", "huge"], "preset"),
        (["sweep", "fc", "--memory-budget", "0"], "memory-budget"),
        (["results", "--format", "xml"], "format"),
        (["compare", "--baseline", "a", "--target", "b", "--by", "colour"], "by"),
        (["compare", "--baseline", "p", "--target", "gpu:0"], "--target"),
        (["compare", "--baseline", "p", "--target", "p"], "--target"),
    ],
)
def test_bad_sweep_input_exits_2_and_leaves_the_store_unchanged(tmp_path, args, needle):
    store = tmp_path / "r.sqlite"
    with Store(store) as s:
        s.add_results([{"family": "fc", "label": "x", "platform": "p", "state": "ok", "examples_per_sec": 1.0}])
    before = digest(store)
    result = paradnn_here(*args, "--store", str(store))
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and needle in result.stderr
    assert digest(store) == before


@pytest.mark.parametrize("content", [b"not a database at all", b"SQLite format 3\x00" + b"\x00" * 200])
def test_a_file_that_is_not_a_store_is_refused_untouched(tmp_path, content):
    store = tmp_path / "notes.sqlite"
    store.write_bytes(content)
    for args in (["sweep", "fc", *TINY], ["results"], ["compare", "--baseline", "a", "--target", "b"]):
        result = paradnn(*args, "--store", str(store))
        assert result.returncode == 2, result.stderr
        assert "store" in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert store.read_bytes() == content


def test_order_covers_the_grid_evenly():
    from paradnn.space import expand

    configs = expand("fc", "paper")
    first = ordered(configs)[: len(configs) // 10]
    assert ordered(configs) == ordered(configs)  # deterministic
    for axis in ("layers", "nodes", "batch"):
        values = {getattr(c, axis) for c in configs}
        assert {getattr(c, axis) for c in first} == values


def test_an_absent_device_exits_2_and_leaves_the_store_unchanged(tmp_path):
    store = tmp_path / "r.sqlite"
    Store(store).close()
    before = digest(store)
    result = paradnn("sweep", "fc", *TINY, "--platform", "gpu:7", "--store", str(store))
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "gpu:7" in result.stderr
    assert digest(store) == before


def test_results_and_compare_refuse_an_empty_file(tmp_path):
    store = tmp_path / "empty.sqlite"
    store.touch()
    for args in (["results"], ["compare", "--baseline", "a", "--target", "b"]):
        result = paradnn(*args, "--store", str(store))
        assert result.returncode == 2 and "empty file" in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert store.read_bytes() == b""


def test_a_read_only_store_is_one_line_and_exit_2(tmp_path):
    import shutil

    store = tmp_path / "r.sqlite"
    Store(store).close()
    before = digest(store)
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(store)]).returncode != 0:
        pytest.skip("cannot make a file immutable here (chattr +i)")
    try:
        result = paradnn("sweep", "fc", *TINY, *FAST, "--store", str(store))
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "read-only" in result.stderr
        assert paradnn("results", "--store", str(store)).returncode == 0  # reading needs no write access
    finally:
        subprocess.run(["chattr", "-i", str(store)])
    assert digest(store) == before


def test_two_sweeps_over_one_grid_measure_each_configuration_once(tmp_path):
    store = tmp_path / "r.sqlite"
    Store(store).close()
    a = start("sweep", "fc", *TINY, *FAST, "--store", str(store))
    b = start("sweep", "fc", *TINY, *FAST, "--store", str(store))
    assert a.wait(300) == 0 and b.wait(300) == 0
    df = rows(store)
    assert len(df) == 6 and df["label"].is_unique
    with Store(store) as s:
        assert s.claims().empty


def test_a_real_workload_sweeps_end_to_end(tmp_path):
    """The worker describes a family counted from its Keras model; the driver stays free of TensorFlow."""
    store = tmp_path / "r.sqlite"
    result = paradnn("sweep", "squeezenet", "--no-xla", *FAST, "--store", str(store))
    assert result.returncode == 0, result.stderr
    df = rows(store)
    assert list(df["state"]) == ["ok"] and df["params"].iloc[0] == 1_248_424
    assert df["label"].iloc[0] == "image_32-bs_2" and df["flops_model"].iloc[0] > 0


def test_sigterm_stops_a_sweep_like_ctrl_c(tmp_path):
    proc, err = interrupt_after_first_row(tmp_path / "r.sqlite", signal.SIGTERM)
    assert proc.returncode == 143, err
    assert "interrupted" in err.decode() and "rerun to resume" in err.decode()


def test_ctrl_c_while_the_worker_starts_counts_what_is_left(tmp_path):
    store = tmp_path / "r.sqlite"
    proc = start("sweep", "fc", *TINY, "--max-seconds", "1", "--store", str(store))
    end = time.monotonic() + 60
    driver = psutil.Process(proc.pid)
    while not driver.children() and time.monotonic() < end:  # its worker has started: importing TensorFlow (seconds)
        time.sleep(0.02)
    assert driver.children(), "the sweep started no worker within 60 s"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "6 left" in err.decode()


def test_two_workers_time_one_at_a_time_and_resume_after_ctrl_c(tmp_path):
    store = tmp_path / "r.sqlite"
    # XLA off: TensorFlow's graph optimiser prepares on one core, so the two workers overlap.
    args = ("sweep", "fc", *TINY, "--max-seconds", "0.5", "--no-xla", "--workers", "2", "--store", str(store))
    proc = start(*args)
    wait_for_rows(store, 2, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    with Store(store, create=False) as s:
        assert s.claims().empty  # what was in flight in either lane was released
    result = paradnn(*args)
    assert result.returncode == 0, result.stderr
    df = rows(store)
    assert sorted(df["label"]) == sorted(set(df["label"])) and len(df) == 6 and set(df["state"]) == {"ok"}
    spans = [extra["spans"] for extra in df["extra"]]
    for i, mine in enumerate(spans):  # no timed phase beside another worker's preparation or timing
        for theirs in spans[:i] + spans[i + 1 :]:
            for start_s, end_s in (theirs["prepared"], theirs["timed"]):
                assert end_s <= mine["timed"][0] or mine["timed"][1] <= start_s, (mine, theirs)
