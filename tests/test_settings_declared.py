"""Run settings declared once: no module, command or notebook restates a setting's option or default.

Every run setting's default lives in :mod:`paradnn.settings`. A function parameter, a class
field or a notebook parameter named after a setting (or its alias: ``policy`` for the dtype)
whose default is that setting's default written out, or a click option of a setting's
command-line name built by hand, is a second declaration that drifts: this test finds them.
"""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from pathlib import Path

import pytest

from paradnn import settings
from paradnn.engine.protocol import RunSettings

ROOT = Path(__file__).parents[1]
ALIASES = {"dtype": ("policy",), "platform": ("platform_id",), "input": ("input_mode",)}


def declared_defaults() -> dict[str, set]:
    """Parameter name -> the (type, value) pairs that would restate its setting's default."""
    out: dict[str, set] = {}
    for s in settings.SETTINGS:
        values = {v for v in (s.default, s.text, s.engine_default) if v is not None}
        for name in (s.name, *ALIASES.get(s.name, ())):
            out[name] = {(type(v), v) for v in values}
    return out


def options() -> set[str]:
    return {text for s in settings.SETTINGS for text in (s.cli, s.option) if text}


def restatements(tree: ast.AST, where: str) -> list[str]:
    """Each place in ``tree`` that restates a run setting's default or builds its option by hand."""
    defaults, found = declared_defaults(), []

    def check(name: str, value: ast.AST | None, line: int) -> None:
        if isinstance(value, ast.Constant) and (type(value.value), value.value) in defaults.get(name, ()):
            found.append(f"{where}:{line}: {name} = {value.value!r} restates the declared default")

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults):
                check(arg.arg, default, node.lineno)
            for arg, default in zip(args.kwonlyargs, args.kw_defaults):
                check(arg.arg, default, node.lineno)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            check(node.target.id, node.value, node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "option":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and arg.value in options():
                    found.append(f"{where}:{node.lineno}: {arg.value} built by hand (use cli.setting_option)")
    return found


def notebook_parameters(path: Path) -> ast.AST:
    cells = json.loads(path.read_text())["cells"]
    (cell,) = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]
    return ast.parse("".join(cell["source"]))


def sources() -> list[tuple[str, ast.AST]]:
    found = [
        (str(p.relative_to(ROOT)), ast.parse(p.read_text()))
        for p in sorted((ROOT / "paradnn").rglob("*.py"))
        if p.name != "settings.py"
    ]
    found += [(str(p.relative_to(ROOT)), notebook_parameters(p)) for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    return found


def test_no_module_command_or_notebook_restates_a_run_setting():
    found = [line for where, tree in sources() for line in restatements(tree, where)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "code",
    [
        'def f(dtype: str = "float32"): ...',
        'def f(*, policy="float32"): ...',
        "class C:\n    xla: bool = True",
        'platform: str = "cpu"  # a notebook parameter',
        'xla: str = "auto"',
        "devices: int = 1",
        '@click.option("--dtype", default="bfloat16")\ndef f(dtype): ...',
    ],
)
def test_the_check_finds_a_restated_default(code):
    assert restatements(ast.parse(code), "x")


def test_a_departure_from_a_default_is_not_a_restatement():
    assert not restatements(ast.parse('xla: bool = False  # convolutions on a CPU\ndtype = other["dtype"]'), "x")


def test_run_settings_carry_the_declared_step_settings_at_the_engines_defaults():
    declared = [f for f in fields(RunSettings)][: len(settings.STEP_FIELDS)]
    assert tuple(f.name for f in declared) == settings.STEP_FIELDS
    assert {f.name: f.default for f in declared} == settings.ENGINE_DEFAULTS


def test_the_software_stack_is_a_run_setting_of_the_worker():
    stack = settings.setting("stack")
    assert stack.scope == "worker" and stack.multiple and not stack.column
    assert stack.parse(" tensorflow==2.16.2, numpy ") == "tensorflow==2.16.2,numpy" and stack.parse("current") == "current"
    with pytest.raises(settings.ConfigError, match="a pip requirement"):
        stack.parse("tensorflow===")


def test_measure_in_this_process_refuses_another_software_stack():
    import paradnn

    with pytest.raises(settings.ConfigError, match="current with measure"):
        paradnn.measure("fc", "layer_1-node_8-input_16-output_4-bs_8", stack="tensorflow==2.16.2")
