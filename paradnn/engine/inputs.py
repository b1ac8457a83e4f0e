"""Input modes: where each step's batch comes from (a run setting, part of run identity).

* ``device`` (default): one batch resident on the device; nothing crosses inside the timer.
* ``host``: every step takes a fresh batch from a ``tf.data`` pipeline in host memory
  (a pool of distinct batches, repeated and prefetched, as Keras users feed a device), so
  the pipeline's own cost and any host-to-device copy are inside the timed loop.
* ``host-prep``: as ``host``, plus per-example preparation in the pipeline, parallel as
  users write it: images are stored JPEG-encoded and decoded, randomly cropped and
  flipped and normalised; token sequences are stored at random lengths and padded;
  feature vectors are stored as bytes and scaled to floats.

In both host modes the harness also times the device-resident loop on the same model,
alternating call by call, and stores the *infeed share* of the step,
``1 - t_device / t_host``: the fraction of a host-fed step spent waiting for input.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from paradnn.config import ConfigError, check_choice
from paradnn.settings import setting

MODES = setting("input").choices
POOL = 4  # distinct batches in host memory: each step reads another one
CROP_MARGIN = 16  # stored images are this many pixels larger than the crop

# Iterators of measured configurations' pipelines, waiting for stop_finished().
_finished: list = []


def check(mode: str) -> None:
    """ConfigError unless ``mode`` is an input mode."""
    check_choice("input", mode, MODES)


def check_input_mode(mode: str, family, config) -> None:
    """ConfigError when ``host-prep`` has no preparation for a family whose inputs are a tuple (traced, not allocated)."""
    if mode != "host-prep":
        return
    from paradnn.tfimport import tf

    inputs = tf.function(lambda: family.data(config, 0)).get_concrete_function().structured_outputs[0]
    if not isinstance(inputs, tf.Tensor):
        raise ConfigError("input", mode, f"device or host for {family.name} (its inputs are a tuple; host-prep prepares one)")


def host_pool(family, config, seed: int) -> tuple[Any, Any]:
    """``POOL`` distinct batches of the family's synthetic data in host memory (NumPy), stacked."""
    from paradnn.tfimport import tf

    batches = [tf.nest.map_structure(lambda t: np.asarray(t), family.data(config, seed + i)) for i in range(POOL)]
    return tf.nest.map_structure(lambda *parts: np.stack(parts), *batches)


def dataset(mode: str, family, config, seed: int = 0):
    """The ``tf.data`` pipeline of a host input mode: one batch per element, prefetched."""
    from paradnn.tfimport import tf

    x, y = host_pool(family, config, seed)
    if mode == "host":
        return tf.data.Dataset.from_tensor_slices((x, y)).repeat().prefetch(tf.data.AUTOTUNE)
    if not isinstance(x, np.ndarray):
        raise ConfigError("input", mode, f"device or host for {family.name} (its inputs are a tuple; host-prep prepares one)")
    examples = x.reshape(-1, *x.shape[2:])
    labels = tf.nest.map_structure(lambda a: a.reshape(-1, *a.shape[2:]), y)
    rng = np.random.default_rng(seed)
    stored, prepare, batch = _preparation(examples, rng, config.batch)
    ds = tf.data.Dataset.from_tensor_slices((stored, labels)).repeat()
    ds = ds.map(lambda s, label: (prepare(s), label), num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    return batch(ds).prefetch(tf.data.AUTOTUNE)


def finish(iterator: Any) -> None:
    """Hand over the iterator of a measured configuration's pipeline, to be stopped by :func:`stop_finished`.

    Stopping a pipeline joins ``tf.data``'s autotuning thread. That costs about 1 ms of CPU,
    but TensorFlow 2.21 at times wakes the thread only at the end of its optimisation period
    (which doubles up to a minute): measured 1.8-22 s of waiting with 0.04 s of CPU, in the
    middle of a sweep, where the iterator used to be dropped by the next configuration's garbage
    collection, with the timing gate held. A sweep's worker stops its pipelines after each
    configuration, outside the gate, so that the other worker can go on timing meanwhile.
    """
    if iterator is not None:
        _finished.append(iterator)


def stop_finished() -> None:
    """Stop the pipelines handed to :func:`finish` (their threads end, their batches are freed)."""
    _finished.clear()


def _preparation(examples: np.ndarray, rng: np.random.Generator, batch_size: int):
    """Stored examples, the per-example preparation and the batching, by the kind of input."""
    from paradnn.tfimport import tf

    def batched(ds):
        return ds.batch(batch_size, drop_remainder=True)

    if examples.ndim == 4 and np.issubdtype(examples.dtype, np.floating):  # images: JPEG, crop, flip, normalise
        n, h, w, c = examples.shape
        pixels = rng.integers(0, 256, size=(n, h + CROP_MARGIN, w + CROP_MARGIN, c), dtype=np.uint8)
        stored = np.array([tf.io.encode_jpeg(p, quality=90).numpy() for p in pixels], dtype=object)

        def prepare(jpeg):
            image = tf.io.decode_jpeg(jpeg, channels=c)
            image = tf.image.random_flip_left_right(tf.image.random_crop(image, (h, w, c)))
            return (tf.cast(image, tf.float32) / 255.0 - 0.5) / 0.25

        return stored, prepare, batched
    if examples.ndim == 2 and np.issubdtype(examples.dtype, np.integer):  # tokens: random lengths, padded
        n, length = examples.shape
        lengths = rng.integers(max(1, length // 2), length + 1, size=n)
        stored = tf.ragged.constant([row[:k] for row, k in zip(examples, lengths)], dtype=tf.int32)

        def pad(tokens):
            return tf.ensure_shape(tf.pad(tokens, [[0, length - tf.shape(tokens)[0]]]), (length,))

        return stored, pad, batched
    if examples.ndim == 2 and np.issubdtype(examples.dtype, np.floating):  # features: bytes scaled to floats
        stored = rng.integers(0, 256, size=examples.shape, dtype=np.uint8)
        return stored, lambda raw: tf.cast(raw, tf.float32) / 255.0 - 0.5, batched
    raise ConfigError("input", "host-prep", f"device or host for inputs of shape {examples.shape[1:]}")
