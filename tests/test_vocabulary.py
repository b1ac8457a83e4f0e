"""The vocabulary holds: no result state, row source or verdict outcome is spelt out where it is
compared or filtered on, outside :mod:`paradnn.vocabulary` (a drifted spelling would filter
silently to nothing)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from paradnn import vocabulary

PACKAGE = Path(vocabulary.__file__).parent
STATES = set(vocabulary.STATES)
SOURCES = {vocabulary.MEASURED, vocabulary.LEGACY, vocabulary.LEGACY + ":"}
OUTCOMES = set(vocabulary.OUTCOMES)
SQL = re.compile(r"\b(state|source)\s*(=|!=|<>|LIKE)\s*'\w", re.I)  # not an f-string's '{MEASURED}'


def _about(node: ast.AST) -> str:
    """What the other side of a comparison or the receiver of a call reads (``row["state"]``, ``m.state``)."""
    return ast.unparse(node).lower()


def _spelt(value: object, context: str) -> bool:
    if not isinstance(value, str):
        return False
    if value in OUTCOMES:
        return True
    return (bool(re.search(r"\bstate\b", context)) and value in STATES) or (
        bool(re.search(r"\bsource\b", context)) and value in SOURCES
    )  # not peak_source: another vocabulary


def literals(source: str) -> list[str]:
    """Every state, source or outcome spelt out in ``source`` where it is compared or filtered on:
    ``x.state == "ok"``, ``where(state="ok")``, ``source.startswith("legacy")``, ``.eq("ok")`` on a
    state column, a verdict compared with ``"holds"``, or SQL text filtering on ``state = '...'``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            context = " ".join(_about(s) for s in sides if not isinstance(s, ast.Constant))
            for side in sides:
                values = [e for e in side.elts] if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                found += [ast.unparse(node) for v in values if isinstance(v, ast.Constant) and _spelt(v.value, context)]
        elif isinstance(node, ast.Call):
            for keyword in node.keywords:
                if (
                    keyword.arg in ("state", "source")
                    and isinstance(keyword.value, ast.Constant)
                    and _spelt(keyword.value.value, keyword.arg)
                ):
                    found.append(ast.unparse(node))
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("startswith", "eq", "ne", "isin"):
                context = _about(node.func.value)
                found += [ast.unparse(node) for a in node.args if isinstance(a, ast.Constant) and _spelt(a.value, context)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
            found.append(node.value.strip()[:80])
    return found


def test_no_state_source_or_outcome_is_spelt_out_outside_the_vocabulary():
    spelt = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "vocabulary.py" and (found := literals(path.read_text()))
    }
    assert spelt == {}


def test_the_check_finds_a_planted_literal_of_each_kind():
    planted = {
        'if record["state"] != "ok": pass': 1,
        'rows = results.where(state="oom", source="measured")': 2,
        'mask = frame["source"].str.startswith("legacy")': 1,
        'bad = frame["state"].eq("timeout")': 1,
        'held = verdict == "holds"': 1,
        'decided = v["verdict"] in ("holds", "does not hold")': 2,
        "conn.execute(\"SELECT * FROM results WHERE state = 'ok'\")": 1,
        'if report.status == "ok": pass': 0,  # a report's status is not a result's state
        "print(OK, vocabulary.MEASURED)": 0,
    }
    assert {code: len(literals(code)) for code in planted} == planted
