"""The report notebooks' parameters, checked in depth before a pipeline runs anything.

A notebook declares each parameter with a type in its ``parameters`` cell; papermill reads
those declarations (:func:`declared`). :func:`validate_overrides` checks every value a
pipeline file or ``-p NAME=VALUE`` gives: the name, the declared type, then what is inside it
(:data:`VALUE_CHECKS`: each family in a list registered, each axis value of an override
allowed, each text one of its choices, each number in its range). :func:`check_platforms`
checks the platform names against what the store and the original study hold. A report
whose parameters are wrong inside therefore stops with one line before it imports, measures
or writes anything, instead of failing inside a notebook after importing the original study.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path

from paradnn.config import POLICIES, ConfigError, check_number, load_yaml
from paradnn.imports import papermill
from paradnn.sweeps.plan import MAX_WORKERS

# What a declared parameter type accepts from -p (YAML-parsed). A text parameter also takes
# a YAML boolean or number (``-p xla=on`` reads as True), which the notebook interprets.
ACCEPTS = {
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "list": (list,),
    "dict": (dict,),
    "str": (str, bool, int, float),
}

# The bounds of the notebooks' numeric parameters (beyond their declared types): name ->
# (positive: above 0, else from 0; the largest value; whole numbers only). Every other
# number a notebook takes must at least be finite.
PARAMETER_BOUNDS: dict[str, tuple[bool, float, bool]] = {
    "budget_minutes": (True, 7 * 24 * 60, False),  # a week
    "max_seconds": (True, 3600, False),
    "profile_count": (False, 1000, True),
    "parallel_devices": (False, 1024, True),  # 0 or 1 skips the replica sweep
    "folds": (True, 100, True),
    "max_rows": (False, 10**7, True),
    "replay_seeds": (True, 100, True),
    "fill_fraction": (True, 1, False),
    "seed": (False, 2**32 - 1, True),
    "projection_count": (False, 100, True),
    "overlap_count": (False, 10_000, True),
    "rerun_count": (False, 1000, True),
    "workers": (True, MAX_WORKERS, True),
}
# Platform names, checked against the store and the original study once the store is known.
PLATFORM_PARAMETERS = ("platform", "baseline", "target", "replay_platform")


def parse_parameter(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` with VALUE read as YAML (numbers, booleans, lists, dicts, strings)."""
    import yaml

    name, sep, value = text.partition("=")
    if not sep or not name.strip().isidentifier():
        raise ConfigError("-p", text, "NAME=VALUE, e.g. -p budget_minutes=5 or -p families=[fc]")
    try:
        return name.strip(), load_yaml(value, f"-p {name.strip()}", value)
    except yaml.YAMLError:
        return name.strip(), value


def declared(notebook: Path) -> dict:
    """The parameters a notebook declares in its ``parameters`` cell (papermill reads them);
    ConfigError (naming the file, never echoing its content) for a file that is not a notebook."""
    try:
        return papermill().inspect_notebook(str(notebook))
    except Exception as exc:  # noqa: BLE001 - papermill raises anything from JSON, nbformat or a kernel lookup
        raise ConfigError("notebook", str(notebook), f"a Jupyter notebook with kernel metadata ({type(exc).__name__})") from None


def validate_overrides(pipeline, overrides: dict) -> dict:
    """Check the pipeline file's parameters and the ``-p`` overrides against what the pipeline's
    notebooks declare: names, types, then what is inside each value (:data:`VALUE_CHECKS`).

    Returns the overrides, a text value of a list parameter read as a one-item list; an
    unknown name, ``store`` (the pipeline's own) or a wrong value is one ConfigError naming
    what is allowed, before anything runs.
    """
    spec: dict[str, dict] = {}
    for entry in pipeline.notebooks:
        for name, found in declared(entry["source"]).items():
            spec.setdefault(name, found)
    known = ", ".join(sorted(set(spec) - {"store"}))
    for given in [pipeline.parameters] + [entry["parameters"] for entry in pipeline.notebooks]:
        for name, value in given.items():  # the pipeline file's own values: the same names, types and bounds
            if name not in spec:
                raise ConfigError(f"{pipeline.path}: parameters", name, f"a parameter of this pipeline's notebooks: {known}")
            check_value(name, value, spec[name], f"{pipeline.path}: parameter {name}")
    checked = {}
    for name, value in overrides.items():
        if name == "store":
            raise ConfigError("-p store", value, "nothing: each pipeline keeps its store in outputs/<pipeline>/ (use --outputs)")
        if name not in spec:
            raise ConfigError("-p", name, f"a parameter of this pipeline's notebooks: {known}")
        checked[name] = check_value(name, value, spec[name], f"-p {name}")
    return checked


