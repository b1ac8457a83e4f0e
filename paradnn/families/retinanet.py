"""RetinaNet (Lin et al. 2017) with a ResNet-50 FPN backbone, built in-package.

As the Cloud TPU reference code the original study used: ResNet-50 (``keras.applications``,
random weights; v1, see the ResNet-50 family) gives C3-C5; the feature pyramid has 1x1
laterals of 256 channels, nearest-neighbour top-down upsampling and 3x3 output
convolutions (P3-P5), P6 a 3x3/2 convolution of P5 and P7 one of ReLU(P6), each level
batch-normalised. The class and box subnets (four 3x3 convolutions of 256 channels with
batch norm per level and ReLU, then a 3x3 convolution to 9 x classes or 9 x 4 outputs)
are shared across the five levels. 9 anchors per location (3 scales x 3 aspect ratios),
90 classes (COCO). Loss: focal loss (alpha 0.25, gamma 1.5) on the classes plus 50 x
Huber (delta 0.1) on the boxes of positive anchors, normalised by the positive count.
Synthetic targets: 1% of anchors positive with a random class; box offsets N(0, 0.1).

Published: 34 M parameters and 97 B multiply-adds at 640 pixels (Tan et al., EfficientDet,
Table 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from paradnn.config import ConfigError
from paradnn.families._common import TENSORFLOW_AND_TORCH
from paradnn.families.base import Config, Family, axis

CLASSES = 90
ANCHORS = 9  # per location: 3 scales x 3 aspect ratios
LEVELS = (3, 4, 5, 6, 7)
CHANNELS = 256
POSITIVE_SHARE = 0.01
ALPHA, GAMMA, DELTA, BOX_WEIGHT = 0.25, 1.5, 0.1, 50.0
C_LAYERS = ("conv3_block4_out", "conv4_block6_out", "conv5_block3_out")  # C3, C4, C5 in Keras's ResNet50


@dataclass(frozen=True)
class RetinaNetConfig(Config):
    """RetinaNet on square ``image``-pixel images (a multiple of 128, so every pyramid level halves exactly)."""

    image: int = axis("image", "image side", "pixels", maximum=8192)
    batch: int = axis("bs", "batch size", "examples", log2=True, maximum=2**30)

    family: ClassVar[str] = "retinanet"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.image % 128:
            raise ConfigError("image", self.image, "a multiple of 128 (pyramid levels P3-P7)")


def anchors(image: int) -> int:
    """Anchors per image: 9 per location of every pyramid level."""
    return ANCHORS * sum(math.ceil(image / 2**level) ** 2 for level in LEVELS)


def _conv(filters: int, kernel: int = 3, stride: int = 1, name: str | None = None, bias: float = 0.0):
    from paradnn.tfimport import keras

    return keras.layers.Conv2D(
        filters, kernel, strides=stride, padding="same", name=name, bias_initializer=keras.initializers.Constant(bias)
    )


def _pyramid(c3, c4, c5):
    from paradnn.tfimport import keras

    laterals = [_conv(CHANNELS, 1)(c) for c in (c3, c4, c5)]
    p5 = laterals[2]
    p4 = keras.layers.Add()([laterals[1], keras.layers.UpSampling2D(2)(p5)])
    p3 = keras.layers.Add()([laterals[0], keras.layers.UpSampling2D(2)(p4)])
    p3, p4, p5 = (_conv(CHANNELS)(p) for p in (p3, p4, p5))
    p6 = _conv(CHANNELS, stride=2)(p5)
    p7 = _conv(CHANNELS, stride=2)(keras.layers.ReLU()(p6))
    return [keras.layers.BatchNormalization()(p) for p in (p3, p4, p5, p6, p7)]


def _subnet(levels, outputs_per_anchor: int, name: str, bias: float = 0.0):
    """Four shared 3x3 convolutions (batch norm per level) and a shared output convolution."""
    from paradnn.tfimport import keras

    convs = [_conv(CHANNELS, name=f"{name}_conv{i}") for i in range(4)]
    head = _conv(ANCHORS * outputs_per_anchor, name=f"{name}_out", bias=bias)
    results = []
    for level in levels:
        x = level
        for conv in convs:
            x = keras.layers.ReLU()(keras.layers.BatchNormalization()(conv(x)))
        results.append(keras.layers.Reshape((-1, outputs_per_anchor))(head(x)))
    return keras.layers.Concatenate(axis=1, dtype="float32")(results)


def build(config: RetinaNetConfig, policy: str):
    from paradnn.families._common import policy_scope
    from paradnn.tfimport import keras

    with policy_scope(policy):
        inputs = keras.Input((config.image, config.image, 3), name="x")
        backbone = keras.applications.ResNet50(include_top=False, weights=None, input_tensor=inputs)
        levels = _pyramid(*(backbone.get_layer(name).output for name in C_LAYERS))
        # The class outputs start at the positive prior (Lin et al., section 4.1), so the loss starts sane.
        classes = _subnet(levels, CLASSES, "class", bias=-math.log((1 - POSITIVE_SHARE) / POSITIVE_SHARE))
        boxes = _subnet(levels, 4, "box")
        return keras.Model(inputs, [classes, boxes], name="retinanet")


def data(config: RetinaNetConfig, seed: int):
    """Images, and per anchor a class (-1: background) and four box offsets."""
    from paradnn.tfimport import tf

    n = anchors(config.image)
    x = tf.random.stateless_uniform((config.batch, config.image, config.image, 3), (seed, 0))
    positive = tf.random.stateless_uniform((config.batch, n), (seed, 1)) < POSITIVE_SHARE
    classes = tf.random.stateless_uniform((config.batch, n), (seed, 2), 0, CLASSES, dtype=tf.int32)
    boxes = 0.1 * tf.random.stateless_normal((config.batch, n, 4), (seed, 3))
    return x, (tf.where(positive, classes, -1), boxes)


def loss(config: RetinaNetConfig):
    """Focal loss on the classes plus weighted Huber loss on positive anchors' boxes, in Keras ops (any backend)."""
    from paradnn.tfimport import keras

    ops = keras.ops

    def focal(targets, outputs):
        classes, boxes = targets
        class_logits, box_outputs = outputs
        positive = ops.cast(classes >= 0, "float32")
        normaliser = ops.maximum(ops.sum(positive), 1.0)
        onehot = ops.one_hot(ops.maximum(classes, 0), CLASSES) * positive[..., None]  # background (-1) is all zeros
        p = ops.sigmoid(class_logits)
        cross_entropy = ops.binary_crossentropy(onehot, class_logits, from_logits=True)
        p_t = onehot * p + (1 - onehot) * (1 - p)
        alpha_t = onehot * ALPHA + (1 - onehot) * (1 - ALPHA)
        class_loss = ops.sum(alpha_t * (1 - p_t) ** GAMMA * cross_entropy) / normaliser
        error = ops.abs(box_outputs - boxes)
        huber = ops.where(error < DELTA, 0.5 * error**2, DELTA * (error - 0.5 * DELTA))
        box_loss = ops.sum(huber * positive[..., None]) / (4 * normaliser)
        return class_loss + BOX_WEIGHT * box_loss

    return focal


FAMILY = Family(
    frameworks=TENSORFLOW_AND_TORCH,
    name="retinanet",
    title="RetinaNet",
    description="RetinaNet object detector: ResNet-50 FPN (P3-P7), shared class and box subnets, focal loss; in-package",
    config=RetinaNetConfig,
    version=1,
    width=None,
    depth=None,
    heatmap=("image", "batch", None),
    build=build,
    data=data,
    role="workload",
    # paper: 640 pixels, the size of the study's reference code (tensorflow/tpu); quick and
    # smoke: the smallest image every pyramid level halves exactly, seconds on a 2-core CPU.
    grids={
        "smoke": {"image": [128], "batch": [1]},
        "quick": {"image": [128], "batch": [2]},
        "paper": {"image": [640], "batch": [8, 16, 32, 64]},
    },
    loss=loss,
    order=12,
    notes="ResNet-50 v1 backbone (Keras) instead of v1.5; the stem is trained (the reference freezes it)",
)
