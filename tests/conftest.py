"""Shared fixtures: the original study's data (shipped copy and oracle), an isolated cache, one Ray at a time.

The suite runs on every core (pytest-xdist, one file per worker, so a module's shared fixture such as the smoke
pipeline runs once), the longest files first; what two files must not do at once takes a lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

ROOT = Path(__file__).resolve().parents[1]
ORACLE = Path(os.environ.get("PARADNN_REFERENCE", ROOT.parent / "shared" / "reference" / "paradnn-2019"))


# The suite's order and its quick tier come from measured durations (tests/durations.json, written by
# `make durations` from a full run): xdist hands out files longest first, so the last to start is a short one;
# `make check` (PARADNN_TIER=check) leaves out every test that took longer than CHECK_SECONDS, its own call or
# a fixture it uses (the smoke pipeline, a docs walk-through, a Ray cluster).
# Hypothesis draws the same examples on every run (derandomize), so a property that held here holds in CI;
# PARADNN_HYPOTHESIS=explore draws new ones each run, to hunt for what the fixed examples miss.
hypothesis_settings.register_profile("fixed", derandomize=True, print_blob=True)
hypothesis_settings.register_profile("explore", print_blob=True)
hypothesis_settings.load_profile(os.environ.get("PARADNN_HYPOTHESIS", "fixed"))

DURATIONS = ROOT / "tests" / "durations.json"
DURATIONS_ENV = "PARADNN_RECORD_DURATIONS"
TIER_ENV = "PARADNN_TIER"
CHECK_SECONDS = 2.0


def _recorded() -> dict:
    return json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {"files": {}, "calls": {}, "fixtures": {}}


def _too_slow_for_check(item: pytest.Item, recorded: dict) -> bool:
    """A test whose call, or one of whose fixtures, took longer than CHECK_SECONDS in the recorded run;
    a test not recorded yet counts as slow only when marked so."""
    if item.get_closest_marker("slow"):
        return True
    fixtures = recorded["fixtures"]
    heavy_fixture = any(fixtures.get(name, 0.0) > CHECK_SECONDS for name in getattr(item, "fixturenames", ()))
    return heavy_fixture or recorded["calls"].get(item.nodeid, 0.0) > CHECK_SECONDS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the longest files first (a stable sort keeps the order within a file); in the check tier,
    leave out what the recorded run found slow."""
    recorded = _recorded()
    files = recorded["files"]
    items.sort(key=lambda item: -files.get(item.path.name, 0.0))
    if os.environ.get(TIER_ENV) == "check":
        slow = [item for item in items if _too_slow_for_check(item, recorded)]
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item not in set(slow)]


_fixture_seconds: dict[str, float] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """Time every fixture's set-up, to find the heavy ones (their first user pays for them)."""
    started = time.perf_counter()
    yield
    name = fixturedef.argname
    _fixture_seconds[name] = max(_fixture_seconds.get(name, 0.0), time.perf_counter() - started)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """Hand the fixtures timed during this set-up to the report (xdist sends it to the controller)."""
    _fixture_seconds.clear()
    yield
    item.user_properties.append(("fixture_seconds", dict(_fixture_seconds)))


_calls: dict[str, float] = {}
_fixtures: dict[str, float] = {}
_files: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Collect each test's call time, its fixtures' set-up times and each file's total."""
    path = report.nodeid.split("::")[0].rsplit("/", 1)[-1]
    _files[path] = _files.get(path, 0.0) + report.duration
    if report.when == "call":
        _calls[report.nodeid] = round(report.duration, 2)
    for key, value in report.user_properties:
        if key == "fixture_seconds":
            for name, seconds in value.items():
                _fixtures[name] = round(max(_fixtures.get(name, 0.0), seconds), 2)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With PARADNN_RECORD_DURATIONS=1 (`make durations`), write what this run measured for the next runs."""
    if os.environ.get(DURATIONS_ENV) != "1" or hasattr(session.config, "workerinput") or not _calls:
        return
    from paradnn.engine.machine import _cpu_name

    record = {
        "machine": f"{_cpu_name()}, {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d"),
        "files": {k: round(v, 1) for k, v in sorted(_files.items(), key=lambda kv: -kv[1])},
        "fixtures": dict(sorted(_fixtures.items())),
        "calls": dict(sorted(_calls.items())),
    }
    DURATIONS.write_text(json.dumps(record, indent=1) + "\n")


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
    return subprocess.run(
        [sys.executable, "-m", "paradnn.cli", "report", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
    )


def paradnn_here(*args: str) -> subprocess.CompletedProcess:
    """``paradnn ARGS`` run in this process (click's CliRunner) and returned as a finished process: for
    refusals, which start no worker and catch no signal, without an interpreter starting each time."""
    import traceback

    from click.testing import CliRunner

    from paradnn.cli import main

    result = CliRunner().invoke(main, list(args))
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["paradnn", *args], result.exit_code, result.stdout, stderr)


@pytest.fixture(scope="session")
def report() -> Callable[..., subprocess.CompletedProcess]:
    """``paradnn report ARGS...`` in a fresh process from the repository root, its output captured
    (``env``: variables set for it)."""
    return _report


def _chromium_dom(page: Path, tmp_path: Path) -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-sync",
        "--disable-background-networking",
        "--disable-component-update",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=10000",
        "--dump-dom",
    ]
    result = subprocess.run([browser, *flags, page.as_uri()], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.fixture(scope="session")
def chromium_dom() -> Callable[[Path, Path], str]:
    """The DOM of a page after Debian's headless Chromium has loaded it (skips where Chromium is missing)."""
    return _chromium_dom
