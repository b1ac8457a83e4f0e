"""The store: every result in one SQLite file, with migrations, claims and the original study's data.

``db`` holds the database itself; ``legacy`` reads the original ParaDnn release's JSON
files into it. The names most callers need are re-exported here.
"""

from paradnn.store.db import (
    CLAIM_MARGIN_S,
    SCHEMA_VERSION,
    STATES,
    Store,
    StoreError,
    export,
    hyperparameter_names,
    result_columns,
)

__all__ = [
    "CLAIM_MARGIN_S",
    "SCHEMA_VERSION",
    "STATES",
    "Store",
    "StoreError",
    "export",
    "hyperparameter_names",
    "result_columns",
]
