"""Imports made without the packages they load only for features paradnn never uses.

A package imported under :func:`hidden` sees ``import name`` fail for each name not yet
loaded, as if it were not installed; every one of them guards that import and goes on
without the feature. The names are released afterwards, so a later ``import name`` loads it
as usual. :mod:`paradnn.tfimport` imports TensorFlow so; :func:`papermill` does the same for
the notebook libraries.
"""

from __future__ import annotations

import contextlib
import sys
from types import ModuleType

# jsonschema checks the "iri" string format with rfc3987-syntax when it is installed (jupyter-events asks for it), and
# that package builds 38 Lark parsers when imported: 1.3 of papermill's 2.3 s import on a 2 vCPU EPYC Zen 4. The
# notebook schemas nbformat validates against use no "iri" format.
UNUSED_BY_NOTEBOOKS = ("rfc3987_syntax",)


@contextlib.contextmanager
def hidden(names: tuple[str, ...]):
    """Make ``import name`` fail inside the block for each name not already loaded, then undo that."""
    hiding = [name for name in names if name not in sys.modules]
    for name in hiding:
        sys.modules[name] = None  # type: ignore[assignment]  # None makes the import raise ImportError
    try:
        yield
    finally:
        for name in hiding:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]


def papermill() -> ModuleType:
    """papermill (and with it nbformat and jsonschema), imported without :data:`UNUSED_BY_NOTEBOOKS`."""
    with hidden(UNUSED_BY_NOTEBOOKS):
        import papermill as pm
    return pm
