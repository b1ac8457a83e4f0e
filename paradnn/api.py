"""The Python API: what the command line does, as functions returning dicts and DataFrames.

Usable from a plain script (no ``if __name__ == "__main__":`` guard needed: sweeps run
their worker as a fresh interpreter) and from a notebook. These examples run as written
(``tests/test_docs.py`` runs them as doctests, in an empty folder):

>>> import paradnn
>>> paradnn.describe("fc", "layer_4-node_512-input_2000-output_1000-bs_256")["flops_model"]
3571937280
>>> paradnn.measure("fc", "layer_1-node_8-input_8-output_8-bs_8", max_seconds=0.2)["state"]
'ok'
>>> df = paradnn.sweep("fc", overrides={"layers": [1], "nodes": [8, 16], "batch": [8]}, max_seconds=0.2,
...                    store="outputs/mine.sqlite")
>>> sorted(paradnn.load("outputs/mine.sqlite").where(family="fc").frame["state"])
['ok', 'ok']
>>> paradnn.merge(["outputs/mine.sqlite"], "outputs/study.sqlite", rename={"cpu": "xeon-lab"})["added"]
{'xeon-lab': 2}
>>> rows, summary = paradnn.project("tpu-v2-8", "tpu-v3-8", "fc")
>>> summary["n"], round(summary["peak_ratio"], 2)
(230, 2.33)

Bad input raises :class:`paradnn.config.ConfigError` naming the field and what is allowed;
a store that is not one, or is damaged, raises :class:`paradnn.store.StoreError`. Both
happen before anything is measured or written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from paradnn.config import ConfigError
from paradnn.settings import CURRENT_STACK, DEFAULTS


def _store_path(value: object, field: str = "store") -> str | Path:
    """A store argument: a path as text or ``pathlib.Path``; ConfigError for anything else."""
    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise ConfigError(field, value, "the path of a store file, as text or a pathlib.Path")
    return value


def _sources(value: object) -> list[str | Path]:
    """Merge sources: one path, or an iterable of paths; ConfigError for anything else."""
    if isinstance(value, (str, Path)):
        return [value]
    if value is None or isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise ConfigError("sources", value, "a store path or a list of store paths")
    return [_store_path(v, "sources") for v in value]


def describe(family: str, label: str, dtype: str = DEFAULTS["dtype"]) -> dict:
    """Parameters, FLOPs and bytes of one training step (whole batch); nothing is allocated."""
    from paradnn.engine.record import describe_config
    from paradnn.families import parse_label
    from paradnn.platform import Target
    from paradnn.sweeps.plan import default_memory_budget

    if not isinstance(family, str):
        raise ConfigError("family", family, "a family's name as text, e.g. 'fc'")
    return describe_config(parse_label(family, label), dtype, memory_budget=default_memory_budget(Target()))


def _run_doc(function):
    """Append the declared run settings (:mod:`paradnn.settings`) to an API function's docstring."""
    from paradnn.settings import SETTINGS

    lines = "".join(f"    ``{s.name}`` (default {s.default!r}): {s.help}\n" for s in SETTINGS)
    function.__doc__ = (function.__doc__ or "") + "\n\n    Run settings, as keywords:\n\n" + lines
    return function


def _stack_texts(value: object) -> list[str]:
    """The ``stack`` run setting as given to the API: one text, several, or none; each checked."""
    from paradnn.settings import setting

    texts = [value] if isinstance(value, str) else list(value or ())
    return [setting("stack").parse(text) for text in texts]


@_run_doc
def measure(family: str, label: str, *, max_seconds: float = 10.0, name: str | None = None, **run: object) -> dict:
    """Time one configuration's training step in this process; the full record (as ``paradnn measure --json``).
    ``name``: what to call the platform (the record's ``platform``; see :func:`sweep`).

    Keras runs one backend per process: ``framework="jax"`` works in a process that has
    not used TensorFlow's Keras yet (else ConfigError; :func:`sweep` runs any framework).
    """
    from paradnn.config import ConfigError
    from paradnn.engine import ceilings as ceil
    from paradnn.engine import frameworks, machine
    from paradnn.engine.record import measure_config
    from paradnn.families import parse_label
    from paradnn.sweeps.plan import SweepOptions, check_settings
    from paradnn.sweeps.request import run_settings

    config = parse_label(family, label)
    if _stack_texts(run.pop("stack", ())) not in ([], [CURRENT_STACK]):
        raise ConfigError(
            "stack", run.get("stack"), "current with measure (it runs in this process; sweep measures other software stacks)"
        )
    parsed, target, settings = run_settings(run, name, max_seconds=max_seconds)
    check_settings([config], SweepOptions(settings=settings, target=target))
    frameworks.activate(settings.framework)
    info = machine.describe(target)
    return measure_config(config, settings, target, info, ceil.ceilings(target, info))


