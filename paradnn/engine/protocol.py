"""The measurement protocol: time one configuration's training step.

1. Build model, optimizer and device-resident synthetic data (nothing crosses from the
   host inside the timer).
2. Tracing the step and the first call (compile + one step) are timed apart, together as
   compile time.
3. Calibrate K, the steps per call, so one call takes at least ``min_call_seconds``.
4. Warm up until two consecutive calls agree within ``warmup_tolerance`` (bounded).
5. Timed calls, each ending with a device synchronisation (the loss is copied to the
   host); every per-step sample is kept. Python's garbage collector runs once before the
   first call and is paused from then to the last sample, as ``timeit`` does. Calibration,
   warm-up and the timed calls hold the machine's timing gate exclusively
   (:mod:`paradnn.engine.gate`): in a sweep with several workers, another worker's build or
   compile never runs beside them.
6. Stop adaptively: once the median's 95% confidence half-width is within
   ``target_precision`` of it (after ``min_samples``), or when ``max_seconds`` is spent.
7. Refuse a contended window: warm-up and timed calls are one window, bracketed by readings
   of what else used the machine (:mod:`paradnn.engine.contention`). A window in which other
   processes and the hypervisor's steal took more than ``max_contention`` cores is timed
   again once the machine is quiet (waiting at most ``quiet_wait_s``), up to
   ``contention_retries`` times; the record keeps the standing window's contention, every
   refused window, and ``contended`` when none was quiet.

A non-finite loss makes timings unrepresentative (denormals and NaNs run at other
speeds); it is reported as state ``error`` with the numbers kept, never hidden.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from paradnn.config import ConfigError
from paradnn.engine import contention, frameworks
from paradnn.engine.contention import Usage
from paradnn.engine.gate import gate
from paradnn.platform import Target
from paradnn.settings import ENGINE_DEFAULTS, STEP_FIELDS
from paradnn.settings import parse as parse_settings
from paradnn.vocabulary import OK

if TYPE_CHECKING:
    from paradnn.engine.energy import Meter
    from paradnn.engine.graphcount import GraphCount


@dataclass(frozen=True)
class RunSettings:
    """How to run a configuration (separate from what it is): the declared run settings
    (:mod:`paradnn.settings`) the step depends on, the device, and the protocol's knobs."""

    # The declared step settings (paradnn.settings.STEP_FIELDS, a test holds the two equal), at the
    # engine's defaults: None is --xla auto (the front ends' default), resolved per family and
    # platform before measuring; the engine's own default is a resolved setting, on.
    dtype: str = ENGINE_DEFAULTS["dtype"]
    xla: bool | None = ENGINE_DEFAULTS["xla"]
    framework: str = ENGINE_DEFAULTS["framework"]  # jax / torch: Keras 3's backends (JAX always compiled; torch.compile with xla)
    input: str = ENGINE_DEFAULTS["input"]  # host / host-prep: each step fed by a tf.data pipeline (paradnn.engine.inputs)
    devices: int = ENGINE_DEFAULTS["devices"]  # data-parallel replicas, the global batch split evenly (paradnn.engine.replicas)
    device: str = "/CPU:0"
    max_seconds: float = 10.0
    min_call_seconds: float = 0.1
    max_steps_per_call: int = 1000
    min_samples: int = 5
    max_samples: int = 200
    max_warmup_calls: int = 10
    warmup_tolerance: float = 0.05
    target_precision: float = 0.01
    max_contention: float = field(default_factory=contention.declared_limit)  # cores others may use in a window
    contention_retries: int = 2  # contended windows timed again, at most
    quiet_wait_s: float = 5.0  # the longest wait for a quiet machine before a window is timed again

    def __post_init__(self) -> None:
        for name, value in parse_settings({k: getattr(self, k) for k in STEP_FIELDS}, defaults=False).items():
            object.__setattr__(self, name, value)  # each through its one parser (ConfigError naming what is allowed)
        frameworks.check(self.framework)  # installed?
        if self.input != "device" and self.framework != "tensorflow":
            raise ConfigError("input", self.input, f"device with --framework {self.framework} (host pipelines are tf.data)")
        frameworks.check_policy(self.framework, self.dtype)
        if self.devices != 1:
            self._check_parallel()
        if self.framework in frameworks.ALWAYS_COMPILED:  # JAX compiles with XLA: --xla auto means on, --no-xla an error
            if self.xla is False:
                raise ConfigError("--xla", "off", "on (JAX always compiles with XLA)")
            object.__setattr__(self, "xla", True)
        if self.framework == "torch" and self.xla is None:  # --xla auto: PyTorch's own default, eager
            object.__setattr__(self, "xla", False)
        if not (isinstance(self.max_seconds, (int, float)) and math.isfinite(self.max_seconds) and self.max_seconds > 0):
            raise ConfigError("max_seconds", self.max_seconds, "a positive number of seconds")

    @classmethod
    def of(cls, run: Mapping[str, object], target: Target, **knobs: object) -> RunSettings:
        """The settings of a parsed run (:func:`paradnn.settings.parse`) on ``target``, with protocol knobs."""
        return cls(**{k: run[k] for k in STEP_FIELDS}, device=target.tf_device, **knobs)

    def _check_parallel(self) -> None:
        """What data-parallel runs (``devices`` > 1) take; ``--xla auto`` means off.

        XLA cannot compile TensorFlow's CPU collectives, and Keras itself turns XLA off under
        ``tf.distribute``; the replicas' step runs as TensorFlow's graph on CPUs and GPUs alike.
        """
        if isinstance(self.devices, bool) or not isinstance(self.devices, int) or self.devices < 1:
            raise ConfigError("--devices", self.devices, "a positive number of replicas")
        if self.framework != "tensorflow":
            raise ConfigError("--devices", self.devices, f"1 with --framework {self.framework} (replicas use tf.distribute)")
        if self.input != "device":
            raise ConfigError("--devices", self.devices, f"1 with --input {self.input} (a run has one reference)")
        if self.xla:
            raise ConfigError("--xla", "on", "off with --devices > 1 (replicas run without XLA, as Keras runs tf.distribute)")
        object.__setattr__(self, "xla", False)


