"""Projection onto a platform that is not at hand: a measured step, split by operation, scaled op by op.

The paper reasons about TPU v3 from v2 this way (Fig. 6), and Habitat (Yu et al., 2021)
predicts GPUs the same way: each operation category of a step measured on platform P keeps
its FLOPs and bytes on Q; one whose intensity (FLOPs/byte) is at or above P's ridge point
is compute-bound and runs ``peak_P / peak_Q`` times as long, one below it is memory-bound
and scales by the bandwidth ratio, and what no device speeds up (infeed, host waits, time
the profile did not cover) is kept as it is. Between two platforms measured here, a
compute-bound category scales instead by the two platforms' FLOP/s (their measured matmul
curves) at the size of its matrix products, as Habitat scales a kernel by what each GPU
reaches on it. With
datasheets on either side a projection is never faster than the larger of the two ratios
allows, and never slower than P; with curves, the bounds are the curves' ratios.

Profiles come from a store's ``traces`` table (op categories per configuration): this
machine's, profiled by :func:`paradnn.sweeps.profiles.profile_local` at one dtype policy with
XLA off, or the original study's TPU v2-8 traces, which ship with the package and are read
from there when the store holds no profile of ``tpu-v2-8``. A local source's steps are its
rows at the profiled dtype and one XLA setting; the target's measured rows, shown beside
the projection, must match both.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paradnn import families
from paradnn.analysis.observations import Part, Rule, Verdict, inconclusive, judged, median_part
from paradnn.analysis.results import Results, Rows, results_of
from paradnn.config import ConfigError, compute_dtype
from paradnn.identity import profile_source
from paradnn.platform import DATASHEETS
from paradnn.settings import DEFAULTS, columns

ORIGINAL = "tpu-v2-8"  # the platform whose profiles ship with the package
# The ratios of peaks the method was checked on against a measurement: between one and two CPU
# threads of one machine (peak ratios 1.6-2.0x; the platform comparison report's check). A
# projection whose peak or bandwidth ratio lies beyond [1/2, 2] is extrapolated, and says so.
VALIDATED_RATIO = 2.0
VALIDATED_ON = "one against two CPU threads of one machine (peak ratios up to 2x)"
# Categories a faster device does not shorten: the host feeding the device, and barriers.
OVERHEAD_CATEGORIES = frozenset({"infeed", "after-all"})
UNTRACED = "untraced"  # the share of P's step its profile did not cover: kept as overhead
BOUNDS = ("compute", "memory", "overhead")


@dataclass(frozen=True)
class Peaks:
    """What a platform can do at most for one compute dtype: FLOP/s and bytes/s, and where from."""

    platform: str
    dtype: str
    flops: float
    bandwidth: float
    source: str
    curve: tuple[tuple[int, float], ...] = ()  # measured (n, FLOP/s) of n x n matmuls, n ascending; () for a datasheet

    @property
    def ridge(self) -> float:
        """The roofline's ridge point: the intensity (FLOPs/byte) above which a step is compute-bound."""
        return self.flops / self.bandwidth

    def flops_at(self, n: float) -> float:
        """FLOP/s of an n x n matmul: interpolated in log n between the curve's sizes, its end
        values beyond them (the peak where there is no curve)."""
        if not self.curve:
            return self.flops
        sizes, rates = zip(*self.curve)
        return float(np.interp(math.log(max(n, 1.0)), np.log(sizes), rates))


# Bytes per element of a compute dtype: an n x n matmul moves 3 n^2 of them for 2 n^3 FLOPs.
ELEMENT_BYTES = {"float32": 4, "tf32": 4, "bfloat16": 2, "float16": 2}


def matmul_size(intensity: float, dtype: str) -> float:
    """The n of the square matmul with this intensity (FLOPs/byte): 2n^3 / (3 n^2 e) = I."""
    return 1.5 * ELEMENT_BYTES.get(dtype, 4) * intensity


def datasheet_peaks(platform: str, dtype: str) -> Peaks:
    """The vendor peaks of a known device (:data:`paradnn.platform.DATASHEETS`) for ``dtype``."""
    sheet = DATASHEETS.get(platform)
    if sheet is None:
        raise ConfigError("platform", platform, f"a datasheet ({', '.join(DATASHEETS)}) or a platform with measured ceilings")
    if dtype not in sheet.peak_flops:
        raise ConfigError("--dtype", dtype, f"a compute dtype of {platform}'s datasheet: {', '.join(sheet.peak_flops)}")
    return Peaks(platform, dtype, sheet.peak_flops[dtype], sheet.memory_bandwidth, f"datasheet:{platform}")


