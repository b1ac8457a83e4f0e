"""Data-parallel runs: replicas split the batch, all-reduce every step, are timed against their own step, and die cleanly."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import psutil
import pytest

from paradnn.config import ConfigError
from paradnn.engine import replicas as parallel
from paradnn.engine.contention import Usage
from paradnn.engine.protocol import Measurement, RunSettings, Stats
from paradnn.families import parse_label
from paradnn.identity import run_key
from paradnn.platform import Target
from paradnn.store import Store
from paradnn.sweeps.backends import run_sweep
from paradnn.sweeps.plan import SweepOptions, check_settings

FC = "layer_1-node_64-input_32-output_10-bs_16"


@pytest.mark.parametrize(
    "settings,message",
    [
        ({"devices": 0}, "devices: 0 is not valid; allowed: a whole number from 1 to 1024"),
        ({"devices": 2, "framework": "jax"}, "allowed: 1 with --framework jax"),
        ({"devices": 2, "input": "host"}, "allowed: 1 with --input host"),
        ({"devices": 2, "xla": True}, "allowed: off with --devices > 1"),
        ({"devices": 2, "xla": True, "device": "/GPU:0"}, "allowed: off with --devices > 1"),
    ],
)
def test_bad_replica_settings_are_one_clear_error(settings, message):
    with pytest.raises(ConfigError, match=message):
        RunSettings(**settings)


def test_replicas_run_without_xla_when_it_is_left_to_auto():
    assert RunSettings(devices=2, xla=None).xla is False
    assert RunSettings(devices=2, xla=None, device="/GPU:0").xla is False


def _check(devices: int, batches=(16,), threads=None) -> None:
    configs = [parse_label("fc", f"layer_1-node_64-input_32-output_10-bs_{b}") for b in batches]
    check_settings(configs, SweepOptions(settings=RunSettings(devices=devices, xla=None), target=Target(threads=threads)))


def test_a_grid_the_replicas_cannot_run_is_refused_before_anything_runs(monkeypatch):
    cores = len(parallel.cpu_cores())
    with pytest.raises(ConfigError, match=f"--devices: {cores + 1} is not valid; allowed: 1 to {cores} on this CPU"):
        _check(cores + 1)
    with pytest.raises(ConfigError, match="allowed: 1 to 1 on this CPU"):
        _check(2, threads=1)
    with pytest.raises(ConfigError, match="a count that divides every batch \\(not 9, 15\\)"):
        _check(2, batches=(16, 9, 15))

    def no_ports(n):
        raise OSError("no loopback")

    monkeypatch.setattr(parallel, "free_ports", no_ports)
    with pytest.raises(ConfigError, match="no port can be bound on 127.0.0.1"):
        _check(2)
    with pytest.raises(ConfigError, match="allowed: 1 to 2 from GPU 1 \\(3 GPUs present\\)"):
        parallel.check_gpus(4, 1, 3)


def test_cores_are_split_into_equal_disjoint_groups():
    assert parallel.split([0, 1, 2, 3, 4], 2) == [[0, 1], [2, 3]]
    assert len(set(parallel.free_ports(3))) == 3


def test_the_replica_count_is_part_of_the_run_identity():
    row = {"family": "fc", "label": FC, "dtype": "float32", "xla": False, "platform": "cpu"}
    assert run_key({**row, "devices": 1}) == run_key(row) != run_key({**row, "devices": 2})


def test_a_replicated_measurement_reports_communication_against_one_replica():
    m = Measurement(state="ok", samples=[0.4, 0.5, 0.6], reference_samples=[0.1, 0.2, 0.3], replicas=2, allreduce_share=0.5)
    m.stats = Stats.of(m.samples)
    record = m.as_dict()
    assert record["replica_step_time_s"] == pytest.approx(0.2)
    assert record["comm_share"] == pytest.approx(0.6) and record["scaling_efficiency"] == pytest.approx(0.4)
    assert record["allreduce_share"] == 0.5 and record["infeed_share"] is None


def test_the_leaders_measurement_survives_its_json_round_trip():
    from dataclasses import asdict

    from paradnn.engine.graphcount import GraphCount

    m = Measurement(state="ok", samples=[0.2, 0.3], reference_samples=[0.1, 0.1], replicas=2, compile_time_s=1.0, final_loss=2.0)
    m.stats, m.graph = Stats.of(m.samples), GraphCount(10, {"MatMul": 10}, ["Einsum"])
    m.contention, m.refused, m.max_contention = Usage(0.5, 0.01, 1.2), [{"others": 0.9, "steal": 0.0, "seconds": 1.0}], 0.1
    back = parallel._measurement(json.loads(json.dumps(asdict(m))))
    assert back.contention == m.contention and back.as_dict()["contended"] is True
    assert back.as_dict() == m.as_dict() and back.graph == m.graph


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.mark.parametrize(
    "fault,state,message",
    [
        ("die:1", "error", "replica 1 of 2 exited with code 3"),
        ("hang:1", "timeout", r"replicas \[0, 1\] of 2 still running after 10 s"),
    ],
)
def test_replicas_that_die_or_hang_are_all_killed_and_their_ports_freed(monkeypatch, fault, state, message):
    if len(parallel.cpu_cores()) < 2:
        pytest.skip("needs two cores")
    ports: list[int] = []
    free = parallel.free_ports
    monkeypatch.setattr(parallel, "free_ports", lambda n: ports.extend(free(n)) or ports)
    monkeypatch.setenv(parallel.FAULT_ENV, fault)
    monkeypatch.setenv(parallel.REPLICA_TIMEOUT_ENV, "10")
    before = _children()
    m = parallel.measure_processes(parse_label("fc", FC), RunSettings(devices=2, xla=None, max_seconds=0.2), count_graph=False)
    assert m.state == state and m.replicas == 2
    assert m.error and __import__("re").search(message, m.error)
    assert _children() <= before  # no orphan (a child of an earlier test may have ended meanwhile)
    for port in ports:  # nothing listens there any more (connections may linger in TIME_WAIT, as TCP wants)
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen()


@pytest.mark.slow
def test_a_two_replica_sweep_stores_its_scaling_and_compare_gives_the_scaling_table(tmp_path):
    if len(parallel.cpu_cores()) < 2:
        pytest.skip("needs two cores")
    store_path = tmp_path / "r.sqlite"

    tmp = tmp_path / "tmp"
    tmp.mkdir()

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "paradnn.cli", *args, "--store", str(store_path)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TMPDIR": str(tmp)},
        )

    grid = ["--set", "layers=1", "--set", "nodes=64", "--set", "input=32", "--set", "output=10", "--set", "batch=16"]
    swept = cli("sweep", "fc", "--preset", "smoke", *grid, "--devices", "2", "--max-seconds", "0.3")
    assert swept.returncode == 0, swept.stderr[-3000:]
    assert "comm_share" in swept.stdout.splitlines()[0] and "1 ok" in swept.stderr
    # Nothing left in TMPDIR: the worker's own folder (autograph's files, the kept replicas' folder) went with it.
    assert list(tmp.iterdir()) == []
    one = RunSettings(xla=False, max_seconds=0.3, min_call_seconds=0.02)
    with Store(store_path) as store:
        run_sweep([parse_label("fc", FC)], store, SweepOptions(settings=one))
        rows = store.results().set_index("devices")
    two = rows.loc[2]
    assert two["replica_batch"] == 8 and rows.loc[1, "replica_batch"] == 16
    assert not two["xla"] and two["n_samples"] >= 5 and two["peak_memory_bytes"] > 0
    assert two["scaling_efficiency"] == pytest.approx(1 - two["comm_share"])
    assert two["scaling_efficiency"] == pytest.approx(two["replica_step_time_s"] / two["step_time_s"])
    assert 0 < two["allreduce_share"] <= 1  # the profiler found the all-reduce
    assert two["flops_graph"] > 0 and two["examples_per_sec"] == pytest.approx(16 / two["step_time_s"])
    out = cli("compare", "--by", "devices", "--baseline", "1", "--target", "2", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["n"] == 1 and result["median_comm_share"] == pytest.approx(two["comm_share"])
    assert result["table"][0]["replica_batch"] == 8


@pytest.mark.slow
def test_mirrored_replicas_in_one_process_share_the_same_code(tmp_path):
    """The GPU path (MirroredStrategy over devices of one process), run on two logical CPUs."""
    script = textwrap.dedent(f"""
        import json
        from paradnn.tfimport import tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from paradnn.engine import replicas as parallel
        from paradnn.families import parse_label
        from paradnn.engine.protocol import RunSettings
        m = parallel.measure_mirrored(parse_label("fc", "{FC}"), RunSettings(devices=2, xla=False, max_seconds=0.2,
                                      min_call_seconds=0.02), ["/CPU:0", "/CPU:1"], count_graph=False)
        print(json.dumps(m.as_dict()))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.loads(out.stdout.splitlines()[-1])
    assert record["state"] == "ok" and record["comm_share"] is not None and record["replica_step_time_s"] > 0


