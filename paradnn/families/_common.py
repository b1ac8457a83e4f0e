"""Helpers the real-workload families share (imported by their builders, never at discovery).

``keras.applications`` models take no dtype argument, so they are built under the run's
dtype policy set globally for the duration of the build (:func:`policy_scope`).
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def policy_scope(policy: str):
    """Build Keras layers under dtype ``policy``, restoring the global policy afterwards."""
    from paradnn.tfimport import keras

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def image_data(batch: int, image: int, classes: int, seed: int):
    """Images uniform in [0, 1) and integer labels uniform in [0, classes)."""
    from paradnn.tfimport import tf

    x = tf.random.stateless_uniform((batch, image, image, 3), (seed, 0))
    y = tf.random.stateless_uniform((batch,), (seed, 1), 0, classes, dtype=tf.int32)
    return x, y
