"""The sweep driver in-process, with a fake worker: failures become results, claims hold."""

from __future__ import annotations

import itertools
import signal
import threading

import pandas as pd
import pytest

from paradnn.analysis.results import Results
from paradnn.config import ConfigError
from paradnn.engine.protocol import RunSettings
from paradnn.platform import Target
from paradnn.space import expand
from paradnn.store import Store
from paradnn.sweeps import backends, plan
from paradnn.sweeps import worker as sweep_worker
from paradnn.sweeps.backends import run_sweep
from paradnn.sweeps.messages import ChooseXLA, Describe, Failed, Measure, Result
from paradnn.sweeps.plan import SweepOptions

CONFIGS = expand("fc", "smoke", {"layers": [1], "nodes": [8, 16, 32], "input": [16], "output": [4], "batch": [8]})
INFO = {
    "id": "cpu",
    "name": "Fake CPU",
    "host": "fake-host",
    "cores": 2,
    "software": {"tensorflow": "9.9", "keras": "9.9", "cuda": "", "python": "3", "numpy": "2", "paradnn": "0"},
}


class FakeWorker:
    """A worker whose behaviour per label is scripted: ok, oom, failed, crash, kill, hang or grow."""

    started: list[FakeWorker] = []

    def __init__(self, target: Target, script: dict[str, str]) -> None:
        self.info, self.ceilings, self.base_rss = INFO, {}, 0
        self.script = script
        self.code: int | None = None
        self.pending: str | None = None
        self.measured: list[str] = []
        self.describing: Describe | ChooseXLA | None = None
        self.chosen: list[str] = []
        self.frameworks: set[str] = set()
        FakeWorker.started.append(self)

    def send(self, message: Measure | Describe | None) -> None:
        if message is None:
            self.code = 0
            return
        if isinstance(message, (Describe, ChooseXLA)):
            self.describing = message
            return
        self.pending = message.label
        self.measured.append(message.label)
        self.frameworks.add(message.settings["framework"])
        behaviour = self.script.get(message.label, "ok")
        if behaviour in ("crash", "kill"):
            self.code = -signal.SIGABRT if behaviour == "crash" else -signal.SIGKILL

    def poll(self, timeout: float) -> bool:
        if self.describing is not None:
            return True
        return self.code is None and self.script.get(self.pending, "ok") not in ("hang", "grow")

    def recv(self):
        if isinstance(self.describing, ChooseXLA):
            family, self.describing = self.describing.family, None
            self.chosen.append(family)
            return Result({"xla": family == "fc", "ceilings": {"xla": {}}})
        if self.describing is not None:
            self.describing = None
            return Result({"params": 1234, "flops_model": 5e9, "memory_estimate_bytes": 10})
        if self.code is not None:
            raise EOFError
        behaviour = self.script.get(self.pending, "ok")
        if behaviour == "failed":
            return Failed("ValueError: boom", "Traceback ...")
        state = "oom" if behaviour == "oom" else "ok"
        return Result({"state": state, "error": "OOM when allocating" if state == "oom" else "", "step_time_s": 0.01})

    def rss(self) -> int:
        return 10**15 if self.script.get(self.pending) == "grow" else 0

    def alive(self) -> bool:
        return self.code is None

    def exit_code(self) -> int | None:
        return self.code

    def kill(self) -> None:
        self.code = self.code if self.code is not None else -signal.SIGKILL

    def stop(self) -> None:
        self.code = 0


def sweep_with(tmp_path, script: dict[str, str], **options):
    FakeWorker.started = []
    opts = SweepOptions(settings=RunSettings(max_seconds=0.1), timeout_s=0.2, memory_budget_bytes=1e12, **options)
    with Store(tmp_path / "r.sqlite") as store:
        summary = run_sweep(CONFIGS, store, opts, start_worker=lambda target: FakeWorker(target, script))
        df = store.results().set_index("label")
        claims = store.claims()
    return summary, df, claims


def label(i: int) -> str:
    return CONFIGS[i].label


