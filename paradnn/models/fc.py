"""FC: input(I) -> L x dense(N, ReLU) -> dense(O) logits (after the original ParaDnn)."""

from __future__ import annotations

from paradnn.config import FCConfig
from paradnn.tfimport import keras, tf


def build(config: FCConfig, policy: str) -> keras.Model:
    inputs = keras.Input(shape=(config.input,), batch_size=config.batch, name="x")
    x = inputs
    for i in range(config.layers):
        x = keras.layers.Dense(config.nodes, activation="relu", dtype=policy, name=f"dense_{i}")(x)
    logits = keras.layers.Dense(config.output, dtype=policy, name="logits")(x)
    return keras.Model(inputs, logits, name="fc")


def data(config: FCConfig, seed: int):
    """Inputs uniform in [-0.5, 0.5), integer labels uniform in [0, output)."""
    gen = tf.random.Generator.from_seed(seed)
    x = gen.uniform((config.batch, config.input), -0.5, 0.5)
    y = gen.uniform((config.batch,), 0, config.output, dtype=tf.int32)
    return x, y
