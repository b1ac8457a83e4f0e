"""DenseNet-121 (Huang et al. 2017), from ``keras.applications`` with random weights.

Dense blocks of [6, 12, 24, 16] layers, growth rate 32, bottleneck (1x1 to 4k, then 3x3)
layers and compression 0.5: DenseNet-BC-121, the DenseNet-121 of the paper and of Keras.
The TPU reference code of the original study defaults to layers without the bottleneck
(3x3 only, 10.9 M parameters); we follow the architecture's paper. 1000 classes.
Published compute: 2.9 G multiply-adds at 224 (timm's model card for the torchvision
weights; Huang et al. draw FLOPs only in a figure).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from paradnn.families.base import Config, Family, axis

CLASSES = 1000


@dataclass(frozen=True)
class DenseNetConfig(Config):
    """DenseNet-121 on square ``image``-pixel images."""

    image: int = axis("image", "image side", "pixels")
    batch: int = axis("bs", "batch size", "examples", log2=True)

    family: ClassVar[str] = "densenet"


def build(config: DenseNetConfig, policy: str):
    from paradnn.families._common import policy_scope
    from paradnn.tfimport import keras

    with policy_scope(policy):
        return keras.applications.DenseNet121(weights=None, input_shape=(config.image, config.image, 3), classes=CLASSES,
                                              classifier_activation=None)  # fmt: skip


def data(config: DenseNetConfig, seed: int):
    from paradnn.families._common import image_data

    return image_data(config.batch, config.image, CLASSES, seed)


FAMILY = Family(
    name="densenet",
    title="DenseNet-121",
    description="DenseNet-BC-121 image classifier (keras.applications, random weights), 1000 classes",
    config=DenseNetConfig,
    version=1,
    width=None,
    depth=None,
    heatmap=("image", "batch", None),
    build=build,
    data=data,
    order=14,
    notes="bottleneck layers (DenseNet-BC, as the paper and Keras); the study's TPU code defaults to 3x3-only layers",
)
