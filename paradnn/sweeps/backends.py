"""One door to every sweep backend: this machine, several software stacks side by side, a Ray cluster.

The command line, the Python API and the notebooks measure a grid through
:func:`run_sweep`; each backend keeps the local sweep's isolated worker, claims and skip
logic (:mod:`paradnn.sweeps.driver`), so a result is the same record whichever ran it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from paradnn.config import ConfigError
from paradnn.families import Config
from paradnn.store import Store
from paradnn.sweeps.driver import SweepOptions, SweepSummary, run_local, run_sweep_stacks


def run_sweep(configs: list[Config], store: Store, options: SweepOptions, *, stacks: Sequence = (), address: str = "",
              progress: Callable[..., object] | None = None, echo: Callable[[str], None] = lambda line: None,
              ) -> SweepSummary:  # fmt: skip
    """Measure what ``store`` lacks of ``configs`` under ``options``: on this machine, under each of
    ``stacks`` (:class:`paradnn.sweeps.stacks.Stack`, interleaved round by round), or on the Ray
    cluster at ``address``; the summary of what was done (stacks that could not run are named
    in it). ConfigError for stacks on a cluster (each node would build its own environments)."""
    if stacks and address:
        raise ConfigError("--stack", stacks[0].name, "a local sweep (not with --backend ray)")
    if options.workers > 1 and (stacks or address):
        raise ConfigError("--workers", options.workers, "1 with --stack or --backend ray (a plain local sweep only)")
    if stacks:
        summary, _ = run_sweep_stacks(configs, store, options, list(stacks), progress=progress, echo=echo)
        return summary
    if address:
        from paradnn.sweeps.cluster import run_sweep_ray

        return run_sweep_ray(configs, store, options, address, progress=progress)
    return run_local(configs, store, options, progress=progress)
