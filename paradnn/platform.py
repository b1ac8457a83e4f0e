"""Platforms: what the device is, what software runs it, and its datasheet peaks.

A platform is a device kind plus settings: ``cpu``, ``cpu[threads=1]``, ``gpu:0``.
For each we record identity, the software stack and datasheet peaks (for the paper's
platforms and current accelerators). The *measured* ceilings live in
:mod:`paradnn.ceilings`; :func:`peak` chooses between the two (on a CPU the measured
ceiling is the peak used for utilisation).
"""

from __future__ import annotations

import os
import platform as pyplatform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from paradnn import __version__
from paradnn.config import ConfigError, compute_dtype


@dataclass(frozen=True)
class Datasheet:
    """Vendor peaks: FLOP/s per compute dtype and memory bandwidth in bytes/s."""

    name: str
    peak_flops: dict[str, float]
    memory_bandwidth: float
    note: str = ""


T = 1e12
DATASHEETS: dict[str, Datasheet] = {
    d.name: d
    for d in [
        Datasheet("tpu-v2-8", {"bfloat16": 180 * T, "float32": 180 * T}, 2400e9, "board of 8 cores; bf16 matmul"),
        Datasheet("tpu-v3-8", {"bfloat16": 420 * T, "float32": 420 * T}, 3600e9, "board of 8 cores; bf16 matmul"),
        Datasheet("v100", {"float32": 15.7 * T, "float16": 125 * T}, 900e9, "SXM2; float16 on Tensor Cores"),
        Datasheet("a100", {"float32": 19.5 * T, "tf32": 156 * T, "bfloat16": 312 * T, "float16": 312 * T}, 2039e9, "SXM 80 GB"),
        Datasheet("h100", {"float32": 67 * T, "tf32": 495 * T, "bfloat16": 989 * T, "float16": 989 * T}, 3350e9, "SXM, dense"),
        Datasheet("h200", {"float32": 67 * T, "tf32": 495 * T, "bfloat16": 989 * T, "float16": 989 * T}, 4800e9, "SXM, dense"),
    ]
}

@dataclass(frozen=True)
class Target:
    """Where to run: a device kind, its index, and a CPU thread count (None: all)."""

    kind: str = "cpu"
    index: int = 0
    threads: int | None = None

    @property
    def id(self) -> str:
        base = "cpu" if self.kind == "cpu" else f"{self.kind}:{self.index}"
        return f"{base}[threads={self.threads}]" if self.threads else base

    @property
    def tf_device(self) -> str:
        return f"/{self.kind.upper()}:{self.index}"


def parse_target(text: str) -> Target:
    """Parse a platform id: ``cpu``, ``cpu[threads=N]``, ``gpu:0`` or ``tpu:0``.

    ``cpu[threads:N]`` is accepted as well: papermill cannot read a notebook parameter whose
    line holds a second ``=``.
    """
    m = re.fullmatch(r"(cpu|gpu|tpu)(?::(\d+))?(?:\[threads[=:](\d+)\])?", text.strip())
    if not m or (m.group(3) is not None and int(m.group(3)) < 1):
        raise ConfigError("platform", text, "cpu, cpu[threads=N], gpu:N or tpu:N")
    return Target(m.group(1), int(m.group(2) or 0), int(m.group(3)) if m.group(3) else None)


def apply_threads(target: Target) -> None:
    """Limit TensorFlow's thread pools; must run before TensorFlow executes anything."""
    if target.threads:
        from paradnn.tfimport import tf

        tf.config.threading.set_intra_op_parallelism_threads(target.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return pyplatform.processor() or pyplatform.machine()


def _memory_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def git_revision() -> str:
    """The paradnn source's git revision (``+dirty`` when modified), or '' if unknown."""
    here = Path(__file__).resolve().parent

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True, timeout=5)

    try:
        rev = git("rev-parse", "--short", "HEAD")
        if rev.returncode != 0:
            return ""
        dirty = git("status", "--porcelain", "--", ".").stdout.strip()
        return rev.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return ""


def software_stack() -> dict[str, str]:
    """Versions of everything that shapes a timing."""
    import numpy

    from paradnn.tfimport import keras, tf

    build = tf.sysconfig.get_build_info()
    stack = {
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "python": pyplatform.python_version(),
        "numpy": numpy.__version__,
        "cuda": str(build.get("cuda_version", "")),
        "cudnn": str(build.get("cudnn_version", "")),
        "paradnn": __version__,
        "git": git_revision(),
    }
    if keras.backend.backend() == "jax":  # Keras runs on JAX in this process: its version shapes timings
        import jax

        stack["jax"] = jax.__version__
    return stack


def _accelerator_name(target: Target) -> str:
    from paradnn.tfimport import tf

    devices = tf.config.list_physical_devices(target.kind.upper())
    if target.index >= len(devices):
        raise ConfigError("platform", target.id, f"{len(devices)} {target.kind.upper()} device(s) on this machine")
    details = tf.config.experimental.get_device_details(devices[target.index])
    return str(details.get("device_name", target.kind.upper()))


def datasheet_for(name: str) -> Datasheet | None:
    """The datasheet of a device name such as 'NVIDIA H200' or 'tpu-v2-8', if known."""
    key = name.lower()
    for sheet_name, sheet in DATASHEETS.items():
        if sheet_name in key or sheet_name.replace("-", " ") in key:
            return sheet
    return None


def describe(target: Target | None = None) -> dict:
    """Identity and software stack of ``target`` (default: this machine's CPU)."""
    from paradnn.tfimport import tf

    target = target or Target()
    info = {
        "id": target.id,
        "kind": target.kind,
        "device": target.tf_device,
        "name": _cpu_name() if target.kind == "cpu" else _accelerator_name(target),
        "host": pyplatform.node(),
        "cpu": _cpu_name(),
        "cores": os.cpu_count() or 1,
        "threads": target.threads,
        "memory_bytes": _memory_bytes(),
        "devices": {k: len(tf.config.list_physical_devices(k)) for k in ("CPU", "GPU", "TPU")},
        "software": software_stack(),
    }
    sheet = datasheet_for(info["name"]) if target.kind != "cpu" else None
    info["datasheet"] = sheet.name if sheet else None
    return info


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
