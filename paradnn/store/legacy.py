"""Import the original ParaDnn study's JSON files (2019), read as they are, into a store.

The study published four kinds of JSON object, each a set of parallel lists:

* sweep files (``tpu_fc.json``, ``gpu_fc.json``): one entry per finished configuration
  (``labels``, ``params``, ``fl``, ``flops``, ``step_per_sec``, ``example_per_sec``,
  ``intensity``) plus the configurations that did not finish (``err_jobs``, ``states``);
* trace files (``fc_trace_10sec.json``): TPU profiler figures per configuration;
* op-breakdown trace files (``fc_trace_10sec_opbreakdown.json``): the same figures per
  ``<configuration label>-<op category>``.

Each sweep entry becomes one result row with the same columns a measurement has, so
legacy and new numbers can be compared with the same code. The study's own figures are
converted to whole-device units: on the TPU v2-8 ``fl`` and ``flops`` are per core, so
they are multiplied by the board's 8 cores; the V100 ran 16-bit Tensor Cores, recorded
as ``mixed_float16``. The original numbers are kept unchanged in ``extra``; ``params``
and ``flops_model`` are this package's analytic counts, so they match measured rows.

Every file given is read and validated completely before anything is written, so a
malformed file leaves the store untouched. Each file is then written in one transaction,
and importing a file again adds nothing (the store keeps each legacy row once).

The four files ship with the package, unmodified (``paradnn/data/paradnn-2019/``, with
their NOTICE and Apache-2.0 LICENSE); :func:`bundled_files` checks their SHA-256 every
time they are read, and every pipeline imports them into its store.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from paradnn import counting, families
from paradnn.config import ConfigError, compute_dtype, read_bounded
from paradnn.families.fc import FCConfig
from paradnn.platform import DATASHEETS
from paradnn.settings import ORIGINAL_INPUT
from paradnn.store import Store
from paradnn.vocabulary import LEGACY, OK, legacy_source

STUDY = "ParaDnn 2019"
# The original release's files as shipped in paradnn/data/paradnn-2019, with their SHA-256.
BUNDLED = {
    "tpu_fc.json": "f06ddfc7513f2fdf4230e5ab601c3729096ca24d3ee38cd2efb47a0c39055608",
    "gpu_fc.json": "96aef2df600c040929c741033fed3d4214f83b038c7d13b9367cb3831a47db2e",
    "fc_trace_10sec.json": "137ac83472d514cec2381b784d8a5a824309bc90eb40141bff9c140f7ca0fdab",
    "fc_trace_10sec_opbreakdown.json": "097e1a7b2acca3298055ea89a22af1c1eeacb4760326720dd8fe1346e9ef5aa1",
}
# The original study's FC model is this package's FC family at version 1.
FC_VERSION = 1

SWEEP_KEYS = ("labels", "params", "fl", "flops", "step_per_sec", "example_per_sec", "intensity", "err_jobs", "states")
# Per-label numeric lists of a sweep file, and those kept unchanged in an ok row's ``extra``
# (``example_per_sec`` is stored as is in ``examples_per_sec``).
SWEEP_NUMBERS = ("params", "fl", "flops", "step_per_sec", "example_per_sec", "intensity")
EXTRA_KEYS = ("params", "fl", "flops", "intensity", "step_per_sec")

# Trace-table column <- file key, for whole-configuration traces and per-op breakdowns.
TRACE_FIELDS = {
    "flops_perc": "flops_perc",
    "flops_perc_mean": "flops_perc_m",
    "flops_perc_std": "flops_perc_std",
    "memory_bandwidth": "memory_bandwidth",
    "intensity": "intensity",
    "raw_mb": "rawMB",
    "time_perc": "time_perc",
    "infeed": "infeed",
    "infeed_mean": "infeed_m",
    "infeed_std": "infeed_std",
}
# An op-breakdown file has no per-capture statistics and no infeed figures.
BREAKDOWN_FIELDS = {c: TRACE_FIELDS[c] for c in ("flops_perc", "memory_bandwidth", "intensity", "raw_mb", "time_perc")}
# Category of a trace row that covers the whole configuration (not NULL: SQLite's UNIQUE
# treats NULLs as distinct, so re-importing would duplicate the row).
WHOLE = "all"
FC_LABEL_FIELDS = 5  # layer, node, input, output, bs

# State text of ``err_jobs`` -> store state; any other text is an ``error``.
STATE_TEXTS = {"oom": "oom", "no error but not finished": "timeout"}


@dataclass(frozen=True)
class LegacyPlatform:
    """A platform of the original study and how to read its numbers."""

    name: str  # platform id in the store (a DATASHEETS key)
    device_name: str
    dtype: str  # Keras dtype policy the runs correspond to
    xla: bool | None  # None: not known
    cores: int  # ``fl`` and ``flops`` are per core: multiply by this for the device

    @property
    def compute_dtype(self) -> str:
        return compute_dtype(self.dtype)

    @property
    def peak_flops(self) -> float:
        return DATASHEETS[self.name].peak_flops[self.compute_dtype]

    @property
    def fingerprint(self) -> str:
        return legacy_source(self.name)


PLATFORMS: dict[str, LegacyPlatform] = {
    "tpu-v2-8": LegacyPlatform("tpu-v2-8", "TPU v2-8", "mixed_bfloat16", True, 8),
    "v100": LegacyPlatform("v100", "NVIDIA V100", "mixed_float16", None, 1),
}
# File-name prefix -> platform (the trace files are TPU v2 traces).
NAME_PLATFORMS = (("tpu", "tpu-v2-8"), ("fc_trace", "tpu-v2-8"), ("gpu", "v100"))


class LegacyError(ValueError):
    """A legacy file cannot be imported: names the file, what is wrong and what is expected."""


@dataclass(frozen=True)
class LegacyFile:
    """One validated legacy file: its rows, ready for the store, nothing written yet."""

    path: Path
    kind: str  # "sweep", "trace" or "breakdown"
    platform: LegacyPlatform
    results: list[dict] = field(default_factory=list)
    traces: list[dict] = field(default_factory=list)

    @property
    def source(self) -> str:
        return source_of(self.path)


def source_of(path: Path) -> str:
    """The ``source`` value of rows imported from ``path``."""
    return legacy_source(path.name)


def _fail(path: Path, problem: str, expected: str) -> LegacyError:
    return LegacyError(f"{path}: {problem}; expected {expected}")


def _json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "list", dict: "object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


# ------------------------------------------------------------------ reading and checking


LEGACY_BYTES = 50_000_000  # the original study's largest file is 0.3 MB


def _read_json(path: Path, device: str) -> dict:
    """The file's JSON object, or LegacyError if it cannot be read (a FIFO or device is refused before
    it is opened: it would block or never end; at most :data:`LEGACY_BYTES`) or is not an object."""
    try:
        text = read_bounded(path, "legacy file", LEGACY_BYTES)
    except ConfigError as exc:
        raise _fail(path, "cannot be read", f"{exc.allowed}: a UTF-8 JSON file") from None
    _check_known_device(path, text, device)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(path, f"is not valid JSON ({exc})", "one JSON object of parallel lists") from None
    except (RecursionError, ValueError) as exc:  # thousands of nested brackets; a number of thousands of digits
        raise _fail(
            path, f"is JSON no study file holds ({type(exc).__name__})", "one JSON object of parallel lists of numbers and labels"
        ) from None
    if not isinstance(data, dict):
        raise _fail(path, f"holds a JSON {_json_type(data)}, not an object", "one JSON object of parallel lists")
    return data


def _check_known_device(path: Path, text: str, device: str) -> None:
    """A file whose contents are one of the original study's files (by SHA-256) is only ever filed
    under that file's device, whatever it is called now (a renamed copy would file a TPU sweep as
    V100 rows)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    found = next((name for name, known in BUNDLED.items() if known == digest), None)
    if found is None:
        return
    own = next(name for prefix, name in NAME_PLATFORMS if found.startswith(prefix))
    if own != device:
        raise _fail(
            path,
            f"holds the original study's {found}, measured on the {own}, not the {device}",
            f"--platform {own} (or a name starting as {found} does)",
        )


