"""MobileNet v1 (Howard et al. 2017), from ``keras.applications`` with random weights.

A 3x3/2 convolution then 13 depthwise-separable blocks, global average pool, dropout and
a 1x1 convolution to 1000 classes. ``width`` is the width multiplier (alpha): every layer
has ``alpha`` times the channels. Published: 569 M multiply-adds and 4.2 M parameters
for 1.0-224 (Howard et al. 2017, Table 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from paradnn.families.base import Config, Family, axis

CLASSES = 1000


@dataclass(frozen=True)
class MobileNetConfig(Config):
    """MobileNet v1 with width multiplier ``alpha`` on square ``image``-pixel images."""

    image: int = axis("image", "image side", "pixels")
    alpha: float = axis("alpha", "width multiplier", kind=float)
    batch: int = axis("bs", "batch size", "examples", log2=True)

    family: ClassVar[str] = "mobilenet"


def build(config: MobileNetConfig, policy: str):
    from paradnn.families._common import policy_scope
    from paradnn.tfimport import keras

    with policy_scope(policy):
        return keras.applications.MobileNet(weights=None, input_shape=(config.image, config.image, 3), alpha=config.alpha,
                                            classes=CLASSES, classifier_activation=None)  # fmt: skip


def data(config: MobileNetConfig, seed: int):
    from paradnn.families._common import image_data

    return image_data(config.batch, config.image, CLASSES, seed)


FAMILY = Family(
    name="mobilenet",
    title="MobileNet",
    description="MobileNet v1 image classifier with a width multiplier (keras.applications, random weights)",
    config=MobileNetConfig,
    version=1,
    width="alpha",
    depth=None,
    heatmap=("alpha", "batch", "image"),
    build=build,
    data=data,
    order=15,
)
