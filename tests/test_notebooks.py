"""The notebooks as committed: thin, without outputs, and with parameters papermill can read."""

from __future__ import annotations

import ast
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
    for cell in code:  # a cell that does not parse fails only when papermill reaches it, minutes into a run
        ast.parse("".join(cell["source"]), filename=f"{path.name}:{cell.get('id', '?')}")


CALLS_ONLY = ("architecture",)  # notebooks whose analysis lives wholly in paradnn.notebook's section helpers


@pytest.mark.parametrize("name", CALLS_ONLY)
def test_code_cells_are_calls_without_row_logic(name):
    """No filters, loops over rows or figure building in the notebook: only printing a helper's lines may loop."""
    cells = json.loads((NOTEBOOKS[0].parent / f"{name}.ipynb").read_text())["cells"]
    code = [line for c in cells if c["cell_type"] == "code" and "parameters" not in c["metadata"].get("tags", [])
            for line in c["source"]]  # fmt: skip
    loops = [line for line in code if line.lstrip().startswith("for ") and not line.lstrip().startswith("for line in ")]
    logic = [line for line in code if any(s in line for s in ('"] ==', "].isin(", ".assign(", ".dropna(", "show(", "plots."))]
    assert not loops and not logic, loops + logic
