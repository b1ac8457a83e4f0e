"""Sweeps across a Ray cluster: one configuration per device at a time, one store, written by the driver.

``paradnn sweep ... --backend ray --address HOST:PORT`` connects to a running Ray cluster
(started with Ray's own ``ray start``) and places one :class:`NodeRunner` actor per device:
on CPU targets one per node, holding all of the node's CPUs; on GPU targets one per GPU,
holding that whole GPU. No two benchmarks ever share a device. Each runner keeps the same
isolated worker process as the local sweep (:class:`paradnn.sweeps.worker.ProcessWorker`), so a
crash, an out-of-memory or a timeout becomes that configuration's row and the worker is
replaced; the worker measures its node's ceilings once per node and software stack.

Every configuration is one actor task, run by the one sweep loop
(:func:`paradnn.sweeps.loop.sweep`) through :class:`RayBackend`. The driver alone writes the
SQLite store, committing each result as it arrives and claiming each configuration before
sending it, so the store's guarantees hold unchanged: a driver killed with ``kill -9`` loses nothing
that arrived and a rerun resumes. Nodes are grouped by platform fingerprint: identical
nodes share one grid (each configuration is measured once), different kinds of node (a
GPU host and a CPU host, two CPU models) each measure the grid under their own platform.
A node that dies mid-configuration loses its runner; the configuration is retried once on
another runner of its group, and recorded ``error`` if that fails too.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from paradnn.config import ConfigError
from paradnn.families import Config, parse_label
from paradnn.identity import fingerprint
from paradnn.platform import Target
from paradnn.store import Store
from paradnn.sweeps.loop import Job, Lane, LaneLost
from paradnn.sweeps.messages import ChooseXLA, Result
from paradnn.sweeps.plan import SweepOptions, default_memory_budget
from paradnn.sweeps.worker import ProcessWorker, run_one

RAY_INSTALL = "pip install 'paradnn[ray]'"
CONNECT_TIMEOUT_S = 5.0
START_TIMEOUT_S = 600.0


class NodeRunner:
    """A Ray actor on one device: an isolated worker process that measures one configuration per call."""

    def __init__(self, target: Target, framework: str) -> None:
        self.target, self.framework = target, framework
        self.worker: ProcessWorker | None = None

    def start(self) -> dict:
        """Start the worker (ceilings measured or read from this node's cache); the node's platform info."""
        import ray

        self.worker = ProcessWorker(self.target, self.framework)
        node = ray.get_runtime_context().get_node_id()
        return {"info": self.worker.info, "ceilings": self.worker.ceilings, "node": node}

    def choose_xla(self, family: str, dtype: str) -> bool:
        """``--xla auto``'s choice for a family on this node (probed once, cached with the ceilings)."""
        assert self.worker is not None, "the driver starts every runner first"
        self.worker.send(ChooseXLA(family, dtype))
        answer = self.worker.recv() if self.worker.poll(START_TIMEOUT_S) else None
        return bool(answer.record["xla"]) if isinstance(answer, Result) else False

    def measure(self, family: str, label: str, options: SweepOptions) -> dict:
        """One configuration's record, exactly as the local sweep makes it (state ok, oom, error, timeout, skipped)."""
        if self.worker is None or not self.worker.alive():
            self.worker = ProcessWorker(self.target, self.framework)
        budget = options.memory_budget_bytes or default_memory_budget(self.target)
        record, reusable = run_one(parse_label(family, label), self.worker, options, budget, None)
        assert record is not None  # no deadline here: always a record
        if not reusable:
            self.worker.kill()
            self.worker = None
        return record

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()


@dataclass
class Runner:
    """The driver's view of one actor (a lane's worker): its node and platform."""

    actor: Any  # a Ray actor handle of NodeRunner
    node: str
    info: dict
    ceilings: dict

    def alive(self) -> bool:
        return True  # a dead node shows as the RayError of its next call (the lane is lost then)

    def kill(self) -> None:
        import ray

        try:
            ray.kill(self.actor)
        except Exception:  # noqa: BLE001 - already gone with its node
            pass

    def stop(self) -> None:
        self.kill()


def check_reachable(address: str) -> None:
    """ConfigError naming ``address`` unless Ray is installed and something listens at ``HOST:PORT``."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError("--backend", "ray", f"local (Ray is not installed: {RAY_INSTALL})") from None
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError("--address", address, "HOST:PORT of a running Ray cluster (what `ray start --head` prints)")
    try:  # Ray itself retries an unreachable address for minutes
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ConfigError("--address", address, f"a reachable Ray cluster ({exc.strerror or exc})") from None
    if not ray_answers(address):  # something listens, but not Ray's GCS: ray.init would wait for minutes
        raise ConfigError(
            "--address",
            address,
            f"a Ray cluster's head (HOST:PORT of its GCS); what listens there did "
            f"not answer as Ray within {CONNECT_TIMEOUT_S:.0f} s",
        )


def ray_answers(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> bool:
    """Whether Ray's GCS answers at ``address`` within ``timeout_s``: one ``GetClusterId`` call over gRPC,
    the first thing ``ray.init`` asks (an HTTP server, an SSH daemon or a silent socket does not answer)."""
    try:
        import grpc
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:  # a Ray without these modules: the TCP check above is all we can do
        return True
    with grpc.insecure_channel(address) as channel:
        try:
            stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s)  # type: ignore[attr-defined]
        except grpc.RpcError:
            return False
    return True


def connect(address: str) -> None:
    """Join the Ray cluster at ``HOST:PORT``; ConfigError naming the address if Ray or the cluster is absent."""
    import ray

    check_reachable(address)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, ignore_reinit_error=True)


def _actors(target: Target, framework: str) -> list[tuple[Any, str]]:
    """One NodeRunner per device of the cluster's alive nodes, each holding its device whole; with its node id."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote: Any = ray.remote(NodeRunner)
    actors: list[tuple[Any, str]] = []
    for node in ray.nodes():
        if not node["Alive"]:
            continue
        resources = node["Resources"]
        pin = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        if target.kind == "cpu":
            cpus = resources.get("CPU", 0)
            if cpus >= 1:
                options = {"num_cpus": cpus, "scheduling_strategy": pin, "max_restarts": 0}
                actors.append((remote.options(**options).remote(target, framework), node["NodeID"]))
        else:
            gpu_target = Target(target.kind, 0)  # Ray gives each actor one GPU, visible as device 0
            device = {"num_gpus": 1} if target.kind == "gpu" else {"resources": {target.kind.upper(): 1}}  # TPU: custom
            for _ in range(int(resources.get(target.kind.upper(), 0))):
                options = {"num_cpus": 1, **device, "scheduling_strategy": pin, "max_restarts": 0}
                actors.append((remote.options(**options).remote(gpu_target, framework), node["NodeID"]))
    return actors


def _start_runners(store: Store, target: Target, framework: str) -> list[Runner]:
    """Start every actor's worker; record each node's platform; ConfigError if no device can run ``target``."""
    import ray

    actors = _actors(target, framework)
    if not actors:
        raise ConfigError("--platform", target.id, "a device kind the cluster's nodes have (no node offers it)")
    runners = []
    for actor, node in actors:
        try:
            started = ray.get(actor.start.remote(), timeout=START_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - a node that cannot start a worker takes no part; the others go on
            ray.kill(actor)
            continue
        store.put_platform(fingerprint(started["info"]), target.platform, started["info"], started["ceilings"], "measured")
        runners.append(Runner(actor, node, started["info"], started["ceilings"]))
    if not runners:
        raise ConfigError("--platform", target.id, "a platform the cluster's nodes can start (every worker failed)")
    return runners


class RayBackend:
    """A Ray cluster: a lane per device (:class:`NodeRunner`), a slot per platform fingerprint.

    Identical nodes share one slot (each configuration is measured once), different kinds
    of node each measure the grid under their own platform. A lane whose node dies is lost:
    its configuration is tried once more on another lane of its slot."""

    label = "--backend ray"
    where = "on ray"
    supports: frozenset[str] = frozenset()
    together = False
    shares_machine = False  # each lane holds its own device; its node sets its own memory budget

    def __init__(self, address: str) -> None:
        self.address = address
        self.lanes: list[Lane] = []
        self.skipped: dict[str, str] = {}
        self.cap = 1
        self.connected = False

    def open(self, store: Store, plans: Sequence[SweepOptions], configs: list[Config]) -> dict[str, dict]:
        options = plans[0]
        connect(self.address)
        self.connected, self.framework = True, options.settings.framework
        slots: dict[str, dict] = {}
        for runner in _start_runners(store, options.target, options.settings.framework):
            slot = fingerprint(runner.info)
            slots.setdefault(slot, runner.info)
            self.lanes.append(Lane(slot, f"node {runner.node[:8]}", runner))
        self.cap = len(self.lanes)
        return slots

    def serves(self, slot: str, plan: SweepOptions) -> bool:
        return True  # every node measures every run (of the one framework its runners started with)

    def choose_xla(self, slot: str, family: str, dtype: str) -> bool:
        import ray

        if self.framework != "tensorflow":
            return False
        runner = next(_runner(lane) for lane in self.lanes if lane.slot == slot)
        return bool(ray.get(runner.actor.choose_xla.remote(family, dtype)))

    def start(self, slot: str) -> Runner:
        raise LaneLost("its Ray node is gone")  # a runner is never replaced: its lane is lost with it

    def measure(self, lane: Lane, job: Job, budget: float | None, deadline: float | None) -> tuple[dict | None, bool]:
        """The node measures with its own worker and memory budget (the record is the local sweep's)."""
        import ray

        runner = _runner(lane)
        try:
            record = ray.get(runner.actor.measure.remote(job.config.family, job.config.label, job.options))
        except ray.exceptions.RayError as exc:  # the actor or its node died
            raise LaneLost(f"the Ray node measuring it died ({type(exc).__name__})", {"ray_node": runner.node}) from None
        record["extra"] = {**(record.get("extra") or {}), "ray_node": runner.node}
        return record, True

    def close(self, clean: bool) -> None:
        import ray

        for lane in self.lanes:
            _runner(lane).kill()
        if self.connected:
            ray.shutdown()


def _runner(lane: Lane) -> Runner:
    """A Ray lane's worker: the runner of its actor, placed there when the sweep opened."""
    assert isinstance(lane.worker, Runner), "a Ray lane holds its actor's runner from the start"
    return lane.worker


def device_hours(results, preset: str, platform: str):
    """Device-hours a preset's grids would take on ``platform``, from the store's own timings.

    Per family: the grid's size times the median wall time of the configurations measured
    on ``platform`` (compile and timing included). Rows measured elsewhere, or families
    never measured there, give no estimate. Returns a DataFrame (family, configurations,
    measured, median_s, device_hours).
    """
    import pandas as pd

    from paradnn.space import expand

    mine = results[(results["platform"] == platform) & results["wall_time_s"].notna()]
    rows = []
    for family, measured in mine.groupby("family"):
        try:
            size = len(expand(family, preset))
        except ConfigError:  # the preset has no grid for this family
            continue
        median = float(measured["wall_time_s"].median())
        rows.append(
            {
                "family": family,
                "configurations": size,
                "measured": len(measured),
                "median_s": median,
                "device_hours": size * median / 3600,
            }
        )
    return pd.DataFrame(rows, columns=["family", "configurations", "measured", "median_s", "device_hours"])


NODE_START_ATTEMPTS = 3


def add_local_node(cluster, num_cpus: int = 1):
    """Add a node of ``num_cpus`` to ``cluster`` (a ``ray.cluster_utils.Cluster`` on this machine) and return it.

    Ray gives a starting raylet 30 s to register with the GCS, a limit it does not let one
    change; on a loaded 2-core machine (a notebook's kernel measuring beside it) that was
    not enough once in a suite of three cluster starts. A start that times out has its
    processes stopped and is tried again, up to ``NODE_START_ATTEMPTS`` times in all."""
    import psutil

    for attempt in range(1, NODE_START_ATTEMPTS + 1):
        started = time.time()
        try:
            return cluster.add_node(num_cpus=num_cpus)
        except Exception:  # Ray raises a bare Exception on the timeout
            if attempt == NODE_START_ATTEMPTS:
                raise
            for child in psutil.Process().children(recursive=True):  # the failed node's GCS, raylet, workers
                try:
                    if child.create_time() >= started - 1:
                        child.kill()
                except psutil.Error:
                    pass
            logging.getLogger(__name__).warning("a Ray node did not start in time (attempt %d); trying again", attempt)
