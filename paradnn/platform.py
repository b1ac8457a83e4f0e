"""Platforms as vocabulary: the target a run names, and the datasheet peaks of known devices.

A platform is a device kind plus settings: ``cpu``, ``cpu[threads=1]``, ``gpu:0``.
What a machine *is* (identity, software stack) is read by :mod:`paradnn.engine.machine`;
its *measured* ceilings live in :mod:`paradnn.engine.ceilings`; :func:`peak` chooses
between datasheet and measurement (on a CPU the measured ceiling is the peak used for
utilisation). Nothing here imports TensorFlow, so analyses and the store can use it.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass

from paradnn.config import ConfigError, compute_dtype


@dataclass(frozen=True)
class Datasheet:
    """Vendor peaks: FLOP/s per compute dtype and memory bandwidth in bytes/s."""

    name: str
    peak_flops: dict[str, float]
    memory_bandwidth: float
    note: str = ""
    memory_bytes: float = 0.0  # device memory (HBM) of the whole device or board; 0: not stated
    replicas: int = 1  # copies of the model the device holds in data parallel (a TPU board: one per core)

    @property
    def replica_memory(self) -> float | None:
        """Memory one replica of a model has (a TPU v2-8 core its own 8 GiB); None where not stated."""
        return self.memory_bytes / self.replicas if self.memory_bytes else None


T = 1e12
GiB = 2**30
DATASHEETS: dict[str, Datasheet] = {
    d.name: d
    for d in [
        # The TPUs' matrix units multiply in bfloat16; their datasheets state no float32 rate.
        Datasheet("tpu-v2-8", {"bfloat16": 180 * T}, 2400e9, "board of 8 cores; bf16 matmul", 64 * GiB, 8),
        Datasheet("tpu-v3-8", {"bfloat16": 420 * T}, 3600e9, "board of 8 cores; bf16 matmul", 128 * GiB, 8),
        Datasheet("v100", {"float32": 15.7 * T, "float16": 125 * T}, 900e9, "SXM2; float16 on Tensor Cores", 16 * GiB),
        Datasheet(
            "a100", {"float32": 19.5 * T, "tf32": 156 * T, "bfloat16": 312 * T, "float16": 312 * T}, 2039e9, "SXM 80 GB", 80 * GiB
        ),
        Datasheet(
            "h100", {"float32": 67 * T, "tf32": 495 * T, "bfloat16": 989 * T, "float16": 989 * T}, 3350e9, "SXM, dense", 80 * GiB
        ),
        Datasheet(
            "h200", {"float32": 67 * T, "tf32": 495 * T, "bfloat16": 989 * T, "float16": 989 * T}, 4800e9, "SXM, dense", 141e9
        ),
    ]
}

# A CPU's theoretical peak, from what the machine exposes: vector width (flags), cores and its
# maximum clock (cpufreq). The FMA units per core are not exposed anywhere; two is what server
# x86 cores have had since Haswell, so the figure is an upper bound (Zen 4 splits a 512-bit FMA
# into two 256-bit halves and reaches half of it at 512 bits).
FMA_UNITS = 2
AMX_BF16_FLOPS_PER_CYCLE = 1024  # Intel's figure per core for AMX tiles in bfloat16


def cpu_flops_per_cycle(flags: set[str]) -> dict[str, tuple[float, str]]:
    """FLOPs per cycle and core by compute dtype, with how each was formed: FMA units x float32
    lanes x 2 (multiply and add); bfloat16 doubles that with AVX512_BF16's dot products, or is
    the AMX tile rate where the core has AMX."""
    lanes = 16 if "avx512f" in flags else 8 if {"avx2", "fma"} <= flags else 4
    float32 = FMA_UNITS * lanes * 2.0
    fp32_basis = f"{FMA_UNITS} FMA units (assumed) x {lanes} float32 lanes x 2 FLOPs"
    if "amx_bf16" in flags:
        bfloat16 = (float(AMX_BF16_FLOPS_PER_CYCLE), f"{AMX_BF16_FLOPS_PER_CYCLE} AMX FLOPs")
    elif "avx512_bf16" in flags:
        bfloat16 = (2 * float32, fp32_basis + " x 2 (AVX512_BF16 pairs)")
    else:
        bfloat16 = (float32, fp32_basis + " (bfloat16 computed in float32)")
    return {"float32": (float32, fp32_basis), "bfloat16": bfloat16}


def cpu_theoretical_peak(flags: set[str], cores: int, max_ghz: float | None) -> dict:
    """The CPU's theoretical FLOP/s per dtype (cores x FLOPs per cycle x maximum clock) and how it
    was formed. Without an exposed maximum clock (most VMs: no cpufreq) there is no peak, only the
    per-cycle figure: the nominal clock a VM reports is below the turbo clock a matmul runs at."""
    per_cycle = cpu_flops_per_cycle(flags)
    clock = f" x {max_ghz:.2f} GHz" if max_ghz else " per cycle"
    return {
        "flops_per_cycle": {d: cores * f for d, (f, _) in per_cycle.items()},
        "max_ghz": max_ghz,
        "peak_flops": {d: cores * f * max_ghz * 1e9 for d, (f, _) in per_cycle.items()} if max_ghz else {},
        "basis": {d: f"{cores} cores x {how}{clock}" for d, (_, how) in per_cycle.items()},
    }


def theoretical_sentence(theoretical: dict | None, measured: float, dtype: str) -> str:
    """One sentence setting a measured ``dtype`` ceiling beside the CPU's theoretical peak, or
    saying what the machine does not expose (with the clock the ceiling implies)."""
    if not theoretical or dtype not in theoretical.get("flops_per_cycle", {}):
        return ""
    peak_flops = theoretical["peak_flops"].get(dtype)
    if peak_flops and measured > peak_flops:
        return (
            f"The measured {dtype} ceiling ({measured / 1e9:,.0f} GFLOP/s) exceeds the {peak_flops / 1e9:,.0f} GFLOP/s "
            f"of {theoretical['basis'][dtype]}: an assumption behind that figure does not hold on this CPU."
        )
    if peak_flops:
        return (
            f"Theoretical {dtype} peak {peak_flops / 1e9:,.0f} GFLOP/s ({theoretical['basis'][dtype]}); "
            f"the measured ceiling is {measured / peak_flops:.0%} of it."
        )
    implied = measured / theoretical["flops_per_cycle"][dtype] / 1e9
    return (
        f"Theoretical {dtype} peak not known here: the machine does not expose its maximum clock "
        f"({theoretical['basis'][dtype]} = {theoretical['flops_per_cycle'][dtype]:.0f} FLOPs per cycle); "
        f"the measured ceiling implies at least {implied:.2f} GHz at that rate."
    )


@dataclass(frozen=True)
class Target:
    """Where to run: a device kind, its index, a CPU thread count (None: all), and the name
    people call the platform by (``sweep --name``; None: its id)."""

    kind: str = "cpu"
    index: int = 0
    threads: int | None = None
    name: str | None = None

    @property
    def id(self) -> str:
        base = "cpu" if self.kind == "cpu" else f"{self.kind}:{self.index}"
        return f"{base}[threads={self.threads}]" if self.threads else base

    @property
    def platform(self) -> str:
        """The platform as stored and addressed (a result's ``platform``): its name, else its id."""
        return self.name or self.id

    def named(self, name: str | None) -> Target:
        """This target called ``name`` (checked by :func:`platform_name`); None or its own id: unnamed."""
        name = platform_name(name, self) if name else None
        return Target(self.kind, self.index, self.threads, None if name == self.id else name)

    def fields(self) -> dict:
        """A record's platform fields: ``platform`` (the name) and, for a named one, ``platform_id``
        (the id its run identity holds: naming a platform never changes a run key)."""
        return {"platform": self.platform, **({"platform_id": self.id} if self.name else {})}

    @property
    def tf_device(self) -> str:
        return f"/{self.kind.upper()}:{self.index}"


def parse_target(text: str) -> Target:
    """Parse a platform this machine can run on: ``cpu``, ``cpu[threads=N]`` or ``gpu:N``.

    A thread limit goes from 1 to this machine's cores. ``cpu[threads:N]`` is accepted as
    well: papermill cannot read a notebook parameter whose
    line holds a second ``=``. ``tpu:N`` is refused: nothing here initialises a TPU, and no
    TPU path has been run on one (the original study's TPU rows are imported, not measured).
    """
    if re.fullmatch(r"tpu(:[0-9]+)?", text.strip()):
        raise ConfigError(
            "platform",
            text,
            "cpu, cpu[threads=N] or gpu:N (no TPU path exists yet: TPU results come "
            "from imported stores, e.g. the original study's tpu-v2-8)",
        )
    m = re.fullmatch(r"(cpu|gpu)(?::([0-9]{1,4}))?(?:\[threads[=:]([0-9]{1,9})\])?", text.strip())  # ASCII digits
    if not m or (m.group(3) is not None and int(m.group(3)) < 1):
        raise ConfigError("platform", text, "cpu, cpu[threads=N] or gpu:N")
    cores = os.cpu_count() or 1
    if m.group(3) is not None and int(m.group(3)) > cores:  # more threads than cores never finishes anything faster
        raise ConfigError("platform", text, f"cpu[threads=N] with N from 1 to this machine's {cores} cores")
    return Target(m.group(1), int(m.group(2) or 0), int(m.group(3)) if m.group(3) else None)


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def folded(name: str) -> str:
    """``name`` as names are compared: Unicode-normalised (NFKC: a full-width ``ｖ１００`` is ``v100``) and
    case-folded (``GPU`` is ``gpu``), so no name passes for a reserved one by its case or width."""
    return unicodedata.normalize("NFKC", name).strip().casefold()


def device_id(name: str) -> bool:
    """True for a device id (``cpu``, ``gpu:0``, ``TPU``), in any case or width."""
    return re.fullmatch(r"(cpu|gpu|tpu)(:[0-9]+)?", folded(name)) is not None


def platform_name(text: object, target: Target | None = None) -> str:
    """A platform's name as people give it (``xeon-lab``, ``a100-cloud``): letters, digits and
    ``. _ + -``, at most 64; not another device's id (``--platform cpu --name gpu:0``) nor a
    datasheet's name (``v100``, ``h100``)."""
    if not isinstance(text, str) or not NAME.fullmatch(text.strip()):
        raise ConfigError("--name", text, "a platform name: letters, digits and . _ + - (at most 64), e.g. xeon-lab")
    text = text.strip()
    if device_id(text) and (target is None or text != target.id):
        raise ConfigError("--name", text, "a name of your own (e.g. xeon-lab), not a device id such as cpu or gpu:0")
    if folded(text) in DATASHEETS:  # kept for the datasheet and the original study's rows (paradnn.store.names)
        raise ConfigError(
            "--name",
            text,
            f"a name of your own (e.g. {text}-lab), not a datasheet's name such as v100 or h100, "
            "which stand for that datasheet and the original study's rows",
        )
    return text


def datasheet_for(name: str) -> Datasheet | None:
    """The datasheet of a device name such as 'NVIDIA H200' or 'tpu-v2-8', if known."""
    key = name.lower()
    for sheet_name, sheet in DATASHEETS.items():
        if sheet_name in key or sheet_name.replace("-", " ") in key:
            return sheet
    return None


def peak(info: dict, ceil: dict, policy: str) -> tuple[float, str]:
    """The FLOP/s peak for ``policy`` and where it came from.

    A datasheet peak where the device has one for that dtype, else the best measured
    matmul rate for that dtype (XLA on or off).
    """
    dtype = compute_dtype(policy)
    sheet = DATASHEETS.get(info.get("datasheet") or "")
    if sheet and dtype in sheet.peak_flops:
        return sheet.peak_flops[dtype], f"datasheet:{sheet.name}"
    measured = ceil.get("matmul_flops", {}).get(dtype, {})
    if measured:
        return max(measured.values()), "measured"
    return float("nan"), "unknown"
