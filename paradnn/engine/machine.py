"""The machine a run is on: its identity and software stack, and its thread settings.

:func:`describe` is what the store keeps per platform and what the run identity's
fingerprint is computed from. TensorFlow is imported lazily, inside the functions.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import platform as pyplatform
import signal
import subprocess
from pathlib import Path

from paradnn.config import ConfigError
from paradnn.identity import ISA_FLAGS
from paradnn.platform import Target, cpu_theoretical_peak, datasheet_for
from paradnn.version import __version__


def apply_threads(target: Target) -> None:
    """Limit TensorFlow's thread pools (and PyTorch's, where Keras runs on it); must run before either
    executes anything."""
    if target.threads:
        from paradnn.tfimport import keras, tf

        tf.config.threading.set_intra_op_parallelism_threads(target.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        if keras.backend.backend() == "torch":
            import torch

            torch.set_num_threads(target.threads)


def _cpuinfo(field: str) -> str:
    """The first ``field`` of ``/proc/cpuinfo`` ("model name", "flags"), or '' where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _cpu_name() -> str:
    return _cpuinfo("model name") or pyplatform.processor() or pyplatform.machine()


def _cpu_flags() -> set[str]:
    return set(_cpuinfo("flags").split())


def _max_ghz() -> float | None:
    """The CPU's maximum clock as cpufreq reports it, or None where it is not exposed (most VMs)."""
    try:
        return int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1e6
    except (OSError, ValueError):
        return None


def _memory_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def git_revision() -> str:
    """The paradnn source's git revision (``+dirty`` when modified), or '' if unknown."""
    here = Path(__file__).resolve().parents[1]  # the paradnn package

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
    backend = keras.backend.backend()
    if backend in ("jax", "torch"):  # Keras runs on JAX or PyTorch in this process: its version shapes timings
        stack[backend] = importlib.import_module(backend).__version__
    return stack


def installed_packages() -> dict[str, str]:
    """Every distribution installed where this process runs, and its version: a software stack's
    full list, kept in its platform record beside the versions that join the run identity."""
    from importlib import metadata

    return dict(sorted((d.metadata["Name"], d.version) for d in metadata.distributions() if d.metadata["Name"]))


def accelerator_name(target: Target) -> str:
    """The name of ``target``'s accelerator as TensorFlow reports it; ConfigError where this machine lacks it."""
    from paradnn.tfimport import tf

    devices = tf.config.list_physical_devices(target.kind.upper())
    if target.index >= len(devices):
        raise ConfigError("platform", target.id, f"{len(devices)} {target.kind.upper()} device(s) on this machine")
    details = tf.config.experimental.get_device_details(devices[target.index])
    return str(details.get("device_name", target.kind.upper()))


def cpu_identity(target: Target) -> dict:
    """What names a CPU target's machine in a store (:func:`paradnn.store.names.machine`), read from the
    host without TensorFlow: enough to refuse a platform name that another machine holds before a
    worker starts. :func:`describe` says the same and more."""
    return {
        "id": target.id,
        "name": _cpu_name(),
        "cores": os.cpu_count() or 1,
        "memory_bytes": _memory_bytes(),
        "isa": sorted(set(ISA_FLAGS) & _cpu_flags()),  # the host's vector units: with the memory, what tells hosts apart
    }


def describe(target: Target | None = None) -> dict:
    """Identity and software stack of ``target`` (default: this machine's CPU)."""
    from paradnn.tfimport import tf

    target = target or Target()
    host = cpu_identity(target)
    info = {
        "id": target.id,
        "kind": target.kind,
        "device": target.tf_device,
        "name": host["name"] if target.kind == "cpu" else accelerator_name(target),
        "host": pyplatform.node(),
        "cpu": host["name"],
        "cores": host["cores"],
        "threads": target.threads,
        "memory_bytes": host["memory_bytes"],
        "isa": host["isa"],
        "devices": {k: len(tf.config.list_physical_devices(k)) for k in ("CPU", "GPU", "TPU")},
        "software": software_stack(),
        "packages": installed_packages(),
    }
    if target.kind == "cpu":
        info["theoretical"] = cpu_theoretical_peak(_cpu_flags(), target.threads or info["cores"], _max_ghz())
    sheet = datasheet_for(info["name"]) if target.kind != "cpu" else None
    info["datasheet"] = sheet.name if sheet else None
    return info


def die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies, and to pick it first on OOM (workers, replicas)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    try:
        Path("/proc/self/oom_score_adj").write_text("1000")
    except OSError:
        pass