def test_the_replicas_of_one_configuration_measure_the_next():
    """One group of replica processes measures configuration after configuration (no TensorFlow import
    each time), each its own: the second's FLOP count is its own model's, twice one replica's step."""
    if len(parallel.cpu_cores()) < 2:
        pytest.skip("needs two cores")
    from dataclasses import replace

    from paradnn.engine.graphcount import count_graph_flops
    from paradnn.engine.training import Trainer

    parallel.ReplicaGroup.stop_kept()
    before = _children()
    settings = RunSettings(devices=2, xla=False, max_seconds=0.2, min_call_seconds=0.02)
    wider = parse_label("fc", "layer_2-node_128-input_32-output_10-bs_16")
    first = parallel.measure_processes(parse_label("fc", FC), settings, count_graph=True)
    pids = [process.pid for process, _ in parallel.ReplicaGroup._kept.processes]
    second = parallel.measure_processes(wider, settings, count_graph=True)
    assert [process.pid for process, _ in parallel.ReplicaGroup._kept.processes] == pids
    assert first.state == second.state == "ok" and first.replicas == second.replicas == 2
    one_replica = count_graph_flops(Trainer(replace(wider, batch=8), xla=False).trace().graph).flops
    assert second.graph.flops == 2 * one_replica and first.graph.flops < second.graph.flops
    assert len(_children() - before) == 2  # kept, idle
    parallel.ReplicaGroup.stop_kept()
    assert _children() <= before  # the kept group is gone (a child of an earlier test may have ended meanwhile)