@_run_doc
def sweep(
    family: str,
    *,
    preset: str = "smoke",
    store: str | Path = "outputs/results.sqlite",
    overrides: Mapping[str, Iterable] | None = None,
    max_minutes: float | None = None,
    max_seconds: float = 3.0,
    progress: bool = True,
    name: str | None = None,
    rounds: int | None = None,
    workers: int = 1,
    timeout_s: float = 600.0,
    memory_gb: float | None = None,
    retry_failed: bool = False,
    force: bool = False,
    budget: str | int | None = None,
    backend: str = "local",
    address: str | None = None,
    **run: object,
):
    """Measure a preset's grid (with ``overrides``) that the store lacks; returns the grid's rows
    under these run settings as a DataFrame (XLA auto: the setting it chose). The same request
    as ``paradnn sweep`` (:class:`paradnn.sweeps.request.SweepRequest`), each keyword its option.

    ``rounds``: time each configuration in this many rounds a pass over the grid apart, sharing
    ``max_seconds``; every round is a measurement of its own, pooled (``paradnn sweep --rounds``).
    ``workers``: worker processes on this CPU that build and compile side by side and time one
    at a time (``paradnn sweep --workers``). ``timeout_s``, ``memory_gb``, ``retry_failed``,
    ``force``: as ``--timeout``, ``--memory-budget``, ``--retry-failed``, ``--force``.
    ``budget``: measure adaptively only this many configurations (``40``) or minutes (``"30m"``)
    and predict the rest (``--adaptive --budget``; the predictions are not returned here:
    ``paradnn predict`` gives them). ``backend="ray"`` with ``address``: a Ray cluster.

    ``name``: what to call this platform in the store and in reports (``xeon-lab``; default
    its id, ``cpu``), so two machines' ``cpu`` stay two platforms when their stores are
    merged (:func:`merge`). A name is not a run setting: it changes no run key."""
    from paradnn.store import Store
    from paradnn.store.db import check_undamaged
    from paradnn.store.guard import store_errors
    from paradnn.sweeps import request as req
    from paradnn.sweeps.plan import SilentProgress

    stacks = tuple(_stack_texts(run.pop("stack", ())))
    asked = req.SweepRequest(
        family,
        preset,
        overrides,
        run,
        stacks,
        name,
        max_seconds,
        max_minutes,
        timeout_s,
        memory_gb,
        retry_failed,
        force,
        rounds,
        workers,
        budget is not None,
        None if budget is None else str(budget),
        backend,
        address,
    )
    prepared = req.prepare(asked)
    store = _store_path(store)
    with store_errors(store):
        check_undamaged(store)
        with Store(store) as s:
            req.run(prepared, s, progress=None if progress else SilentProgress)
        return req.rows(prepared, store)


def load(store: str | Path):
    """Every result in a store as a :class:`paradnn.analysis.results.Results` (``.frame``: the
    DataFrame, JSON columns decoded): select with ``where``/``for_settings``, compare with
    ``matched(vary=...)``, find true reruns with ``reruns()``."""
    from paradnn.analysis.results import Results
    from paradnn.store.guard import store_errors

    with store_errors(_store_path(store)):
        return Results.load(store)


def merge(sources: Iterable[str | Path], store: str | Path, rename: Mapping[str, str] | None = None) -> dict:
    """Merge the paradnn stores ``sources`` into ``store`` (created if missing), renaming
    platforms ``{old: new}`` on the way in (every source); what it added, per platform.

    Sources are only read; the merge is one transaction on ``store``; de-duplicated by run
    identity (a rerun, the same identity finished at another time, is kept with its origin);
    two machines under one name are refused (:class:`paradnn.store.StoreError`), saying how
    to rename. See :mod:`paradnn.store.merge`.
    """
    from paradnn.store.merge import merge as merge_stores

    if rename is not None and not isinstance(rename, Mapping):
        raise ConfigError("rename", rename, "a mapping of old name -> new name, e.g. {'cpu': 'xeon-lab'}")
    return merge_stores(_sources(sources), _store_path(store), rename).as_dict()


def project(
    source: str,
    target: str,
    family: str,
    labels: Iterable[str] | None = None,
    *,
    store: str | Path | None = None,
    batch_scale: int = 1,
    dtype: str | None = None,
):
    """Project ``family``'s steps measured on platform ``source`` onto ``target`` (a datasheet, or a
    platform with measured ceilings in ``store``): a DataFrame of one row per configuration
    (projected step, speedup, bound shares, bracket, Q's measurement where it has one) and a
    summary dict. The original study's TPU v2-8 profiles ship with paradnn, so ``store`` may
    be None. See :mod:`paradnn.analysis.projection`."""
    from paradnn.analysis.projection import projection
    from paradnn.store.guard import store_errors

    labels = [labels] if isinstance(labels, str) else labels  # one label, not its letters
    if store is None:
        return projection(None, source, target, family, list(labels) if labels else None, batch_scale, dtype)
    with store_errors(_store_path(store)):
        return projection(str(store), source, target, family, list(labels) if labels else None, batch_scale, dtype)
