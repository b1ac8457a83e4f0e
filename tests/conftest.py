"""Shared fixtures: the original study's data and an isolated ceilings cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Path(os.environ.get("PARADNN_REFERENCE", ROOT.parent / "shared" / "reference" / "paradnn-2019"))


@pytest.fixture(scope="session")
def reference() -> Path:
    """The folder holding the original ParaDnn JSON files (read in place, never copied)."""
    if not (REFERENCE / "gpu_fc.json").exists():
        pytest.skip(f"reference data not found at {REFERENCE} (set PARADNN_REFERENCE)")
    return REFERENCE


@pytest.fixture(scope="session", autouse=True)
def ceilings_cache(tmp_path_factory) -> Path:
    """Measure this machine's ceilings at most once per test session, in a private cache."""
    path = tmp_path_factory.mktemp("cache")
    os.environ["PARADNN_CACHE_DIR"] = str(path)
    return path
