"""What the image workloads share: their configuration, data, and ``keras.applications`` models.

:func:`application` turns a ``keras.applications`` model into a workload family in a few
lines (ResNet-50, DenseNet-121, MobileNet; docs/adding-a-family.md adds VGG16 with it);
:func:`image_family` declares an image classifier with a builder of its own (SqueezeNet).
Both give the family the axes ``image`` (square side, pixels) and ``batch``, plus any
axes passed in between, so their labels read ``image_224-bs_64``.

``keras.applications`` models take no dtype argument, so they are built under the run's
dtype policy set globally for the duration of the build (:func:`policy_scope`).
Nothing here imports TensorFlow at import time: families are discovered without it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import make_dataclass
from typing import Any

from paradnn.families.base import Config, Family, Grid, axis

CLASSES = 1000  # ImageNet's classes, the output of every image workload


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


def image_config(family: str, title: str, axes: dict[str, Any] | None = None) -> type[Config]:
    """The configuration class of an image family: ``image``, the ``axes`` given (declared with ``axis``), ``batch``.

    Configurations travel between processes as labels, never pickled, so a class made
    here needs no module-level name.
    """
    fields = [("image", int, axis("image", "image side", "pixels", maximum=8192))]
    fields += [(name, spec.metadata["axis"]["kind"], spec) for name, spec in (axes or {}).items()]
    fields.append(("batch", int, axis("bs", "batch size", "examples", log2=True, maximum=2**30)))
    cls = make_dataclass(family.capitalize() + "Config", fields, bases=(Config,), frozen=True, namespace={"family": family})
    cls.__doc__ = f"{title} on square ``image``-pixel images."
    return cls


# Frameworks of a family whose builder, data and loss are Keras layers and ops alone, measured under
# each (JAX's step is tested on FC and CNN only: a family joins it once its training is checked there).
TENSORFLOW_AND_TORCH = ("tensorflow", "torch")


def image_family(
    name: str,
    build: Callable[[Any, str], Any],
    *,
    title: str,
    description: str,
    grids: dict[str, Grid],
    version: int = 1,
    order: int = 100,
    notes: str = "",
    axes: dict[str, Any] | None = None,
    width: str | None = None,
    heatmap: tuple[str, str, str | None] = ("image", "batch", None),
) -> Family:
    """A real-workload image classifier of 1000 classes, built by ``build(config, policy)``, on random images."""

    def data(config: Any, seed: int):
        return image_data(config.batch, config.image, CLASSES, seed)

    return Family(
        name=name,
        title=title,
        description=description,
        config=image_config(name, title, axes),
        version=version,
        width=width,
        depth=None,
        heatmap=heatmap,
        build=build,
        data=data,
        role="workload",
        grids=grids,
        order=order,
        notes=notes,
        frameworks=TENSORFLOW_AND_TORCH,
    )


def application(name: str, app: str, **declaration: Any) -> Family:
    """A workload family of ``keras.applications.<app>`` with random weights and 1000 classes.

    ``declaration`` is :func:`image_family`'s (title, description, grids, version, ...);
    each extra axis in ``axes`` is passed to the application by name (MobileNet's
    ``alpha``). Nothing is downloaded: the model is built with ``weights=None``.
    """
    extra = tuple(declaration.get("axes") or ())

    def build(config: Any, policy: str):
        from paradnn.tfimport import keras

        with policy_scope(policy):
            return getattr(keras.applications, app)(
                weights=None,
                input_shape=(config.image, config.image, 3),
                classes=CLASSES,
                classifier_activation=None,
                **{a: getattr(config, a) for a in extra},
            )

    return image_family(name, build, **declaration)