def test_every_configuration_gets_one_row_and_claims_are_released(tmp_path):
    summary, df, claims = sweep_with(tmp_path, {})
    assert summary.states == {"ok": 3} and len(df) == 3 and set(df["state"]) == {"ok"}
    assert claims.empty
    assert (df["platform_fingerprint"].str.contains("Fake_CPU")).all() and (df["family_version"] == 1).all()
    assert len(FakeWorker.started) == 1  # one worker for the whole sweep


@pytest.mark.parametrize(
    "behaviour,state,needle,replaced",
    [
        ("oom", "oom", "OOM when allocating", True),
        ("failed", "error", "ValueError: boom", False),
        ("crash", "error", "worker crashed (killed by signal SIGABRT)", True),
        ("kill", "error", "SIGKILL from outside", True),
        ("hang", "timeout", "no result within 0.2 s", True),
        ("grow", "oom", "worker grew to", True),
    ],
)
def test_a_failure_is_a_result_and_the_sweep_goes_on(tmp_path, monkeypatch, behaviour, state, needle, replaced):
    monkeypatch.setattr(sweep_worker, "oom_kills", lambda: 7)  # the kernel's OOM killer did nothing
    summary, df, _ = sweep_with(tmp_path, {label(0): behaviour})
    assert df.loc[label(0), "state"] == state and needle in df.loc[label(0), "error"]
    assert (df.drop(label(0))["state"] == "ok").all()
    assert len(FakeWorker.started) == (2 if replaced else 1)  # a worker that failed this way is never reused


def test_a_worker_killed_by_the_oom_killer_is_oom(tmp_path, monkeypatch):
    counts = iter([3, 4] + [4] * 10)  # the system's oom_kill count rises while the worker runs
    monkeypatch.setattr(sweep_worker, "oom_kills", lambda: next(counts))
    _, df, _ = sweep_with(tmp_path, {label(0): "kill"})
    assert df.loc[label(0), "state"] == "oom" and "OOM killer" in df.loc[label(0), "error"]


