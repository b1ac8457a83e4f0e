"""Sweeps: measure a grid into the store, resumably, one isolated worker per device.

``plan`` decides what to measure (options, run keys, order, rounds); ``loop`` is the
one sweep loop (claims, progress, deadline, Ctrl-C) every backend runs under; ``backends``
is the door (:func:`paradnn.sweeps.backends.run_sweep`) and this machine's backends (its
own environment, its software stacks); ``cluster`` is Ray's; ``worker`` the worker process
and ``messages`` what it is told; ``stacks`` builds software stacks' environments;
``profiles`` keeps profiles for projection; ``adaptive`` measures part of a grid and
predicts the rest.
"""
