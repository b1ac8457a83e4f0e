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

Keras imports scikit-learn, if it is installed, for its scikit-learn wrappers, which paradnn
never uses: about 15% of the import's CPU time (5.1 -> 4.3 s user on a 2 vCPU EPYC Zen 3,
three runs alternated), paid by every sweep worker, replica and kernel. Unless scikit-learn
is already loaded, the import runs with it hidden (Keras then defines its wrappers without
it), and the name is released afterwards, so ``import sklearn`` later (prediction) loads it
as usual.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys


@contextlib.contextmanager
def _sklearn_hidden():
    """Make ``import sklearn`` fail during the block, unless it is already loaded."""
    if "sklearn" in sys.modules:
        yield
        return
    sys.modules["sklearn"] = None  # type: ignore[assignment]  # None makes the import raise ImportError
    try:
        yield
    finally:
        if sys.modules.get("sklearn", ...) is None:
            del sys.modules["sklearn"]


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


with _fd2_silenced(), _sklearn_hidden():
    import keras  # noqa: E402
    import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")  # deprecation notices from TF1-era profiler code
gc.freeze()  # the import's objects live as long as the process: no collection need walk them again

__all__ = ["keras", "tf"]