@dataclass
class Stats:
    """Summary of per-step times in seconds."""

    median: float
    mad: float
    mean: float
    std: float
    min: float
    p5: float
    p95: float
    cv: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> Stats:
        a = np.asarray(samples, dtype=float)
        median = float(np.median(a))
        mean = float(a.mean())
        std = float(a.std(ddof=1)) if a.size > 1 else 0.0
        return cls(
            median=median,
            mad=float(np.median(np.abs(a - median))),
            mean=mean,
            std=std,
            min=float(a.min()),
            p5=float(np.percentile(a, 5)),
            p95=float(np.percentile(a, 95)),
            cv=std / mean if mean > 0 else 0.0,
            n=int(a.size),
        )

    def median_halfwidth(self) -> float:
        """Approximate 95% confidence half-width of the median (normal approximation)."""
        if self.n < 2:
            return math.inf
        sigma = 1.4826 * self.mad if self.mad > 0 else self.std
        return 1.96 * 1.2533 * sigma / math.sqrt(self.n)


UNSTABLE_CV = 0.10


@dataclass
class Measurement:
    """Everything one measurement produced: state, timings, samples and the loss."""

    state: str  # ok | oom | error
    error: str = ""
    steps_per_call: int = 0
    compile_time_s: float = float("nan")
    warmup_calls: int = 0
    samples: list[float] = field(default_factory=list)  # seconds per step, one per timed call
    warmup_s: list[float] = field(default_factory=list)  # seconds per step of each warm-up call
    stats: Stats | None = None
    unstable: bool = False
    final_loss: float = float("nan")
    wall_time_s: float = 0.0
    peak_memory_bytes: int | None = None
    graph: GraphCount | None = None
    # Seconds spent per phase (build, calibration, warmup, timed): where the wall time went.
    phases: dict[str, float] = field(default_factory=dict)
    # When (epoch seconds) it was prepared (built .. compiled) and timed (calibration .. last
    # sample, the gate held exclusively): with several workers, the timed span overlaps no
    # other worker's spans.
    spans: dict[str, list[float]] = field(default_factory=dict)
    # The reference's per-step times, sampled alternately with ``samples``: for host input modes
    # the device-resident loop; for data-parallel runs (``replicas`` > 1) one replica's own step at B/N.
    reference_samples: list[float] = field(default_factory=list)
    replicas: int = 1
    allreduce_share: float | None = None  # data-parallel: the profiler's all-reduce time over the step
    # Energy per step over the timed calls, where the device has a readable counter (paradnn.engine.energy).
    energy_per_step_j: float | None = None
    energy_source: str = ""
    # What else used the machine in the standing window (None: not readable here), and every refused window's.
    contention: Usage | None = None
    refused: list[dict] = field(default_factory=list)
    max_contention: float = math.inf
    reused_step: bool = False  # the step was built and compiled for an earlier round (paradnn.engine.training)

    @property
    def contended(self) -> bool | None:
        """Whether the standing window was contended (no quiet one was had); None where not readable."""
        return None if self.contention is None else not self.contention.quiet(self.max_contention)

    def _against_reference(self) -> dict:
        """The reference's step time and what the step spends beyond it.

        Host input modes: the device-resident step and the infeed share ``1 - t_device / t_host``.
        Data-parallel runs: one replica's step at B/N, the communication share
        ``1 - t_replica / t_parallel`` and the (weak) scaling efficiency ``t_replica / t_parallel``.
        """
        out = dict.fromkeys(("device_step_time_s", "infeed_share", "replica_step_time_s", "comm_share", "scaling_efficiency"))
        out["allreduce_share"] = self.allreduce_share
        if self.reference_samples and self.samples:
            ref, step = float(np.median(self.reference_samples)), float(np.median(self.samples))
            if self.replicas > 1:
                out.update(replica_step_time_s=ref, comm_share=1 - ref / step, scaling_efficiency=ref / step)
            else:
                out.update(device_step_time_s=ref, infeed_share=1 - ref / step)
        return out

    def as_dict(self) -> dict:
        """Flat record: ``step_time_s`` is the median; ``step_time_<stat>_s`` the rest."""
        d = {
            "state": self.state,
            "error": self.error,
            "steps_per_call": self.steps_per_call,
            "compile_time_s": self.compile_time_s,
            "warmup_calls": self.warmup_calls,
            "n_samples": len(self.samples),
            "unstable": self.unstable,
            "final_loss": self.final_loss,
            "wall_time_s": self.wall_time_s,
            "peak_memory_bytes": self.peak_memory_bytes,
            "samples_s": list(self.samples),
            "warmup_s": list(self.warmup_s),
            "extra": {
                "phases": dict(self.phases),
                **({"spans": dict(self.spans)} if self.spans else {}),
                **({"refused": list(self.refused)} if self.refused else {}),
                **({"reused_step": True} if self.reused_step else {}),
            },
            "contention_cores": self.contention.others if self.contention else None,
            "steal_cores": self.contention.steal if self.contention else None,
            "refused_windows": len(self.refused),
            "contended": self.contended,
            "energy_per_step_j": self.energy_per_step_j,
            **self._against_reference(),
            "energy_source": self.energy_source or None,
        }
        s = self.stats
        d["step_time_s"] = s.median if s else None
        for key in ("mad", "mean", "std", "min", "p5", "p95"):
            d[f"step_time_{key}_s"] = getattr(s, key) if s else None
        d["step_time_cv"] = s.cv if s else None
        return d


