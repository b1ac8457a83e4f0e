"""RNN: tokens -> embedding(V, E) -> L stacked cells (rnn | lstm | gru) -> dense(V) per step.

Token ids are [batch, T + 1]: the first T are inputs, the next T the targets. The cell
is a real choice (the original hard-wired one). The original scripts pass vocabulary
sizes 1, 5, 9; we read them as thousands so the output projection matters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from paradnn.families._common import TENSORFLOW_AND_TORCH
from paradnn.families.base import Config, Family, Layer, axis, choice

# Gates per cell type: weight matrices per step, and the extra activations they write.
GATES = {"rnn": 1, "lstm": 4, "gru": 3}


@dataclass(frozen=True)
class RNNConfig(Config):
    """Embedding -> ``layers`` stacked ``cell`` layers -> dense(``vocab``) per step."""

    layers: int = axis("layer", "recurrent layers", maximum=1024)
    maxlength: int = axis("maxlength", "sequence length", "tokens", maximum=2**16)
    vocab: int = axis("vocab", "vocabulary", "tokens")
    embedding: int = axis("embedding", "embedding size", maximum=2**16)
    batch: int = axis("bs", "batch size", "examples", log2=True, maximum=2**30)
    cell: str = choice(tuple(GATES), "lstm", "cell type")

    family: ClassVar[str] = "rnn"


def build(config: RNNConfig, policy: str):
    from paradnn.tfimport import keras

    cells = {"rnn": keras.layers.SimpleRNN, "lstm": keras.layers.LSTM, "gru": keras.layers.GRU}
    inputs = keras.Input(shape=(config.maxlength,), batch_size=config.batch, dtype="int32", name="x")
    x = keras.layers.Embedding(config.vocab, config.embedding, dtype=policy)(inputs)
    for _ in range(config.layers):
        x = cells[config.cell](config.embedding, return_sequences=True, dtype=policy)(x)
    logits = keras.layers.Dense(config.vocab, dtype=policy, name="logits")(x)
    return keras.Model(inputs, logits, name="rnn")


def data(config: RNNConfig, seed: int):
    """Inputs are tokens [0, T), targets tokens [1, T + 1) of one random sequence."""
    from paradnn.tfimport import tf

    tokens = tf.random.stateless_uniform((config.batch, config.maxlength + 1), (seed, 0), 0, config.vocab, dtype=tf.int32)
    return tokens[:, :-1], tokens[:, 1:]


def cell_params(cell: str, e: int) -> int:
    """Kernel [E, gE] + recurrent kernel [E, gE] + bias, with g gates (Keras 3 layout)."""
    if cell == "gru":  # reset_after=True: two bias vectors
        return 3 * (2 * e * e) + 2 * 3 * e
    return GATES[cell] * (2 * e * e + e)


def layers(config: RNNConfig) -> list[Layer]:
    t, e, v = config.maxlength, config.embedding, config.vocab
    cell = cell_params(config.cell, e)
    result = [Layer("input", 0, 0, t), Layer("embedding", v * e, 0, t * e)]  # a gather: no multiply-adds
    result += [Layer(f"{config.cell}_{i}", cell, cell * t, t * e * (GATES[config.cell] + 1)) for i in range(config.layers)]
    return [*result, Layer("logits", e * v + v, (e * v + v) * t, t * v)]


FAMILY = Family(
    frameworks=TENSORFLOW_AND_TORCH,
    name="rnn",
    title="RNN",
    description="token embedding, L stacked vanilla RNN, LSTM or GRU layers of size E, dense(V) at every step",
    config=RNNConfig,
    version=1,
    width="embedding",
    depth="layers",
    heatmap=("embedding", "batch", "layers"),
    build=build,
    data=data,
    role="model",
    # paper: Table 2, with vocab read as thousands (the original scripts pass 1, 5, 9) so
    # that the output projection matters. quick is scaled down from the paper's values:
    # each RNN configuration compiles for ~10 s.
    grids={
        "smoke": {"layers": [1], "maxlength": [10], "vocab": [1000], "embedding": [64], "batch": [32, 64], "cell": ["lstm"]},
        "quick": {
            "layers": [1, 2],
            "maxlength": [10],
            "vocab": [1000],
            "embedding": [100, 200],
            "batch": [32, 128],
            "cell": ["lstm"],
        },
        "paper": {
            "layers": [1, 5, 9, 13],
            "maxlength": [10, 50, 90],
            "vocab": [1000, 5000, 9000],
            "embedding": [100, 500, 900],
            "batch": [64, 128, 256, 512, 1024],
            "cell": ["rnn", "lstm", "gru"],
        },
    },
    layers=layers,
    order=3,
)