def measured_peaks(platform: str, dtype: str, platforms: pd.DataFrame) -> Peaks | None:
    """The best measured matmul FLOP/s and copy bandwidth of ``platform`` in a store's platforms
    table (a maximum over its fingerprints and trials), or None where it has no such ceilings."""
    from paradnn.store.peaks import ceiling_of, platform_ceilings

    rows = platforms[platforms["platform"] == platform] if "platform" in platforms else platforms.iloc[0:0]
    ceilings = platform_ceilings(rows).values()
    flops = max((ceiling_of(c, dtype) for c in ceilings), default=0.0)
    curve: dict[int, float] = {}
    for c in ceilings:  # a maximum per size over fingerprints, like the peaks
        for n, rate in ((c.get("matmul_curve") or {}).get(dtype) or {}).items():
            curve[int(n)] = max(curve.get(int(n), 0.0), float(rate))
    bandwidth = max(
        (max([float(v) for v in (c.get("copy_bandwidth") or {}).values() if v], default=0.0) for c in ceilings), default=0.0
    )
    if flops <= 0 or bandwidth <= 0:
        return None
    return Peaks(platform, dtype, flops, bandwidth, "measured", tuple(sorted((n, r) for n, r in curve.items() if r > 0)))


def peaks_for(platform: str, dtype: str, platforms: pd.DataFrame, flag: str = "platform") -> Peaks:
    """A platform's peaks: its datasheet where one exists, else its measured ceilings in the store.
    ``flag``: the option that named the platform, for the error; a platform measured at other
    precisions only is a bad ``--dtype``, not a bad platform."""
    if platform in DATASHEETS:
        return datasheet_peaks(platform, dtype)
    found = measured_peaks(platform, dtype, platforms)
    if found is None:
        names = sorted(set(platforms.get("platform", [])))
        own = [d for d in ELEMENT_BYTES if platform in names and measured_peaks(platform, d, platforms) is not None]
        if own:
            raise ConfigError("--dtype", dtype, f"a compute dtype with measured ceilings on {platform} ({', '.join(own)})")
        measured = [p for p in names if measured_peaks(p, dtype, platforms) is not None]
        raise ConfigError(
            flag,
            platform,
            f"a datasheet ({', '.join(DATASHEETS)}) or a platform with measured "
            f"{dtype} ceilings in the store ({', '.join(measured) or 'none'})",
        )
    return found


def scale_factor(
    flops: float, bytes_: float, category: str, source: Peaks, target: Peaks, size: float | None = None
) -> tuple[str, float]:
    """The bound of one operation category on ``source`` and by how much its time is multiplied on ``target``.

    A compute-bound category scales by the two peaks' ratio, or, where both platforms have a
    measured curve, by their FLOP/s at its size: ``size``, the n of the square matmul with
    the work of its matrix products (:func:`paradnn.engine.profiler.op_sizes`), or where a
    profile has none the n of the square matmul of the same intensity (:func:`matmul_size`).
    Small operations do not reach a platform's peak, and two threads gain nothing on them
    (the projection across thread counts was 29-37% too fast without the curves)."""
    if category in OVERHEAD_CATEGORIES or category == UNTRACED or (flops <= 0 and bytes_ <= 0):
        return "overhead", 1.0
    intensity = math.inf if bytes_ <= 0 else flops / bytes_
    if intensity >= source.ridge:
        if source.curve and target.curve:
            n = size if size is not None and size > 0 else matmul_size(intensity, source.dtype)
            return "compute", source.flops_at(n) / target.flops_at(n)
        return "compute", source.flops / target.flops
    return "memory", source.bandwidth / target.bandwidth


