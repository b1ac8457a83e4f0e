"""Software stacks: the same sweep under several TensorFlow versions, each in its own environment.

A stack is a list of pip requirements (``tensorflow==2.16.2``, optionally more, comma
separated) or ``current`` (the environment paradnn runs in). Each is built once with
``uv`` into ``<cache>/stacks/<key>``, with this paradnn installed editable without its
dependencies plus what a sweep worker imports, and reused whenever it is complete. A stack is
of its own era: everything its requirements leave open (Keras, numpy, ...) is resolved as of
the day its first pinned requirement (``tensorflow==X``) was released on the index (uv's
``--exclude-newer``), so TensorFlow 2.16.2 runs with the Keras and numpy of its day, as its
users ran it; what a requirement pins itself is taken as written. A build
that fails leaves nothing behind (it is built in a scratch folder and renamed into place
only when complete) and is reported with the installer's reason, so the other stacks can
go on. :class:`paradnn.sweeps.backends.StacksBackend` runs one worker per stack and measures each
configuration on every stack in turn.
"""

from __future__ import annotations

import hashlib
import os
import platform as pyplatform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from paradnn.config import cache_dir
from paradnn.settings import CURRENT_STACK
from paradnn.version import __version__

# How a stack's open requirements are resolved; part of its environment's key.
RESOLUTION = "era"  # as of its first pin's release (see the module docstring)
DEFAULT_INDEX = "https://pypi.org/simple"  # uv's, unless UV_DEFAULT_INDEX or UV_INDEX_URL says otherwise
# What a sweep worker imports besides TensorFlow (and the Keras it brings).
WORKER_REQUIREMENTS = ("numpy", "pandas", "psutil", "PyYAML")
SOURCE = Path(__file__).resolve().parents[2]  # the paradnn checkout installed into every stack


@dataclass(frozen=True)
class Stack:
    """A software stack: its requirements (empty for the current environment)."""

    requirements: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return ",".join(self.requirements) or CURRENT_STACK

    @property
    def key(self) -> str:
        """The environment's folder name: changes with the requirements, Python, paradnn's version
        and how the rest is resolved (:data:`RESOLUTION`)."""
        text = "|".join([*sorted(self.requirements), pyplatform.python_version(), __version__, RESOLUTION])
        return hashlib.sha1(text.encode()).hexdigest()[:16]

    @property
    def pinned(self) -> dict[str, str]:
        """Requirements pinned to one version (``name==version``): name -> version, in order."""
        pins = (r.split("==", 1) for r in self.requirements if "==" in r and not any(c in r for c in "<>!~,;"))
        return {name.strip().lower(): version.strip() for name, version in pins}


class StackFailed(RuntimeError):
    """A stack could not be built; the message is the installer's reason, in a line or two."""


def parse(text: str) -> Stack:
    """A stack from ``current`` or comma-separated requirements (the ``stack`` run setting's
    text, :func:`paradnn.settings.stack_text`); ConfigError for a malformed requirement."""
    from paradnn.settings import setting

    written = str(setting("stack").parse(text))
    return Stack() if written == CURRENT_STACK else Stack(tuple(written.split(",")))


def root() -> Path:
    return cache_dir() / "stacks"


def python_of(stack: Stack) -> Path | None:
    """The Python of a complete environment of ``stack`` (the running one for ``current``), or None."""
    if not stack.requirements:
        return Path(sys.executable)
    env = root() / stack.key
    return env / "bin" / "python" if (env / ".complete").exists() else None


def uv() -> str:
    """The ``uv`` executable installed with paradnn."""
    from uv import find_uv_bin

    return find_uv_bin()


