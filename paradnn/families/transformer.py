"""Transformer (Vaswani et al. 2017): the encoder-decoder translation model, built in-package.

As the original study ran it (tensor2tensor's ``transformer_tpu``: ``transformer_base``
for TPUs): 6 encoder and 6 decoder layers, model width 512, 8 heads of 64, feed-forward
width 2048 (4 x width), a 32,768-token vocabulary shared by source, target and the
output projection (tied embeddings, scaled by sqrt(width)), sinusoidal positions,
pre-layer-norm sublayers with dropout 0.1, sequences of 64 tokens. The loss is
label-smoothed (0.1) softmax cross-entropy on synthetic token ids; every sequence is full
length, so there is no padding mask. Heads are width / 64.

Published: 65 M parameters for the base model with its 37,000-token vocabulary
(Vaswani et al. 2017, Table 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from paradnn.config import ConfigError
from paradnn.families._common import TENSORFLOW_AND_TORCH
from paradnn.families.base import Config, Family, axis

LABEL_SMOOTHING = 0.1
DROPOUT = 0.1
HEAD_SIZE = 64


@dataclass(frozen=True)
class TransformerConfig(Config):
    """Encoder-decoder Transformer: ``layers`` each side, model width ``width``, ``length``-token sequences."""

    layers: int = axis("layer", "layers per side", maximum=1024)
    width: int = axis("width", "model width", log2=True, maximum=2**16)
    vocab: int = axis("vocab", "vocabulary", "tokens")
    length: int = axis("length", "sequence length", "tokens", log2=True, maximum=2**16)
    batch: int = axis("bs", "batch size", "sequences", log2=True, maximum=2**30)

    family: ClassVar[str] = "transformer"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.width % HEAD_SIZE:
            raise ConfigError("width", self.width, f"a multiple of {HEAD_SIZE} (heads of {HEAD_SIZE})")


def _positions(length: int, width: int) -> np.ndarray:
    """Sinusoidal position encodings [length, width] (Vaswani et al., section 3.5)."""
    position = np.arange(length)[:, None]
    rates = 1.0 / np.power(10000.0, np.arange(0, width, 2) / width)
    table = np.zeros((length, width), np.float32)
    table[:, 0::2], table[:, 1::2] = np.sin(position * rates), np.cos(position * rates)
    return table


def _tied_embedding_class():
    from paradnn.tfimport import keras

    class TiedEmbedding(keras.layers.Embedding):
        """An embedding that also serves as the output projection (``reverse=True``: logits)."""

        def call(self, inputs, reverse: bool = False):
            if reverse:
                weights = keras.ops.cast(self.embeddings, self.compute_dtype)
                return keras.ops.matmul(inputs, keras.ops.transpose(weights))
            return super().call(inputs)

        def compute_output_spec(self, inputs, reverse: bool = False):
            if reverse:
                return keras.KerasTensor((*inputs.shape[:-1], self.input_dim), dtype=self.compute_dtype)
            return super().compute_output_spec(inputs)

    return TiedEmbedding


def _sublayer(x, make):
    """Pre-norm residual sublayer: x + dropout(make(layer_norm(x)))."""
    from paradnn.tfimport import keras

    y = make(keras.layers.LayerNormalization(epsilon=1e-6)(x))
    return keras.layers.Add()([x, keras.layers.Dropout(DROPOUT)(y)])


def _feed_forward(width: int):
    from paradnn.tfimport import keras

    def make(x):
        x = keras.layers.Dense(4 * width, activation="relu")(x)
        return keras.layers.Dense(width)(keras.layers.Dropout(DROPOUT)(x))

    return make


def _attention(width: int, causal: bool = False, memory=None):
    from paradnn.tfimport import keras

    def make(x):
        layer = keras.layers.MultiHeadAttention(width // HEAD_SIZE, HEAD_SIZE, dropout=DROPOUT)
        return layer(x, x if memory is None else memory, use_causal_mask=causal)

    return make


def build(config: TransformerConfig, policy: str):
    from paradnn.families._common import policy_scope
    from paradnn.tfimport import keras

    w = config.width
    with policy_scope(policy):
        source = keras.Input((config.length,), dtype="int32", name="source")
        target = keras.Input((config.length,), dtype="int32", name="target")
        embed = _tied_embedding_class()(config.vocab, w, name="shared_embedding")
        positions = _positions(config.length, w)

        def embedded(tokens):
            x = keras.ops.add(keras.ops.multiply(embed(tokens), np.sqrt(w).astype("float32")), positions)
            return keras.layers.Dropout(DROPOUT)(x)

        x = embedded(source)
        for _ in range(config.layers):
            x = _sublayer(_sublayer(x, _attention(w)), _feed_forward(w))
        memory = keras.layers.LayerNormalization(epsilon=1e-6)(x)
        y = embedded(target)
        for _ in range(config.layers):
            y = _sublayer(y, _attention(w, causal=True))
            y = _sublayer(y, _attention(w, memory=memory))
            y = _sublayer(y, _feed_forward(w))
        y = keras.layers.LayerNormalization(epsilon=1e-6)(y)
        return keras.Model([source, target], embed(y, reverse=True), name="transformer")


def data(config: TransformerConfig, seed: int):
    """Source tokens [B, L], and target tokens [B, L + 1]: the decoder reads the first L, predicts the next L."""
    from paradnn.tfimport import tf

    source = tf.random.stateless_uniform((config.batch, config.length), (seed, 0), 1, config.vocab, dtype=tf.int32)
    target = tf.random.stateless_uniform((config.batch, config.length + 1), (seed, 1), 1, config.vocab, dtype=tf.int32)
    return (source, target[:, :-1]), target[:, 1:]


def loss(config: TransformerConfig):
    """Label-smoothed softmax cross-entropy: (1 - e) x NLL + e x the mean over the vocabulary of -log p,
    in Keras ops (any backend)."""
    from paradnn.tfimport import keras

    ops = keras.ops

    def smoothed(labels, logits):
        labels = ops.cast(labels, "int32")  # Keras's fit hands labels over as floats
        log_p = ops.log_softmax(logits)
        nll = -ops.squeeze(ops.take_along_axis(log_p, labels[..., None], axis=-1), -1)
        uniform = -ops.mean(log_p, axis=-1)
        return ops.mean((1 - LABEL_SMOOTHING) * nll + LABEL_SMOOTHING * uniform)

    return smoothed


FAMILY = Family(
    frameworks=TENSORFLOW_AND_TORCH,
    name="transformer",
    title="Transformer",
    description="encoder-decoder Transformer (base: 6+6 layers, width 512, 8 heads), tied embeddings, built in-package",
    config=TransformerConfig,
    version=1,
    width="width",
    depth="layers",
    heatmap=("length", "batch", "width"),
    build=build,
    data=data,
    role="workload",
    # paper: the sizes of the study's reference code (tensor2tensor's transformer_tpu);
    # batch 64 x 64 tokens is the paper's "4k batch size". quick: a 2-layer, 128-wide
    # Transformer a 2-core CPU measures in seconds (with XLA off, compiling takes 1-20 s).
    grids={
        "smoke": {"layers": [1], "width": [64], "vocab": [1000], "length": [16], "batch": [4]},
        "quick": {"layers": [2], "width": [128], "vocab": [8192], "length": [32], "batch": [16]},
        "paper": {"layers": [6], "width": [512], "vocab": [32768], "length": [64], "batch": [32, 64, 128, 256]},
    },
    loss=loss,
    order=10,
    notes="pre-layer-norm sublayers as in tensor2tensor; no padding mask (synthetic sequences are full length); "
    "Adafactor replaced by the suite's RMSProp",
)
