"""ResNet-50 v1 (He et al. 2016), from ``keras.applications`` with random weights.

Bottleneck blocks [3, 4, 6, 3]; Keras puts each group's stride on the first 1x1
convolution (v1), whereas the TPU reference code of the original study strides the 3x3
(v1.5): 3.86 G against 4.09 G multiply-adds at 224 pixels. 1000 classes; images uniform
in [0, 1), labels uniform. Published: 3.8 x 10^9 multiply-adds at 224 (He et al. 2016,
Table 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from paradnn.families.base import Config, Family, axis

CLASSES = 1000


@dataclass(frozen=True)
class ResNet50Config(Config):
    """ResNet-50 on square ``image``-pixel images."""

    image: int = axis("image", "image side", "pixels")
    batch: int = axis("bs", "batch size", "examples", log2=True)

    family: ClassVar[str] = "resnet50"


def build(config: ResNet50Config, policy: str):
    from paradnn.families._common import policy_scope
    from paradnn.tfimport import keras

    with policy_scope(policy):
        return keras.applications.ResNet50(weights=None, input_shape=(config.image, config.image, 3), classes=CLASSES,
                                           classifier_activation=None)  # fmt: skip


def data(config: ResNet50Config, seed: int):
    from paradnn.families._common import image_data

    return image_data(config.batch, config.image, CLASSES, seed)


FAMILY = Family(
    name="resnet50",
    title="ResNet-50",
    description="ResNet-50 v1 image classifier (keras.applications, random weights), 1000 classes",
    config=ResNet50Config,
    version=1,
    width=None,
    depth=None,
    heatmap=("image", "batch", None),
    build=build,
    data=data,
    order=11,
    notes="stride on the first 1x1 of each group (v1, as Keras); the study's TPU code strides the 3x3 (v1.5)",
)
