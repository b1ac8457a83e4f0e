"""Frameworks a run may use: TensorFlow (the default), JAX or PyTorch, all driving Keras 3 models.

The framework is a run setting and part of a result's identity. Keras picks its backend
once per process, when it is first imported, so a framework is *activated* before
anything imports Keras (:func:`activate`); sweeps start their worker process with the
framework's backend, so any framework can be swept from any process.
"""

from __future__ import annotations

import getpass
import importlib.util
import os
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from paradnn.config import ConfigError, check_choice
from paradnn.settings import FRAMEWORK_TITLES, setting

# The frameworks paradnn can drive, the default first; each is also Keras's backend name.
FRAMEWORKS = setting("framework").choices
DEFAULT = str(setting("framework").default)
# Dtype policies each framework's training step supports (float16 loss scaling is TensorFlow's).
POLICIES: dict[str, tuple[str, ...]] = {
    "jax": ("float32", "bfloat16", "mixed_bfloat16"),
    "torch": ("float32", "bfloat16", "mixed_bfloat16"),
}
TITLES = FRAMEWORK_TITLES
# Frameworks that always compile their step (JAX with XLA): they have no uncompiled run.
ALWAYS_COMPILED = ("jax",)
# Frameworks that honour a CPU thread limit (cpu[threads=N]): TensorFlow's pools, torch.set_num_threads.
THREADED = ("tensorflow", "torch")
# How to install each framework where it is missing (PyTorch: pip takes the machine's CPU build; see the README).
INSTALL = {
    "tensorflow": "pip install tensorflow",
    "jax": "pip install jax",
    "torch": "pip install 'paradnn[torch]' (or make torch)",
}


def installed(framework: str) -> bool:
    """Whether ``framework``'s Python package can be imported here."""
    return importlib.util.find_spec(framework) is not None


def check(framework: str) -> None:
    """ConfigError unless ``framework`` is known and installed."""
    check_choice("framework", framework, FRAMEWORKS)
    if not installed(framework):
        here = ", ".join(f for f in FRAMEWORKS if installed(f))
        raise ConfigError("framework", framework, f"{here} (the {framework} package is not installed: {INSTALL[framework]})")


def check_framework(family: str, framework: str) -> None:
    """ConfigError unless ``family`` declares it can be trained under ``framework``."""
    from paradnn.families import get

    supported = get(family).frameworks
    if framework not in supported:
        raise ConfigError("framework", framework, f"{', '.join(supported)} for family {family}")


def check_policy(framework: str, policy: str) -> None:
    """ConfigError when ``framework``'s training step has no support for dtype ``policy``."""
    allowed = POLICIES.get(framework)
    if allowed and policy not in allowed:
        raise ConfigError("dtype", policy, f"{', '.join(allowed)} with --framework {framework}")


def check_target(framework: str, target) -> None:
    """ConfigError when ``framework`` cannot honour the platform's settings (JAX has no CPU thread limit)."""
    if framework not in THREADED and getattr(target, "threads", None):
        owners = " and ".join(f"{TITLES[f]}'s" for f in THREADED)
        raise ConfigError("platform", target.id, f"cpu or gpu:N with --framework {framework} (thread limits are {owners})")


def version(framework: str) -> str:
    """The installed version of ``framework``'s package, or '' if it is absent."""
    try:
        return metadata.version(framework)
    except metadata.PackageNotFoundError:
        return ""


def loaded_backend() -> str | None:
    """The Keras backend of this process, or None while Keras is not imported yet."""
    keras = sys.modules.get("keras")
    return keras.backend.backend() if keras is not None else None


def activate(framework: str) -> None:
    """Make Keras use ``framework`` in this process; ConfigError if Keras already runs another.

    Must be called before anything imports Keras (paradnn imports it lazily).
    """
    check(framework)
    backend = loaded_backend()
    if backend is None:
        os.environ["KERAS_BACKEND"] = framework
    elif backend != framework:
        raise ConfigError(
            "framework",
            framework,
            f"{backend} in this process (Keras is already loaded with the "
            f"{backend} backend); a sweep measures {framework} in a fresh worker process",
        )


def worker_environment(framework: str) -> dict[str, str]:
    """The environment of a worker process measuring under ``framework``."""
    env = dict(os.environ, KERAS_BACKEND=framework)
    if framework != "tensorflow":
        # TensorFlow (imported for ceilings and data) shares an accelerator with JAX or PyTorch:
        # neither may take all of its memory up front.
        env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if framework == "torch":
        # torch.compile's kernels in PyTorch's own default cache (the system's temporary folder, per
        # user), not in the worker's private TMPDIR: every worker and every run shares what was
        # compiled before, as a PyTorch user's runs do (a fresh cache costs about 10 s of gcc per step).
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}"))
    return env
