"""ResNet-50 v1 (He et al. 2016), from ``keras.applications`` with random weights.

Bottleneck blocks [3, 4, 6, 3]; Keras puts each group's stride on the first 1x1
convolution (v1), whereas the TPU reference code of the original study strides the 3x3
(v1.5): 3.86 G against 4.09 G multiply-adds at 224 pixels. 1000 classes; images uniform
in [0, 1), labels uniform. Published: 3.8 x 10^9 multiply-adds at 224 (He et al. 2016,
Table 1).
"""

from paradnn.families._common import application

FAMILY = application(
    "resnet50",
    "ResNet50",
    title="ResNet-50",
    description="ResNet-50 v1 image classifier (keras.applications, random weights), 1000 classes",
    # smoke and quick: seconds on a 2-core CPU (with XLA off, compiling takes 1-20 s);
    # paper: the size of the study's reference code (tensorflow/tpu), batch up to 1024,
    # the TPU v2-8 board's global batch.
    grids={
        "smoke": {"image": [32], "batch": [2]},
        "quick": {"image": [64], "batch": [8]},
        "paper": {"image": [224], "batch": [64, 128, 256, 512, 1024]},
    },
    version=1,
    order=11,
    notes="stride on the first 1x1 of each group (v1, as Keras); the study's TPU code strides the 3x3 (v1.5)",
)
