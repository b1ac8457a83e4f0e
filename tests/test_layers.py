"""The package is a house in layers: each module imports only from its own layer or below.

Imports made inside functions count: hiding an upward import in a function body is how
cycles crept in before. The layers, bottom up, are those of the
README's layout section.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "paradnn"

# Bottom up. A module's layer is the first entry that is a prefix of its dotted name.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "vocabulary",
        (
            "paradnn.vocabulary",
            "paradnn.config",
            "paradnn.identity",
            "paradnn.settings",
            "paradnn.markup",
            "paradnn.tfimport",
            "paradnn.imports",
            "paradnn.platform",
            "paradnn.version",
        ),
    ),
    ("families", ("paradnn.families", "paradnn.counting", "paradnn.space")),
    ("engine", ("paradnn.engine",)),
    ("store", ("paradnn.store",)),
    ("analysis", ("paradnn.analysis",)),
    ("sweep", ("paradnn.sweeps",)),
    (
        "front ends",
        ("paradnn.api", "paradnn.cli", "paradnn.sections", "paradnn.reports", "paradnn.parameters", "paradnn.checks", "paradnn"),
    ),
]


def layer_of(module: str) -> int:
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> list[tuple[str, int, list[str]]]:
    """Every paradnn module ``path`` imports (anywhere in the file), its line, and the names taken."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "paradnn" and node.level == 0:
            names = [a.name for a in node.names]
            for name in names:  # ``from paradnn.engine import training`` imports a module
                sub = f"{node.module}.{name}"
                if (PACKAGE.parent / Path(*sub.split("."))).with_suffix(".py").exists() or (
                    PACKAGE.parent / Path(*sub.split(".")) / "__init__.py"
                ).exists():
                    found.append((sub, node.lineno, []))
                    names = [n for n in names if n != name]
            if names:  # names the module defines (not only its submodules): it is imported itself
                found.append((node.module, node.lineno, names))
        elif isinstance(node, ast.Import):
            found += [(a.name, node.lineno, []) for a in node.names if a.name.split(".")[0] == "paradnn"]
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_imports_go_down_the_layers(path: Path) -> None:
    me = module_name(path)
    upward = [
        f"line {line}: {target} ({LAYERS[layer_of(target)][0]})"
        for target, line, _ in imports(path)
        if layer_of(target) > layer_of(me)
    ]
    assert not upward, f"{me} ({LAYERS[layer_of(me)][0]}) imports from above: " + "; ".join(upward)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: module_name(p))
def test_no_private_name_crosses_a_module(path: Path) -> None:
    me = module_name(path)
    crossing = [
        f"line {line}: {target}.{name}"
        for target, line, names in imports(path)
        if target != me
        for name in names
        if name.startswith("_") and name != "__version__"
    ]
    assert not crossing, f"{me} imports private names: " + "; ".join(crossing)


def test_the_layer_checker_can_fail(tmp_path: Path) -> None:
    """An upward import inside a function is found (the check is not vacuous)."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from paradnn.sweeps.loop import sweep\n")
    assert ("paradnn.sweeps.loop", 2, ["sweep"]) in imports(module)
    assert layer_of("paradnn.sweeps.loop") > layer_of("paradnn.engine.protocol")


def test_the_api_functions_are_not_shadowed_by_subpackages() -> None:
    """``paradnn.sweep`` stays the API function once the sweep machinery is imported."""
    import paradnn
    import paradnn.sweeps.loop  # noqa: F401 - importing a subpackage sets an attribute on paradnn

    assert callable(paradnn.sweep) and callable(paradnn.measure) and callable(paradnn.describe)


def test_the_analysis_never_measures():
    """The analysis reads what the engine and the sweeps stored; it imports nothing of the engine."""
    analysis = [path for path in MODULES if module_name(path).startswith("paradnn.analysis")]
    reaching = [
        f"{module_name(path)} line {line}: {target}"
        for path in analysis
        for target, line, _ in imports(path)
        if target.startswith("paradnn.engine")
    ]
    assert not reaching, "; ".join(reaching)
