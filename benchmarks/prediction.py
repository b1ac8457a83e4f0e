"""How well the performance model predicts, against the targets of issue 15 (not timed; about 15 minutes).

    python benchmarks/prediction.py                          # the original study's sweeps only
    python benchmarks/prediction.py --cpu-store outputs/cpu.sqlite   # plus this machine's FC grid

Sections (targets in brackets):
  random    TPU v2 FC, random 5-fold, 5 seeds: MAPE and 90% coverage [<= 3%; 85-95%]
  levels    TPU v2 FC, each interior level of each axis held out whole [<= 8% every level]
  cross     fit on the V100 sweep, predict the TPU v2 on the shared configurations with the
            TPU's datasheet roofline (reported; no target)
  prior     the projection as prior: the V100's 176 configurations predicted from the TPU v2's
            steps and traces, calibrated on 0/3/6/12/24 measured V100 rows (10 draws each),
            against the same calibration on the V100's roofline, the model fitted on those rows
            alone, and the roofline swap (reported; issue 26 item 5); with --cpu-store holding
            profiles of cpu[threads=1] (`paradnn profile`), cpu from them the same way
  cpu       this machine's FC grid from --cpu-store, random 5-fold [<= 8%]
  replay    TPU v2 FC: error on the unmeasured rest after measuring 5/10/20% of the grid,
            adaptive vs random, 3 seeds [adaptive within 2 points of the full-data model by
            20%; adaptive below random]
  verdicts  Fig. 2's regression on the grid filled from a 20% adaptive sample against the
            fully measured grid: same signs and order of the hyperparameters' effects

Prints the figures and writes them as JSON to ``outputs/bench/prediction.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from paradnn.analysis import predict
from paradnn.analysis.regression import regress
from paradnn.store import Store, legacy


def reference_store(folder: Path) -> Store:
    store = Store(folder / "reference.sqlite")
    legacy.import_bundled(store)
    return store


def fitted_rows(store: Store, platform: str) -> tuple[pd.DataFrame, predict.Featurizer]:
    ok, _ = predict.training_rows(store.results(platform=platform), "fc")
    return ok.reset_index(drop=True), predict.Featurizer("fc", predict.platform_ceilings(store.platforms(), platform))


def random_folds(rows: pd.DataFrame, featurizer: predict.Featurizer, seeds: range) -> dict:
    runs = [predict.cross_validate(rows, featurizer, 5, seed) for seed in seeds]
    mape, coverage = [r["model"]["mape"] for r in runs], [r["model"]["coverage"] for r in runs]
    return {
        "seeds": list(seeds),
        "mape": mape,
        "coverage": coverage,
        "mape_mean": float(np.mean(mape)),
        "coverage_mean": float(np.mean(coverage)),
        "median_ape_mean": float(np.mean([r["model"]["median_ape"] for r in runs])),
        "roofline_mape": runs[0]["roofline"]["mape"],
        "paper_regression_mape": runs[0]["paper_regression"]["mape"],
    }


def cross_platform(store: Store) -> dict:
    """Fit on the V100 and predict the TPU v2's shared configurations through the TPU's own roofline."""
    v100, on_v100 = fitted_rows(store, "v100")
    tpu, on_tpu = fitted_rows(store, "tpu-v2-8")
    model = predict.PerformanceModel.fit(v100, on_v100)
    shared = tpu[tpu["label"].isin(v100["label"])].assign(dtype=v100["dtype"].iloc[0], xla=v100["xla"].iloc[0])
    model.featurizer = predict.Featurizer("fc", on_tpu.ceilings, model.featurizer.categories)
    out = model.predict(shared)
    scores = predict.Scores.of(
        out["step_time_s"].to_numpy(),
        shared["step_time_s"].to_numpy(dtype=float),
        out["step_time_low_s"].to_numpy(),
        out["step_time_high_s"].to_numpy(),
    )
    return scores.as_dict()


PRIOR_ROWS = (0, 3, 6, 12, 24)
PRIOR_DRAWS = 10


def scored(predicted: np.ndarray, truth: np.ndarray, low: np.ndarray | None = None, high: np.ndarray | None = None) -> dict:
    ape = np.abs(predicted / truth - 1) * 100
    out = {"median_ape": float(np.median(ape)), "mape": float(ape.mean())}
    if low is not None and np.isfinite(low).all():
        out["coverage"] = float(np.mean((low <= truth) & (truth <= high)))
    return out


def roofline_terms(rows: pd.DataFrame, featurizer: predict.Featurizer) -> np.ndarray:
    """The baseline's calibration terms: the V100 roofline bound, one per step, the batch."""
    bound = np.exp(predict.log_bound(*featurizer.bound_s(rows, predict.counts("fc", rows))))
    return np.column_stack([bound, np.ones(len(rows)), rows["batch"].to_numpy(dtype=float)])


