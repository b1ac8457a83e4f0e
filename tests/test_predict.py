"""The performance model, its evaluation, adaptive sampling and `paradnn predict`, on small derived data."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from paradnn import counting
from paradnn.analysis import predict
from paradnn.analysis.roofline import Ceilings
from paradnn.config import ConfigError
from paradnn.engine.protocol import RunSettings
from paradnn.families import parse_label
from paradnn.space import expand
from paradnn.store import Store
from paradnn.sweeps import adaptive
from paradnn.sweeps.plan import SweepOptions
from tests.conftest import paradnn_here

CEILINGS = Ceilings(peak_flops=1e12, bandwidth=1e11, source="test")
GRID = {"layers": [1, 2, 4, 8], "nodes": [16, 32, 64, 128], "input": [64], "output": [8], "batch": [8, 16, 32, 64]}


def synthetic_step_s(config, noise: float = 0.0, rng=None) -> float:
    """A smooth 'platform': the roofline bound, an efficiency that grows with batch, and a fixed overhead."""
    bound = max(counting.flops_model(config) / CEILINGS.peak_flops, counting.bytes_estimate(config) / CEILINGS.bandwidth)
    efficiency = 0.05 * config.batch**0.5
    step = bound / min(efficiency, 0.9) + 2e-5 * config.layers
    return step * (float(np.exp(rng.normal(0, noise))) if noise else 1.0)


def grid_frame(noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for config in expand("fc", "smoke", GRID):
        rows.append(
            {
                "label": config.label,
                "family": "fc",
                **config.hyperparameters(),
                "dtype": "float32",
                "xla": "true",
                "state": "ok",
                "step_time_s": synthetic_step_s(config, noise, rng),
            }
        )
    return pd.DataFrame(rows)


def featurizer() -> predict.Featurizer:
    return predict.Featurizer("fc", lambda dtype: CEILINGS)


def test_the_model_interpolates_a_smooth_platform_better_than_both_baselines():
    rows = grid_frame(noise=0.02)
    scores = predict.cross_validate(rows, featurizer(), k=4)
    assert scores["model"]["n"] == len(rows) == 64
    assert scores["model"]["mape"] < 6.0
    assert scores["model"]["mape"] < scores["roofline"]["mape"] and scores["model"]["mape"] < scores["paper_regression"]["mape"]
    assert 0.5 <= scores["model"]["coverage"] <= 1.0 and scores["roofline"]["coverage"] is None


def test_predictions_carry_consistent_intervals_and_are_reproducible():
    rows = grid_frame(noise=0.02)
    model = predict.PerformanceModel.fit(rows, featurizer(), seed=3)
    new = predict.label_rows("fc", ["layer_3-node_48-input_64-output_8-bs_24"], "float32", "true")
    out = model.predict(new).iloc[0]
    assert out["step_time_low_s"] < out["step_time_s"] < out["step_time_high_s"]
    assert out["examples_per_sec"] == pytest.approx(24 / out["step_time_s"])
    assert out["examples_per_sec_low"] == pytest.approx(24 / out["step_time_high_s"])
    truth = synthetic_step_s(parse_label("fc", "layer_3-node_48-input_64-output_8-bs_24"))
    assert abs(out["step_time_s"] / truth - 1) < 0.15  # between grid levels on every axis
    again = predict.PerformanceModel.fit(rows, featurizer(), seed=3).predict(new).iloc[0]
    assert again["step_time_s"] == out["step_time_s"]
    assert np.isnan(out["fits_probability"])  # no failed rows: nothing to say about memory


def test_fitting_and_predicting_use_one_blas_thread(monkeypatch):
    """Beside another busy process two spinning OpenBLAS threads made the prediction report 2-3x slower."""
    from threadpoolctl import threadpool_info

    seen = []
    fit_gp = predict.fit_gp
    monkeypatch.setattr(predict, "fit_gp", lambda *a: seen.append(threadpool_info()) or fit_gp(*a))
    model = predict.PerformanceModel.fit(grid_frame(), featurizer())
    gp_predict = model.gp.predict
    monkeypatch.setattr(model.gp, "predict", lambda *a, **k: seen.append(threadpool_info()) or gp_predict(*a, **k))
    model.predict(predict.label_rows("fc", ["layer_3-node_48-input_64-output_8-bs_24"], "float32", "true"))
    blas = [[lib["num_threads"] for lib in info if lib["user_api"] == "blas"] for info in seen]
    assert len(blas) >= 2 and all(blas) and all(n == 1 for threads in blas for n in threads)


def test_independent_fits_run_in_other_processes_and_keep_their_order(monkeypatch):
    monkeypatch.setattr(predict.os, "cpu_count", lambda: 2)
    calls = [functools.partial(divmod, n, 3) for n in range(5)]
    assert predict.in_parallel(calls) == [divmod(n, 3) for n in range(5)]
    pids = predict.in_parallel([os.getpid, os.getpid])
    assert os.getpid() not in pids  # one process per core: the kernel fit's optimiser runs in Python
    monkeypatch.setattr(predict.os, "cpu_count", lambda: 1)
    assert predict.in_parallel([os.getpid]) == [os.getpid()]  # one core: no process to start


def test_a_held_out_level_is_interpolated():
    table = predict.level_holdout(grid_frame(), featurizer())
    assert set(table["axis"]) == {"layers", "nodes", "batch"}  # input and output have one level: nothing interior
    assert list(table[table["axis"] == "batch"]["level"]) == [16, 32]
    assert (table["mape"] < 15).all(), table


def test_out_of_memory_is_predicted_from_failed_rows():
    rows = grid_frame()
    memory = predict.counts("fc", rows)["memory_estimate"]
    failed = rows[memory > memory.quantile(0.75)].assign(state="oom")
    model = predict.PerformanceModel.fit(rows[memory <= memory.quantile(0.75)], featurizer(), failed=failed)
    probe = predict.label_rows(
        "fc", ["layer_1-node_16-input_64-output_8-bs_8", "layer_8-node_128-input_64-output_8-bs_64"], "float32", "true"
    )
    small, large = model.predict(probe)["fits_probability"]
    assert small > 0.9 and large < 0.1


def test_too_few_rows_is_one_clear_error():
    with pytest.raises(predict.PredictionError, match=f"at least {predict.MIN_ROWS}"):
        predict.PerformanceModel.fit(grid_frame().head(5), featurizer())
    with pytest.raises(ConfigError, match="--cv"):
        predict.cross_validate(grid_frame(), featurizer(), k=1)


def test_space_filling_design_spreads_over_the_log_axes():
    rows = grid_frame()
    chosen = predict.space_filling(rows, "fc", 8, seed=1)
    assert len(set(chosen)) == 8
    x = predict.log_axes(rows, "fc")

    def min_gap(idx) -> float:
        pts = x[list(idx)]
        return min(np.linalg.norm(a - b) for i, a in enumerate(pts) for b in pts[i + 1 :])

    randoms = [min_gap(np.random.default_rng(s).choice(len(x), 8, replace=False)) for s in range(20)]
    assert min_gap(chosen) >= max(randoms)


def test_replay_compares_adaptive_and_random_at_equal_budgets():
    table = predict.replay(grid_frame(noise=0.02), featurizer(), fractions=[0.3], rounds=2)
    assert list(table["strategy"]) == ["adaptive", "random"]
    assert (table["budget"] == 19).all() and (table["n"] == 64 - 19).all()
    assert (table["mape"] < 25).all()


@pytest.mark.parametrize("remaining,rounds,steps", [(10, 4, [3, 3, 2, 2]), (2, 4, [1, 1]), (0, 4, [])])
def test_adaptive_rounds_spend_the_budget_exactly(remaining, rounds, steps):
    assert predict.adaptive_steps(remaining, rounds) == steps


@pytest.mark.parametrize(
    "text,budget",
    [("40", adaptive.Budget(configs=40)), ("30m", adaptive.Budget(minutes=30.0)), ("2.5min", adaptive.Budget(minutes=2.5))],
)
def test_budget_parses_configurations_or_minutes(text, budget):
    assert adaptive.Budget.parse(text) == budget


@pytest.mark.parametrize("text", ["", "0", "-3", "2.5", "ten", "5h"])
def test_a_bad_budget_is_refused(text):
    with pytest.raises(ConfigError, match="--budget"):
        adaptive.Budget.parse(text)


# ------------------------------------------------------------------ adaptive sweep with a scripted worker


def test_adaptive_sweep_measures_its_budget_and_predicts_the_rest(tmp_path):
    from test_sweep_driver import FakeWorker

    class SyntheticWorker(FakeWorker):
        """Answers with the synthetic platform's step time; one label answers 5x slow the first time."""

        slow_once: set[str] = set()

        def __init__(self, target, script):
            super().__init__(target, script)
            self.ceilings = {
                "matmul_flops": {"float32": {"2048": CEILINGS.peak_flops}},
                "copy_bandwidth": {"64MB": CEILINGS.bandwidth},
            }

        def recv(self):
            answer = super().recv()
            if self.pending and "step_time_s" in answer.record:
                step = synthetic_step_s(parse_label("fc", self.pending))
                if self.pending in self.slow_once:
                    self.slow_once.discard(self.pending)
                    step *= 5
                answer.record["step_time_s"] = step
            return answer

    configs = expand("fc", "smoke", GRID)
    options = SweepOptions(settings=RunSettings(max_seconds=0.1), timeout_s=5, memory_budget_bytes=1e12)
    lines: list[str] = []
    with Store(tmp_path / "r.sqlite") as store:
        first = adaptive.adaptive_sweep(
            configs,
            store,
            options,
            adaptive.Budget(configs=20),
            rounds=2,
            echo=lines.append,
            start_worker=lambda t: SyntheticWorker(t, {}),
            progress=_quiet,
        )
        assert first.measured == 20 and first.rounds == 2 and first.summary.already_done == 0
        assert "64 configurations: 0 already in the store; this run: 20 ok" in first.summary.line()
        assert len(first.predicted) == 64 - 20 and set(first.predicted["label"]).isdisjoint(store.results()["label"])
        assert store.count() == 20 + len(first.remeasured)  # a repeat is an extra row, not part of the budget
        # an outlier: the model knows the platform now; a 5x slow answer is measured again, both rows kept
        target = first.predicted.sort_values("relative_width").iloc[-1]["label"]
        SyntheticWorker.slow_once = {target}
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(predict, "most_informative", lambda model, candidates, n: [target] if target in candidates.index else [])
            mp.setattr(predict, "space_filling", lambda *a, **k: [])
            second = adaptive.adaptive_sweep(
                configs,
                store,
                options,
                adaptive.Budget(configs=21),
                rounds=1,
                echo=lines.append,
                start_worker=lambda t: SyntheticWorker(t, {}),
                progress=_quiet,
            )
        rows = store.results().set_index("label")
    assert second.remeasured and target in second.remeasured[0] and "agrees with the model" in second.remeasured[0]
    assert len(rows.loc[[target]]) == 2 and lines == first.remeasured + second.remeasured


