"""Sweeps across a Ray cluster: one configuration per device at a time, one store, written by the driver.

``paradnn sweep ... --backend ray --address HOST:PORT`` connects to a running Ray cluster
(started with Ray's own ``ray start``) and places one :class:`NodeRunner` actor per device:
on CPU targets one per node, holding all of the node's CPUs; on GPU targets one per GPU,
holding that whole GPU. No two benchmarks ever share a device. Each runner keeps the same
isolated worker process as the local sweep (:class:`paradnn.sweeps.driver.ProcessWorker`), so a
crash, an out-of-memory or a timeout becomes that configuration's row and the worker is
replaced; the worker measures its node's ceilings once per node and software stack.

Every configuration is one actor task. The driver alone writes the SQLite store,
committing each result as it arrives and claiming each configuration before sending it,
so the store's guarantees hold unchanged: a driver killed with ``kill -9`` loses nothing
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
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from paradnn.config import ConfigError
from paradnn.families import Config, parse_label
from paradnn.identity import fingerprint
from paradnn.platform import Target
from paradnn.store import CLAIM_MARGIN_S, Store
from paradnn.sweeps.driver import (
    ChooseXLA,
    ProcessWorker,
    Result,
    SweepOptions,
    SweepSummary,
    check_settings,
    default_memory_budget,
    run_key_of,
    run_one,
    skip_states,
)

RAY_INSTALL = "pip install 'paradnn[ray]'"
CONNECT_TIMEOUT_S = 5.0
START_TIMEOUT_S = 600.0
RETRIES = 1  # a configuration whose node died is tried once more elsewhere


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
        self.worker.send(ChooseXLA(family, dtype))
        answer = self.worker.recv() if self.worker.poll(START_TIMEOUT_S) else None
        return bool(answer.record["xla"]) if isinstance(answer, Result) else False

    def measure(self, family: str, label: str, options: SweepOptions) -> dict:
        """One configuration's record, exactly as the local sweep makes it (state ok, oom, error, timeout, skipped)."""
        if self.worker is None or not self.worker.alive():
            self.worker = ProcessWorker(self.target, self.framework)
        budget = options.memory_budget_bytes or default_memory_budget(self.target)
        record, reusable = run_one(parse_label(family, label), self.worker, options, budget, None)
        if not reusable:
            self.worker.kill()
            self.worker = None
        return record

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()


@dataclass
class Runner:
    """The driver's view of one actor: its node, platform and how many configurations it finished."""

    actor: object
    node: str
    info: dict
    group: str = ""
    done: int = 0


@dataclass
class Task:
    config: Config
    key: str
    attempts: int = 0


@dataclass
class Group:
    """Runners of one platform fingerprint, the options they measure under and their queue."""

    options: SweepOptions
    runners: list[Runner] = field(default_factory=list)
    queue: deque = field(default_factory=deque)


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
        raise ConfigError("--address", address, f"a Ray cluster's head (HOST:PORT of its GCS); what listens there did "
                                                f"not answer as Ray within {CONNECT_TIMEOUT_S:.0f} s")  # fmt: skip


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
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s)
        except grpc.RpcError:
            return False
    return True


def connect(address: str) -> None:
    """Join the Ray cluster at ``HOST:PORT``; ConfigError naming the address if Ray or the cluster is absent."""
    import ray

    check_reachable(address)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, ignore_reinit_error=True)


def _actors(target: Target, framework: str) -> list[tuple[object, str]]:
    """One NodeRunner per device of the cluster's alive nodes, each holding its device whole; with its node id."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(NodeRunner)
    actors = []
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
        runners.append(Runner(actor, node, started["info"]))
    if not runners:
        raise ConfigError("--platform", target.id, "a platform the cluster's nodes can start (every worker failed)")
    return runners


def _groups(runners: list[Runner], configs: list[Config], options: SweepOptions, store: Store) -> dict[str, Group]:
    """Runners grouped by platform fingerprint, each group's options (XLA auto resolved) and its queue."""
    import ray

    from paradnn.sweeps.driver import ordered

    groups: dict[str, Group] = {}
    for r in runners:
        r.group = fingerprint(r.info)
        groups.setdefault(r.group, Group(options)).runners.append(r)
    done = store.run_keys(skip_states(options))
    for group in groups.values():
        if options.settings.xla is None and options.settings.framework == "tensorflow":
            ask = group.runners[0].actor
            families = sorted({c.family for c in configs})
            chosen = ray.get([ask.choose_xla.remote(f, options.settings.dtype) for f in families])
            group.options = replace(options, xla_choices=dict(zip(families, chosen)))
        info = group.runners[0].info
        keys = ((c, run_key_of(c, group.options, info)) for c in ordered(configs, options.seed))
        group.queue.extend(Task(c, k) for c, k in keys if k not in done)
    return groups