def project_step(profile: pd.DataFrame, step_time_s: float, source: Peaks, target: Peaks) -> dict:
    """Project one configuration's step (``profile``: category, time_s, flops, bytes of one step on
    ``source``, and optionally op_size; ``step_time_s``: its measured step) onto ``target``.

    Returns the projected step, the speedup (source step over projection), each bound's share
    of the source step, the time kept as it was (``kept_s``: overhead), and a bracket: the
    projection if every scaled category gained the smallest factor (of the two peaks' ratios
    and those the categories got), and if every one gained the largest (the uncertainty of
    the bound labels).
    """
    profile = profile.reindex(columns=["category", "time_s", "flops", "bytes", "op_size"])
    untraced = step_time_s - float(profile["time_s"].sum())
    if untraced > 0:
        profile.loc[len(profile)] = [UNTRACED, untraced, 0.0, 0.0, math.nan]
    sizes = [None if pd.isna(n) else float(n) for n in profile["op_size"]]
    rows = [
        scale_factor(f, b, c, source, target, n)
        for c, f, b, n in zip(profile["category"], profile["flops"], profile["bytes"], sizes)
    ]
    profile["bound"] = [bound for bound, _ in rows]
    profile["factor"] = [factor for _, factor in rows]
    projected = float((profile["time_s"] * profile["factor"]).sum())
    total = float(profile["time_s"].sum())
    scaled = profile["bound"] != "overhead"
    ratios = (source.flops / target.flops, source.bandwidth / target.bandwidth, *profile.loc[scaled, "factor"])
    fixed = float(profile.loc[~scaled, "time_s"].sum())
    moved = float(profile.loc[scaled, "time_s"].sum())
    shares = profile.groupby("bound")["time_s"].sum() / total if total > 0 else pd.Series(dtype=float)
    # The bracket holds the projection; where one ratio decides both (a single scaled category
    # at an end of the ratios) rounding alone could leave it a hair outside.
    low, high = min(fixed + moved * min(ratios), projected), max(fixed + moved * max(ratios), projected)
    return {
        "projected_step_time_s": projected,
        "speedup": total / projected if projected > 0 else math.nan,
        "bound": {b: round(float(shares.get(b, 0.0)), 4) for b in BOUNDS},
        "interval_s": [low, high],
        "kept_s": fixed,
    }


def trace_profiles(traces: pd.DataFrame, platform: str, source: str | None = None) -> pd.DataFrame:
    """Per-category profiles (label, category, time_share, intensity, bytes_share, op_size) of
    ``platform`` from a store's traces table (the original study's op breakdowns, or this
    machine's profiles of ``source``): the category rows only. ``op_size`` is NaN where the
    traces have none (the original study's, a profile stored before schema 3)."""
    from paradnn.store.legacy import WHOLE

    rows = traces[(traces["platform"] == platform) & (traces["category"] != WHOLE)]
    rows = (rows[rows["source"] == source] if source else rows).copy()
    rows["time_share"] = pd.to_numeric(rows["time_perc"]).fillna(0.0) / 100
    rows["bytes_share"] = pd.to_numeric(rows["raw_mb"]).fillna(0.0) * 1e6
    rows["intensity"] = pd.to_numeric(rows["intensity"]).fillna(0.0)
    rows["op_size"] = pd.to_numeric(rows["op_size"]) if "op_size" in rows else math.nan
    return rows[["label", "category", "time_share", "intensity", "bytes_share", "op_size"]].reset_index(drop=True)


@functools.lru_cache(maxsize=1)
def bundled_original() -> tuple[Results, pd.DataFrame]:
    """The original study's TPU v2-8 sweep rows and traces, read from the package data (nothing
    written; read once per process, callers copy before changing them)."""
    from paradnn.store.legacy import bundled_files, load_file

    results, traces = [], []
    for path in bundled_files():
        loaded = load_file(path)
        if loaded.platform.name == ORIGINAL:
            results += loaded.results
            traces += loaded.traces
    return Results(pd.DataFrame(results)), pd.DataFrame(traces)


@dataclass(frozen=True)
class Source:
    """What a projection starts from: P's measured steps (latest ok row per label) and profiles."""

    platform: str
    dtype: str
    steps: pd.Series  # label -> measured step time (s)
    profiles: pd.DataFrame  # trace_profiles() rows
    where: str  # "store" or "bundled"
    held: dict = dataclasses.field(default_factory=dict)  # settings P's steps share (local: dtype policy, xla)


def source_of(platform: str, family: str, results: Results, traces: pd.DataFrame, flag: str = "--from") -> Source:
    """P's steps and profiles from the store, else (for the original study's TPU v2-8) the package data;
    ``flag``: the option that named P, for the error."""
    ok = _ok_rows(results, platform, family)
    local = _local_profiles(traces, platform, ok)
    held, where = {}, "store"
    if local is not None:  # this machine's profiles: the steps at their dtype policy and one XLA setting
        profiles, held = local
        ok = ok.held(held)
    else:
        profiles = trace_profiles(traces, platform) if not traces.empty else pd.DataFrame()
    if profiles.empty and platform == ORIGINAL:
        results, traces = bundled_original()
        ok = _ok_rows(results, platform, family)
        profiles, where = trace_profiles(traces, platform), "bundled"
    if profiles.empty:
        raise ConfigError(
            flag,
            platform,
            f"a platform with op profiles of {family} ({ORIGINAL}'s ship with "
            "paradnn; profile a local platform's configurations with `paradnn "
            "profile`)",
        )
    ok = ok.subset(ok.frame.sort_values("finished_at", na_position="first")) if "finished_at" in ok.frame else ok
    profiles = profiles[profiles["label"].isin(set(ok.frame["label"]))]
    if profiles.empty:
        raise ConfigError("--family", family, f"a family with op profiles on {platform}")
    dtype = compute_dtype(str(ok.dominant_run(("dtype",))["dtype"]))  # ties: the dtype measured first
    steps = ok.frame.groupby("label")["step_time_s"].last().astype(float)
    return Source(platform, dtype, steps, profiles, where, held)


