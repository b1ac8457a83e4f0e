"""Sweeps: measure a grid into the store, resumably, one isolated worker per device.

``driver`` holds the local sweep (worker process, claims, checks) that the other backends
reuse: ``stacks`` (software stacks in uv environments, interleaved), ``cluster`` (Ray) and
``adaptive`` (measure part of a grid, predict the rest).
"""
