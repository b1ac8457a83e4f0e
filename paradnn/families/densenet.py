"""DenseNet-121 (Huang et al. 2017), from ``keras.applications`` with random weights.

Dense blocks of [6, 12, 24, 16] layers, growth rate 32, bottleneck (1x1 to 4k, then 3x3)
layers and compression 0.5: DenseNet-BC-121, the DenseNet-121 of the paper and of Keras.
The TPU reference code of the original study defaults to layers without the bottleneck
(3x3 only, 10.9 M parameters); we follow the architecture's paper. 1000 classes.
Published compute: 2.9 G multiply-adds at 224 (timm's model card for the torchvision
weights; Huang et al. draw FLOPs only in a figure).
"""

from paradnn.families._common import application

FAMILY = application(
    "densenet",
    "DenseNet121",
    title="DenseNet-121",
    description="DenseNet-BC-121 image classifier (keras.applications, random weights), 1000 classes",
    # smoke and quick: seconds on a 2-core CPU (with XLA off, compiling takes 1-20 s);
    # paper: the size of the study's reference code (tensorflow/tpu), batch up to 1024,
    # the TPU v2-8 board's global batch.
    grids={
        "smoke": {"image": [32], "batch": [2]},
        "quick": {"image": [64], "batch": [8]},
        "paper": {"image": [224], "batch": [64, 128, 256, 512, 1024]},
    },
    version=1,
    order=14,
    notes="bottleneck layers (DenseNet-BC, as the paper and Keras); the study's TPU code defaults to 3x3-only layers",
)