def resolve_platform(path: Path, platform: str | None = None) -> LegacyPlatform:
    """The platform of ``path``: ``platform`` if given, else from the file name."""
    known = " or ".join(PLATFORMS)
    named = next((name for prefix, name in NAME_PLATFORMS if path.name.startswith(prefix)), None)
    if platform is not None:
        if platform not in PLATFORMS:
            raise LegacyError(f"platform {platform!r} is not a platform of the original study; expected {known}")
        if named is not None and platform != named:  # a file is only ever filed under its own device
            raise LegacyError(
                f"{path.name}: --platform {platform!r} is not this file's device; expected {named} "
                "(the name says which device measured it)"
            )
        return PLATFORMS[platform]
    if named is not None:
        return PLATFORMS[named]
    prefixes = ", ".join(f"'{p}...' ({n})" for p, n in NAME_PLATFORMS)
    raise _fail(
        path, "the file name does not say which platform it is from", f"a name starting with {prefixes}, or a platform ({known})"
    )


def _kind(path: Path, data: dict) -> str:
    """Sweep, whole-configuration trace or op-breakdown trace: by name, else by keys."""
    name = path.name
    if "opbreakdown" in name:
        return "breakdown"
    if name.startswith("fc_trace"):
        return "trace"
    if name.startswith(("tpu", "gpu")) or "step_per_sec" in data or "err_jobs" in data:
        return "sweep"
    if "flops_perc" in data:
        return "trace" if "infeed" in data else "breakdown"
    raise _fail(path, "is neither a sweep nor a trace file", f"the keys {', '.join(SWEEP_KEYS)} (a sweep file)")