def check_value(name: str, value: object, spec: dict, field: str) -> object:
    """``value`` checked against a notebook's declared parameter: its type, its bounds, then what is
    inside it; a text value of a list parameter is read as a one-item list."""
    kind = spec["inferred_type_name"]
    if kind == "list" and isinstance(value, str):
        value = [value]
    allowed = ACCEPTS.get(kind)
    if allowed and (not isinstance(value, allowed) or (kind in ("int", "float") and isinstance(value, bool))):
        raise ConfigError(field, value, f"a {kind} ({spec['help']})")
    check_bounds(name, value, field)
    check = VALUE_CHECKS.get(name)
    if check is not None:
        check(field, value)
    return value


def check_bounds(name: str, value: object, field: str = "") -> None:
    """ConfigError unless a notebook parameter's number is finite and within :data:`PARAMETER_BOUNDS`."""
    field = field or name
    if name in PARAMETER_BOUNDS:
        positive, most, integer = PARAMETER_BOUNDS[name]
        check_number(field, value, positive=positive, most=most, integer=integer)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(field, value, "a finite number")


def check_platforms(notebooks: list[Mapping[str, object]], store: Path) -> None:
    """Each platform parameter of each notebook's values names this machine (``cpu``,
    ``cpu[threads=N]``, ``gpu:N`` where this machine has that device), a platform of the original
    study, or a platform the store holds; ConfigError listing them otherwise. Run once the store is
    known, before anything is imported or measured; the store is read once."""
    from paradnn.sections.common import canonical, is_local
    from paradnn.store import Store, StoreError
    from paradnn.store.legacy import PLATFORMS

    names = list(PLATFORMS)
    if store.is_file():
        try:
            with Store(store, create=False, readonly=True, snapshot=True) as db:
                names += [n for n in db.platform_names() if n not in names]
        except StoreError:
            pass  # the store's own checks say what is wrong with it
    for values in notebooks:
        for name in PLATFORM_PARAMETERS:
            value = values.get(name)
            if value is None or (isinstance(value, str) and (value in names or (is_local(value) and canonical(value) in names))):
                continue
            if isinstance(value, str) and is_local(value):
                _check_device(name, value)
                continue
            raise ConfigError(
                f"parameter {name}",
                value,
                "this machine (cpu, cpu[threads=N], gpu:N) or a platform of the store or the original study: " + ", ".join(names),
            )
        baseline, target = values.get("baseline"), values.get("target")
        if baseline is not None and target is not None and canonical(str(baseline)) == canonical(str(target)):
            raise ConfigError("parameter target", target, "a platform other than the baseline")


def _check_device(name: str, platform: str) -> None:
    """ConfigError when ``platform`` names an accelerator this machine lacks (``gpu:0`` without a GPU):
    said before a report starts, not by its first notebook. Asking TensorFlow takes a few seconds,
    paid only where a report names an accelerator."""
    from paradnn.engine.machine import accelerator_name
    from paradnn.platform import parse_target

    target = parse_target(platform)
    if target.kind == "cpu":
        return
    try:
        accelerator_name(target)
    except ConfigError as error:
        raise ConfigError(f"parameter {name}", platform, error.allowed) from None


# What is inside a parameter's value: name -> check(field, value), raising ConfigError. Every
# parameter a notebook declares has one here or is a plain number, flag or path
# (tests/test_parameters.py checks that no declared parameter is forgotten).
def _family_names(role: str | None) -> Callable[[], tuple[str, ...]]:
    """The registered families of ``role`` (every one when None), looked up when a value is checked."""

    def names() -> tuple[str, ...]:
        from paradnn import families

        return families.of_role(role) if role else families.names()

    return names


def _family(field: str, value: object) -> None:
    from paradnn.families import names

    if value not in names():
        raise ConfigError(field, value, ", ".join(names()))


def _choice(*choices: str) -> Callable[[str, object], None]:
    def check(field: str, value: object) -> None:
        if value not in choices:
            raise ConfigError(field, value, ", ".join(repr(c) for c in choices))

    return check


def _items(choices: Callable[[], tuple[str, ...]]) -> Callable[[str, object], None]:
    def check(field: str, value: object) -> None:
        allowed = choices()
        for item in value:  # type: ignore[attr-defined]
            if item not in allowed:
                raise ConfigError(field, item, ", ".join(allowed))

    return check


def _numbers(most: float, integer: bool) -> Callable[[str, object], None]:
    def check(field: str, value: object) -> None:
        for item in value:  # type: ignore[attr-defined]
            check_number(field, item, positive=True, most=most, integer=integer)

    return check


def _axis_values(field: str, axes: object, axis_of: Callable[[str], object]) -> None:
    """A mapping of axis -> non-empty list of that axis's values."""
    if not isinstance(axes, Mapping):
        raise ConfigError(field, axes, "a mapping of axis -> list of values, e.g. {batch: [64, 128]}")
    for name, values in axes.items():
        try:
            axis = axis_of(name)
        except ConfigError as exc:  # an unknown axis: what the family has
            raise ConfigError(field, name, exc.allowed) from None
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{field}: {name}", values, f"a non-empty list of {name} values, e.g. [64, 128]")
        for item in values:
            try:
                axis.check(item)  # type: ignore[attr-defined]
            except ConfigError as exc:
                raise ConfigError(f"{field}: {name}", item, exc.allowed) from None