def local_settings(store: str, platform: str, family: str) -> dict:
    """The run settings a projection from ``platform`` takes its steps at (its profiles' dtype
    policy and the XLA setting most of those rows ran; see :func:`source_of`), or {} where the
    store holds no profile of this machine for it."""
    from paradnn.store import Store

    with Store(store, create=False, readonly=True, snapshot=True) as s:
        results, traces = Results.read(s), s.traces()
    local = _local_profiles(traces, platform, _ok_rows(results, platform, family))
    return local[1] if local else {}


def _ok_rows(results: Results, platform: str, family: str) -> Results:
    """The finished rows of ``family`` on ``platform``."""
    return results.where(platform=platform, family=family).ok()


def _local_profiles(traces: pd.DataFrame, platform: str, ok: Results) -> tuple[pd.DataFrame, dict] | None:
    """This machine's profiles of ``platform`` at the dtype policy most of its ok rows ran (None
    if it has none), with the settings its steps are taken at: that policy and the XLA
    setting most of those rows ran."""
    if traces.empty or ok.empty or "dtype" not in ok.frame:
        return None
    for policy in ok.frame["dtype"].value_counts().index:
        rows = trace_profiles(traces, platform, profile_source(platform, str(policy)))
        same = ok.held({"dtype": policy, **PROFILED})
        if not rows.empty and len(same):
            xla = bool(same.dominant_run(("xla",))["xla"]) if "xla" in same.frame else False
            return rows, {"dtype": str(policy), "xla": xla, **PROFILED}
    return None


# What a profile of this machine runs besides its dtype and XLA setting: the plain step at the
# declared defaults (TensorFlow, fed from device memory, one device; a missing value in a row
# means these), by store column.
PROFILED = columns({name: DEFAULTS[name] for name in ("framework", "input", "devices")})


def step_profile(source: Source, label: str) -> pd.DataFrame:
    """One configuration's profile in seconds of its measured step: category, time_s, flops, bytes, op_size."""
    rows = source.profiles[source.profiles["label"] == label]
    step = float(source.steps[label])
    return pd.DataFrame(
        {
            "category": rows["category"].to_numpy(),
            "time_s": (rows["time_share"] * step).to_numpy(),
            "flops": (rows["intensity"] * rows["bytes_share"]).to_numpy(),
            "bytes": rows["bytes_share"].to_numpy(),
            "op_size": rows["op_size"].to_numpy(),
        }
    )


def scaled_label(family: str, label: str, batch_scale: int) -> str:
    """The label of ``label`` at ``batch_scale`` times its batch."""
    config = families.parse_label(family, label)
    return dataclasses.replace(config, batch=config.batch * batch_scale).label if batch_scale != 1 else label


def extrapolated(source: Peaks, target: Peaks) -> bool:
    """True where the two platforms' peak or bandwidth ratio lies beyond what the method was
    validated on (:data:`VALIDATED_RATIO`)."""
    ratios = (target.flops / source.flops, target.bandwidth / source.bandwidth)
    return any(not 1 / VALIDATED_RATIO <= r <= VALIDATED_RATIO for r in ratios)


def step_floor(target: str, family: str, results: Rows) -> tuple[float, str]:
    """The shortest step ``target`` can take, and where the figure comes from: the fastest ``family``
    step it measured in ``results``, else the fastest any measured platform of its class took (a
    GPU datasheet: the original study's V100; a TPU: its TPU v2-8), else 0 (no floor known). A
    step has a fixed cost (the host's loop, kernel launches) that no peak ratio divides."""
    from paradnn.analysis.scorecard import device_class

    rows = results_of(results)
    if len(rows) and {"state", "family", "platform", "step_time_s"} <= set(rows.frame.columns):
        own = pd.to_numeric(rows.where(platform=target, family=family).ok().frame["step_time_s"]).dropna()
        if len(own):
            return float(own.min()), f"the fastest {family} step {target} measured"
    kind = device_class(target)
    peers = {p: step for p, step in original_floors().items() if device_class(p) == kind}
    if peers:
        return min(peers.values()), (
            f"the fastest FC step {', '.join(sorted(peers))} took in the original study where its "
            "chip, not its input pipeline, was the bound"
        )
    return 0.0, "no step of such a platform measured"


