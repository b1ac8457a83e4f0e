"""Profiles for projection: each configuration's step by operation category, kept in the store.

Profiling happens here, in a worker of this machine; the analysis
(:mod:`paradnn.analysis.projection`) reads the stored profiles only.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from paradnn.families import Config
from paradnn.platform import Target
from paradnn.store import Store
from paradnn.sweeps.messages import Profile, Result
from paradnn.sweeps.plan import Progress, SweepOptions
from paradnn.sweeps.worker import Worker, finish, register, reuse_or_start


def profile_local(
    configs: list[Config],
    store: Store,
    options: SweepOptions,
    progress: Callable[..., Progress] | None = None,
    start_worker: Callable[[Target], Worker] | None = None,
) -> dict:
    """Profile each configuration's step by operation category on ``options.target`` (in a worker,
    with the target's threads) and keep it in the store's traces table, for projection from this
    platform (:mod:`paradnn.analysis.projection`). What the store already holds is skipped.

    Returns counts (``profiled``, ``already``) and ``failed``: label -> error.
    """
    from tqdm import tqdm

    from paradnn.identity import profile_source

    start_worker = start_worker or partial(reuse_or_start, framework=options.settings.framework)
    dtype, platform = options.settings.dtype, options.target.platform
    traces = store.traces()
    held = set(traces.loc[traces["source"] == profile_source(platform, dtype), "label"]) if not traces.empty else set()
    todo = [c for c in configs if c.label not in held]
    out: dict = {"profiled": 0, "already": len(configs) - len(todo), "failed": {}}
    if not todo:
        return out
    worker = start_worker(options.target)
    register(store, options.target, worker)
    ended_normally = False
    bar = (progress or tqdm)(total=len(todo), unit="config", desc=f"profile {options.target.id}", dynamic_ncols=True)
    try:
        for config in todo:
            worker.send(Profile(config.family, config.label, dtype))
            if not worker.poll(options.timeout_s):
                out["failed"][config.label] = f"no profile within {options.timeout_s:g} s"
                return out  # the worker may still be busy: stopped below, not kept
            answer = worker.recv()
            if isinstance(answer, Result):
                store.add_traces(answer.record["rows"])
                out["profiled"] += 1
            else:
                out["failed"][config.label] = answer.error
            bar.update(1)
        ended_normally = True
    except EOFError:
        out["failed"][config.label] = "the worker died while profiling"
    finally:
        bar.close()
        finish([worker], ended_normally)
    return out


# ---------------------------------------------------------------------------- software stacks side by side