def ensure(stack: Stack, echo=lambda line: None) -> Path:
    """The Python of ``stack``'s environment, built with uv if it is not complete yet; StackFailed with uv's reason."""
    found = python_of(stack)
    if found is not None:
        return found
    root().mkdir(parents=True, exist_ok=True)
    echo(f"building the environment of {stack.name} with uv (once; reused afterwards)...")
    scratch = Path(tempfile.mkdtemp(prefix=f"{stack.key}.building-", dir=root()))
    try:
        python = scratch / "bin" / "python"
        _uv("venv", "--quiet", "--allow-existing", "--python", sys.executable, str(scratch))
        # Compiled now, as pip does: where PYTHONDONTWRITEBYTECODE is set, every worker would otherwise
        # compile TensorFlow's sources as it imports them (12 s instead of 5 s on a 2-core CPU).
        _uv(
            "pip",
            "install",
            "--quiet",
            "--compile-bytecode",
            "--python",
            str(python),
            *era_options(stack),
            *stack.requirements,
            *WORKER_REQUIREMENTS,
        )
        _uv("pip", "install", "--quiet", "--python", str(python), "--no-deps", "-e", str(SOURCE))
        _check_imports(python)
        (scratch / ".complete").write_text(stack.name + "\n")
        target = root() / stack.key
        if (target / ".complete").exists():  # another sweep finished the same build meanwhile
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            shutil.rmtree(target, ignore_errors=True)  # an incomplete leftover, never reused
            scratch.rename(target)  # the interpreter finds its environment from where it lies
        return target / "bin" / "python"
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def index_url() -> str:
    return (os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL") or DEFAULT_INDEX).rstrip("/")


def release_time(name: str, version: str) -> str:
    """When ``name==version`` was uploaded to the index (its last file, RFC 3339), from the index's
    JSON simple API (PEP 691); StackFailed where the index does not say."""
    import json
    import urllib.request

    url = f"{index_url()}/{name}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            files = json.load(response).get("files", [])
    except (OSError, ValueError) as exc:
        raise StackFailed(f"cannot read when {name} {version} was released from {url}: {exc}") from None
    return release_of(files, name, version, url)


def release_of(files: list[dict], name: str, version: str, url: str) -> str:
    """The latest upload time among ``files`` (a PEP 691 listing) that are ``version`` of ``name``."""
    stem = _normal(name)
    times = [f["upload-time"] for f in files if f.get("upload-time") and _version_of(f.get("filename", ""), stem) == version]
    if not times:
        raise StackFailed(f"{url} lists no upload time for {name} {version}: the stack's era is unknown")
    return max(times)


def _version_of(filename: str, stem: str) -> str | None:
    """The version in a wheel or sdist name (``tensorflow-2.16.2-cp311-...whl`` -> ``2.16.2``)."""
    for ending in (".whl", ".tar.gz", ".zip"):
        if filename.lower().endswith(ending):
            parts = filename[: -len(ending)].split("-")
            return parts[1] if len(parts) > 1 and _normal(parts[0]) == stem else None
    return None


def _normal(name: str) -> str:
    return name.replace("-", "_").replace(".", "_").lower()


def era_options(stack: Stack) -> list[str]:
    """uv's options that resolve ``stack``'s open requirements as of its first pin's release; the
    other pins are taken as written. None for a stack without a pin."""
    pins = stack.pinned
    if not pins:
        return []
    first, version = next(iter(pins.items()))
    options = ["--exclude-newer", release_time(first, version)]
    for name in list(pins)[1:]:  # pinned on purpose, whatever their date
        options += ["--exclude-newer-package", f"{name}={NO_LIMIT}"]
    return options


NO_LIMIT = "2100-01-01T00:00:00Z"  # an --exclude-newer date that excludes nothing


def _check_imports(python: Path) -> None:
    """StackFailed with the import error if the new environment cannot import what a sweep worker does
    (a stack whose TensorFlow lacks Keras 3, say): such an environment is never marked complete."""
    code = "import tensorflow, keras, paradnn.sweeps.worker"
    quiet = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True, env=quiet)
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit status {result.returncode}"
        raise StackFailed(f"the environment cannot run a sweep worker: {why}")


def _uv(*args: str) -> None:
    result = subprocess.run([uv(), *args], capture_output=True, text=True)
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        reason = " ".join(lines[-3:]) if lines else f"uv exited with status {result.returncode}"
        raise StackFailed(reason)