def test_an_adaptive_budget_counts_what_the_store_holds(tmp_path):
    """Interrupted after 13 of a 20 budget: 7 left; the rerun measures those 7, a third run nothing."""
    from test_sweep_driver import FakeWorker

    class Answers(FakeWorker):
        interrupt_after: int | None = None
        answered = 0

        def __init__(self, target, script):
            super().__init__(target, script)
            self.ceilings = {
                "matmul_flops": {"float32": {"2048": CEILINGS.peak_flops}},
                "copy_bandwidth": {"64MB": CEILINGS.bandwidth},
            }

        def recv(self):
            if self.pending and Answers.interrupt_after is not None and Answers.answered >= Answers.interrupt_after:
                raise KeyboardInterrupt
            answer = super().recv()
            if self.pending and "step_time_s" in answer.record:
                answer.record["step_time_s"] = synthetic_step_s(parse_label("fc", self.pending))
                Answers.answered += 1
            return answer

    configs = expand("fc", "smoke", GRID)
    options = SweepOptions(settings=RunSettings(max_seconds=0.1), timeout_s=5, memory_budget_bytes=1e12)

    def run(store):
        return adaptive.adaptive_sweep(
            configs,
            store,
            options,
            adaptive.Budget(configs=20),
            rounds=2,
            start_worker=lambda t: Answers(t, {}),
            progress=_quiet,
            echo=lambda _: None,
        )

    with Store(tmp_path / "r.sqlite") as store:
        Answers.interrupt_after = 13
        first = run(store)
        assert first.summary.interrupted and first.measured == 13 and first.summary.left == 7
        assert "interrupted, 7 left (rerun to resume)" in first.summary.line()
        Answers.interrupt_after = None
        second = run(store)
        assert (second.summary.already_done, second.measured, second.summary.left) == (13, 7, 0)
        third = run(store)
        assert third.measured == 0 and "64 configurations: 20 already in the store; this run: nothing measured" in (
            third.summary.line()
        )
        assert len(set(store.results()["label"])) == 20 and len(third.predicted) == 64 - 20