def check_devices(devices: int) -> None:
    """ConfigError for data-parallel replicas on a cluster (measure those on one machine: ``--devices`` locally)."""
    if devices != 1:
        raise ConfigError("--devices", devices, "1 with --backend ray (each node runs one replica per configuration)")


def run_sweep_ray(configs: list[Config], store: Store, options: SweepOptions, address: str,
                  progress: Callable[..., object] | None = None) -> SweepSummary:  # fmt: skip
    """Measure every configuration the store lacks on a Ray cluster; see the module docstring."""
    import ray
    from tqdm import tqdm

    framework = options.settings.framework
    check_devices(options.settings.devices)
    check_settings(configs, options)
    connect(address)
    summary = SweepSummary(planned=len(configs), left=len(configs))
    deadline = time.monotonic() + options.max_minutes * 60 if options.max_minutes else None
    runners: list[Runner] = []
    pending: dict[object, tuple[Runner, Task]] = {}
    bar = None
    try:
        runners = _start_runners(store, options.target, framework)
        groups = _groups(runners, configs, options, store)
        todo = sum(len(g.queue) for g in groups.values())
        summary.already_done = len(configs) * len(groups) - todo
        summary.planned, summary.left = len(configs) * len(groups), todo
        bar = (progress or tqdm)(total=todo, unit="config", desc=f"sweep {options.target.id} on ray", dynamic_ncols=True)
        while True:
            if not (deadline and time.monotonic() >= deadline):
                _dispatch(groups, runners, pending, store, summary, bar)
            elif not pending:
                summary.out_of_time = True
                break
            if not pending:
                summary.stranded = sum(len(g.queue) for g in groups.values() if not g.runners)
                break
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for future in ready:
                runner, task = pending.pop(future)
                _collect(future, runner, task, groups, runners, store, summary, bar)
            bar.set_postfix_str(_postfix(runners, summary))
    except KeyboardInterrupt:
        summary.interrupted = True
    finally:
        store.release([task.key for _, task in pending.values()])
        if bar is not None:
            bar.close()
        for r in runners:
            try:
                ray.kill(r.actor)
            except Exception:  # noqa: BLE001 - already gone with its node
                pass
        ray.shutdown()
    return summary


def _dispatch(groups: dict[str, Group], runners: list[Runner], pending: dict, store: Store, summary: SweepSummary,
              bar) -> None:  # fmt: skip
    """Give every idle runner the next configuration of its group that it can claim."""
    busy = {id(r) for r, _ in pending.values()}
    for runner in runners:
        if id(runner) in busy:
            continue
        group = groups[runner.group]
        while group.queue:
            task = group.queue.popleft()
            status = store.claim(task.key, task.config.label, skip_states(group.options),
                                 group.options.timeout_s + CLAIM_MARGIN_S)  # fmt: skip
            if status == "claimed":
                future = runner.actor.measure.remote(task.config.family, task.config.label, group.options)
                pending[future] = (runner, task)
                break
            summary.already_done += status == "done"  # finished or taken by another sweep meanwhile
            summary.busy += status == "busy"
            summary.left -= 1
            bar.update(1)


def _collect(future, runner: Runner, task: Task, groups: dict[str, Group], runners: list[Runner], store: Store,
             summary: SweepSummary, bar) -> None:  # fmt: skip
    """Store a finished configuration's record; requeue it once if its node died, else record the death."""
    import ray

    try:
        record = ray.get(future)
    except ray.exceptions.RayError as exc:  # the actor or its node died
        runners.remove(runner)
        group = groups[runner.group]
        group.runners.remove(runner)
        task.attempts += 1
        if task.attempts <= RETRIES and group.runners:
            group.queue.appendleft(task)  # the claim is still ours: retried by another runner of the group
            return
        why = "twice" if task.attempts > RETRIES else "and no other node of its platform is left"
        failure = {"state": "error", "error": f"the Ray node measuring it died ({type(exc).__name__}), {why}"}
        record = _dead_record(task, runner, group.options, failure)
    record = summary.stamp({**record, "run_key": task.key})
    record["extra"]["ray_node"] = runner.node
    store.add_results([record], release=True)
    runner.done += 1
    summary.states[record["state"]] += 1
    summary.left -= 1
    bar.update(1)


def _dead_record(task: Task, runner: Runner, options: SweepOptions, failure: dict) -> dict:
    """The record of a configuration whose node died: its identity on that node's platform, and why."""
    from paradnn.sweeps.driver import identity_record

    record = identity_record(task.config, options, runner.info)
    return {**record, **failure, "started_at": time.time()}


def _postfix(runners: list[Runner], summary: SweepSummary) -> str:
    failed = sum(n for s, n in summary.states.items() if s != "ok")
    per_node = Counter()
    for r in runners:
        per_node[r.node[:8]] += r.done
    return f"failed {failed} | " + ", ".join(f"node {n}: {d}" for n, d in per_node.items())


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
        rows.append({"family": family, "configurations": size, "measured": len(measured), "median_s": median,
                     "device_hours": size * median / 3600})  # fmt: skip
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
