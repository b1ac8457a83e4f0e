"""Import TensorFlow and Keras once, without their start-up noise.

``TF_CPP_MIN_LOG_LEVEL`` (set by ``paradnn/__init__``) hides most C++ logging, but a few
lines (the CUDA stub probe, absl's pre-initialisation warning) are written to file
descriptor 2 during the import itself. Unless the user asked for logs by setting a
level below 3, we point descriptor 2 at /dev/null for the duration of the import only.
"""

from __future__ import annotations

import contextlib
import os


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


with _fd2_silenced():
    import keras  # noqa: E402
    import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")  # deprecation notices from TF1-era profiler code

__all__ = ["keras", "tf"]
