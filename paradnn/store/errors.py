"""The store's one error: a file that is not a paradnn store, is damaged, read-only, from a
newer paradnn, or a write that would break the store's rules (two machines under one name).
Front ends print it as one line and exit with status 2."""


class StoreError(Exception):
    """The file is not a paradnn store, is damaged, read-only, or from a newer paradnn; or a write was refused."""
