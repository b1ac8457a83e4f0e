"""FC: input(I) -> L x dense(N, ReLU) -> dense(O) logits, after the original ParaDnn.

Parameters are exactly ``I*N + (L-1)*N^2 + N*O + L*N + O``. Inputs are uniform in
[-0.5, 0.5), labels uniform in [0, O).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from paradnn.families.base import Config, Family, Layer, axis


@dataclass(frozen=True)
class FCConfig(Config):
    """Input of width ``input`` -> ``layers`` x dense(``nodes``, ReLU) -> dense(``output``)."""

    layers: int = axis("layer", "hidden layers", maximum=4096)
    nodes: int = axis("node", "nodes per layer", log2=True, maximum=2**17)
    input: int = axis("input", "input width", "features")
    output: int = axis("output", "output classes")
    batch: int = axis("bs", "batch size", "examples", log2=True, maximum=2**30)

    family: ClassVar[str] = "fc"


def build(config: FCConfig, policy: str):
    from paradnn.tfimport import keras

    inputs = keras.Input(shape=(config.input,), batch_size=config.batch, name="x")
    x = inputs
    for i in range(config.layers):
        x = keras.layers.Dense(config.nodes, activation="relu", dtype=policy, name=f"dense_{i}")(x)
    logits = keras.layers.Dense(config.output, dtype=policy, name="logits")(x)
    return keras.Model(inputs, logits, name="fc")


def data(config: FCConfig, seed: int):
    """Inputs uniform in [-0.5, 0.5), integer labels uniform in [0, output)."""
    from paradnn.tfimport import tf

    x = tf.random.stateless_uniform((config.batch, config.input), (seed, 0), -0.5, 0.5)
    y = tf.random.stateless_uniform((config.batch,), (seed, 1), 0, config.output, dtype=tf.int32)
    return x, y


def layers(config: FCConfig) -> list[Layer]:
    widths = [config.input] + [config.nodes] * config.layers + [config.output]
    dense = [Layer(f"dense_{i}", a * b + b, a * b + b, b) for i, (a, b) in enumerate(zip(widths, widths[1:]))]
    return [Layer("input", 0, 0, config.input), *dense]


FAMILY = Family(
    name="fc",
    title="FC",
    description="fully connected: L dense ReLU layers of N nodes between an input of I features and O classes",
    config=FCConfig,
    version=1,
    width="nodes",
    depth="layers",
    heatmap=("nodes", "batch", "layers"),
    build=build,
    data=data,
    role="model",
    # paper: Table 2 of Wang, Wei, Brooks (2019); quick: minutes on a 2-core CPU; smoke: CI,
    # seconds per configuration.
    grids={
        "smoke": {"layers": [2], "nodes": [64, 256], "input": [2000], "output": [1000], "batch": [64, 256]},
        "quick": {"layers": [4, 8], "nodes": [64, 256, 1024], "input": [2000], "output": [1000], "batch": [64, 256, 1024]},
        "paper": {
            "layers": [4, 8, 16, 32, 64, 128],
            "nodes": [32, 64, 128, 256, 512, 1024, 2048, 4096, 8192],
            "input": [2000, 4000, 6000, 8000],
            "output": [200, 400, 600, 800, 1000],
            "batch": [64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384],
        },
    },
    layers=layers,
    frameworks=("tensorflow", "jax", "torch"),
    order=1,
)
