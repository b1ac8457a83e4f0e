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
    lines = [line for line in parameters["source"] if line.strip() and not line.startswith("from ")]
    assert lines and all(line.count("=") == 1 for line in lines), [line for line in lines if line.count("=") != 1]
    assert any(line.startswith("backend:") for line in lines)  # every notebook can sweep on a cluster


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_thin_and_committed_without_outputs(path):
    code = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    assert all(not c["outputs"] and c["execution_count"] is None for c in code)
    assert not any(line.lstrip().startswith(("def ", "class ")) for c in code for line in c["source"])
    for cell in code:  # a cell that does not parse fails only when papermill reaches it, minutes into a run
        ast.parse("".join(cell["source"]), filename=f"{path.name}:{cell.get('id', '?')}")


def thin_problems(source: str, where: str) -> list[str]:
    """What makes a code cell more than narrative's calls: each statement may import, call a
    function (assigning what it returns to plain names, ``+=`` included), or print a helper's
    lines (``for line in f(...): print(line)``). Anything that selects rows or computes is a
    problem: a subscript, a comparison, a branch, a comprehension, a lambda, or a method called
    on a value (calls go to functions and modules the cell imported)."""
    tree = ast.parse(source)
    modules = {
        alias.asname or alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    problems = []
    for statement in tree.body:
        line = f"{where}:{statement.lineno}"
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(statement, ast.For):
            printing = (
                isinstance(statement.target, ast.Name)
                and len(statement.body) == 1
                and ast.unparse(statement.body[0]) == f"print({statement.target.id})"
            )
            if not printing or statement.orelse:
                problems.append(f"{line}: a loop that does more than print a helper's lines")
            parts = [statement.iter]
        elif isinstance(statement, (ast.Expr, ast.Assign, ast.AugAssign)):
            targets = (
                statement.targets
                if isinstance(statement, ast.Assign)
                else [statement.target]
                if isinstance(statement, ast.AugAssign)
                else []
            )
            if any(not isinstance(t, (ast.Name, ast.Tuple)) for t in targets):
                problems.append(f"{line}: assigns into something other than plain names")
            parts = [statement.value]
        else:
            problems.append(f"{line}: a {type(statement).__name__} statement (branches and blocks belong in paradnn)")
            continue
        for node in (n for part in parts for n in ast.walk(part)):
            if isinstance(
                node,
                (
                    ast.Subscript,
                    ast.Compare,
                    ast.IfExp,
                    ast.Lambda,
                    ast.ListComp,
                    ast.DictComp,
                    ast.SetComp,
                    ast.GeneratorExp,
                    ast.BoolOp,
                ),
            ):
                problems.append(f"{line}: {type(node).__name__} (row selection or logic belongs in paradnn)")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                if not (isinstance(owner, ast.Name) and owner.id in modules):
                    problems.append(f"{line}: method {node.func.attr}() called on a value")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_cells_are_calls_without_row_logic(path):
    """Narrative, parameters and one-line calls into paradnn.sections: no row selection in a notebook."""
    cells = json.loads(path.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code" and "parameters" not in c["metadata"].get("tags", [])]
    imports = "\n".join(line for cell in code for line in cell.splitlines() if line.startswith(("from ", "import ")))
    problems = [p for i, cell in enumerate(code) for p in thin_problems(imports + "\n" + cell, f"{path.stem} cell {i + 1}")]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_first_calls_prepare(path):
    cells = json.loads(path.read_text())["cells"]
    first = next(c for c in cells if c["cell_type"] == "code" and "parameters" not in c["metadata"].get("tags", []))
    assert "p = prepare(globals(), report.Parameters)" in "".join(first["source"])


@pytest.mark.parametrize(
    "code",
    [
        'df = load(store)\nok = df[df["state"] == "ok"]',
        "x = results.where(platform='cpu')",
        "if low_precision:\n    show(x)",
        "rows = [r for r in load(store)]",
        "for name in families:\n    show(name)",
    ],
)
def test_the_thin_check_finds_row_logic(code):
    assert thin_problems("from paradnn.sections.common import load, show\n" + code, "x")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_report_declares_its_notebooks_parameters_with_their_types(path):
    """A parameter misspelt or retyped in a notebook or its report's dataclass fails here, in seconds."""
    import dataclasses
    import importlib
    import typing

    from paradnn.parameters import declared

    kind = importlib.import_module(f"paradnn.sections.{path.stem}").Parameters
    hints = typing.get_type_hints(kind)
    notebook = {name: spec["inferred_type_name"] for name, spec in declared(path).items()}
    assert set(notebook) == {f.name for f in dataclasses.fields(kind)} == set(hints)
    for name, written in notebook.items():
        accepted = {getattr(t, "__name__", str(t)) for t in typing.get_args(hints[name]) or (hints[name],)}
        assert written in accepted, f"{path.stem}: {name} is {written} in the notebook, {hints[name]} in {kind.__qualname__}"


def test_a_misspelt_or_mistyped_report_parameter_fails_when_the_notebook_starts():
    from paradnn.config import ConfigError
    from paradnn.sections.common import typed
    from paradnn.sections.prediction import Parameters

    values = {
        "store": "s.sqlite",
        "measure_missing": False,
        "budget_minutes": 1,
        "max_seconds": 0.5,
        "backend": "local",
        "workers": 1,
        "platform": "cpu",
        "family": "fc",
        "preset": "smoke",
        "fill_overrides": {},
        "folds": 3,
        "max_rows": 0,
        "replay_platform": "tpu-v2-8",
        "replay_fractions": [0.1],
        "replay_seeds": 1,
        "fill_fraction": 0.2,
        "reference_dir": "",
        "seed": 0,
    }
    assert typed(Parameters, values).budget_minutes == 1  # a whole number where a float is asked
    with pytest.raises(ConfigError, match="parameter: 'fold'"):
        typed(Parameters, {**{k: v for k, v in values.items() if k != "folds"}, "fold": 3})
    with pytest.raises(ConfigError, match="parameter: 'seed'.*declared"):
        typed(Parameters, {k: v for k, v in values.items() if k != "seed"})
    with pytest.raises(ConfigError, match=r"folds: '3' is not valid; allowed: a int"):
        typed(Parameters, {**values, "folds": "3"})
    with pytest.raises(ConfigError, match="measure_missing: 1"):
        typed(Parameters, {**values, "measure_missing": 1})
    with pytest.raises(ConfigError, match="folds: True"):
        typed(Parameters, {**values, "folds": True})