@functools.lru_cache(maxsize=1)
def original_floors() -> dict[str, float]:
    """The fastest step each platform of the original study took where its chip, not its input
    pipeline, was the bound (:mod:`paradnn.store.bounds`; its sweeps and traces, from the package
    data): an input-bound step measures the host's pipeline, not what the chip can do."""
    from paradnn.store.bounds import CHIP
    from paradnn.store.legacy import bundled_rows

    rows = bundled_rows()
    rows = rows[(rows["bound"] == CHIP) & rows["step_time_s"].notna()]
    return {platform: float(steps.min()) for platform, steps in rows.groupby("platform")["step_time_s"]}


def project(
    source: Source,
    src: Peaks,
    target: Peaks,
    family: str,
    labels: list[str] | None = None,
    batch_scale: int = 1,
    measured: pd.DataFrame | None = None,
    floor_s: float = 0.0,
) -> pd.DataFrame:
    """Project ``labels`` (default: every profiled one) of ``source`` (peaks ``src``) onto ``target``.

    With ``batch_scale`` K each configuration is projected at K times its batch, from P's
    measurement at that batch; its speedup is then in examples/s over P at the original
    batch (the paper's 3x for TPU v3: a doubled batch on a doubled memory). A label P did
    not measure and profile is an error when named, skipped otherwise. ``measured``: Q's
    own rows (label, step_time_s), shown beside the projections where they exist. A projected
    step never falls below ``floor_s`` (:func:`step_floor`; ``floored`` says where it was held
    there); ``extrapolated`` is True beyond the ratios the method was validated on.
    """
    profiled = set(source.profiles["label"])
    named = labels is not None
    rows = []
    for label in labels if named else sorted(profiled):
        families.parse_label(family, label)
        at = scaled_label(family, label, batch_scale)
        if at not in profiled or label not in source.steps:
            if named:
                missing = label if label not in source.steps else at
                raise ConfigError(
                    "LABEL",
                    missing,
                    f"a configuration {source.platform} measured and profiled "
                    f"({len(profiled)} of {family}; e.g. {min(profiled)})",
                )
            continue
        profile = step_profile(source, at)
        out = project_step(profile, float(source.steps[at]), src, target)
        floored = out["projected_step_time_s"] < floor_s
        out["projected_step_time_s"] = max(out["projected_step_time_s"], floor_s)
        out["interval_s"] = [max(t, floor_s) for t in out["interval_s"]]
        moved = float(profile["bytes"].sum())
        base = float(source.steps[label])
        speedup = (batch_scale / out["projected_step_time_s"]) / (1 / base)
        out["speedup_interval"] = [batch_scale * base / out["interval_s"][1], batch_scale * base / out["interval_s"][0]]
        truth = None
        if measured is not None and not measured.empty:
            hit = measured[measured["label"] == at]["step_time_s"]
            truth = float(hit.iloc[-1]) if len(hit) else None
        rows.append(
            {
                "label": label,
                "projected_label": at,
                "source_step_time_s": base,
                "intensity": float(profile["flops"].sum()) / moved if moved > 0 else math.nan,
                **out,
                "speedup": speedup,
                "floored": bool(floored),
                "extrapolated": extrapolated(src, target),
                "measured_step_time_s": truth,
            }
        )
    return pd.DataFrame(rows)


