"""RNN: tokens -> embedding(V, E) -> L stacked cells (rnn | lstm | gru) -> dense(V) per step.

Token ids are [batch, T + 1]: the first T are inputs, the next T the targets.
"""

from __future__ import annotations

from paradnn.config import RNNConfig
from paradnn.tfimport import keras, tf

_CELLS = {"rnn": keras.layers.SimpleRNN, "lstm": keras.layers.LSTM, "gru": keras.layers.GRU}


def build(config: RNNConfig, policy: str) -> keras.Model:
    inputs = keras.Input(shape=(config.maxlength,), batch_size=config.batch, dtype="int32", name="x")
    x = keras.layers.Embedding(config.vocab, config.embedding, dtype=policy)(inputs)
    for _ in range(config.layers):
        x = _CELLS[config.cell](config.embedding, return_sequences=True, dtype=policy)(x)
    logits = keras.layers.Dense(config.vocab, dtype=policy, name="logits")(x)
    return keras.Model(inputs, logits, name="rnn")


def data(config: RNNConfig, seed: int):
    """Inputs are tokens [0, T), targets tokens [1, T + 1) of one random sequence."""
    gen = tf.random.Generator.from_seed(seed)
    tokens = gen.uniform((config.batch, config.maxlength + 1), 0, config.vocab, dtype=tf.int32)
    return tokens[:, :-1], tokens[:, 1:]
