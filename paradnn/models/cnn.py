"""CNN: ResNet-v1 style, channels-last, residual or bottleneck blocks.

Stem 7x7/2 conv (F) + BN + ReLU + 3x3/2 max-pool; four groups of B blocks with F, 2F,
4F, 8F filters and strides 1, 2, 2, 2 (projection shortcut on each group's first block);
global average pool -> dense(O). The original used a fixed 7x7 average pool, which fails
for 100-pixel images and is not global at 300; we pool globally.
"""

from __future__ import annotations

from paradnn.config import CNN_GROUP_STRIDES, CNNConfig
from paradnn.tfimport import keras, tf


def _conv_bn(x, filters: int, kernel: int, stride: int, policy: str, relu: bool):
    x = keras.layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False, dtype=policy)(x)
    x = keras.layers.BatchNormalization(dtype=policy)(x)
    return keras.layers.ReLU(dtype=policy)(x) if relu else x


def _block(x, filters: int, stride: int, first: bool, bottleneck: bool, policy: str):
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


def build(config: CNNConfig, policy: str) -> keras.Model:
    inputs = keras.Input(shape=(config.image, config.image, 3), batch_size=config.batch, name="x")
    x = _conv_bn(inputs, config.filters, 7, 2, policy, relu=True)
    x = keras.layers.MaxPooling2D(3, strides=2, padding="same", dtype=policy)(x)
    for group, stride in enumerate(CNN_GROUP_STRIDES):
        filters = config.filters * 2**group
        for b in range(config.blocks):
            x = _block(x, filters, stride if b == 0 else 1, b == 0, config.block == "bottleneck", policy)
    x = keras.layers.GlobalAveragePooling2D(dtype=policy)(x)
    logits = keras.layers.Dense(config.output, dtype=policy, name="logits")(x)
    return keras.Model(inputs, logits, name="cnn")


def data(config: CNNConfig, seed: int):
    """Images uniform in [0, 1), integer labels uniform in [0, output)."""
    gen = tf.random.Generator.from_seed(seed)
    x = gen.uniform((config.batch, config.image, config.image, 3))
    y = gen.uniform((config.batch,), 0, config.output, dtype=tf.int32)
    return x, y
