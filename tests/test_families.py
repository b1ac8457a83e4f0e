"""Conformance of every registered family (in the spirit of scikit-learn's check_estimator).

Parametrised over the registry: a new family is tested by adding it, nothing else.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from paradnn import counting, families
from paradnn.config import ConfigError
from paradnn.space import expand, grid, preset_names
from paradnn.store import Store

FAMILIES = families.all_families()


def smallest(family) -> families.Config:
    """The smoke preset's smallest configuration of ``family`` (by analytic FLOPs)."""
    return min(expand(family.name, "smoke"), key=counting.flops_model)


@pytest.fixture(params=FAMILIES, ids=lambda f: f.name)
def family(request):
    return request.param


def test_the_paper_families_are_registered_in_order():
    assert families.names()[:3] == ("fc", "cnn", "rnn")


def test_declaration_is_complete(family):
    names = family.config.axes()
    assert "batch" in names and family.width in (*names, None) and set(family.heatmap) - {None} <= set(names)
    assert family.depth in (*names, None)
    assert isinstance(family.version, int) and family.version >= 1
    assert family.title and family.description
    assert families.get(family.name) is family and family.config.family == family.name


def test_labels_round_trip(family):
    for config in expand(family.name, "smoke"):
        assert family.parse_label(config.label) == config
        assert families.family_of(config) is family
    with pytest.raises(ConfigError, match=family.label_format.split("_")[0]):
        family.parse_label("not-a-label")


def test_every_preset_has_a_complete_grid(family):
    for preset in preset_names():
        axes = grid(family.name, preset)
        assert set(axes) == set(family.config.axes()), preset
        assert expand(family.name, preset)


def test_parameters_equal_keras_and_flops_equal_the_layer_walker(family):
    config = smallest(family)
    model = family.build(config, "float32")
    keras_params = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    assert counting.count_params(config) == keras_params
    walked = counting._walked(dataclasses.replace(config, batch=1))
    assert 2 * 3 * sum(x.macs for x in walked) * config.batch == counting.flops_model(config)


def test_a_smoke_configuration_trains_one_step_with_a_finite_loss(family):
    from paradnn.engine.training import Trainer

    assert math.isfinite(Trainer(smallest(family), xla=False).run(1))


def test_the_store_keeps_every_axis(family, tmp_path):
    config = smallest(family)
    record = {"family": family.name, "family_version": family.version, "label": config.label, **config.hyperparameters(),
              "platform": "p", "state": "ok"}  # fmt: skip
    with Store(tmp_path / "r.sqlite") as store:
        store.add_results([record])
        row = store.results().iloc[0]
    assert {name: row[name] for name in family.config.axes()} == config.hyperparameters()


def test_the_family_version_is_part_of_run_identity(family):
    from paradnn.identity import run_key

    record = {"family": family.name, "label": smallest(family).label, "platform": "cpu", "family_version": family.version}
    assert run_key(record) != run_key({**record, "family_version": family.version + 1})


def test_unknown_families_and_configs_are_clear_errors():
    with pytest.raises(ConfigError, match="family: 'mlp'"):
        families.get("mlp")
    with pytest.raises(ConfigError, match="configuration"):
        counting.count_params(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="preset"):
        grid("fc", "huge")


def test_a_family_missing_from_a_preset_is_a_clear_error(monkeypatch):
    from paradnn import space

    monkeypatch.setattr(space, "_presets", lambda: {"smoke": {"fc": {"layers": [1]}}})
    with pytest.raises(ConfigError, match="presets.yaml"):
        grid("cnn", "smoke")
    with pytest.raises(ConfigError, match="missing nodes"):
        grid("fc", "smoke")


def test_a_family_from_outside_registers_and_conforms():
    from paradnn.families.fc import FAMILY as FC

    @dataclasses.dataclass(frozen=True)
    class WideConfig(families.Config):
        width: int = families.axis("width", "width", log2=True)
        batch: int = families.axis("bs", "batch size", "examples", log2=True)
        family = "toy-wide"

    def build(config, policy):
        return FC.build(FC.config(1, config.width, 4, 3, config.batch), policy)

    def data(config, seed):
        return FC.data(FC.config(1, config.width, 4, 3, config.batch), seed)

    toy = families.Family("toy-wide", "Toy", "one hidden layer", WideConfig, 1, "width", None, ("width", "batch", None),
                          build, data)  # fmt: skip
    families.register(toy)
    try:
        config = toy.parse_label("width_8-bs_2")
        assert families.parse_label("toy-wide", "width_8-bs_2") == config
        assert counting.count_params(config) == 4 * 8 + 8 + 8 * 3 + 3  # counted by the layer walker
        assert "toy-wide" in families.names() and "width" in families.hyperparameter_columns()
    finally:
        families._EXTRA.pop("toy-wide")