def projection_as_prior(store: Store, path: str) -> dict:
    """Issue 26 item 5: the V100 predicted from the TPU v2 with k of its rows measured, beside the baselines."""
    from scipy.optimize import nnls

    from paradnn.analysis.prior import projection_prior

    v100, on_v100 = fitted_rows(store, "v100")
    tpu, on_tpu = fitted_rows(store, "tpu-v2-8")
    prior, measured = projection_prior(path, "tpu-v2-8", "v100", "fc", "float16")
    rows = v100.set_index("label").loc[list(measured["label"])].reset_index()
    baseline_x = roofline_terms(rows, on_v100)
    swap = predict.PerformanceModel.fit(tpu, on_tpu)  # the TPU's model moved onto the V100's roofline
    swap.featurizer = predict.Featurizer("fc", on_v100.ceilings, swap.featurizer.categories)
    swapped = swap.predict(rows.assign(dtype=tpu["dtype"].iloc[0], xla=tpu["xla"].iloc[0]))["step_time_s"].to_numpy()

    def baselines(chosen: np.ndarray, rest: np.ndarray, truth: np.ndarray, seed: int) -> dict:
        out = {}
        if len(chosen) >= 3:
            coef, _ = nnls(baseline_x[chosen] / truth[chosen][:, None], np.ones(len(chosen)))
            out["roofline_calibrated"] = scored(baseline_x[rest] @ coef, truth[rest])
        if len(chosen) >= predict.MIN_ROWS:
            model = predict.PerformanceModel.fit(rows.iloc[chosen], predict.Featurizer("fc", on_v100.ceilings), seed)
            out["model_on_these_rows"] = scored(model.predict(rows.iloc[rest])["step_time_s"].to_numpy(), truth[rest])
        return out

    return {
        "n": len(measured),
        "swap_tpu_model_onto_v100": scored(swapped, measured["step_time_s"].to_numpy(dtype=float)),
        **held_out_prior(prior, measured, PRIOR_ROWS, PRIOR_DRAWS, baselines),
    }


def local_prior(path: str, source: str = "cpu[threads=1]", target: str = "cpu") -> dict:
    """The same on this machine: ``target`` from ``source``'s profiles (``paradnn profile``), where the store has them."""
    from paradnn.analysis.prior import projection_prior

    prior, measured = projection_prior(path, source, target, "fc")
    measured = measured.drop_duplicates("label", keep="last")
    measured = measured[measured["label"].isin(prior.source.steps.index)].reset_index(drop=True)
    return {
        "pair": f"{source} -> {target}",
        "n": len(measured),
        "held_fixed": prior.source.held,
        **held_out_prior(prior, measured, (0, 3, 5, 8), 20),
    }


def held_out_prior(prior, measured: pd.DataFrame, ks, draws: int, baselines=None) -> dict:
    """The prior calibrated on k of ``measured``'s rows drawn at random and scored on the rest,
    averaged over ``draws`` draws per k (``baselines(chosen, rest, truth, seed)`` adds others)."""
    labels = list(measured["label"])
    truth = measured["step_time_s"].to_numpy(dtype=float)
    report = {}
    for k in ks:
        runs = []
        for seed in range(draws if k else 1):
            chosen = np.random.default_rng(seed).choice(len(labels), k, replace=False)
            rest = np.setdiff1d(np.arange(len(labels)), chosen)
            out = prior.calibrated(measured.iloc[chosen]).predict([labels[i] for i in rest])
            step, t = out["step_time_s"].to_numpy(), truth[rest]
            own = (out["parts_from"] == "profile").to_numpy()
            run = {"prior": scored(step, t, out["step_time_low_s"].to_numpy(), out["step_time_high_s"].to_numpy())}
            if own.any() and (~own).any():
                run |= {"prior_own_profile": scored(step[own], t[own]), "prior_neighbours": scored(step[~own], t[~own])}
            runs.append(run | (baselines(chosen, rest, truth, seed) if baselines else {}))
        report[f"rows_{k}"] = {name: {m: float(np.mean([r[name][m] for r in runs])) for m in runs[0][name]} for name in runs[0]}
    return report


