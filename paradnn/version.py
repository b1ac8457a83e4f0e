"""paradnn's version, in a module of its own: the engine and the sweeps record it in every row
without importing the package root (which loads the API)."""

__version__ = "0.1.0"
