"""The engine: a training step under TensorFlow or JAX, timed by one protocol.

Layers inside: ``protocol`` (run settings, the timing protocol and its statistics; knows
no backend), the backends that time a step with it (``training`` for TensorFlow,
``jaxstep`` for JAX, ``replicas`` for data-parallel runs), what they use (``inputs``,
``energy``, ``graphcount``, ``profiler``), the machine (``machine``, ``ceilings``) and
``record``, which picks the backend and turns a measurement into a flat record. Nothing
here imports the sweep, the store or the analyses. TensorFlow and JAX are imported lazily.
"""
