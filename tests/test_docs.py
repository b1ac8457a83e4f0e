"""The docs stay true: every shell and Python block of the README and docs/ marked runnable
(``<!-- runnable -->`` on the line before its fence) runs as written on small settings, and every
option the docs give a ``paradnn`` command exists in that command's ``--help``.

A block marked ``<!-- runnable: tests/FILE.py -->`` is run by that test file instead (its run is
costly and shared there); this checks that the file reads the page."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from paradnn.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"<!-- runnable(?::\s*(?P<by>\S+))? -->\n```(?P<lang>bash|python)\n(?P<body>.*?)```", re.S)


def blocks() -> list[tuple[str, str, str | None, str]]:
    """(page, language, the test file that runs it or None, body) of every runnable block."""
    return [
        (page.relative_to(ROOT).as_posix(), m["lang"], m["by"], m["body"])
        for page in PAGES
        for m in BLOCK.finditer(page.read_text())
    ]


def test_the_readme_has_runnable_blocks_in_both_languages():
    langs = {(page, lang) for page, lang, _, _ in blocks()}
    assert {("README.md", "bash"), ("README.md", "python")} <= langs


@pytest.mark.slow
@pytest.mark.parametrize("page, lang, by, body", [b for b in blocks() if not b[2]], ids=lambda v: str(v)[:30])
def test_a_runnable_block_runs_as_written(page, lang, by, body, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if lang == "python":
        script = tmp_path / "example.py"
        script.write_text(body)
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
        assert done.returncode == 0, f"{page}: {done.stderr[-3000:]}"
        return
    for line in body.splitlines():
        args = shlex.split(line, comments=True)
        if not args:
            continue
        assert args[0] == "paradnn", f"{page}: a runnable shell line runs paradnn: {line}"
        done = subprocess.run(
            [sys.executable, "-m", "paradnn.cli", *args[1:]], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900
        )
        assert done.returncode == 0, f"{page}: {line}\n{done.stderr[-3000:]}"


def test_a_block_run_elsewhere_is_read_by_that_test():
    for page, _, by, _ in blocks():
        if by:
            assert Path(page).name in (ROOT / by).read_text(), f"{by} does not read {page}"


def commands() -> dict[str, str]:
    """Each command's ``--help`` text."""
    names = main.list_commands(None)  # type: ignore[arg-type]
    return {name: CliRunner().invoke(main, [name, "--help"], terminal_width=200).output for name in names}


MENTION = re.compile(r"paradnn ([a-z][a-z-]+)((?:[^`\n#|]|\\\n)*)")


def test_every_option_the_docs_give_a_command_exists():
    helps = commands()
    missing = []
    for page in PAGES:
        for command, rest in MENTION.findall(page.read_text()):
            if command not in helps:
                continue
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                if flag not in helps[command]:
                    missing.append(f"{page.relative_to(ROOT)}: paradnn {command} {flag}")
    assert not missing, "\n".join(sorted(set(missing)))


@pytest.mark.slow
def test_the_api_docstring_examples_run_as_doctests(tmp_path, monkeypatch):
    import doctest

    import paradnn.api

    monkeypatch.chdir(tmp_path)
    failed, tried = doctest.testmod(paradnn.api, optionflags=doctest.ELLIPSIS, report=True)
    assert tried >= 8 and failed == 0


def test_every_relative_link_of_the_docs_resolves():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not target.startswith(("http://", "https://", "mailto:")) and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "\n".join(broken)