def summary(projected: pd.DataFrame, source: Peaks, target: Peaks) -> dict:
    """Median speedup with the medians of its brackets (``speedup_interval``), its range, the
    datasheet ratios it must stay within (at the same batch), and whether those ratios lie beyond
    what the method was validated on (``extrapolated``, with ``validated_ratio`` and ``validated_on``)."""
    speed = projected["speedup"] if len(projected) else pd.Series(dtype=float)
    brackets = np.array(projected["speedup_interval"].tolist()) if len(projected) else np.empty((0, 2))
    return {
        "n": int(len(projected)),
        "median_speedup": float(speed.median()) if len(speed) else math.nan,
        "speedup_interval": [float(np.median(brackets[:, 0])), float(np.median(brackets[:, 1]))]
        if len(brackets)
        else [math.nan, math.nan],
        "min_speedup": float(speed.min()) if len(speed) else math.nan,
        "max_speedup": float(speed.max()) if len(speed) else math.nan,
        "peak_ratio": target.flops / source.flops,
        "bandwidth_ratio": target.bandwidth / source.bandwidth,
        "extrapolated": extrapolated(source, target),
        "validated_ratio": [1 / VALIDATED_RATIO, VALIDATED_RATIO],
        "validated_on": VALIDATED_ON,
        "floored": int(projected["floored"].sum()) if len(projected) else 0,
    }


def projection_inputs(
    store: str | None,
    source: str,
    target: str,
    family: str,
    dtype: str | None = None,
    flags: tuple[str, str] = ("--from", "--to"),
) -> tuple[Source, Peaks, Peaks, pd.DataFrame | None]:
    """What projecting ``family`` from ``source`` onto ``target`` starts from: P's steps and
    profiles, both platforms' peaks (``dtype``: the compute dtype on Q, default P's), and Q's
    own ok rows at that compute dtype and P's run settings (None where the store has no
    results), oldest first. ``flags``: the options that named P and Q, for errors."""
    from paradnn.store import Store

    families.get(family)
    same_platform = ConfigError(
        flags[1], target, f"a platform other than {flags[0]} {source} (or {source} itself with another compute --dtype)"
    )
    if source == target and dtype is None:
        raise same_platform
    no_rows = Results(pd.DataFrame(columns=["platform", "family", "state", "label"]))
    results, traces, platforms = no_rows, pd.DataFrame(), pd.DataFrame(columns=["platform"])
    if store is not None:
        with Store(store, create=False, readonly=True, snapshot=True) as s:
            results, traces, platforms = Results.read(s), s.traces(), s.platforms()
    start = source_of(source, family, results, traces, flags[0])
    src = peaks_for(source, start.dtype, platforms, flags[0])
    dst = peaks_for(target, dtype or start.dtype, platforms, flags[1])
    if source == target and dst.dtype == start.dtype:
        raise same_platform
    theirs = None
    if store is not None:
        theirs = results.where(platform=target, family=family, compute_dtype=dst.dtype).ok()  # Q's own steps
        # a local source: Q's rows at its run settings too (its dtype policy only onto the same compute dtype)
        theirs = theirs.held({k: v for k, v in start.held.items() if k != "dtype" or dst.dtype == start.dtype}).frame
        theirs = theirs.sort_values("finished_at")
    return start, src, dst, theirs


def projection(
    store: str | None,
    source: str,
    target: str,
    family: str,
    labels: list[str] | None = None,
    batch_scale: int = 1,
    dtype: str | None = None,
    floor: bool = True,
) -> tuple[pd.DataFrame, dict]:
    """Project ``family``'s configurations measured on platform ``source`` onto ``target`` (a
    datasheet or a platform with measured ceilings in ``store``; None: no store, the bundled
    original study only). ``dtype``: the compute dtype on the target (default: the source's).
    ``floor``: hold projected steps at the target's step floor (:func:`step_floor`); off where the
    floor would come from the very rows a projection is scored against.
    Returns the rows (:func:`project`) and a summary with both platforms' peaks."""
    if isinstance(batch_scale, bool) or not isinstance(batch_scale, int) or not 1 <= batch_scale <= 64:
        raise ConfigError("--batch-scale", batch_scale, "a whole number from 1 to 64")
    start, src, dst, theirs = projection_inputs(store, source, target, family, dtype)
    # The floor never comes from the very configurations projected (their measurements check the projection).
    projected = set(labels or start.profiles["label"])
    projected |= {scaled_label(family, label, batch_scale) for label in projected}
    others = theirs[~theirs["label"].isin(projected)] if theirs is not None else pd.DataFrame()
    floor_s, floor_source = step_floor(target, family, others) if floor else (0.0, "no floor")
    rows = project(start, src, dst, family, labels, batch_scale, theirs, floor_s)
    if rows.empty and batch_scale != 1:  # nothing to project from: say why rather than print an empty table
        batches = ", ".join(map(str, sorted({families.parse_label(family, label).batch for label in start.profiles["label"]})))
        raise ConfigError(
            "--batch-scale",
            batch_scale,
            f"a factor at which {source} has rows of its profiled {family} configurations (their batches: {batches})",
        )
    return rows, {
        **summary(rows, src, dst),
        "from": vars(src),
        "to": vars(dst),
        "profiles": start.where,
        "batch_scale": batch_scale,
        "held_fixed": start.held,
        "floor_s": floor_s,
        "floor_source": floor_source,
    }


