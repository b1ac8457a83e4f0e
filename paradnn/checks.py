"""The conformance suite every family passes, shipped for plug-in families too.

:func:`check_family` runs, in the spirit of scikit-learn's ``check_estimator``, the
checks ``tests/test_families.py`` applies to every registered family, and raises an
AssertionError naming the first check that fails. It exercises a family through the
whole stack (counting, training, store, run identity), so it sits above them all, beside
the front ends, and the family registry never imports it (``paradnn.check_family`` is the
same function).
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Callable
from functools import cached_property
from pathlib import Path

from paradnn.config import ConfigError
from paradnn.engine import frameworks
from paradnn.families.base import PRESETS, ROLES, Config, Family, Layer


def check_family(family: Family, *, train: bool = True, framework: str = frameworks.DEFAULT) -> None:
    """Check that ``family`` (registered) works everywhere paradnn uses a family, under ``framework``.

    Checks, in order: ``registered``, ``declaration`` (role, title, description,
    version), ``grids`` (every preset expands to valid configurations of every axis),
    ``labels`` (round trip, clear error for a bad label), ``parameters`` (the count equals
    Keras's trainable weights), ``flops`` (the analytic count equals the layer walker's),
    ``training`` (the family declares ``framework`` and a smoke configuration trains one step
    under it with a finite loss; skipped with ``train=False``), ``store`` (the store keeps every axis) and ``identity`` (the
    version is part of run identity). Raises AssertionError naming the failed check.

    Keras runs one backend per process: a framework other than TensorFlow is checked in a
    process started with its backend (``KERAS_BACKEND=torch``; ConfigError otherwise).
    """
    frameworks.activate(framework)
    subject = _Subject(family, framework)
    for name, check in CHECKS:
        if name == "training" and not train:
            continue
        try:
            check(subject)
        except Exception as exc:
            raise AssertionError(f"family {family.name!r} fails check {name!r}: {exc}") from exc


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


class _Subject:
    """The family under check, with what several checks need computed once (models take seconds to build)."""

    def __init__(self, family: Family, framework: str) -> None:
        self.family = family
        self.framework = framework

    @cached_property
    def smallest(self) -> Config:
        """The smoke grid's smallest configuration (by analytic FLOPs)."""
        from paradnn import counting
        from paradnn.space import expand

        return min(expand(self.family.name, "smoke"), key=counting.flops_model)

    @cached_property
    def walked(self) -> tuple[int, list[Layer] | None]:
        """Keras's trainable parameter count of the smallest configuration under the framework, and its
        layers as the walker counts them (the walker traces TensorFlow graphs: None under another framework)."""
        import numpy as np

        from paradnn.counting import keras_layers
        from paradnn.tfimport import tf

        family = self.family
        one = dataclasses.replace(self.smallest, batch=1)  # type: ignore[type-var]
        model = family.build(one, "float32")
        params = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
        if self.framework != "tensorflow":
            return params, None
        x, _ = tf.function(lambda: family.data(one, 0)).get_concrete_function().structured_outputs
        return params, keras_layers(model, tf.nest.map_structure(tf.TensorSpec.from_tensor, x))


def _registered(subject: _Subject) -> None:
    from paradnn import families

    _expect(families.get(subject.family.name) is subject.family, "another family is registered under its name")


def _declaration(subject: _Subject) -> None:
    family = subject.family
    _expect(family.role in ROLES, f"role {family.role!r} is not one of {ROLES}")
    _expect(bool(family.title and family.description), "title and description must not be empty")
    _expect(isinstance(family.version, int) and family.version >= 1, f"version {family.version!r} is not a positive int")
    _expect(family.config.family == family.name, f"its config class says family {family.config.family!r}")


def _grids(subject: _Subject) -> None:
    from paradnn.space import expand, grid

    family = subject.family
    for preset in PRESETS:
        axes = grid(family.name, preset)
        _expect(set(axes) == set(family.config.axes()), f"the {preset} grid has axes {sorted(axes)}")
        _expect(bool(expand(family.name, preset)), f"the {preset} grid is empty")


def _labels(subject: _Subject) -> None:
    from paradnn import families
    from paradnn.space import expand

    family = subject.family
    for config in expand(family.name, "smoke"):
        _expect(family.parse_label(config.label) == config, f"label {config.label!r} does not parse back")
        _expect(families.family_of(config) is family, f"{config.label!r} is not recognised as {family.name}")
    try:
        family.parse_label("not-a-label")
    except ConfigError as exc:
        _expect(family.label_format in str(exc), f"the error for a bad label does not show the format: {exc}")
    else:
        raise AssertionError("'not-a-label' parses as a label")


def _parameters(subject: _Subject) -> None:
    from paradnn import counting

    config = subject.smallest
    keras_params, walked = subject.walked
    counted = counting.count_params(config)
    _expect(counted == keras_params, f"{config.label}: counted {counted:,} parameters, Keras has {keras_params:,}")
    if walked is not None:
        _expect(sum(x.params for x in walked) == keras_params, f"{config.label}: the layer walker misses parameters")


def _flops(subject: _Subject) -> None:
    """The analytic count against the walker's (a TensorFlow trace; the count itself is the same under any framework)."""
    from paradnn import counting

    config, layers = subject.smallest, subject.walked[1]
    if layers is None:
        return
    walked = 2 * 3 * sum(x.macs for x in layers) * config.batch
    counted = counting.flops_model(config)
    _expect(counted == walked, f"{config.label}: counted {counted:,} FLOPs, the layer walker {walked:,}")


def _training(subject: _Subject) -> None:
    config, framework = subject.smallest, subject.framework
    _expect(framework in subject.family.frameworks, f"it declares frameworks {', '.join(subject.family.frameworks)}")
    if framework == "jax":
        from paradnn.engine.jaxstep import JaxTrainer

        trainer = JaxTrainer(config)
    elif framework == "torch":
        from paradnn.engine.torchstep import TorchTrainer

        trainer = TorchTrainer(config)
    else:
        from paradnn.engine.training import Trainer

        trainer = Trainer(config, xla=False)
    loss = trainer.run(1)
    _expect(math.isfinite(loss), f"{config.label}: one training step under {framework} gives loss {loss}")


def _store(subject: _Subject) -> None:
    from paradnn import families
    from paradnn.store import Store

    family, config = subject.family, subject.smallest
    columns = families.hyperparameter_columns()
    for a in family.axes:
        _expect(a.name in columns and columns[a.name].kind is a.kind, f"axis {a.name!r} has no {a.kind.__name__} column")
    record = {
        "family": family.name,
        "family_version": family.version,
        "label": config.label,
        **config.hyperparameters(),
        "platform": "p",
        "state": "ok",
    }
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "r.sqlite") as store:
        store.add_results([record])
        row = store.results().iloc[0]
    kept = {name: row[name] for name in family.config.axes()}
    _expect(kept == config.hyperparameters(), f"the store gives back {kept} for {config.hyperparameters()}")


def _identity(subject: _Subject) -> None:
    from paradnn.identity import run_key

    family = subject.family
    record = {"family": family.name, "label": subject.smallest.label, "platform": "cpu", "family_version": family.version}
    _expect(run_key(record) != run_key({**record, "family_version": family.version + 1}), "version is not in run_key")


CHECKS: tuple[tuple[str, Callable[[_Subject], None]], ...] = (
    ("registered", _registered),
    ("declaration", _declaration),
    ("grids", _grids),
    ("labels", _labels),
    ("parameters", _parameters),
    ("flops", _flops),
    ("training", _training),
    ("store", _store),
    ("identity", _identity),
)