def _quiet(*args, **kwargs):
    from paradnn.sweeps.plan import SilentProgress

    return SilentProgress()


def test_an_adaptive_budget_below_the_initial_design_is_refused():
    with pytest.raises(ConfigError, match=f"at least {predict.MIN_ROWS}"):
        adaptive.Budget(configs=5)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--adaptive"], "--adaptive/--budget"),
        (["--budget", "20"], "--adaptive/--budget"),
        (["--adaptive", "--budget", "5"], "--budget: 5 is not valid; allowed: at least 12"),
        (["--adaptive", "--budget", "5h"], "--budget: '5h' is not valid"),
    ],
)
def test_adaptive_sweep_bad_input_is_one_line_and_exit_2(tmp_path, args, needle):
    done = paradnn_here("sweep", "fc", "--store", str(tmp_path / "r.sqlite"), *args)
    assert done.returncode == 2 and needle in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "r.sqlite").exists()


def test_adaptive_sweep_end_to_end_measures_the_budget_and_prints_predictions(tmp_path):
    """Smoke size, a real worker: 12 of 18 configurations measured (the design), 6 predicted."""
    store = tmp_path / "r.sqlite"
    grid = ["--set", "layers=1,2", "--set", "nodes=16,32,64", "--set", "batch=8,16,32", "--set", "input=64", "--set", "output=8"]
    done = cli("sweep", "fc", "--store", str(store), *grid, "--max-seconds", "0.2", "--no-xla", "--adaptive", "--budget", "12")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(" predicted ") == 6 and done.stdout.count(" ok ") == 12
    assert "adaptive: 12 of 18 configurations measured in 0 rounds, 6 predicted" in done.stderr
    assert Store(store).count() == 12


