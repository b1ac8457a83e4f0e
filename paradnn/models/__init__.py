"""Keras builders for the ParaDnn families, and their synthetic training data.

``build_model(config, policy)`` returns an uncompiled ``keras.Model`` whose outputs are
logits; ``synthetic_data(config)`` returns device-resident ``(inputs, labels)`` tensors.
Everything is random: no weights or data are ever downloaded.
"""

from __future__ import annotations

from paradnn.config import POLICIES, CNNConfig, Config, FCConfig, RNNConfig
from paradnn.models import cnn, fc, rnn

__all__ = ["POLICIES", "build_model", "synthetic_data"]
_BUILDERS = {FCConfig: fc, CNNConfig: cnn, RNNConfig: rnn}


def build_model(config: Config, policy: str = "float32"):
    """The Keras model of ``config`` with every layer under dtype ``policy``."""
    return _BUILDERS[type(config)].build(config, policy)


def synthetic_data(config: Config, seed: int = 0):
    """Random ``(inputs, labels)`` for one batch, created on the current device."""
    return _BUILDERS[type(config)].data(config, seed)
