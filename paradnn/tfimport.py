"""Import TensorFlow and Keras once, without their start-up noise.

``TF_CPP_MIN_LOG_LEVEL`` (set by ``paradnn/__init__``) hides most C++ logging, but a few
lines (the CUDA stub probe, absl's pre-initialisation warning) are written to file
descriptor 2 during the import itself. Unless the user asked for logs by setting a
level below 3, we point descriptor 2 at /dev/null for the duration of the import only.

After the import, everything alive is frozen out of the garbage collector's reach
(``gc.freeze``): TensorFlow and Keras leave about 470,000 objects that never become
garbage, and every full collection walked them all, 0.28 s each on a 2-core CPU. The
protocol collects once before each measurement, so that was 0.28 s per configuration
(a smoke sweep of 10 configurations 16.5 -> 14.0 s, medians of four alternated runs).

Three optional packages are loaded by the import for features paradnn never uses, if they
are installed: scikit-learn (Keras's scikit-learn wrappers), Matplotlib (Keras's image
gallery) and JAX (TensorFlow Lite's converter). Each import is guarded by Keras or
TensorFlow, so the import runs with the ones not already loaded hidden, and releases the
names afterwards: ``import sklearn`` later (prediction) or Matplotlib (figures) loads them as
usual. JAX stays visible where Keras runs on it (``KERAS_BACKEND=jax``). Hiding scikit-learn
alone took a TensorFlow import 5.75 -> 4.76 s (user 5.23 -> 4.19 s; medians of four
alternated runs on a 2 vCPU EPYC Zen 3): every sweep worker, replica and kernel pays it.
"""

from __future__ import annotations

import contextlib
import gc
import os

from paradnn.imports import hidden


def _unused_by_paradnn() -> tuple[str, ...]:
    """Packages the import loads only for features paradnn does not use (see the module's docstring)."""
    names = ("sklearn", "matplotlib")
    return names if os.environ.get("KERAS_BACKEND", "tensorflow") == "jax" else (*names, "jax")


@contextlib.contextmanager
def _fd2_silenced():
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3") != "3":
        yield
        return
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


with _fd2_silenced(), hidden(_unused_by_paradnn()):
    import keras  # noqa: E402
    import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")  # deprecation notices from TF1-era profiler code
gc.freeze()  # the import's objects live as long as the process: no collection need walk them again

__all__ = ["keras", "tf"]
