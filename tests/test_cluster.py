"""Sweeps on a real Ray cluster of two nodes on this machine (loopback): placement, node loss, driver loss."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest

from paradnn.sweeps.cluster import add_local_node

pytestmark = pytest.mark.slow
ray_cluster_utils = pytest.importorskip("ray.cluster_utils")

GRID = ["--set", "nodes=16,32,64", "--set", "batch=8,16", "--set", "layers=1", "--set", "input=32", "--set", "output=10"]
N = 6


@pytest.fixture(scope="module")
def cluster(ray_alone):
    """A Ray head with one CPU; each test adds (and may kill) its own second node. Everything is stopped after."""
    c = ray_cluster_utils.Cluster()
    add_local_node(c)
    yield c
    c.shutdown()


def sweep_args(store, address: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "paradnn.cli",
        "sweep",
        "fc",
        "--preset",
        "smoke",
        *GRID,
        "--max-seconds",
        "0.3",
        "--store",
        str(store),
        "--backend",
        "ray",
        "--address",
        address,
        *extra,
    ]


def rows(store) -> list[dict]:
    if not store.exists():
        return []
    with sqlite3.connect(store) as db:
        db.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in db.execute("SELECT label, state, error, extra FROM results")]
        except sqlite3.OperationalError as exc:  # the sweep has made the file but not its tables yet
            if "no such table" in str(exc):
                return []
            raise


def wait_for_rows(store, n: int, process: subprocess.Popen, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while len(rows(store)) < n:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < end, "no results in time"
        time.sleep(0.2)


def test_a_node_that_does_not_start_in_time_is_started_again_up_to_three_times():
    class Slow:  # Ray's own timeout, as a raylet too slow to register raises it
        def __init__(self, failures: int) -> None:
            self.failures, self.calls = failures, 0

        def add_node(self, num_cpus: int) -> str:
            self.calls += 1
            if self.calls <= self.failures:
                raise Exception("The current node timed out during startup.")
            return f"node with {num_cpus} cpu"

    twice = Slow(2)
    assert add_local_node(twice) == "node with 1 cpu" and twice.calls == 3
    with pytest.raises(Exception, match="timed out during startup"):
        add_local_node(Slow(3))


def test_a_killed_driver_keeps_its_results_and_a_rerun_spreads_over_both_nodes_and_survives_losing_one(cluster, tmp_path):
    """Ray's one end-to-end path, both failures in one grid: the driver killed with SIGKILL keeps what
    finished; its rerun measures the rest on both nodes, loses the second mid-sweep and retries there."""
    second = add_local_node(cluster)
    cluster.wait_for_nodes()
    store = tmp_path / "r.sqlite"
    sweep = subprocess.Popen(sweep_args(store, cluster.address), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_rows(store, 2, sweep)
    sweep.send_signal(signal.SIGKILL)
    sweep.wait(timeout=60)
    kept = rows(store)
    assert 2 <= len(kept) <= N
    rerun = subprocess.Popen(sweep_args(store, cluster.address), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if len(kept) < N:
        wait_for_rows(store, len(kept) + 1, rerun)
    nodes = {json.loads(r["extra"])["ray_node"] for r in rows(store)}
    cluster.remove_node(second)  # the second node dies, possibly mid-configuration
    out, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err[-3000:]
    assert f"{len(kept)} already in the store" in err
    done = rows(store)
    assert Counter(r["label"] for r in done) == Counter({label: 1 for label in {r["label"] for r in done}})  # no duplicate
    assert len(done) == N and all(r["state"] == "ok" for r in done), done  # a lost configuration was retried
    assert len(nodes | {json.loads(r["extra"])["ray_node"] for r in done}) == 2  # both nodes measured


def test_an_unreachable_cluster_is_one_line_and_exit_2(tmp_path):
    store = tmp_path / "r.sqlite"
    result = subprocess.run(sweep_args(store, "127.0.0.1:9"), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--address: '127.0.0.1:9' is not valid; allowed: a reachable Ray cluster" in result.stderr
    assert not store.exists()


def test_the_notebooks_sweep_on_the_cluster_their_backend_names(cluster, tmp_path):
    from paradnn.sections.common import Lanes, ensure_measured, setup

    setup(f"ray:{cluster.address}")
    overrides = {"fc": {"nodes": [16], "batch": [8, 16], "layers": [1], "input": [32], "output": [10]}}
    line = ensure_measured(
        tmp_path / "r.sqlite", ["fc"], preset="smoke", overrides=overrides, max_seconds=0.3, lanes=Lanes(f"ray:{cluster.address}")
    )[0]
    assert "2 configurations: 0 already in the store; this run: 2 ok" in line
    assert {json.loads(r["extra"]).get("ray_node") for r in rows(tmp_path / "r.sqlite")} != {None}


def test_a_bad_backend_is_refused_before_anything_runs(tmp_path, monkeypatch):
    from paradnn.config import ConfigError
    from paradnn.sections.common import setup

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ConfigError, match="backend: 'ray' is not valid; allowed: local, ray:HOST:PORT, or ray with RAY_ADDRESS"):
        setup("ray")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "paradnn.cli",
            "report",
            "smoke",
            "--backend",
            "ray",
            "--address",
            "127.0.0.1:9",
            "--outputs",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "a reachable Ray cluster" in result.stderr and not any(tmp_path.iterdir())


def test_device_hours_scale_the_stores_median_wall_time_to_a_presets_grid():
    import pandas as pd

    from paradnn.space import expand
    from paradnn.sweeps.cluster import device_hours

    results = pd.DataFrame(
        [{"family": "fc", "platform": "cpu", "wall_time_s": s} for s in (1.0, 2.0, 9.0)]
        + [{"family": "fc", "platform": "v100", "wall_time_s": 100.0}]
    )
    table = device_hours(results, "paper", "cpu").set_index("family")
    assert table.loc["fc", "configurations"] == len(expand("fc", "paper")) == 9720
    assert table.loc["fc", "median_s"] == 2.0 and table.loc["fc", "device_hours"] == pytest.approx(9720 * 2 / 3600)