class NonFiniteLoss(RuntimeError):
    pass


class _Calls:
    """Times calls of ``run(k)``, counting the steps done and checking every loss.

    ``announce(k)``, if given, runs before each call, outside the timer (a data-parallel
    leader tells the other replicas what to run: see :mod:`paradnn.engine.replicas`).
    """

    def __init__(self, run: Callable[[int], float], announce: Callable[[int], None] | None = None) -> None:
        self.run, self.announce, self.steps, self.loss = run, announce, 0, math.nan

    def __call__(self, k: int) -> float:
        if self.announce is not None:
            self.announce(k)
        start = time.perf_counter()
        self.loss = self.run(k)
        seconds = time.perf_counter() - start
        self.steps += k
        if not math.isfinite(self.loss):
            raise NonFiniteLoss(f"loss became non-finite ({self.loss}) after {self.steps} steps; timings are not representative")
        return seconds


def calibrate(calls: _Calls, settings: RunSettings) -> tuple[int, float]:
    """Steps per call K so a call lasts ``min_call_seconds``; returns K and the last call's seconds per step."""
    per_step = calls(1)
    k = _steps_for(per_step, settings)
    if k > 1:  # refine: a single step's time includes the call overhead
        per_step = calls(k) / k
        k = _steps_for(per_step, settings)
    return k, per_step


