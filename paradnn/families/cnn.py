"""CNN: ResNet-v1 style, channels-last, residual or bottleneck blocks.

Stem 7x7/2 conv (F) + BN + ReLU + 3x3/2 max-pool; four groups of B blocks with F, 2F,
4F, 8F filters and strides 1, 2, 2, 2 (projection shortcut on each group's first block);
global average pool -> dense(O). The original used a fixed 7x7 average pool, which fails
for 100-pixel images and is not global at 300; we pool globally.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from paradnn.families.base import Config, Family, Layer, axis, choice

# Strides of the four groups (filters F, 2F, 4F, 8F).
GROUP_STRIDES = (1, 2, 2, 2)


@dataclass(frozen=True)
class CNNConfig(Config):
    """ResNet-v1 style network: 4 groups of ``blocks`` blocks, base width ``filters``."""

    blocks: int = axis("block", "blocks per group", maximum=256)
    filters: int = axis("filter", "filters in the first group", log2=True, maximum=2**14)
    image: int = axis("image", "image side", "pixels", maximum=8192)
    output: int = axis("output", "output classes")
    batch: int = axis("bs", "batch size", "examples", log2=True, maximum=2**30)
    block: str = choice(("residual", "bottleneck"), "residual", "block type")

    family: ClassVar[str] = "cnn"


def _conv_bn(x, filters: int, kernel: int, stride: int, policy: str, relu: bool):
    from paradnn.tfimport import keras

    x = keras.layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False, dtype=policy)(x)
    x = keras.layers.BatchNormalization(dtype=policy)(x)
    return keras.layers.ReLU(dtype=policy)(x) if relu else x


def _block(x, filters: int, stride: int, first: bool, bottleneck: bool, policy: str):
    from paradnn.tfimport import keras

    if bottleneck:
        out_channels = 4 * filters
        y = _conv_bn(x, filters, 1, 1, policy, relu=True)
        y = _conv_bn(y, filters, 3, stride, policy, relu=True)
        y = _conv_bn(y, out_channels, 1, 1, policy, relu=False)
    else:
        out_channels = filters
        y = _conv_bn(x, filters, 3, stride, policy, relu=True)
        y = _conv_bn(y, filters, 3, 1, policy, relu=False)
    shortcut = _conv_bn(x, out_channels, 1, stride, policy, relu=False) if first else x
    y = keras.layers.Add(dtype=policy)([y, shortcut])
    return keras.layers.ReLU(dtype=policy)(y)


def build(config: CNNConfig, policy: str):
    from paradnn.tfimport import keras

    inputs = keras.Input(shape=(config.image, config.image, 3), batch_size=config.batch, name="x")
    x = _conv_bn(inputs, config.filters, 7, 2, policy, relu=True)
    x = keras.layers.MaxPooling2D(3, strides=2, padding="same", dtype=policy)(x)
    for group, stride in enumerate(GROUP_STRIDES):
        filters = config.filters * 2**group
        for b in range(config.blocks):
            x = _block(x, filters, stride if b == 0 else 1, b == 0, config.block == "bottleneck", policy)
    x = keras.layers.GlobalAveragePooling2D(dtype=policy)(x)
    logits = keras.layers.Dense(config.output, dtype=policy, name="logits")(x)
    return keras.Model(inputs, logits, name="cnn")


def data(config: CNNConfig, seed: int):
    """Images uniform in [0, 1), integer labels uniform in [0, output)."""
    from paradnn.tfimport import tf

    x = tf.random.stateless_uniform((config.batch, config.image, config.image, 3), (seed, 0))
    y = tf.random.stateless_uniform((config.batch,), (seed, 1), 0, config.output, dtype=tf.int32)
    return x, y


def _conv(name: str, cin: int, cout: int, k: int, hw: int) -> list[Layer]:
    """A bias-free conv followed by batch norm (2 trainable parameters per channel)."""
    weights = k * k * cin * cout
    return [Layer(name, weights, weights * hw * hw, hw * hw * cout), Layer(name + "_bn", 2 * cout, 0, hw * hw * cout)]


def layers(config: CNNConfig) -> list[Layer]:
    hw = math.ceil(config.image / 2)
    result = [Layer("input", 0, 0, 3 * config.image**2), *_conv("stem", 3, config.filters, 7, hw)]
    hw = math.ceil(hw / 2)  # 3x3/2 max-pool
    channels = config.filters
    bottleneck = config.block == "bottleneck"
    for g, group_stride in enumerate(GROUP_STRIDES):
        f = config.filters * 2**g
        out = 4 * f if bottleneck else f
        for b in range(config.blocks):
            hw_out = math.ceil(hw / (group_stride if b == 0 else 1))
            name = f"g{g}b{b}"
            if bottleneck:
                result += _conv(name + "_a", channels, f, 1, hw)
                result += _conv(name + "_b", f, f, 3, hw_out)
                result += _conv(name + "_c", f, out, 1, hw_out)
            else:
                result += _conv(name + "_a", channels, f, 3, hw_out)
                result += _conv(name + "_b", f, f, 3, hw_out)
            if b == 0:
                result += _conv(name + "_proj", channels, out, 1, hw_out)
            channels, hw = out, hw_out
    dense = channels * config.output + config.output
    return [*result, Layer("logits", dense, dense, config.output)]


FAMILY = Family(
    name="cnn",
    title="CNN",
    description="ResNet-v1 style: a 7x7 stem, four groups of B residual or bottleneck blocks of F..8F filters, dense(O)",
    config=CNNConfig,
    version=1,
    width="filters",
    depth="blocks",
    heatmap=("filters", "batch", "blocks"),
    build=build,
    data=data,
    role="model",
    # paper: Table 2. quick is scaled down from the paper's values: with XLA a 100-pixel
    # CNN step takes seconds on 2 CPU cores.
    grids={
        "smoke": {"blocks": [1], "filters": [8], "image": [32], "output": [100], "batch": [16, 32], "block": ["residual"]},
        "quick": {
            "blocks": [1, 2],
            "filters": [8, 16],
            "image": [64],
            "output": [1000],
            "batch": [16, 64],
            "block": ["residual"],
        },
        "paper": {
            "blocks": [1, 2, 3, 4, 5, 6, 7, 8],
            "filters": [16, 32, 64],
            "image": [200, 250, 300],
            "output": [500, 1000, 1500],
            "batch": [64, 128, 256, 512, 1024],
            "block": ["residual", "bottleneck"],
        },
    },
    layers=layers,
    frameworks=("tensorflow", "jax", "torch"),
    order=2,
)