def _lists(path: Path, data: dict, keys: Iterable[str]) -> dict[str, list]:
    """The lists under ``keys``: every key present and holding a list."""
    keys = tuple(keys)
    missing = [k for k in keys if k not in data]
    if missing:
        raise _fail(path, f"missing key(s) {', '.join(missing)}", f"the keys {', '.join(keys)}")
    for key in keys:
        if not isinstance(data[key], list):
            raise _fail(path, f"key {key!r} holds a {_json_type(data[key])}", "a list")
    return {k: data[k] for k in keys}


def _same_length(path: Path, lists: dict[str, list], keys: Iterable[str]) -> int:
    """The common length of ``lists[keys]``, or LegacyError naming the odd ones out."""
    keys = tuple(keys)
    lengths = {k: len(lists[k]) for k in keys}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k}: {n}" for k, n in lengths.items())
        raise _fail(path, f"lists of unequal length ({shown})", f"parallel lists of one length ({', '.join(keys)})")
    return lengths[keys[0]]


def _number(path: Path, key: str, index: int, value: object, finite: bool = True) -> float:
    """``value`` as a float, or LegacyError; NaN and infinities pass only if not ``finite``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(path, f"{key}[{index}] is {value!r}", "a number")
    if finite and not math.isfinite(value):
        raise _fail(path, f"{key}[{index}] is {value!r}", "a finite number")
    return float(value)


def _text(path: Path, key: str, index: int, value: object) -> str:
    if not isinstance(value, str):
        raise _fail(path, f"{key}[{index}] is {value!r}", "a string")
    return value


def _fc_config(path: Path, key: str, index: int, label: object) -> FCConfig:
    """The FC configuration of a label, or LegacyError (wrapping the ConfigError)."""
    text = _text(path, key, index, label)
    try:
        config = families.parse_label("fc", text)
    except ConfigError as exc:
        detail = "" if exc.field == "label" else f" ({exc})"  # e.g. a zero layer count
        raise _fail(path, f"{key}[{index}] {text!r} is not an FC label{detail}", families.label_format("fc")) from exc
    assert isinstance(config, FCConfig)
    return config


def _fc(label: str) -> FCConfig:
    """The FC configuration of a label already checked (the original study's own)."""
    config = families.parse_label("fc", label)
    assert isinstance(config, FCConfig)
    return config


def _unique(path: Path, key: str, labels: list[str]) -> None:
    """Each label once: the store keeps one row per (file, platform, label, state)."""
    seen: set[str] = set()
    for label in labels:
        if label in seen:
            raise _fail(path, f"label {label!r} appears more than once in {key}", "each configuration once per list")
        seen.add(label)


# ------------------------------------------------------------------ building rows


def _base_record(config: FCConfig, plat: LegacyPlatform, source: str, state: str, error: str | None) -> dict:
    """The columns every row of a legacy sweep has: configuration, platform, counts."""
    return {
        "family": "fc",
        "family_version": FC_VERSION,
        "label": config.label,
        **config.hyperparameters(),
        "dtype": plat.dtype,
        "compute_dtype": plat.compute_dtype,
        "xla": plat.xla,
        "input_mode": ORIGINAL_INPUT,
        "platform": plat.name,
        "platform_fingerprint": plat.fingerprint,
        "device_name": plat.device_name,
        "state": state,
        "error": error,
        "params": counting.count_params(config),
        "flops_model": counting.flops_model(config),
        "bytes_estimate": replica_bytes(config, plat),
        "peak_flops": plat.peak_flops,
        "peak_source": f"datasheet:{plat.name}",
        "n_samples": None,
        "started_at": None,  # unknown: measured in 2019, not at import time
        "finished_at": None,
        "source": source,
    }


def replica_bytes(config: FCConfig, plat: LegacyPlatform) -> float:
    """Bytes one step moves on the whole board: each of its ``cores`` replicas holds every weight and
    runs ``batch / cores`` examples (the TPU v2-8 ran data-parallel on 8 cores), so the model's
    operational intensity is a replica's, as the study's traces measure it per core."""
    replica = dataclasses.replace(config, batch=max(1, config.batch // plat.cores))
    return float(counting.bytes_estimate(replica, plat.dtype) * plat.cores)


def _ok_record(config: FCConfig, values: dict[str, float], plat: LegacyPlatform, source: str) -> dict:
    """A finished configuration: the study's figures in whole-device units."""
    flops_per_sec = values["flops"] * 1e9 * plat.cores
    return {
        **_base_record(config, plat, source, "ok", None),
        "flops_graph": values["fl"] * 1e9 * plat.cores,
        "examples_per_sec": values["example_per_sec"],
        "step_time_s": 1.0 / values["step_per_sec"],
        "flops_per_sec": flops_per_sec,
        "utilization": flops_per_sec / plat.peak_flops,
        "extra": {k: values[k] for k in EXTRA_KEYS},
    }


def state_of(text: str) -> str:
    """Store state of an ``err_jobs`` state text: ``OOM`` -> oom, not finished -> timeout."""
    return STATE_TEXTS.get(text.strip().lower(), "error")


def _sweep(path: Path, data: dict, plat: LegacyPlatform) -> LegacyFile:
    lists = _lists(path, data, SWEEP_KEYS)
    n = _same_length(path, lists, ("labels", *SWEEP_NUMBERS))
    _same_length(path, lists, ("err_jobs", "states"))
    source = source_of(path)
    records = []
    for i in range(n):
        config = _fc_config(path, "labels", i, lists["labels"][i])
        values = {k: _number(path, k, i, lists[k][i]) for k in SWEEP_NUMBERS}
        for rate in ("step_per_sec", "example_per_sec", "flops"):
            if values[rate] <= 0:
                raise _fail(path, f"{rate}[{i}] is {values[rate]!r}", "a positive rate")
        for count in ("params", "fl", "intensity"):
            if values[count] < 0:
                raise _fail(path, f"{count}[{i}] is {values[count]!r}", "a count of 0 or more")
        records.append(_ok_record(config, values, plat, source))
    failed = []
    for i, (label, text) in enumerate(zip(lists["err_jobs"], lists["states"])):
        config = _fc_config(path, "err_jobs", i, label)
        text = _text(path, "states", i, text)
        failed.append(_base_record(config, plat, source, state_of(text), text))
    _unique(path, "labels", [r["label"] for r in records])
    _unique(path, "err_jobs", [r["label"] for r in failed])
    return LegacyFile(path, "sweep", plat, results=records + failed)


def _split_category(path: Path, index: int, label: object) -> tuple[FCConfig, str]:
    """``<configuration label>-<op category>``: the first five dash-separated fields, the rest."""
    text = _text(path, "labels", index, label)
    parts = text.split("-")
    category = "-".join(parts[FC_LABEL_FIELDS:]).strip()
    if not category:
        raise _fail(path, f"labels[{index}] {text!r} has no op category", f"{families.label_format('fc')}-<op category>")
    return _fc_config(path, "labels", index, "-".join(parts[:FC_LABEL_FIELDS])), category


def _traces(path: Path, data: dict, plat: LegacyPlatform, breakdown: bool) -> LegacyFile:
    fields = BREAKDOWN_FIELDS if breakdown else TRACE_FIELDS
    lists = _lists(path, data, ("labels", *fields.values()))
    n = _same_length(path, lists, ("labels", *fields.values()))
    source = source_of(path)
    rows, seen = [], set()
    for i in range(n):
        if breakdown:
            config, category = _split_category(path, i, lists["labels"][i])
        else:
            config, category = _fc_config(path, "labels", i, lists["labels"][i]), WHOLE
        if (config.label, category) in seen:
            raise _fail(path, f"labels[{i}] {lists['labels'][i]!r} appears more than once", "each label once")
        seen.add((config.label, category))
        row: dict[str, object] = {"source": source, "platform": plat.name, "label": config.label, "category": category}
        for column, key in fields.items():
            value = _number(path, key, i, lists[key][i], finite=False)
            row[column] = value if math.isfinite(value) else None  # e.g. 0/0 intensity of empty ops
        rows.append(row)
    return LegacyFile(path, "breakdown" if breakdown else "trace", plat, traces=rows)


def load_file(path: str | Path, platform: str | None = None) -> LegacyFile:
    """Read and validate one legacy file; raises LegacyError, writes nothing."""
    path = Path(path)
    plat = resolve_platform(path, platform)
    data = _read_json(path, plat.name)
    kind = _kind(path, data)
    if kind == "sweep":
        return _sweep(path, data, plat)
    return _traces(path, data, plat, breakdown=kind == "breakdown")


# ------------------------------------------------------------------ writing


def _record_platform(store: Store, plat: LegacyPlatform) -> str:
    """Record the study's platform once (re-recording it would only change the timestamp); returns the
    name its rows take: the device's own, or the one a merge renamed its record to (``--rename
    v100=gpu-2019``), so an import into a renamed store adds nothing twice and strands nothing."""
    info = {"name": plat.device_name, "datasheet": plat.name, "source": STUDY}
    known = store.platform(plat.fingerprint)
    if known and known["source"] == LEGACY and known["platform"] != plat.name:
        return known["platform"]
    if known and known["platform"] == plat.name and known["info"] == info and known["source"] == LEGACY:
        return plat.name
    store.put_platform(fingerprint=plat.fingerprint, platform=plat.name, info=info, ceilings=None, source=LEGACY)
    return plat.name


def _named(rows: list[dict], name: str, plat: LegacyPlatform) -> list[dict]:
    """Rows under ``name``, keeping the device they were measured on as their platform id."""
    if name == plat.name:
        return rows
    return [{**r, "platform": name, "platform_id": plat.name} if "platform" in r else r for r in rows]


def import_files(store: Store, paths: Iterable[str | Path], platform: str | None = None) -> dict:
    """Import legacy files into ``store``; all are validated before anything is written.

    ``platform`` overrides the platform the file names imply (``tpu-v2-8`` or ``v100``).
    Returns ``{"files": {name: {"kind", "platform", "rows", "added"}}, "results_added",
    "traces_added"}``, where ``rows`` is what the file holds and ``added`` what was new.
    """
    files = [load_file(p, platform) for p in paths]
    summary: dict = {"files": {}, "results_added": 0, "traces_added": 0}
    for f in files:
        name = _record_platform(store, f.platform)
        if f.kind == "sweep":
            added = store.add_results(_named(f.results, name, f.platform), ignore_duplicates=True)
            summary["results_added"] += added
        else:
            added = store.add_traces(_named(f.traces, name, f.platform))
            summary["traces_added"] += added
        entry = summary["files"].setdefault(f.path.name, {"kind": f.kind, "platform": f.platform.name, "rows": 0, "added": 0})
        entry["rows"] += len(f.results) + len(f.traces)
        entry["added"] += added
    return summary


def bundled_dir() -> Path:
    """The folder of the original study's files shipped with the package."""
    return Path(__file__).resolve().parents[1] / "data" / "paradnn-2019"


def bundled_files() -> list[Path]:
    """The shipped files, each checked against its SHA-256; LegacyError if one is missing or altered."""
    paths = []
    for name, digest in BUNDLED.items():
        path = bundled_dir() / name
        try:
            actual = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise LegacyError(f"{path}: the bundled file cannot be read ({exc}); reinstall paradnn") from None
        if actual != digest:
            raise LegacyError(f"{path}: SHA-256 {actual} is not the original release's {digest}; reinstall paradnn")
        paths.append(path)
    return paths


def import_bundled(store: Store) -> dict:
    """Import the shipped files of the original study (adds nothing when they are already in)."""
    return import_files(store, bundled_files())


# ------------------------------------------------------------------ the original grids as a preset

OVERLAP = "overlap"  # the preset name: the original study's FC configurations, cheapest first
OVERLAP_WITH = ("both", "either")


@functools.lru_cache(maxsize=1)
def bundled_rows():
    """The bundled sweeps' finished rows, each with what bound its step (``bound``, ``bound_why``:
    :mod:`paradnn.store.bounds`, from the bundled traces and rates), as a pandas frame."""
    import pandas as pd

    from paradnn.store.bounds import row_bounds

    loaded = [load_file(path) for path in bundled_files()]
    rows = pd.DataFrame([row for f in loaded for row in f.results if row.get("state") == OK])
    return rows.join(row_bounds(rows, pd.DataFrame([row for f in loaded for row in f.traces])))


def _finished() -> dict[str, dict[str, tuple[float, str]]]:
    """Per original platform, the labels its bundled sweep finished: their model FLOPs per step and
    what bound the step there."""
    rows = bundled_rows()
    done: dict[str, dict[str, tuple[float, str]]] = {}
    for platform, label, flops, bound in zip(rows["platform"], rows["label"], rows["flops_model"], rows["bound"]):
        done.setdefault(platform, {})[label] = (float(flops), bound)
    return done


def overlap_configs(count: int | None = None, overrides: dict | None = None, within: str = "both") -> list[FCConfig]:
    """FC configurations the original study finished on its TPU v2-8 and V100 (``within="both"``,
    and where neither platform's step waited on its input: the chips were the bound) or on either
    (any bound), cheapest first (fewest model FLOPs per step), at most ``count``: what this machine
    can measure to stand beside both platforms on their own grid. ``overrides`` keep only the
    configurations whose axis values are listed (``{"layers": [4, 8]}``)."""
    from paradnn.store.bounds import CHIP

    if within not in OVERLAP_WITH:
        raise ConfigError("within", within, ", ".join(OVERLAP_WITH))
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise ConfigError("count", count, "a whole number of configurations, 0 or more")
    sweeps = list(_finished().values())
    if within == "both":
        labels = {label for label in set.intersection(*map(set, sweeps)) if all(s[label][1] == CHIP for s in sweeps)}
    else:
        labels = set.union(*map(set, sweeps))
    flops = {label: f for sweep in sweeps for label, (f, _) in sweep.items()}
    configs = sorted((_fc(label) for label in labels), key=lambda c: (flops[c.label], c.layers, c.label))
    for name, values in (overrides or {}).items():
        if name not in FCConfig.axes():
            raise ConfigError("overrides", name, "an FC axis: " + ", ".join(FCConfig.axes()))
        configs = [c for c in configs if getattr(c, name) in set(values)]
    return configs[:count] if count is not None else configs


OVERLAP_PRESET = "paper-overlap"  # sweep --preset paper-overlap: the original study's own FC grid


def grid_of(family: str, preset: str, overrides: dict | None = None) -> list:
    """A sweep's configurations: a family's preset grid (:func:`paradnn.space.expand`), or with
    ``paper-overlap`` the FC configurations the original study finished on both its TPU v2-8 and
    V100 (:func:`overlap_configs`, cheapest first; ``overrides`` keep the listed axis values)."""
    from paradnn.space import expand

    if preset != OVERLAP_PRESET:
        return expand(family, preset, overrides)
    if family != "fc":
        raise ConfigError(
            "--preset",
            preset,
            f"{OVERLAP_PRESET} with the fc family only (the original study's sweeps are FC), or smoke, quick or paper",
        )
    configs = overlap_configs(None, overrides)
    if not configs:  # a filter that keeps nothing is a mistake, not an empty sweep
        every = overlap_configs(None)
        held = "; ".join(
            f"{name} " + ", ".join(map(str, sorted({getattr(c, name) for c in every}))) for name in (overrides or {})
        )
        raise ConfigError("--set", overrides, f"values of the {OVERLAP_PRESET} configurations, which hold {held}")
    return configs