def warm_up(calls: _Calls, k: int, previous: float, settings: RunSettings, budget_end: float) -> list[float]:
    """Calls of K steps until two consecutive ones agree within ``warmup_tolerance`` (bounded).

    ``previous`` is the last calibration call's time for K steps (the first warm-up sample).
    Returns the warm-up calls' seconds per step.
    """
    values: list[float] = []
    for _ in range(settings.max_warmup_calls):
        t = calls(k)
        values.append(t / k)
        if abs(t - previous) <= settings.warmup_tolerance * t or time.perf_counter() > budget_end:
            break
        previous = t
    return values


def sample(
    calls: _Calls, k: int, settings: RunSettings, budget_end: float, reference: _Calls | None = None
) -> tuple[list[float], list[float]]:
    """Timed calls until the median is known within ``target_precision`` or the budget is spent.

    With a ``reference`` (a host input mode's device-resident loop), each timed call is
    followed by one of the reference, side by side so drift cancels; returns both lists.
    """
    samples: list[float] = []
    others: list[float] = []
    while len(samples) < settings.max_samples:
        samples.append(calls(k) / k)
        if reference is not None:
            others.append(reference(k) / k)
        if len(samples) < settings.min_samples:
            continue
        stats = Stats.of(samples)
        if stats.median_halfwidth() <= settings.target_precision * stats.median or time.perf_counter() > budget_end:
            break
    return samples, others


def run_protocol(
    run: Callable[[int], float],
    settings: RunSettings,
    meter: Meter | None = None,
    reference: Callable[[int], float] | None = None,
    announce: tuple[Callable[[int], None], Callable[[int], None]] | None = None,
    began: float | None = None,
    partners: tuple[int, ...] = (),
    kept: tuple[int, float] | None = None,
) -> Measurement:
    """Apply the protocol to ``run(k)``, a function that executes k steps and syncs.

    Phases: compile (the first call, one step), :func:`calibrate`, :func:`warm_up`,
    :func:`sample`; where the time went is kept in ``phases``. With an energy ``meter``,
    the energy of the timed calls per step is kept too. With a ``reference`` (the
    device-resident loop of a host input mode, or one replica's own step), it is compiled
    right after the step, warmed up after the step's warm-up and called after each timed
    call (:func:`sample`).
    ``announce``: untimed hooks called before each call of ``run`` and of ``reference``.
    ``began``: when (epoch seconds) building the step began, where the caller built it; the
    start of the ``prepared`` span (else this call's start). ``partners``: the other processes
    that run the step (a data-parallel run's replicas): their CPU is the step's, not contention.
    ``kept``: a step compiled and calibrated in an earlier round, as (K, seconds per step):
    no first call (``compile_time_s`` stays unset for the caller to fill) and no calibration.
    """
    m = Measurement(state=OK)
    start = time.perf_counter()
    calls = _Calls(run, announce[0] if announce else None)
    gc_was_enabled = gc.isenabled()
    try:
        prepared = began or time.time()
        ref = _Calls(reference, announce[1] if announce else None) if reference is not None else None
        with gate().shared():
            # No Python garbage collection inside the timer (as ``timeit``): earlier garbage (the
            # last configuration's) is collected here, before the first call, and the collector
            # stays off until the last sample. Collected after calibration instead, with a host
            # pipeline's threads running, it took 1.6-4.8 s for host-fed FC rows and 25.7 s once
            # for a host-prep SqueezeNet (``gc_s``), holding the timing gate all along. Such waits
            # were the last host pipeline stopping; it is now stopped apart (inputs.finish).
            collecting = time.perf_counter()
            gc.collect()
            gc.disable()
            m.phases["gc_s"] = time.perf_counter() - collecting
            if kept is None:
                m.compile_time_s = calls(1)
            if ref is not None:
                ref(1)  # compiles the reference too (not timed), beside other workers' preparations
        m.spans["prepared"] = [prepared, time.time()]
        waiting = time.perf_counter()
        with gate().exclusive():
            if gate().active:
                m.phases["gate_wait_s"] = time.perf_counter() - waiting
            m.spans["timed"] = [time.time(), math.nan]
            calibrated = time.perf_counter()
            m.steps_per_call, per_step = kept or calibrate(calls, settings)
            k = m.steps_per_call
            m.phases["calibration_s"] = time.perf_counter() - calibrated
            _quiet_window(m, calls, k, per_step, settings, meter, ref, partners)
            m.spans["timed"][1] = time.time()
    except NonFiniteLoss as exc:
        m.state, m.error = "error", str(exc)
    finally:
        if gc_was_enabled:
            gc.enable()
        m.wall_time_s = time.perf_counter() - start
    if m.samples:
        m.stats = Stats.of(m.samples)
        m.unstable = m.stats.cv > UNSTABLE_CV
    return m