def test_a_configuration_claimed_by_another_live_sweep_is_skipped(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "r.sqlite"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with Store(path) as store:
            key = plan.run_key_of(CONFIGS[1], SweepOptions(), INFO)
            store.claim(key, label(1), (), 60)
            # Hand the claim to the other (live) process, as if it were measuring it.
            store.conn.execute("UPDATE claims SET pid = ?, pid_started = NULL WHERE run_key = ?", (other.pid, key))
        summary, df, claims = sweep_with(tmp_path, {})
        assert summary.busy == 1 and "being measured by another sweep" in summary.line()
        assert label(1) not in df.index and len(df) == 2
        other.kill()
        other.wait()  # reaped: the claim's process is gone
        summary, df, claims = sweep_with(tmp_path, {})  # its process died: the claim is taken over
        assert summary.states == {"ok": 1} and len(df) == 3 and claims.empty
    finally:
        other.kill()


def test_an_unusable_platform_is_a_config_error_and_nothing_is_written(tmp_path):
    path = tmp_path / "r.sqlite"
    with Store(path):
        pass
    before = path.read_bytes()

    def absent(target):
        raise ConfigError("--platform", target.id, "1 GPU device(s) on this machine")

    with Store(path) as store, pytest.raises(ConfigError, match="GPU"):
        run_sweep(CONFIGS, store, SweepOptions(target=Target("gpu", 7)), start_worker=absent)
    assert path.read_bytes() == before


def test_retry_failed_measures_failures_again_and_force_everything(tmp_path):
    sweep_with(tmp_path, {label(0): "failed"})
    summary, df, _ = sweep_with(tmp_path, {}, retry_failed=True)
    assert summary.already_done == 2 and summary.states == {"ok": 1}
    summary, _, _ = sweep_with(tmp_path, {}, force=True)
    assert summary.states == {"ok": 3}


def test_a_family_counted_by_its_keras_model_is_described_by_the_worker(tmp_path):
    """The driver never imports TensorFlow: it asks the worker for the counts."""
    FakeWorker.started = []
    configs = expand("squeezenet", "smoke")
    with Store(tmp_path / "r.sqlite") as store:
        run_sweep(
            configs,
            store,
            SweepOptions(memory_budget_bytes=1e12, timeout_s=0.2),
            start_worker=lambda target: FakeWorker(target, {configs[0].label: "hang"}),
        )
        row = store.results().iloc[0]
    assert row["state"] == "timeout" and row["params"] == 1234 and row["flops_model"] == 5e9


def test_xla_auto_chooses_per_family_and_records_it(tmp_path):
    FakeWorker.started = []
    configs = CONFIGS + expand("squeezenet", "smoke")
    options = SweepOptions(settings=RunSettings(xla=None, max_seconds=0.1), memory_budget_bytes=1e12, timeout_s=5)
    with Store(tmp_path / "r.sqlite") as store:
        run_sweep(configs, store, options, start_worker=lambda target: FakeWorker(target, {}))
        df = store.results().set_index("family")
    assert FakeWorker.started[0].chosen == ["fc", "squeezenet"]  # asked once per family
    assert set(df.loc["fc", "xla"]) == {True} and not df.loc["squeezenet", "xla"]
    assert (df["xla_auto"] == 1).all()


def test_xla_choice_is_probed_once_and_cached(tmp_path, monkeypatch):
    from paradnn.engine import ceilings as ceil

    monkeypatch.setenv("PARADNN_CACHE_DIR", str(tmp_path))
    ceil._write(INFO, {"matmul_flops": {}, "matmul_curve": {}})  # ceilings already measured for this platform
    probes = []
    monkeypatch.setattr(ceil, "probe_xla", lambda target, family, dtype: probes.append(family) or {"xla": family == "cnn"})
    target = Target()
    assert ceil.xla_choice(target, INFO, "cnn", "float32") == {"xla": True}
    assert ceil.xla_choice(target, INFO, "cnn", "float32") == {"xla": True}
    assert ceil.xla_choice(target, INFO, "fc", "float32") == {"xla": False}
    assert probes == ["cnn", "fc"]
    assert ceil.cached_ceilings(INFO)["xla"] == {"cnn|float32": {"xla": True}, "fc|float32": {"xla": False}}
    from paradnn.counting import flops_model

    quick = sorted(expand("fc", "quick"), key=flops_model)
    assert ceil.probe_config("fc") == quick[len(quick) // 2]  # the quick grid's median by model FLOPs


def test_one_door_refuses_stacks_on_a_cluster_before_anything_runs(tmp_path):
    from paradnn.sweeps import stacks as stk
    from paradnn.sweeps.backends import run_sweep

    with Store(tmp_path / "r.sqlite") as store, pytest.raises(ConfigError, match="a local sweep"):
        run_sweep(CONFIGS, store, SweepOptions(), stacks=[stk.parse("current")], address="127.0.0.1:1")
    with Store(tmp_path / "r.sqlite") as store:
        assert store.count() == 0


class KeptWorker(FakeWorker):
    """A fake worker with an identity, which the pool of idle workers may keep between sweeps."""

    def __init__(self, target: Target, script: dict[str, str], identity: tuple = ("python", "cpu")) -> None:
        super().__init__(target, script)
        self.identity = identity


def sweep_kept(tmp_path, script: dict[str, str], configs=CONFIGS, identity: tuple = ("python", "cpu"), progress=None):
    """A sweep whose workers come from the pool when it has one of ``identity`` (as the default does)."""
    opts = SweepOptions(settings=RunSettings(max_seconds=0.1), timeout_s=0.2, memory_budget_bytes=1e12)
    with Store(tmp_path / "r.sqlite") as store:
        return run_sweep(
            configs,
            store,
            opts,
            progress=progress,
            start_worker=lambda t: sweep_worker.IDLE.take(identity) or KeptWorker(t, script, identity),
        )


@pytest.fixture
def idle(monkeypatch):
    pool = sweep_worker.IdleWorkers()
    monkeypatch.setattr(sweep_worker, "IDLE", pool)
    FakeWorker.started = []
    yield pool
    pool.stop_all()


def test_the_next_sweep_measures_on_the_worker_the_last_one_left_idle(tmp_path, idle):
    sweep_kept(tmp_path, {}, CONFIGS[:2])
    first = FakeWorker.started[0]
    assert first.alive() and idle._idle == [first]  # parked, not stopped
    sweep_kept(tmp_path, {}, CONFIGS[2:])
    assert FakeWorker.started == [first] and first.measured == [c.label for c in plan.ordered(CONFIGS[:2])] + [label(2)]
    sweep_kept(tmp_path / "other", {}, CONFIGS[2:], identity=("python", "cpu", "another environment"))
    assert len(FakeWorker.started) == 2  # started with something else: a worker of its own
    idle.stop_all()
    assert not first.alive() and not idle._idle


def test_a_worker_that_failed_or_was_interrupted_is_never_kept(tmp_path, idle):
    sweep_kept(tmp_path, {label(0): "hang"}, CONFIGS[:1])
    assert not idle._idle and not FakeWorker.started[0].alive()  # killed after its timeout

    class Interrupting(plan.SilentProgress):
        def update(self, n: int = 1) -> None:
            raise KeyboardInterrupt

    summary = sweep_kept(tmp_path, {}, CONFIGS[1:], progress=Interrupting)
    assert summary.interrupted and not idle._idle and not FakeWorker.started[-1].alive()
    sweep_with(tmp_path / "plain", {})  # a worker without an identity (another kind of worker) is stopped
    assert not idle._idle and not FakeWorker.started[-1].alive()


def test_the_pool_keeps_only_the_newest_workers(tmp_path, idle):
    for i in range(sweep_worker.IDLE_WORKERS_MAX + 1):
        sweep_kept(tmp_path / str(i), {}, CONFIGS[:1], identity=("python", str(i)))
    assert len(idle._idle) == sweep_worker.IDLE_WORKERS_MAX and not FakeWorker.started[0].alive()
    assert idle.take(("python", "0")) is None and idle.take(("python", "1")) is FakeWorker.started[1]


def test_lanes_taking_from_the_pool_at_once_share_its_one_worker_without_error(idle):
    import threading

    class Slow:
        """An idle worker whose identity takes a while to read, so the lanes overlap inside take()."""

        @property
        def identity(self) -> tuple:
            threading.Event().wait(0.01)
            return ("python", "cpu")

        def alive(self) -> bool:
            return True

        def kill(self) -> None: ...

    idle._idle.append(Slow())
    got, errors = [], []

    def lane() -> None:
        try:
            got.append(idle.take(("python", "cpu")))
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            errors.append(exc)

    lanes = [threading.Thread(target=lane) for _ in range(8)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    assert not errors and sum(w is not None for w in got) == 1 and not idle._idle


def test_profile_local_keeps_each_profile_once_and_reports_failures(tmp_path, idle):
    from paradnn.sweeps.messages import Profile
    from paradnn.sweeps.profiles import profile_local

    class Profiler(KeptWorker):
        def send(self, message) -> None:
            if isinstance(message, Profile):
                self.asked = [*getattr(self, "asked", []), message.label]
                return
            super().send(message)

        def poll(self, timeout: float) -> bool:
            return True

        def recv(self):
            from paradnn.engine.profiler import trace_rows

            label = self.asked[-1]
            if label == CONFIGS[1].label:
                return Failed("RuntimeError: no profiler", "Traceback ...")
            profiled = pd.DataFrame(
                {
                    "label": [label],
                    "category": ["matmul"],
                    "time_s": [0.001],
                    "flops": [1e6],
                    "bytes": [1e4],
                    "step_wall_s": [0.002],
                }
            )
            return Result({"rows": trace_rows(profiled, "cpu", "float32")})

    options = SweepOptions(settings=RunSettings(dtype="float32"))
    with Store(tmp_path / "r.sqlite") as store:
        start = lambda t: sweep_worker.IDLE.take(("python", "cpu")) or Profiler(t, {})  # noqa: E731
        first = profile_local(CONFIGS, store, options, progress=plan.SilentProgress, start_worker=start)
        assert first == {"profiled": 2, "already": 0, "failed": {CONFIGS[1].label: "RuntimeError: no profiler"}}
        assert set(store.traces()["label"]) == {CONFIGS[0].label, CONFIGS[2].label}
        again = profile_local(CONFIGS, store, options, progress=plan.SilentProgress, start_worker=start)
    assert again == {"profiled": 0, "already": 2, "failed": first["failed"]}
    assert len(FakeWorker.started) == 1  # the first call's worker, left idle and reused
    assert FakeWorker.started[0].asked == [c.label for c in CONFIGS] + [CONFIGS[1].label]


class TimedWorker(FakeWorker):
    """A fake worker whose step time for a label is the next of its scripted times."""

    def __init__(self, target: Target, script: dict[str, str], times: dict[str, list[float]]) -> None:
        super().__init__(target, script)
        self.times = {k: list(v) for k, v in times.items()}
        self.budgets: list[float] = []

    def send(self, message) -> None:
        if isinstance(message, Measure):
            self.budgets.append(message.settings["max_seconds"])
        super().send(message)

    def recv(self):
        result = super().recv()
        if isinstance(result, Result) and result.record.get("state") == "ok":
            result.record["step_time_s"] = self.times[self.pending].pop(0)
        return result


def rounds_sweep(tmp_path, times: dict[str, list[float]], rounds: int, failing: dict[str, str] | None = None):
    """Sweep CONFIGS in ``rounds`` on one TimedWorker; the summary, the worker and every row."""
    workers: list[TimedWorker] = []

    def start(target):
        workers.append(TimedWorker(target, failing or {}, times))
        return workers[-1]

    options = SweepOptions(settings=RunSettings(max_seconds=0.4), timeout_s=5, memory_budget_bytes=1e12, rounds=rounds)
    with Store(tmp_path / "r.sqlite") as store:
        summary = run_sweep(CONFIGS, store, options, start_worker=start)
        df = store.results()
    (worker,) = workers
    return summary, worker, df


def test_rounds_time_each_configuration_a_pass_apart_and_every_round_is_a_measurement(tmp_path):
    times = {label(0): [0.02, 0.01, 0.012], label(1): [0.010, 0.0105, 0.011]}
    summary, worker, df = rounds_sweep(tmp_path, times, rounds=3, failing={label(2): "failed"})
    order = [c.label for c in plan.ordered(CONFIGS)]
    again = [x for x in order if x != label(2)]  # failed: timed once
    assert worker.measured == order + again + again  # a whole pass between rounds
    assert worker.budgets == pytest.approx([0.4 / 3] * 7)  # the rounds share max_seconds
    assert summary.states == {"ok": 2, "error": 1} and summary.left == 0
    assert df.groupby("label").size().to_dict() == {label(0): 3, label(1): 3, label(2): 1}
    assert sorted(df["extra"].map(lambda e: e["round"])) == [1, 1, 1, 2, 2, 3, 3]
    pooled = Results.load(tmp_path / "r.sqlite").pooled().frame.set_index("label")
    assert pooled.loc[label(0), "step_time_s"] == 0.012 and pooled.loc[label(0), "n_measurements"] == 3  # the median
    assert pooled.loc[label(0), "rerun_spread"] == pytest.approx(1.0)


def test_one_round_is_never_timed_again(tmp_path):
    times = {label(i): [0.01] for i in range(3)}
    _, worker, df = rounds_sweep(tmp_path, times, rounds=1)
    assert sorted(worker.measured) == sorted(c.label for c in CONFIGS) and len(df) == 3
    assert set(df["extra"].map(lambda e: e["round"])) == {1}


@pytest.mark.parametrize("rounds", [0, 6, 1.5, True])
def test_rounds_must_be_a_small_whole_number(rounds):
    with pytest.raises(ConfigError, match="rounds"):
        SweepOptions(rounds=rounds)


class SizedWorker(FakeWorker):
    """A fake worker whose label ``big`` holds 0.7 of the memory budget while it runs."""

    def __init__(self, target: Target, script: dict[str, str]) -> None:
        super().__init__(target, script)
        self.polled = False

    def send(self, message) -> None:
        self.polled = False
        super().send(message)

    def poll(self, timeout: float) -> bool:
        first, self.polled = not self.polled, True
        return not (first and self.script.get(self.pending) == "big") and super().poll(timeout)

    def rss(self) -> int:
        return int(0.7e12) if self.script.get(self.pending) == "big" else 0


def two_worker_sweep(tmp_path, script: dict[str, str], xla: bool):
    FakeWorker.started = []
    opts = SweepOptions(settings=RunSettings(max_seconds=0.1, xla=xla), timeout_s=5, memory_budget_bytes=1e12, workers=2)
    with Store(tmp_path / "r.sqlite") as store:
        summary = run_sweep(CONFIGS, store, opts, start_worker=lambda target: SizedWorker(target, script))
        return summary, store.results().set_index("label"), store.claims()


def test_two_workers_measure_every_configuration_once(tmp_path):
    summary, df, claims = two_worker_sweep(tmp_path, {}, xla=False)
    assert summary.states == {"ok": 3} and len(df) == 3 and claims.empty
    assert len(FakeWorker.started) == 2  # one per lane
    measured = [x for worker in FakeWorker.started for x in worker.measured]
    assert sorted(measured) == sorted(c.label for c in CONFIGS) and all(worker.measured for worker in FakeWorker.started)


def test_several_runs_share_one_sweep_and_its_workers(tmp_path):
    FakeWorker.started = []
    opts = SweepOptions(settings=RunSettings(max_seconds=0.1), timeout_s=5, memory_budget_bytes=1e12, workers=2)
    runs = [RunSettings(max_seconds=0.1, xla=False, dtype=d) for d in ("float32", "mixed_bfloat16")]
    with Store(tmp_path / "r.sqlite") as store:
        summary = run_sweep(CONFIGS, store, opts, start_worker=lambda target: SizedWorker(target, {}), runs=runs)
        started = len(FakeWorker.started)
        again = run_sweep(CONFIGS, store, opts, start_worker=lambda target: SizedWorker(target, {}), runs=runs)
        df = store.results()
    assert summary.planned == 6 and summary.states == {"ok": 6} and again.already_done == 6
    assert started == 2  # the runs share the sweep's two lanes
    assert df.groupby("dtype")["label"].apply(sorted).to_dict() == {
        d: sorted([c.label for c in CONFIGS] * 3) for d in ("float32", "mixed_bfloat16")
    }
    assert df["run_key"].nunique() == 6 and df.groupby("run_key").size().eq(plan.COMPARE_ROUNDS).all()


def test_a_comparison_times_its_alternatives_interleaved_in_shuffled_rounds(tmp_path):
    FakeWorker.started = []
    runs = [RunSettings(max_seconds=0.3, xla=False, dtype=d) for d in ("float32", "mixed_bfloat16")]
    with Store(tmp_path / "r.sqlite") as store:
        run_sweep(CONFIGS, store, SweepOptions(timeout_s=5), start_worker=lambda target: FakeWorker(target, {}), runs=runs)
        df = store.results().sort_values("id")
    (worker,) = FakeWorker.started
    assert len(worker.measured) == 2 * 3 * plan.COMPARE_ROUNDS
    assert worker.measured[0::2] == worker.measured[1::2]  # a configuration's alternatives side by side: a, a, b, b, ...
    rounds = [e["round"] for e in df["extra"]]
    assert rounds == [1] * 6 + [2] * 6 + [3] * 6  # each round a pass over the grid
    assert list(df["max_seconds"]) == pytest.approx([0.1] * 18)  # the rounds share each run's max_seconds
    order = [(e["round"], e["position"], d) for e, d in zip(df["extra"], df["dtype"])]
    firsts = [d for r, pos, d in order if pos == 0]
    assert set(firsts) == {"float32", "mixed_bfloat16"}  # the shuffled order puts either first, and says which
    assert {pos for _, pos, _ in order} == {0, 1}


def test_a_configuration_missing_under_one_alternative_is_measured_again_under_every_one(tmp_path):
    FakeWorker.started = []
    runs = [RunSettings(max_seconds=0.3, xla=False, dtype=d) for d in ("float32", "mixed_bfloat16")]
    with Store(tmp_path / "r.sqlite") as store:
        run_sweep(
            CONFIGS[:1], store, SweepOptions(settings=runs[0], timeout_s=5), start_worker=lambda target: FakeWorker(target, {})
        )  # float32 alone, first
        run_sweep(CONFIGS[:1], store, SweepOptions(timeout_s=5), start_worker=lambda target: FakeWorker(target, {}), runs=runs)
        df = store.results()
    assert df.groupby("dtype").size().to_dict() == {"float32": 1 + plan.COMPARE_ROUNDS, "mixed_bfloat16": plan.COMPARE_ROUNDS}


def test_runs_of_several_frameworks_are_interleaved_each_on_its_own_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(backends, "known_platform", lambda *args: INFO)
    FakeWorker.started = []
    runs = [RunSettings(max_seconds=0.3, framework=f, xla=x) for f, x in (("tensorflow", True), ("jax", True), ("torch", False))]
    with Store(tmp_path / "r.sqlite") as store:
        summary = run_sweep(
            CONFIGS[:2], store, SweepOptions(timeout_s=5), start_worker=lambda target: FakeWorker(target, {}), runs=runs
        )
        df = store.results()
    assert summary.states == {"ok": 2 * 3} and len(df) == 2 * 3 * plan.COMPARE_ROUNDS and set(df["state"]) == {"ok"}
    assert sorted(sorted(w.frameworks) for w in FakeWorker.started) == [["jax"], ["tensorflow"], ["torch"]]  # a worker each
    rounds = df.groupby(["label", "framework"])["extra"].apply(lambda e: sorted(x["round"] for x in e))
    assert all(r == list(range(1, plan.COMPARE_ROUNDS + 1)) for r in rounds)  # every framework in every round
    places = df.assign(round=df["extra"].map(lambda x: x["round"]), place=df["extra"].map(lambda x: x["position"]))
    for _, one_round in places.groupby(["label", "round"]):  # the three frameworks one after another, each in a place
        assert sorted(one_round["place"]) == [0, 1, 2] and set(one_round["framework"]) == {"tensorflow", "jax", "torch"}


def test_a_backend_of_one_framework_refuses_runs_of_several(tmp_path):
    runs = [RunSettings(framework=f) for f in ("tensorflow", "jax")]
    opts = SweepOptions()
    refused = "--framework: 'jax, tensorflow' .* one framework with --stack"
    with Store(tmp_path / "r.sqlite") as store, pytest.raises(ConfigError, match=refused):
        backends.sweep(CONFIGS, store, opts, backends.StacksBackend([]), runs)


def test_two_lanes_start_their_workers_side_by_side(tmp_path, monkeypatch):
    monkeypatch.setattr(backends, "known_platform", lambda *args: INFO)  # no worker needed to learn the platform
    both = threading.Barrier(2, timeout=10)  # broken unless the second start begins while the first is under way

    def start(target: Target) -> SizedWorker:
        both.wait()
        return SizedWorker(target, {})

    FakeWorker.started = []
    opts = SweepOptions(settings=RunSettings(max_seconds=0.1, xla=False), timeout_s=5, memory_budget_bytes=1e12, workers=2)
    with Store(tmp_path / "r.sqlite") as store:
        summary = run_sweep(CONFIGS, store, opts, start_worker=start)
        platforms = store.platforms()
    assert summary.states == {"ok": 3} and len(FakeWorker.started) == 2
    assert platforms["name"].tolist() == ["Fake CPU"]  # each started worker's platform recorded (by the driver's thread)


class InterruptedWorker(SizedWorker):
    """A worker whose measurement is cut short by Ctrl-C once ``when`` is set."""

    def __init__(self, target: Target, when: threading.Event) -> None:
        super().__init__(target, {})
        self.when = when

    def recv(self):
        self.when.wait(10)
        raise KeyboardInterrupt


def test_a_worker_started_after_an_interrupt_is_stopped_and_measures_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(backends, "known_platform", lambda *args: INFO)
    starting, interrupted, late, starts = threading.Event(), threading.Event(), [], itertools.count()
    finish = backends.finish
    monkeypatch.setattr(backends, "finish", lambda *args: interrupted.set() or finish(*args))

    def start(target: Target) -> SizedWorker:
        if next(starts) == 0:  # the lanes start their workers side by side: one of them is first
            return InterruptedWorker(target, when=starting)  # Ctrl-C while the other lane starts its worker
        starting.set()
        interrupted.wait(10)  # and that start ends after the sweep was interrupted
        late.append(SizedWorker(target, {}))
        return late[-1]

    FakeWorker.started = []
    opts = SweepOptions(settings=RunSettings(max_seconds=0.1, xla=False), timeout_s=5, memory_budget_bytes=1e12, workers=2)
    with Store(tmp_path / "r.sqlite") as store:
        summary = run_sweep(CONFIGS, store, opts, start_worker=start)
        for _ in range(100):  # the lane's thread goes on after the sweep returned
            if late and late[0].code is not None:
                break
            threading.Event().wait(0.05)
        assert summary.interrupted and store.results().empty and store.claims().empty
    assert late and late[0].code == 0 and late[0].measured == []  # stopped before measuring anything


def test_configurations_compiled_by_xla_are_measured_alone(tmp_path):
    summary, df, claims = two_worker_sweep(tmp_path, {}, xla=True)  # XLA's compiler keeps both cores busy
    assert summary.states == {"ok": 3} and claims.empty
    assert len(FakeWorker.started) == 1  # the second lane's worker is never started


def test_a_configuration_that_outgrows_its_share_is_measured_again_alone(tmp_path):
    summary, df, claims = two_worker_sweep(tmp_path, {label(1): "big"}, xla=False)  # 0.7 of the budget: over a half
    assert summary.states == {"ok": 3} and claims.empty
    assert df.loc[label(1), "state"] == "ok"  # the attempt beside another lane is not a result
    assert [x for worker in FakeWorker.started for x in worker.measured].count(label(1)) == 2
    (grown,) = [worker for worker in FakeWorker.started if worker.code == -signal.SIGKILL]  # stopped, not reused
    assert grown.measured[-1] == label(1)


@pytest.mark.parametrize("workers", [0, 5, 1.5, True])
def test_workers_must_be_a_small_whole_number(workers):
    with pytest.raises(ConfigError, match="workers"):
        SweepOptions(workers=workers)


def test_several_workers_need_one_cpu_device():
    with pytest.raises(ConfigError, match="--workers: 2 is not valid; allowed: 1 with --devices > 1"):
        plan.check_settings(CONFIGS, SweepOptions(settings=RunSettings(devices=2, xla=False), workers=2))


def test_each_backend_supports_what_its_page_says_and_refuses_the_rest(tmp_path):
    """The features table of docs/stacks-and-clusters.md is read from each backend's declaration:
    a feature added to or dropped from a backend fails here until the page says so."""
    from pathlib import Path

    from paradnn.sweeps import stacks as stk
    from paradnn.sweeps.backends import LocalBackend, StacksBackend
    from paradnn.sweeps.cluster import RayBackend
    from paradnn.sweeps.loop import FEATURES

    page = (Path(__file__).parents[1] / "docs" / "stacks-and-clusters.md").read_text()
    rows = page.split("<!-- backend-features -->")[1].strip().splitlines()[2:]
    rows = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[: len(FEATURES)]]
    for feature, option in FEATURES.items():
        (row,) = [r for r in rows if option in r[0]]
        said = [cell == "yes" for cell in row[1:]]
        assert said == [feature in b.supports for b in (LocalBackend, StacksBackend, RayBackend)], feature
    with Store(tmp_path / "r.sqlite") as store, pytest.raises(ConfigError, match="--workers: 2 .* 1 with --stack"):
        run_sweep(CONFIGS, store, SweepOptions(workers=2), stacks=[stk.parse("current")])


def test_a_worker_started_in_a_lane_thread_outlives_the_thread():
    """Workers die with their parent *thread* (PR_SET_PDEATHSIG); a lane's thread ends with its pass,
    the worker must not. A process started plainly from such a thread is the control: it dies."""
    import subprocess
    import sys
    import time

    code = "from paradnn.engine.machine import die_with_parent\ndie_with_parent()\nimport time\ntime.sleep(30)"
    started = {}

    def start(name, how):
        started[name] = how([sys.executable, "-c", code])
        time.sleep(1.5)  # the thread ends once the child has asked to die with its parent thread

    for name, how in (("spawned", sweep_worker.popen), ("plain", subprocess.Popen)):
        thread = threading.Thread(target=start, args=(name, how))
        thread.start()
        thread.join()
    time.sleep(0.5)
    try:
        assert started["spawned"].poll() is None
        assert started["plain"].poll() == -signal.SIGKILL
    finally:
        for process in started.values():
            process.kill()
            process.wait()
