"""Shared fixtures: the original study's data (shipped copy and oracle), an isolated cache, one Ray at a time.

The suite runs on every core (pytest-xdist, one file per worker); what two files must not do at once takes a lock.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORACLE = Path(os.environ.get("PARADNN_REFERENCE", ROOT.parent / "shared" / "reference" / "paradnn-2019"))


@pytest.fixture(scope="session")
def reference() -> Path:
    """The original ParaDnn JSON files as shipped with the package (checksums verified)."""
    from paradnn.store.legacy import bundled_dir, bundled_files

    bundled_files()
    return bundled_dir()


@pytest.fixture(scope="session")
def oracle() -> Path:
    """The same files from the project's shared folder: an independent copy to compare against."""
    if not (ORACLE / "gpu_fc.json").exists():
        pytest.skip(f"reference data not found at {ORACLE} (set PARADNN_REFERENCE)")
    return ORACLE


@pytest.fixture(scope="session", autouse=True)
def ceilings_cache(tmp_path_factory) -> Path:
    """Measure this machine's ceilings about once per test run, in a cache private to the run and
    shared by its xdist workers (their common base folder; writes to the cache are atomic)."""
    base = tmp_path_factory.getbasetemp()
    path = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "cache"
    path.mkdir(exist_ok=True)
    os.environ["PARADNN_CACHE_DIR"] = str(path)
    return path


@pytest.fixture(scope="module")
def ray_alone():
    """Hold the machine's one Ray lock: two local Ray clusters started at once by two workers may collide."""
    with open(Path(tempfile.gettempdir()) / "paradnn-tests-ray.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
