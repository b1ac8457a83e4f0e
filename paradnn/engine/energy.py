"""Energy counters, where the machine exposes one: RAPL on CPUs, NVML on NVIDIA GPUs.

A meter is a function returning a cumulative energy reading in joules. The harness reads
it before and after the timed calls, so a row's ``energy_per_step_j`` is the energy the
device (RAPL: every CPU package, including whatever else ran on it) used per training
step while being timed. Where no counter can be read (no powercap tree, counters readable
by root only, no NVML), there is no meter and the row says nothing: paradnn never
estimates energy from a datasheet TDP.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RAPL_ROOT = Path("/sys/class/powercap")


@dataclass(frozen=True)
class Meter:
    """A cumulative energy counter in joules and the name of where it comes from."""

    source: str
    read: Callable[[], float]


def _package_domains(root: Path) -> list[Path]:
    """Top-level RAPL package domains (``intel-rapl:0``, not the sub-zones ``intel-rapl:0:0``)."""
    return sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)


def rapl_meter(root: Path = RAPL_ROOT) -> Meter | None:
    """The sum of every CPU package's RAPL energy counter, unwrapped; None if none can be read."""
    domains = _package_domains(root)
    try:
        ranges = [int((d / "max_energy_range_uj").read_text()) for d in domains]
        last = [int((d / "energy_uj").read_text()) for d in domains]  # root-only on most kernels since 2020
    except (OSError, ValueError):
        return None
    if not domains:
        return None
    total_uj = [0]

    def read() -> float:
        """Joules since the meter was made, counting each counter's wrap-around."""
        for i, domain in enumerate(domains):
            now = int((domain / "energy_uj").read_text())
            total_uj[0] += now - last[i] if now >= last[i] else ranges[i] - last[i] + now
            last[i] = now
        return total_uj[0] / 1e6

    return Meter(f"rapl ({len(domains)} package(s))", read)


def nvml_meter(index: int) -> Meter | None:
    """NVIDIA GPU ``index``'s total energy counter (Volta and newer), via ``nvidia-ml-py``; None without it."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception:  # noqa: BLE001 - no library, no driver, no such device or no counter: no meter
        return None
    return Meter(f"nvml (gpu {index})", lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3)


def meter_for(device: str) -> Meter | None:
    """The energy meter of a TensorFlow device string (``/CPU:0``: RAPL; ``/GPU:N``: NVML), if readable."""
    kind, _, index = device.strip("/").upper().partition(":")
    if kind == "CPU":
        return rapl_meter()
    if kind == "GPU":
        return nvml_meter(int(index or 0))
    return None
