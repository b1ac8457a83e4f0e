"""The notebooks as committed: thin, without outputs, and with parameters papermill can read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_are_one_assignment_per_line(path):
    """papermill cannot read a parameter whose line holds a second '=' (in a default or a comment)."""
    cells = json.loads(path.read_text())["cells"]
    (parameters,) = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]
    lines = [line for line in parameters["source"] if line.strip()]
    assert lines and all(line.count("=") == 1 for line in lines), [line for line in lines if line.count("=") != 1]
    assert any(line.startswith("backend:") for line in lines)  # every notebook can sweep on a cluster


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_thin_and_committed_without_outputs(path):
    code = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    assert all(not c["outputs"] and c["execution_count"] is None for c in code)
    assert not any(line.lstrip().startswith(("def ", "class ")) for c in code for line in c["source"])
