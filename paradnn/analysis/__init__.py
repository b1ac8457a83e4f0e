"""Analyses of a results store: comparisons of platforms, dtypes and settings.

Each analysis takes the DataFrame :meth:`paradnn.store.Store.results` returns and gives
back a frozen results object (a table plus summary figures), so the CLI, notebooks and
tests share one implementation and none of them re-derives the numbers.
"""
