"""SqueezeNet v1.0 (Iandola et al. 2016), built in-package as the study's TPU code has it.

The original study took SqueezeNet from the Cloud TPU reference models, which implement
v1.0: a 7x7/2 convolution of 96 filters, max-pools (3x3/2, valid) after it, fire4 and
fire8, eight fire modules (squeeze 1x1, then expand 1x1 and 3x3 concatenated), dropout
0.5, a 1x1 convolution to the classes and an average pool. Every convolution is
"same"-padded and followed by ReLU; there is no batch norm. We pool globally (the
reference's fixed 13x13 pool is global only at 224 pixels). 1000 classes: 1,248,424
parameters, as in the SqueezeNet paper's Table 1; 0.83 G multiply-adds at 224
(torchvision's squeezenet1_0 lists 0.82 GFLOPS, multiply-adds).
"""

from __future__ import annotations

from typing import Any

from paradnn.families._common import CLASSES, image_family, policy_scope

# Fire modules: (squeeze, expand) filters; a max-pool follows the ones marked True.
FIRES = (
    (16, 64, False),
    (16, 64, False),
    (32, 128, True),
    (32, 128, False),
    (48, 192, False),
    (48, 192, False),
    (64, 256, True),
    (64, 256, False),
)


def _conv(x, filters: int, kernel: int, stride: int = 1):
    from paradnn.tfimport import keras

    return keras.layers.Conv2D(filters, kernel, strides=stride, padding="same", activation="relu")(x)


def build(config: Any, policy: str):
    from paradnn.tfimport import keras

    with policy_scope(policy):
        inputs = keras.Input((config.image, config.image, 3), name="x")
        x = _conv(inputs, 96, 7, 2)
        x = keras.layers.MaxPooling2D(3, 2)(x)
        for squeeze, expand, pool in FIRES:
            s = _conv(x, squeeze, 1)
            x = keras.layers.Concatenate()([_conv(s, expand, 1), _conv(s, expand, 3)])
            if pool:
                x = keras.layers.MaxPooling2D(3, 2)(x)
        x = keras.layers.Dropout(0.5)(x)
        x = _conv(x, CLASSES, 1)
        logits = keras.layers.GlobalAveragePooling2D(dtype="float32")(x)
        return keras.Model(inputs, logits, name="squeezenet")


FAMILY = image_family(
    "squeezenet",
    build,
    title="SqueezeNet",
    description="SqueezeNet v1.0 image classifier (fire modules, no batch norm), built in-package, 1000 classes",
    # smoke and quick: seconds on a 2-core CPU (with XLA off, compiling takes 1-20 s);
    # paper: the size of the study's reference code (tensorflow/tpu), batch up to 1024,
    # the TPU v2-8 board's global batch.
    grids={
        "smoke": {"image": [32], "batch": [2]},
        "quick": {"image": [64], "batch": [8]},
        "paper": {"image": [224], "batch": [64, 128, 256, 512, 1024]},
    },
    version=1,
    order=16,
    notes="global average pool instead of the reference's fixed 13x13 pool (the same at 224 pixels)",
)
