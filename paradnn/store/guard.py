"""Damage found after a store opened: one :class:`StoreError`, whichever query found it.

A store damaged in the middle (a disk error, a partly overwritten file) opens, because its
header and ``meta`` table are intact, and fails at the first query that reads a damaged
page: as ``sqlite3.DatabaseError`` from the store itself or ``pandas.errors.DatabaseError``
from ``pandas.read_sql_query``. Front ends run their work under :func:`store_errors`, so
the user reads one line naming the store, never a traceback.
"""

from __future__ import annotations

import contextlib
import sqlite3

from paradnn.store.db import StoreError


def damaged(exc: BaseException) -> bool:
    """True for an error that means a store file is damaged or not a database."""
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return True
    try:
        from pandas.errors import DatabaseError
    except ImportError:  # pragma: no cover - pandas is a dependency
        return False
    return isinstance(exc, DatabaseError) and isinstance(exc.__cause__, sqlite3.DatabaseError)


@contextlib.contextmanager
def store_errors(path: object = "the store"):
    """Turn a damaged store's database errors into one :class:`StoreError` naming ``path``."""
    try:
        yield
    except Exception as exc:
        if not damaged(exc):
            raise
        cause = exc.__cause__ or exc
        raise StoreError(f"{path}: damaged or not a paradnn store ({cause})") from None
