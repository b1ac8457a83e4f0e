"""What a sweep's driver and its worker process say to each other: small typed messages.

The driver (this process) never imports TensorFlow; it asks the worker, which has, over a
socket, and the worker answers each question with a Result or a Failed (a failure is an
answer too). A ``None`` instead of a message asks the worker to exit.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Measure:
    """Driver -> worker: measure one configuration (``None`` instead asks the worker to exit)."""

    family: str
    label: str
    settings: dict


@dataclass(frozen=True)
class Describe:
    """Driver -> worker: the analytic record of a configuration whose family is counted by
    walking its Keras model (the driver never imports TensorFlow). Answered with a Result."""

    family: str
    label: str
    dtype: str


@dataclass(frozen=True)
class ChooseXLA:
    """Driver -> worker: which XLA setting ``--xla auto`` uses for a family and dtype here
    (probed once per platform and stack, then cached). Answered with a Result."""

    family: str
    dtype: str


@dataclass(frozen=True)
class Profile:
    """Driver -> worker: profile one configuration's step by operation category (for projection).
    Answered with a Result whose record holds the traces table's ``rows``."""

    family: str
    label: str
    dtype: str


@dataclass(frozen=True)
class Ready:
    """Worker -> driver, once: the platform it measures on."""

    info: dict
    ceilings: dict


@dataclass(frozen=True)
class StartFailed:
    """Worker -> driver, instead of Ready: the platform cannot be used (an absent GPU, say)."""

    error: str


@dataclass(frozen=True)
class Result:
    """Worker -> driver: the record of one measurement (its state may be ``oom`` or ``error``)."""

    record: dict


@dataclass(frozen=True)
class Failed:
    """Worker -> driver: measuring raised; the worker is still usable."""

    error: str
    traceback: str


# ---------------------------------------------------------------------------- options and summary