# O5's rule: configurations dominated by one bound reach at least this share of its ratio,
# and the doubled batch reaches at least DOUBLED_AT_LEAST in the median (the paper: about 3x).
SHARE_OF_RATIO = 0.75
DOUBLED_AT_LEAST = 2.5


def dominant_bound(rows: pd.DataFrame) -> pd.Series:
    """The bound (compute, memory, overhead) that takes the largest share of each configuration's step."""
    return pd.Series([max(BOUNDS, key=lambda b: shares[b]) for shares in rows["bound"]], index=rows.index, dtype=object)


def generation_verdict(same: pd.DataFrame, doubled: pd.DataFrame, summary_: dict) -> Verdict:
    """Observation 5 judged on projections (``same``: at each configuration's batch; ``doubled``:
    at twice it), three parts, each a median with its bootstrap interval: compute-dominated
    configurations reach 75% of the peak ratio, memory-dominated ones 75% of the bandwidth ratio,
    and the doubled batch's compute-dominated configurations reach 2.5x (a median, never a maximum)."""
    paper = (
        "TPU v3 speeds up compute-bound operations by the peak ratio (2.3x), memory-bound ones by the bandwidth "
        "ratio (1.5x), and about 3x where its doubled memory doubles the batch"
    )
    name = "speedup of a newer generation, projected"
    platform = f"{summary_['from']['platform']} -> {summary_['to']['platform']}"
    if same.empty or doubled.empty:
        return inconclusive(name, paper, "no projected configurations", id="O5", platform=platform)
    bound = dominant_bound(same)
    targets = {"compute": summary_["peak_ratio"], "memory": summary_["bandwidth_ratio"]}
    missing = sorted(b for b in targets if not (bound == b).any())
    if missing:  # the claim is about both kinds of operation
        return inconclusive(
            name, paper, f"no {' or '.join(missing)}-dominated configuration among {len(same)}", id="O5", platform=platform
        )
    parts = [
        median_part(
            b,
            same.loc[bound == b, "speedup"] / targets[b],
            Rule(f"{b}-dominated median share of the {b} ratio ({targets[b]:.2f}x)", SHARE_OF_RATIO, ">", min_n=2),
            log=True,
        )
        for b in targets
    ]
    doubled_bound = dominant_bound(doubled)
    heavy = doubled[doubled_bound == "compute"] if (doubled_bound == "compute").any() else doubled
    parts.append(
        median_part(
            "doubled",
            heavy["speedup"],
            Rule("median speedup at twice the batch (compute-dominated)", DOUBLED_AT_LEAST, ">", min_n=2),
            log=True,
        )
    )
    medians = same.groupby(bound)["speedup"].median()
    counts = bound.value_counts()
    evidence = "; ".join(f"{b}-dominated median {medians[b]:.2f}x of {targets[b]:.2f}x (n={counts[b]})" for b in targets)
    evidence += (
        f"; host-bound (infeed, idle) configurations median {medians.get('overhead', math.nan):.2f}x "
        f"(n={counts.get('overhead', 0)}); doubled batch median {heavy['speedup'].median():.2f}x (up to "
        f"{doubled['speedup'].max():.2f}x) over {len(heavy)} configurations"
    )
    numbers = {
        "median_speedup_by_bound": {b: float(v) for b, v in medians.items()},
        "ratios": targets,
        "median_doubled_speedup": float(heavy["speedup"].median()),
        "n": int(len(same)),
        "n_doubled": int(len(doubled)),
    }
    return judged(name, paper, parts, evidence, numbers, projected=True, id="O5", platform=platform)


# ------------------------------------------------------------------ validation against the 2019 chips

# The original study's chips, each at the compute dtype it ran (the V100 on float16 Tensor Cores,
# the TPU v2's matrix units in bfloat16), and the method's goals against them (issue 66).
ORIGINAL_TARGETS = {"v100": "float16", "tpu-v2-8": "bfloat16"}
STEP_GOAL = 0.25  # median absolute error of a projected step
RATIO_GOAL = 0.20  # median absolute error of the projected TPU-over-V100 step ratio


