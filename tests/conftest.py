"""Shared fixtures: the original study's data (shipped copy and oracle), an isolated cache, one Ray at a time.

The suite runs on every core (pytest-xdist, one file per worker, so a module's shared fixture such as the smoke
pipeline runs once), the longest files first; what two files must not do at once takes a lock.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORACLE = Path(os.environ.get("PARADNN_REFERENCE", ROOT.parent / "shared" / "reference" / "paradnn-2019"))


# Test files in descending order of their time in a fresh-clone run (2026-12-03, 2 vCPU AMD EPYC: the smoke pipeline
# 550 s, benchmarks 300 s, sweep 244 s); the rest follow in file order. xdist hands out files in this order, so the
# last to start is a short one. The smoke pipeline's file holds nothing else, so the other worker takes the rest
# meanwhile; the two files that start Ray clusters come next, one after the other on that worker, never waiting
# for each other's lock.
LONGEST_FIRST = ("test_reports", "test_benchmarks", "test_cluster", "test_report_runs", "test_sweep", "test_predict",
                 "test_merge", "test_stacks", "test_families", "test_harness", "test_cli", "test_parallel",
                 "test_frameworks", "test_inputs", "test_workloads")  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the longest files first (a stable sort: the order within a file is kept)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))


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


def _run_folder(tmp_path_factory, name: str) -> Path:
    """A folder private to this test run and shared by its xdist workers (their common base folder)."""
    base = tmp_path_factory.getbasetemp()
    path = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session", autouse=True)
def ceilings_cache(tmp_path_factory) -> Path:
    """Measure this machine's ceilings about once per test run, in a cache private to the run and
    shared by its xdist workers (writes to the cache are atomic)."""
    path = _run_folder(tmp_path_factory, "cache")
    os.environ["PARADNN_CACHE_DIR"] = str(path)
    return path


@pytest.fixture(scope="session", autouse=True)
def contention_recorded_not_refused() -> None:
    """The suite measures on every core at once on purpose: timing windows record their
    contention but are not refused and timed again (tests of the refusal set their own limit)."""
    from paradnn.engine.contention import CONTENTION_ENV

    os.environ[CONTENTION_ENV] = "off"


@pytest.fixture(scope="session", autouse=True)
def run_tmpdir(tmp_path_factory) -> Path:
    """The run's TMPDIR, for its processes and those they start: tests kill workers and kernels on
    purpose, and a killed process leaves TensorFlow's autograph files and its folders behind. pytest
    removes old runs' folders; /tmp keeps nothing of the suite."""
    path = _run_folder(tmp_path_factory, "tmp")
    # Ray reads TMPDIR too, and its sockets' paths must stay under 108 bytes: it keeps its own folder.
    os.environ.setdefault("RAY_TMPDIR", tempfile.gettempdir())
    os.environ["TMPDIR"] = str(path)
    tempfile.tempdir = None  # computed again from TMPDIR on next use
    return path


@pytest.fixture(scope="module")
def ray_alone():
    """Hold the machine's one Ray lock: two local Ray clusters started at once by two workers may collide."""
    with open(Path(tempfile.gettempdir()) / "paradnn-tests-ray.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _report(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "paradnn.cli", "report", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=ROOT)  # fmt: skip


@pytest.fixture(scope="session")
def report() -> Callable[..., subprocess.CompletedProcess]:
    """``paradnn report ARGS...`` in a fresh process from the repository root, its output captured
    (``env``: variables set for it)."""
    return _report


def _chromium_dom(page: Path, tmp_path: Path) -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", f"--user-data-dir={tmp_path / 'profile'}",
             "--virtual-time-budget=10000", "--dump-dom"]  # fmt: skip
    result = subprocess.run([browser, *flags, page.as_uri()], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.fixture(scope="session")
def chromium_dom() -> Callable[[Path, Path], str]:
    """The DOM of a page after Debian's headless Chromium has loaded it (skips where Chromium is missing)."""
    return _chromium_dom
