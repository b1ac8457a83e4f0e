"""The six real workloads against the figures their own papers publish (within 3%).

Multiply-adds are forward, per example, at the standard input size; ``flops_model`` is
2 x 3 x that x batch. Sources are cited in docs/workloads.md.
"""

from __future__ import annotations

import pytest

from paradnn import counting
from paradnn.families import parse_label

pytestmark = pytest.mark.slow

PUBLISHED = [
    # family, label, multiply-adds (None: not published), trainable parameters, source
    ("resnet50", "image_224-bs_64", 3.8e9, 25.6e6, "He et al. 2016, Table 1"),
    ("mobilenet", "image_224-alpha_1.0-bs_64", 569e6, 4.2e6, "Howard et al. 2017, Table 6"),
    ("densenet", "image_224-bs_64", 2.9e9, 8.0e6, "timm densenet121.tv_in1k model card"),
    ("squeezenet", "image_224-bs_64", 0.82e9, 1_248_424, "torchvision squeezenet1_0; Iandola et al. 2016, Table 1"),
    ("transformer", "layer_6-width_512-vocab_37000-length_64-bs_64", None, 65e6, "Vaswani et al. 2017, Table 3"),
    ("retinanet", "image_640-bs_8", 97e9, 34e6, "Tan et al. 2020 (EfficientDet), Table 2"),
]


@pytest.mark.parametrize("family,label,macs,params,source", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_counts_match_the_published_figures(family, label, macs, params, source):
    config = parse_label(family, label)
    assert counting.count_params(config) == pytest.approx(params, rel=0.03), source
    forward = counting.forward_flops_per_example(config) / 2
    if macs is not None:
        assert forward == pytest.approx(macs, rel=0.03), source
    assert counting.flops_model(config) == 3 * 2 * forward * config.batch


def test_transformer_multiply_adds_per_token_equal_an_independent_count():
    """Per source + target token pair: projections and feed-forward of every layer, the tied
    output projection, and the attention products (QK^T and attention x V)."""
    config = parse_label("transformer", "layer_6-width_512-vocab_32768-length_64-bs_1")
    w, n, length, v = config.width, config.layers, config.length, config.vocab
    attention_projections = 4 * (w * w + w)
    feed_forward = (w * 4 * w + 4 * w) + (4 * w * w + w)
    products = 2 * length * w  # one query row against `length` keys, then `length` values
    encoder = n * (attention_projections + feed_forward + products)
    decoder = n * (2 * attention_projections + feed_forward + 2 * products)
    per_token = encoder + decoder + w * v
    assert counting.forward_flops_per_example(config) / 2 == per_token * length


def test_retinanet_anchor_count_and_image_size_check():
    from paradnn.config import ConfigError
    from paradnn.families.retinanet import anchors

    assert anchors(640) == 9 * (80**2 + 40**2 + 20**2 + 10**2 + 5**2)
    with pytest.raises(ConfigError, match="multiple of 128"):
        parse_label("retinanet", "image_600-bs_8")
