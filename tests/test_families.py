"""Conformance of every registered family (``paradnn.check_family``), and the checks' teeth.

Parametrised over the registry: a new family is tested by adding it, nothing else.
"""

from __future__ import annotations

import dataclasses

import keras
import pytest

from paradnn import counting, families
from paradnn.checks import check_family
from paradnn.config import ConfigError
from paradnn.families.fc import FAMILY as FC
from paradnn.space import grid

FAMILIES = families.all_families()


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_every_family_conforms(family):
    check_family(family)


def test_the_paper_families_are_registered_in_order_with_their_roles():
    assert families.names()[:3] == ("fc", "cnn", "rnn")
    assert families.of_role("model") == ("fc", "cnn", "rnn")
    assert set(families.of_role("workload")) == {"transformer", "resnet50", "retinanet", "densenet", "mobilenet", "squeezenet"}
    with pytest.raises(ConfigError, match="role: 'real'.*model, workload"):
        families.of_role("real")


def test_unknown_families_and_configs_are_clear_errors():
    with pytest.raises(ConfigError, match="family: 'mlp'"):
        families.get("mlp")
    with pytest.raises(ConfigError, match="configuration"):
        counting.count_params(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="preset: 'huge'.*smoke, quick, paper"):
        grid("fc", "huge")


@dataclasses.dataclass(frozen=True)
class WideConfig(families.Config):
    width: int = families.axis("width", "width", log2=True)
    batch: int = families.axis("bs", "batch size", "examples", log2=True)
    family = "toy-wide"


def _fc(config: WideConfig):
    return FC.config(1, config.width, 4, 3, config.batch)


GRIDS = {preset: {"width": [8], "batch": [2]} for preset in families.PRESETS}
TOY = families.Family(
    "toy-wide",
    "Toy",
    "one hidden layer",
    WideConfig,
    1,
    "width",
    None,
    ("width", "batch", None),
    lambda config, policy: FC.build(_fc(config), policy),
    lambda config, seed: FC.data(_fc(config), seed),
    "model",
    GRIDS,
)


@pytest.fixture
def registered():
    """Register a toy family (or a broken variant of it) for the duration of a test."""
    added = []

    def add(family: families.Family) -> families.Family:
        added.append(families.register(family))
        return family

    yield add
    for family in added:
        families._EXTRA.pop(family.name)


def test_a_family_from_outside_registers_and_conforms(registered):
    registered(TOY)
    config = TOY.parse_label("width_8-bs_2")
    assert families.parse_label("toy-wide", "width_8-bs_2") == config
    assert counting.count_params(config) == 4 * 8 + 8 + 8 * 3 + 3  # counted by the layer walker
    assert "toy-wide" in families.of_role("model") and "width" in families.hyperparameter_columns()
    check_family(TOY)


def _nan_loss(config):
    """A loss that is NaN whatever the model does (NaN inputs are not enough: ReLU on this CPU maps NaN to 0)."""

    def loss(y, outputs):
        return keras.ops.mean(outputs) * float("nan")

    return loss


def _layers(params_extra: int, macs_extra: int):
    """An analytic counter of the toy that is off by ``params_extra`` parameters and ``macs_extra`` multiply-adds."""

    def layers(config):
        sizes = [(4, config.width), (config.width, 3)]
        return [families.Layer("input", 0, 0, 4)] + [
            families.Layer(f"dense_{i}", a * b + b + params_extra, a * b + b + macs_extra, b) for i, (a, b) in enumerate(sizes)
        ]

    return layers


BROKEN = [
    ("declaration", {"title": ""}),
    ("grids", {"grids": {**GRIDS, "quick": {"width": [8], "batch": [0]}}}),  # set after declaration, which refuses it
    ("parameters", {"layers": _layers(1, 0)}),
    ("flops", {"layers": _layers(0, 1)}),
    ("training", {"loss": _nan_loss}),
]


@pytest.mark.parametrize("check,change", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_family_fails_the_check_it_breaks(registered, check, change):
    if check == "grids":  # declaration refuses a grid outside the axis bounds; the check must catch one changed later
        broken = dataclasses.replace(TOY)
        object.__setattr__(broken, "grids", change["grids"])
        broken = registered(broken)
    else:
        broken = registered(dataclasses.replace(TOY, **change))
    with pytest.raises(AssertionError, match=f"family 'toy-wide' fails check '{check}'"):
        check_family(broken)


def test_the_label_store_and_identity_checks_can_fail(registered, monkeypatch):
    with pytest.raises(AssertionError, match="fails check 'registered'"):
        check_family(TOY)  # not registered
    registered(TOY)
    monkeypatch.setattr(TOY.config, "label", property(lambda self: f"width_{self.width}x-bs_{self.batch}"))
    with pytest.raises(AssertionError, match="fails check 'labels'"):
        check_family(TOY, train=False)
    monkeypatch.undo()
    monkeypatch.setattr(families, "hyperparameter_columns", lambda: {})
    with pytest.raises(AssertionError, match="fails check 'store'.*axis 'width' has no int column"):
        check_family(TOY, train=False)
    monkeypatch.undo()
    monkeypatch.setattr("paradnn.identity.run_key", lambda record: record["label"])
    with pytest.raises(AssertionError, match="fails check 'identity'"):
        check_family(TOY, train=False)


def test_an_incomplete_declaration_is_refused_when_declared():
    with pytest.raises(TypeError, match="role 'real'"):
        dataclasses.replace(TOY, role="real")
    with pytest.raises(TypeError, match="grids for presets"):
        dataclasses.replace(TOY, grids={"smoke": GRIDS["smoke"]})
    with pytest.raises(TypeError, match="the quick grid: batch: 0 is not valid"):
        dataclasses.replace(TOY, grids={**GRIDS, "quick": {"width": [8], "batch": [0]}})
    with pytest.raises(TypeError, match="the quick grid must give values for exactly the axes"):
        dataclasses.replace(TOY, grids={**GRIDS, "quick": {"width": [8]}})
