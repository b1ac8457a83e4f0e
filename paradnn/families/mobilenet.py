"""MobileNet v1 (Howard et al. 2017), from ``keras.applications`` with random weights.

A 3x3/2 convolution then 13 depthwise-separable blocks, global average pool, dropout and
a 1x1 convolution to 1000 classes. ``alpha`` is the width multiplier: every layer has
``alpha`` times the channels. Published: 569 M multiply-adds and 4.2 M parameters for
1.0-224 (Howard et al. 2017, Table 6).
"""

from paradnn.families._common import application
from paradnn.families.base import axis

FAMILY = application(
    "mobilenet",
    "MobileNet",
    title="MobileNet",
    description="MobileNet v1 image classifier with a width multiplier (keras.applications, random weights)",
    axes={"alpha": axis("alpha", "width multiplier", kind=float, maximum=4.0)},
    width="alpha",
    heatmap=("alpha", "batch", "image"),
    # smoke and quick: seconds on a 2-core CPU (with XLA off, compiling takes 1-20 s);
    # paper: the size of the study's reference code (tensorflow/tpu), batch up to 1024,
    # the TPU v2-8 board's global batch.
    grids={
        "smoke": {"image": [32], "alpha": [0.25], "batch": [2]},
        "quick": {"image": [64], "alpha": [1.0], "batch": [8]},
        "paper": {"image": [224], "alpha": [1.0], "batch": [64, 128, 256, 512, 1024]},
    },
    version=1,
    order=15,
)
