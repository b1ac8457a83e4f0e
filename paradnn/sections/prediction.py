"""The prediction report: what a model trained on the store predicts where nothing was measured.

Held-out error on every platform, adaptive against random sampling on a replayed sweep of the
original study, a grid filled by prediction, and this machine's grid filled the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from paradnn.analysis.results import Results
from paradnn.sections import common
from paradnn.sections.common import caption, ensure_measured, show, table
from paradnn.store import Store


@dataclass
class Parameters(common.Parameters):
    """The prediction report's parameters, as its notebook declares them (see the notebook for each one's help)."""

    platform: str
    family: str
    preset: str
    fill_overrides: dict
    folds: int
    max_rows: int
    replay_platform: str
    replay_fractions: list
    replay_seeds: int
    fill_fraction: float
    reference_dir: str
    seed: int


def measure(p: Parameters) -> list[str]:
    """Measure the preset's grid of ``p.family`` on ``p.platform`` where the store lacks it (nothing
    with ``measure_missing`` off); returns the sweep's lines."""
    if not p.measure_missing:
        return []
    return ensure_measured(
        p.store,
        [p.family],
        preset=p.preset,
        platform=p.platform,
        budget_minutes=p.budget_minutes,
        max_seconds=p.max_seconds,
        lanes=p.lanes,
    )


def held_out(p: Parameters) -> tuple[pd.DataFrame, pd.DataFrame]:
    """K-fold held-out error of one model per platform (shown as a table), and the held-out predictions."""
    from paradnn.analysis import predict

    with Store(p.store, readonly=True) as db:
        scores, oof = predict.evaluate_store(db, p.family, p.folds, p.seed, p.max_rows)
    table(scores, 3)
    return scores, oof


def held_out_section(scores: pd.DataFrame, oof: pd.DataFrame, p: Parameters) -> None:
    """Held-out step times predicted against measured, with the paper's regression beside the model."""
    from paradnn.analysis import plots

    if oof.empty:
        print(f"No platform has enough measured {p.family} rows for {p.folds}-fold held-out error.")
        return
    title = _title(p.family)
    show(plots.predicted_vs_measured(oof, f"{title}: held-out step time predicted vs measured ({p.folds}-fold)"))
    rated = scores[scores["note"] == ""]
    best = rated.loc[rated["mape"].idxmin()]
    paper = rated["paper_regression_mape"]
    caption(
        "The paper found which hyperparameters matter with a linear regression fitted to its grids, and predicted "
        f"nothing; here that regression misses held-out step times by {paper.min():.0f}-{paper.max():.0f}% "
        f"on average, the model by {rated['mape'].min():.1f}-{rated['mape'].max():.1f}% (best on {best['platform']}, "
        f"{best['n']} rows), with {rated['coverage'].min():.0%}-{rated['coverage'].max():.0%} of measurements inside "
        "their 90% intervals."
    )


def replay_section(scores: pd.DataFrame, p: Parameters) -> tuple[object, pd.DataFrame]:
    """The original study's ``p.replay_platform`` sweep replayed: the error of the unmeasured rest
    against the share measured, adaptive against random. Returns the replay's model and rows."""
    from paradnn.analysis import plots, predict

    with Store(p.store, readonly=True) as db:
        model, rows = predict.fit_store(db, p.replay_platform, p.family, p.seed)
    rows = rows.reset_index(drop=True)
    rated = scores.set_index("platform").reindex([p.replay_platform])
    full, full_n = rated.loc[p.replay_platform, "mape"], rated.loc[p.replay_platform, "n"]
    fractions = [float(f) for f in p.replay_fractions]
    replayed = predict.replay(rows, model.featurizer, fractions, seeds=range(p.seed, p.seed + p.replay_seeds))
    title = _title(p.family)
    show(plots.replay_curves(replayed, full, f"{title} on {p.replay_platform}: error of the unmeasured rest vs share measured"))
    means = replayed.groupby(["fraction", "strategy"])["mape"].mean().unstack()
    top = means.index.max()
    adaptive, random = means.loc[top, "adaptive"], means.loc[top, "random"]
    caption(
        f"The paper found its verdicts by measuring the whole grid; replaying its {p.replay_platform} sweep, "
        f"measuring {top:.0%} of it leaves the rest predicted within {adaptive:.1f}% (adaptive) and {random:.1f}% "
        f"(random) on average, against {full:.1f}% held-out error of the model on {full_n} rows ({p.folds}-fold, above)."
    )
    table(means, 2)
    return model, rows


def filled_section(model: object, rows: pd.DataFrame, p: Parameters) -> None:
    """The replayed platform's heatmap with ``p.fill_fraction`` of it measured and the rest predicted."""
    from paradnn.analysis import plots, predict

    chosen = predict.sample(rows, model.featurizer, int(round(p.fill_fraction * len(rows))), "adaptive", p.seed)
    filled = predict.filled_grid(rows, model.featurizer, chosen, p.seed)
    title = _title(p.family)
    show(
        plots.heatmaps(
            filled,
            p.family,
            "examples_per_sec",
            f"{title} on {p.replay_platform}: {p.fill_fraction:.0%} measured, the rest predicted",
            "throughput (examples/s, log colour)",
            log_color=True,
            fmt="{:.3g}",
            marked="measured",
        )
    )
    error = filled.loc[~filled["measured"], "error_pct"].abs()
    caption(
        f"The paper found its {p.replay_platform} heatmaps by measuring every cell; filled from {len(chosen)} measured "
        f"cells, the other {len(error)} predictions differ from the study's measurements by {error.mean():.1f}% on "
        f"average (median {error.median():.1f}%, 90th percentile {error.quantile(0.9):.1f}%)."
    )


def local_grid_section(p: Parameters) -> None:
    """This machine's denser grid (``p.fill_overrides``): measured cells, the rest predicted."""
    from paradnn.analysis import plots, predict
    from paradnn.space import expand

    labels = [c.label for c in expand(p.family, p.preset, p.fill_overrides)]
    with Store(p.store, readonly=True) as db:
        local_rows = predict.training_rows(Results.read(db, platform=p.platform), p.family)[0]
        if len(local_rows) < predict.MIN_ROWS:
            print(f"{len(local_rows)} measured {p.family} rows on {p.platform}; prediction needs at least {predict.MIN_ROWS}.")
            return
        local = predict.grid_with_predictions(db, p.platform, p.family, labels, p.seed)
    title = _title(p.family)
    show(
        plots.heatmaps(
            local,
            p.family,
            "examples_per_sec",
            f"{title} on {p.platform}: measured and predicted throughput",
            "throughput (examples/s, log colour)",
            log_color=True,
            fmt="{:.3g}",
            marked="measured",
        )
    )
    measured = int(local["measured"].sum())
    caption(
        f"The paper found its heatmaps by measuring all cells ({len(local)} here); here {measured} are measured and "
        f"{len(local) - measured} predicted from them, which is what `paradnn sweep --adaptive` shows for "
        "the cells it did not measure."
    )


def _title(family: str) -> str:
    from paradnn.families import get

    return get(family).title