def _quiet_window(
    m: Measurement,
    calls: _Calls,
    k: int,
    per_step: float,
    settings: RunSettings,
    meter: Meter | None,
    ref: _Calls | None,
    partners: tuple[int, ...] = (),
) -> None:
    """Warm-up and timed calls in a window the others left quiet (see the module docstring, step 7)."""
    m.max_contention = settings.max_contention
    for attempt in range(settings.contention_retries + 1):
        began, start = time.perf_counter(), contention.read(partners)
        _timed_calls(m, calls, k, per_step, settings, meter, ref)
        m.contention = contention.between(start, contention.read(partners))
        if not m.contended or attempt == settings.contention_retries:
            return
        m.refused.append(m.contention.as_dict())
        contention.wait_for_quiet(settings.max_contention, settings.quiet_wait_s)
        m.phases["refused_s"] = m.phases.get("refused_s", 0.0) + time.perf_counter() - began


def _timed_calls(
    m: Measurement, calls: _Calls, k: int, per_step: float, settings: RunSettings, meter: Meter | None, ref: _Calls | None
) -> None:
    """Warm-up and timed calls (with the compiled reference's, and the energy), kept in ``m``."""
    warmup_start = time.perf_counter()
    budget_end = warmup_start + settings.max_seconds
    m.warmup_s = warm_up(calls, k, per_step * k, settings, budget_end)
    m.warmup_calls = len(m.warmup_s)
    m.phases["warmup_s"] = time.perf_counter() - warmup_start
    timed_start = time.perf_counter()
    if ref is not None:
        ref(k)  # warms the reference up at K steps per call
    steps_before, joules_before = calls.steps, meter.read() if meter else None
    m.samples, m.reference_samples = sample(calls, k, settings, budget_end, ref)
    m.phases["timed_s"] = time.perf_counter() - timed_start
    if meter and joules_before is not None:
        m.energy_per_step_j = (meter.read() - joules_before) / (calls.steps - steps_before)
        m.energy_source = meter.source
    m.final_loss = calls.loss


def _steps_for(step_seconds: float, settings: RunSettings) -> int:
    k = math.ceil(settings.min_call_seconds / max(step_seconds, 1e-9))
    return int(min(max(k, 1), settings.max_steps_per_call))


def host_rss() -> int:
    """This process's resident memory in bytes (the CPU's peak-memory proxy)."""
    import psutil

    return int(psutil.Process().memory_info().rss)


def first_line(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
