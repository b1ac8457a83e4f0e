"""Configurations, labels and grids."""

from __future__ import annotations

import pytest

from paradnn.config import ConfigError
from paradnn.families import label_format, make_config, parse_label
from paradnn.families.cnn import CNNConfig
from paradnn.families.fc import FCConfig
from paradnn.families.rnn import RNNConfig
from paradnn.space import expand, grid, parse_override

LABELS = [
    ("fc", "layer_4-node_512-input_2000-output_1000-bs_8192"),
    ("cnn", "block_2-filter_32-image_200-output_1000-bs_64-bottleneck"),
    ("cnn", "block_1-filter_16-image_100-output_500-bs_64-residual"),
    ("rnn", "layer_5-maxlength_50-vocab_5000-embedding_500-bs_128-lstm"),
    ("rnn", "layer_1-maxlength_10-vocab_1000-embedding_100-bs_64-gru"),
]


@pytest.mark.parametrize("family,label", LABELS)
def test_label_round_trips(family, label):
    config = parse_label(family, label)
    assert config.label == label
    assert parse_label(family, config.label) == config


def test_label_fields_are_parsed():
    assert parse_label("fc", LABELS[0][1]) == FCConfig(layers=4, nodes=512, input=2000, output=1000, batch=8192)
    assert parse_label("cnn", LABELS[1][1]) == CNNConfig(2, 32, 200, 1000, 64, "bottleneck")
    assert parse_label("rnn", LABELS[3][1]) == RNNConfig(5, 50, 5000, 500, 128, "lstm")


@pytest.mark.parametrize(
    "family,label,field",
    [
        ("fc", "layer_4-node_512-input_2000-output_1000", "label"),
        ("fc", "layer_4-nodes_512-input_2000-output_1000-bs_8", "label"),
        ("fc", "layer_0-node_512-input_2000-output_1000-bs_8", "layers"),
        ("cnn", "block_2-filter_32-image_200-output_1000-bs_64-dense", "block"),
        ("rnn", "layer_5-maxlength_50-vocab_5000-embedding_500-bs_128-transformer", "cell"),
        ("mlp", "layer_4", "family"),
    ],
)
def test_bad_labels_name_the_field(family, label, field):
    with pytest.raises(ConfigError) as err:
        parse_label(family, label)
    assert err.value.field == field
    assert "allowed" in str(err.value)


def test_label_format_is_documented_in_errors():
    with pytest.raises(ConfigError, match="layer_<layers>-node_<nodes>"):
        parse_label("fc", "nonsense")
    assert label_format("rnn").endswith("-<rnn|lstm|gru>")


def test_configs_are_immutable():
    config = FCConfig(4, 64, 2000, 1000, 64)
    with pytest.raises(AttributeError):
        config.nodes = 128  # type: ignore[misc]


def test_paper_grids_match_table_2():
    fc = grid("fc", "paper")
    assert fc["layers"] == [4, 8, 16, 32, 64, 128]
    assert fc["nodes"][0] == 32 and fc["nodes"][-1] == 8192 and len(fc["nodes"]) == 9
    assert fc["batch"] == [2**i for i in range(6, 15)]
    assert len(expand("fc", "paper")) == 6 * 9 * 4 * 5 * 9
    assert len(expand("cnn", "paper")) == 8 * 3 * 3 * 3 * 5 * 2
    assert len(expand("rnn", "paper")) == 4 * 3 * 3 * 3 * 5 * 3


def test_overrides_replace_one_axis():
    configs = expand("fc", "smoke", {"nodes": [32, 64, 128]})
    assert sorted({c.nodes for c in configs}) == [32, 64, 128]
    assert {c.layers for c in configs} == set(grid("fc", "smoke")["layers"])


def test_parse_override():
    assert parse_override("rnn", "cell=gru,rnn") == ("cell", ["gru", "rnn"])
    assert parse_override("fc", "batch=64, 128") == ("batch", [64, 128])
    for bad in ("depth=3", "nodes=abc", "nodes=0", "nodes", "cell=lstm"):
        with pytest.raises(ConfigError):
            parse_override("fc", bad)


def test_unknown_preset_and_axis():
    with pytest.raises(ConfigError, match="preset"):
        grid("fc", "huge")
    with pytest.raises(ConfigError, match="axis"):
        make_config("fc", layers=1, nodes=2, input=3, output=4, batch=5, depth=6)