def _family_overrides(field: str, value: object) -> None:
    """``{family: {axis: [values]}}``: registered families, their axes, allowed values, a bounded grid."""
    from paradnn import families
    from paradnn.space import grid

    for family, axes in value.items():  # type: ignore[attr-defined]
        if family not in families.names():
            raise ConfigError(field, family, "a mapping whose keys are families: " + ", ".join(families.names()))
        _axis_values(f"{field}: {family}", axes, families.get(family).axis)
        grid(family, "smoke", axes)  # at most MAX_GRID configurations


def _axis_overrides(field: str, value: object) -> None:
    """``{axis: [values]}`` of the prediction's family: each axis one a family has, each value allowed there."""
    from paradnn.families import hyperparameter_columns

    columns = hyperparameter_columns()

    def axis_of(name: str) -> object:
        if name not in columns:
            raise ConfigError(field, name, "an axis: " + ", ".join(columns))
        return columns[name]

    _axis_values(field, value, axis_of)


def _stacks(field: str, value: object) -> None:
    """Software stacks, each a pip requirement list or ``current``, none given twice."""
    from paradnn.settings import stack_text

    seen: set[str] = set()
    for item in value:  # type: ignore[attr-defined]
        try:
            written = stack_text(item)
        except ConfigError as exc:
            raise ConfigError(field, exc.value, exc.allowed) from None
        if written in seen:
            raise ConfigError(field, item, "each stack once (measured side by side, a stack twice is one stack)")
        seen.add(written)


def _policy(empty: bool) -> Callable[[str, object], None]:
    return _choice(*(("",) if empty else ()), *POLICIES)


def _xla(field: str, value: object) -> None:
    from paradnn.settings import on_off_auto

    try:
        on_off_auto(value)
    except ConfigError as exc:
        raise ConfigError(field, value, exc.allowed) from None


def _backend(field: str, value: object) -> None:
    from paradnn.sections.common import ray_address

    try:
        ray_address(str(value))
    except ConfigError as exc:
        raise ConfigError(field, value, exc.allowed) from None


def check_reference_dir(field: str, value: object) -> None:
    """'' or a folder holding at least one of the original study's files (by name, as import-legacy reads them)."""
    from paradnn.store.legacy import BUNDLED

    if value == "":
        return
    if not (isinstance(value, str) and Path(value).is_dir() and any((Path(value) / name).is_file() for name in BUNDLED)):
        raise ConfigError(
            field,
            value,
            "'' (the copies shipped with paradnn) or a folder with the original study's JSON files: " + ", ".join(BUNDLED),
        )


def _platform_text(field: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(field, value, "a platform name such as cpu, cpu[threads=1] or tpu-v2-8")


def _input_modes() -> tuple[str, ...]:
    from paradnn.settings import BY_NAME

    return tuple(c for c in BY_NAME["input"].choices if c != "device")


def _presets() -> tuple[str, ...]:
    from paradnn.families import PRESETS

    return tuple(PRESETS)


def _datasheets() -> tuple[str, ...]:
    from paradnn.platform import DATASHEETS

    return ("", *DATASHEETS)


def _one_of(choices: Callable[[], tuple[str, ...]]) -> Callable[[str, object], None]:
    def check(field: str, value: object) -> None:
        _choice(*choices())(field, value)

    return check


VALUE_CHECKS: dict[str, Callable[[str, object], None]] = {
    "families": _items(_family_names("model")),
    "low_precision_families": _items(_family_names(None)),
    "infeed_families": _items(_family_names(None)),
    "parallel_families": _items(_family_names(None)),
    "framework_families": _items(_family_names(None)),
    "workloads": _items(_family_names("workload")),
    "infeed_workloads": _items(_family_names("workload")),
    "profile_workloads": _items(_family_names("workload")),
    "family": _family,
    "preset": _one_of(_presets),
    "parameter_preset": _one_of(_presets),
    "overrides": _family_overrides,
    "precision_overrides": _family_overrides,
    "infeed_overrides": _family_overrides,
    "parallel_overrides": _family_overrides,
    "stack_overrides": _family_overrides,
    "framework_overrides": _family_overrides,
    "fill_overrides": _axis_overrides,
    "dtype": _policy(empty=False),
    "low_precision": _policy(empty=True),
    "xla": _xla,
    "regression_form": _choice("log2", "paper"),
    "infeed_inputs": _items(_input_modes),
    "stacks": _stacks,
    "fig7_nodes": _numbers(2**20, integer=True),
    "fig7_batch": _numbers(2**20, integer=True),
    "replay_fractions": _numbers(1, integer=False),
    "backend": _backend,
    "reference_dir": check_reference_dir,
    "project_to": _one_of(_datasheets),
    **{name: _platform_text for name in PLATFORM_PARAMETERS},
}
# Parameters whose declared type and bounds say all there is to check (a flag, the path the pipeline sets).
PLAIN = ("measure_missing", "store")