def verdicts(rows: pd.DataFrame, featurizer: predict.Featurizer, fraction: float = 0.2) -> dict:
    """Fig. 2's regression (FLOP/s on log2 hyperparameters) from the measured grid and from a filled one."""
    grid = rows.reset_index(drop=True)
    chosen = predict.sample(grid, featurizer, int(round(fraction * len(grid))), "adaptive")
    filled = predict.filled_grid(grid, featurizer, chosen)
    out = {}
    for name, df in (("measured", grid), ("filled", filled)):
        df = df.assign(flops_per_sec=df["flops_model"] / df["step_time_s"])
        out[name] = regress(df, "flops_per_sec", family="fc").coefficients["coef"].to_dict()
    m, f = pd.Series(out["measured"]), pd.Series(out["filled"])
    out["same_signs"] = bool((np.sign(m) == np.sign(f)).all())
    out["same_order"] = list(m.abs().sort_values().index) == list(f.abs().sort_values().index)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-store", help="A store with this machine's FC grid (at least 12 ok rows).")
    parser.add_argument("--only", help="Comma-separated sections.")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else {"random", "levels", "cross", "prior", "cpu", "replay", "verdicts"}
    report: dict = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        store = reference_store(Path(tmp))
        tpu, featurizer = fitted_rows(store, "tpu-v2-8")
        if "random" in only:
            report["random"] = random_folds(tpu, featurizer, range(5))
            print("random", json.dumps(report["random"]), flush=True)
        if "levels" in only:
            table = predict.level_holdout(tpu, featurizer)
            report["levels"] = table.to_dict("records")
            print(table.round(3).to_string(), flush=True)
        if "cross" in only:
            report["cross"] = cross_platform(store)
            print("cross", json.dumps(report["cross"]), flush=True)
        if "prior" in only:
            report["prior"] = projection_as_prior(store, str(Path(tmp) / "reference.sqlite"))
            print("prior", json.dumps(report["prior"], indent=1), flush=True)
        if "prior" in only and args.cpu_store:
            report["prior_local"] = local_prior(args.cpu_store)
            print("prior_local", json.dumps(report["prior_local"], indent=1), flush=True)
        if "cpu" in only and args.cpu_store:
            with Store(args.cpu_store, create=False, readonly=True) as cpu:
                platform = cpu.platform_names()[0]
                rows, on_cpu = fitted_rows(cpu, platform)
            report["cpu"] = {"platform": platform, **predict.cross_validate(rows, on_cpu, 5, 0)}
            print("cpu", json.dumps(report["cpu"]), flush=True)
        if "replay" in only:
            full = predict.cross_validate(tpu, featurizer, 5, 0)["model"]["mape"]
            table = predict.replay(tpu, featurizer, [0.05, 0.1, 0.2], seeds=range(3))
            summary = table.groupby(["fraction", "strategy"])[["mape", "coverage"]].mean().reset_index()
            report["replay"] = {"full_data_mape": full, "runs": table.to_dict("records"), "mean": summary.to_dict("records")}
            print(f"full-data 5-fold MAPE {full:.2f}%\n" + summary.round(3).to_string(), flush=True)
        if "verdicts" in only:
            report["verdicts"] = verdicts(tpu, featurizer)
            print("verdicts", json.dumps(report["verdicts"]), flush=True)
    report["wall_s"] = time.monotonic() - started
    out = Path("outputs/bench/prediction.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=float))
    print(f"wrote {out} ({report['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