# ------------------------------------------------------------------ the command line, on the original study's V100 sweep


@pytest.fixture(scope="module")
def legacy_store(tmp_path_factory, reference):
    path = tmp_path_factory.mktemp("predict") / "ref.sqlite"
    cli("import-legacy", "--store", str(path))
    return path


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "paradnn.cli", *args], capture_output=True, text=True, timeout=600)


def test_predict_labels_json(legacy_store):
    done = cli(
        "predict",
        "--store",
        str(legacy_store),
        "--platform",
        "v100",
        "--family",
        "fc",
        "--json",
        "layer_4-node_512-input_2000-output_1000-bs_8192",
        "layer_3-node_700-input_2000-output_1000-bs_300",
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [o["label"] for o in out] == [
        "layer_4-node_512-input_2000-output_1000-bs_8192",
        "layer_3-node_700-input_2000-output_1000-bs_300",
    ]
    for o in out:
        assert {"step_time_s", "examples_per_sec", "examples_per_sec_low", "examples_per_sec_high", "extrapolated"} <= set(o)
        assert o["examples_per_sec_low"] < o["examples_per_sec"] < o["examples_per_sec_high"]
    assert out[0]["measured_step_time_s"] > 0 and out[1]["measured_step_time_s"] is None


def test_predict_cross_validation_json(legacy_store):
    done = cli("predict", "--store", str(legacy_store), "--platform", "v100", "--family", "fc", "--cv", "3", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["n"] == 176 and {"mape", "median_ape", "p90_ape", "coverage"} <= set(out)
    assert set(out["baselines"]) == {"roofline", "paper_regression"}
    assert out["mape"] < out["baselines"]["roofline"]["mape"] and out["mape"] < out["baselines"]["paper_regression"]["mape"]


TRACED = "layer_4-node_128-input_2000-output_1000-bs_16384"  # measured on both sweeps and traced on the TPU


def test_predict_with_the_projection_as_prior_calibrates_on_the_rows_q_has(legacy_store):
    """V100 from the TPU v2's traces: calibrated on the V100's 176 rows; H100 (a datasheet, no rows): not calibrated."""
    done = cli(
        "predict",
        "--store",
        str(legacy_store),
        "--platform",
        "v100",
        "--family",
        "fc",
        "--prior-from",
        "tpu-v2-8",
        "--json",
        TRACED,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "calibrated on 176 measured rows of v100" in out["prior"] and "float16" in out["prior"]
    row = out["rows"][0]
    assert row["parts_from"] == "profile" and row["measured_step_time_s"] > 0
    assert row["step_time_low_s"] < row["step_time_s"] < row["step_time_high_s"]
    done = cli(
        "predict",
        "--store",
        str(legacy_store),
        "--platform",
        "h100",
        "--family",
        "fc",
        "--prior-from",
        "tpu-v2-8",
        "--json",
        TRACED,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "not calibrated" in out["prior"] and out["rows"][0]["step_time_low_s"] is None
    assert out["rows"][0]["measured_step_time_s"] is None and out["rows"][0]["step_time_s"] > 0


FC_LABEL = "layer_4-node_256-input_2000-output_1000-bs_64"


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--platform", "cpu", "--family", "fc", FC_LABEL], "--platform: 'cpu' is not valid; allowed: tpu-v2-8, v100"),
        (
            ["--platform", "v100", "--family", "cnn", "--cv", "3"],
            "0 measured cnn configurations on v100; prediction needs at least 12",
        ),
        (["--platform", "v100", "--family", "fc", "block_1-filter_16-image_64-output_1000-bs_32-residual"], "label:"),
        (["--platform", "v100", "--family", "fc"], "LABEL"),
        (["--platform", "v100", "--family", "fc", "--cv", "1"], "--cv: 1 is not valid"),
        (["--platform", "v100", "--family", "fc", "--replay", "2"], "--replay: '2' is not valid"),
        (["--platform", "v100", "--family", "fc", "--dtype", "float32", FC_LABEL], "--dtype: 'float32' is not valid"),
        (["--platform", "v100", "--family", "fc", "--prior-from", "tpu-v2-8", "--cv", "3"], "--prior-from: 'tpu-v2-8' is not"),
        (["--platform", "h100", "--family", "fc", "--prior-from", "v100", FC_LABEL], "--prior-from: 'v100' is not valid"),
        (["--platform", "nowhere", "--family", "fc", "--prior-from", "tpu-v2-8", FC_LABEL], "--platform: 'nowhere' is not"),
    ],
)
def test_predict_bad_input_is_one_line_and_exit_2(legacy_store, args, needle):
    before = Store(legacy_store).count()
    done = paradnn_here("predict", "--store", str(legacy_store), *args)
    assert done.returncode == 2 and needle in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert Store(legacy_store).count() == before


def test_a_family_with_a_text_axis_gets_it_as_a_feature():
    """CNN's block kind is one-hot; a platform where bottleneck blocks cost 1.5x more is learned."""
    grid = {
        "blocks": [1, 2, 3, 4],
        "filters": [8, 16],
        "image": [32],
        "output": [10],
        "batch": [8, 16, 32],
        "block": ["residual", "bottleneck"],
    }
    rows = []
    for config in expand("cnn", "smoke", grid):
        bound = counting.flops_model(config) / CEILINGS.peak_flops
        step = bound / 0.2 * (1.5 if config.block == "bottleneck" else 1.0) + 1e-4
        rows.append({"label": config.label, **config.hyperparameters(), "dtype": "float32", "xla": "true", "step_time_s": step})
    rows = pd.DataFrame(rows)
    cnn = predict.Featurizer("cnn", lambda dtype: CEILINGS)
    x = cnn.learn(rows).matrix(rows, predict.counts("cnn", rows))
    assert x.shape == (48, 5 + 2 + 1)  # five numeric axes, two roofline times, one block-kind column
    assert predict.cross_validate(rows, cnn, k=4)["model"]["mape"] < 10


def test_axes_read_back_as_floats_are_counted():
    """A store holding several families reads FC's integer columns as floats (NULLs elsewhere)."""
    rows = grid_frame().head(3)
    floats = rows.astype({"layers": float, "nodes": float, "batch": float}).astype(object)
    assert predict.counts("fc", floats).equals(predict.counts("fc", rows))


def test_labels_measured_with_and_without_xla_are_predicted_for_one_setting():
    both = pd.concat([grid_frame(), grid_frame().head(10).assign(xla="false", step_time_s=lambda d: d["step_time_s"] * 2)])
    model = predict.PerformanceModel.fit(both, featurizer())
    label = both["label"].iloc[0]
    out = predict.predict_labels(model, both, [label]).iloc[0]
    assert out["measured_step_time_s"] == both["step_time_s"].iloc[0]  # the setting most rows have: XLA on


def test_beyond_the_measured_range_the_residual_is_held_and_the_row_flagged():
    rows = grid_frame(noise=0.02)
    model = predict.PerformanceModel.fit(rows, featurizer())
    probe = predict.label_rows(
        "fc", ["layer_4-node_32-input_64-output_8-bs_16", "layer_64-node_1024-input_64-output_8-bs_512"], "float32", "true"
    )
    out = model.predict(probe)
    assert list(out["extrapolated"]) == [False, True]
    far = parse_label("fc", "layer_64-node_1024-input_64-output_8-bs_512")
    assert 0.2 < out["step_time_s"].iloc[1] / synthetic_step_s(far) < 5  # the roofline carries it, no polynomial blow-up