def original_validation(store: str, source: str, family: str = "fc") -> tuple[pd.DataFrame, dict]:
    """``source``'s profiled steps projected onto the V100's and the TPU v2-8's datasheets (each at
    the precision the study ran it) and scored, configuration by configuration, against what the
    original study measured, on the configurations where that chip, not its input pipeline, was the
    bound (:mod:`paradnn.store.bounds`). Nothing is fitted: no floor (the study's own steps would
    set it), no calibration. Returns one row per configuration and chip (``error`` = projected /
    measured - 1) and a summary per chip and of the TPU-over-V100 ratio."""
    from paradnn.store.bounds import CHIP

    everything = Results.load(store)
    rows = []
    for target, dtype in ORIGINAL_TARGETS.items():
        truth = everything.where(platform=target, family=family).ok().frame
        steps = truth[truth["bound"] == CHIP].set_index("label")["step_time_s"]
        if steps.empty:
            continue
        try:
            projected, _ = projection(store, source, target, family, dtype=dtype, floor=False)
        except ConfigError:  # no profile of the source yet: nothing to score
            continue
        if projected.empty:
            continue
        projected = projected[projected["label"].isin(steps.index)].assign(target=target)
        projected["measured_step_time_s"] = projected["label"].map(steps)
        rows.append(projected)
    frame = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["label", "target"])
    if len(frame):
        frame["error"] = frame["projected_step_time_s"] / frame["measured_step_time_s"] - 1
    return frame, validation_summary(frame)


def validation_parts(rows: pd.DataFrame) -> dict[str, Part]:
    """Per chip, the median absolute error of the projected step with its interval; and ``ratio``,
    that of the projected TPU-over-V100 step ratio on the configurations projected onto both."""
    parts = {}
    for target in ORIGINAL_TARGETS:
        errors = rows.loc[rows["target"] == target, "error"].abs() if len(rows) else pd.Series(dtype=float)
        parts[target] = median_part(
            f"{target} step", errors, Rule(f"median absolute error of the {target} step", STEP_GOAL, "<", min_n=2)
        )
    parts["ratio"] = median_part(
        "ratio", ratio_errors(rows).abs(), Rule("median absolute error of the TPU/V100 ratio", RATIO_GOAL, "<", min_n=2)
    )
    return parts


def validation_summary(rows: pd.DataFrame) -> dict:
    """:func:`validation_parts` as plain figures: n, median absolute error and its interval."""
    return _figures(validation_parts(rows))


def _figures(parts: dict[str, Part]) -> dict:
    return {
        key: {"n": part.n, "median_abs_error": part.effect, "interval": list(part.interval or ())} for key, part in parts.items()
    }


def ratio_errors(rows: pd.DataFrame) -> pd.Series:
    """Per configuration projected onto both chips: projected TPU/V100 step ratio over the measured one, minus 1."""
    if rows.empty:
        return pd.Series(dtype=float)
    steps = rows.pivot_table(index="label", columns="target", values=["projected_step_time_s", "measured_step_time_s"])
    tpu, gpu = "tpu-v2-8", "v100"
    if (("projected_step_time_s", tpu) not in steps) or (("projected_step_time_s", gpu) not in steps):
        return pd.Series(dtype=float)
    steps = steps.dropna()
    projected = steps[("projected_step_time_s", tpu)] / steps[("projected_step_time_s", gpu)]
    measured = steps[("measured_step_time_s", tpu)] / steps[("measured_step_time_s", gpu)]
    return projected / measured - 1


def validation_verdict(rows: pd.DataFrame, source: str) -> Verdict:
    """paradnn's check of the projection method against the 2019 chips: each chip's median step error
    below :data:`STEP_GOAL` and the TPU-over-V100 ratio's below :data:`RATIO_GOAL`."""
    name = "projection reproduces the 2019 V100 and TPU v2-8"
    claim = (
        f"projecting this machine's profiled steps onto the V100's and TPU v2-8's datasheets lands within "
        f"{STEP_GOAL:.0%} of the study's measured steps, and the TPU-over-V100 ratio within {RATIO_GOAL:.0%} (median)"
    )
    if rows.empty:
        return inconclusive(
            name,
            claim,
            f"no profiled configuration of {source} where a 2019 chip was the bound",
            platform=f"{source} -> 2019 chips",
        )
    parts = validation_parts(rows)
    summary = _figures(parts)
    evidence = (
        "; ".join(f"{t}: median error {v['median_abs_error']:.0%} over {v['n']}" for t, v in summary.items() if v["n"])
        + " (nothing fitted; 2019 steps where the chip was the bound)"
    )
    return judged(name, claim, list(parts.values()), evidence, summary, platform=f"{source} -> 2019 chips")
