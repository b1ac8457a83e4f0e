"""Regression, roofline and the paper's observations on data with known answers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from paradnn.analysis import observations as obs
from paradnn.analysis.regression import regress
from paradnn.analysis.roofline import ceilings_for, model_points
from paradnn.analysis.speedup import compare


def fc_frame(util) -> pd.DataFrame:
    """A full FC grid whose utilisation is ``util(nodes, batch, layers)``, with sizes as a store has them."""
    from paradnn import counting
    from paradnn.families import parse_label

    rows = []
    for layers in (2, 4):
        for nodes in (64, 128, 256, 512):
            for batch in (32, 64, 128, 256):
                label = f"layer_{layers}-node_{nodes}-input_100-output_10-bs_{batch}"
                config = parse_label("fc", label)
                rows.append({"family": "fc", "label": label, **config.hyperparameters(), "state": "ok",
                             "params": counting.count_params(config), "flops_model": counting.flops_model(config),
                             "utilization": util(nodes, batch, layers)})  # fmt: skip
    return pd.DataFrame(rows)


def test_regression_recovers_known_weights():
    df = fc_frame(lambda n, b, layers: 0.1 * np.log2(n) + 0.05 * np.log2(b))
    res = regress(df, "utilization", family="fc")
    assert res.r_squared == pytest.approx(1.0)
    # Standardised log2 features: weight = slope x s.d. of log2 values (4 evenly spaced levels: s.d. sqrt(1.25)).
    assert res.coefficients.loc["nodes", "coef"] == pytest.approx(0.1 * np.sqrt(1.25))
    assert res.coefficients.loc["batch", "coef"] == pytest.approx(0.05 * np.sqrt(1.25))
    assert abs(res.coefficients.loc["layers", "coef"]) < 1e-9
    assert set(res.dropped) == {"input", "output"}


def test_regression_with_too_little_data_says_so():
    for df in (fc_frame(lambda n, b, layers: 0.5), fc_frame(lambda n, b, layers: float(b)).head(2)):
        res = regress(df, "utilization", family="fc")
        assert res.coefficients.empty and np.isnan(res.r_squared)


def test_trend_verdicts():
    rising = fc_frame(lambda n, b, layers: 0.001 * b)
    falling = fc_frame(lambda n, b, layers: 1 / b)
    assert obs.trend(rising, "batch", "fc").verdict == obs.HOLDS
    verdict = obs.trend(falling, "batch", "fc")
    assert verdict.verdict == obs.FAILS and verdict.numbers["groups"] == 8
    assert verdict.numbers["median_ratio"] == pytest.approx(32 / 256)
    assert obs.trend(rising, "batch", "cnn").verdict == obs.UNKNOWN
    assert "The paper found" in obs.trend(rising, "nodes", "fc", paper="x").sentence


def test_memory_bound_share():
    breakdown = pd.DataFrame({"label": ["a", "a"], "category": ["matmul", "element-wise"], "flops": [100.0, 1.0],
                              "bytes": [1.0, 10.0], "time_share": [0.7, 0.3], "intensity": [100.0, 0.1]})  # fmt: skip
    v = obs.memory_bound_share(breakdown, ridge=10)
    assert v.verdict == obs.HOLDS and v.numbers["memory_bound_share"] == pytest.approx(0.3)
    assert obs.memory_bound_share(pd.DataFrame(), ridge=10).verdict == obs.UNKNOWN


def test_speedup_depends_on_nodes_and_batch():
    base = fc_frame(lambda n, b, layers: 1.0).assign(platform="a", examples_per_sec=1000.0)
    tgt = base.assign(platform="b", examples_per_sec=1000.0 * base["batch"] / base["nodes"])
    result = compare(pd.concat([base, tgt]), "a", "b")
    assert result.n == len(base)
    verdict = obs.speedup_depends_on(result.table, "fc")
    assert verdict.verdict == obs.HOLDS and set(verdict.numbers["significant"]) == {"nodes", "batch"}
    flat = compare(pd.concat([base, base.assign(platform="b")]), "a", "b")
    assert (
        obs.speedup_depends_on(
            flat.table.assign(
                speedup=flat.table["speedup"] * (1 + 1e-3 * np.random.default_rng(0).standard_normal(len(flat.table)))
            ),
            "fc",
        ).verdict
        == obs.FAILS
    )  # noqa: E501


def test_stack_speedup_compute_bound_only():
    base = fc_frame(lambda n, b, layers: 1.0).assign(dtype="float32", platform="cpu", examples_per_sec=100.0)
    # Lower precision doubles the throughput of the larger half (by FLOPs) and halves the rest.
    big = base["nodes"] * base["batch"] >= 128 * 64
    fast = base.assign(dtype="mixed_bfloat16", examples_per_sec=np.where(big, 200.0, 50.0))
    result = compare(pd.concat([base, fast]), "float32", "mixed_bfloat16", by="dtype")
    assert obs.stack_speedup(result, "x", "y", compute_bound_only=True).verdict == obs.HOLDS
    assert obs.stack_speedup(result, "x", "y").numbers["n"] == len(base)


def test_roofline_ceilings_and_points():
    ceilings = {"matmul_flops": {"float32": {"xla": 100e9, "no_xla": 120e9}}, "copy_bandwidth": {"xla": 10e9, "no_xla": 8e9}}
    platforms = pd.DataFrame([{"platform": "cpu", "source": "measured", "ceilings": json.dumps(ceilings)}])
    c = ceilings_for(platforms, "cpu", "float32")
    assert (c.peak_flops, c.bandwidth, c.ridge, c.source) == (120e9, 10e9, 12.0, "measured")
    assert ceilings_for(platforms, "tpu-v2-8", "mixed_bfloat16").ridge == pytest.approx(75.0)
    assert ceilings_for(platforms, "unknown-box") is None
    df = pd.DataFrame({"state": ["ok", "oom"], "flops_model": [100.0, 5.0], "bytes_estimate": [10.0, 1.0],
                       "flops_per_sec": [1e9, None]})  # fmt: skip
    points = model_points(df)
    assert points["intensity"].tolist() == [10.0]


def breakdown_of(label: str, family: str, shares: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """A per-op breakdown: category -> (time share, intensity)."""
    rows = [{"family": family, "label": label, "category": c, "time_share": t, "intensity": i, "flops": i * 10.0,
             "bytes": 10.0} for c, (t, i) in shares.items()]  # fmt: skip
    return pd.DataFrame(rows)


def test_memory_bound_time_checks_the_premise_on_the_roofline():
    breakdown = pd.concat([
        breakdown_of("big", "resnet50", {"convolution": (0.8, 50.0), "element-wise": (0.2, 0.5)}),
        breakdown_of("rnn", "rnn", {"recurrent loop": (0.9, 0.0), "element-wise": (0.1, 0.5)}),
    ])  # fmt: skip
    points = pd.DataFrame({"label": ["big", "rnn"], "intensity": [40.0, 2.0]})
    verdict = obs.compute_bound_memory_time(breakdown, ridge=10.0, points=points)
    assert verdict.verdict == obs.HOLDS and "1 of 2" in verdict.evidence
    models = {m["label"]: m for m in verdict.numbers["models"]}
    assert models["big"]["memory_bound_share"] == pytest.approx(0.2)
    assert models["rnn"]["uncounted_share"] == pytest.approx(0.9)  # the loop is left out, not called memory-bound
    assert models["rnn"]["memory_bound_share"] == pytest.approx(1.0)
    little = breakdown_of("big", "resnet50", {"convolution": (0.95, 50.0), "element-wise": (0.05, 0.5)})
    assert obs.compute_bound_memory_time(little, 10.0, points).verdict == obs.FAILS
    # The premise fails: no profiled model is right of the ridge.
    assert obs.compute_bound_memory_time(breakdown, 100.0, points).verdict == obs.UNKNOWN
    assert obs.compute_bound_memory_time(pd.DataFrame(), 10.0, points).verdict == obs.UNKNOWN


def test_utilisation_ratio_needs_both_platforms():
    table = pd.DataFrame({"tpu-v2-8": [0.3, 0.6], "v100": [0.1, 0.3]}, index=["fc", "cnn"])
    verdict = obs.utilisation_ratio(table)
    assert verdict.verdict == obs.HOLDS and verdict.numbers["ratios"]["fc"] == pytest.approx(3.0)
    assert obs.utilisation_ratio(table.assign(v100=[0.1, 0.9])).verdict == obs.FAILS
    assert "needs measurements on v100" in obs.utilisation_ratio(table.drop(columns="v100")).evidence


def test_largest_weights():
    df = fc_frame(lambda n, b, layers: 0.1 * np.log2(n) + 0.01 * layers)
    assert obs.largest_weights({"fc": regress(df, "utilization", family="fc")}).verdict == obs.HOLDS
    deep = fc_frame(lambda n, b, layers: 0.3 * layers + 0.001 * np.log2(b))
    assert obs.largest_weights({"fc": regress(deep, "utilization", family="fc")}).verdict == obs.FAILS
    assert obs.largest_weights({}).verdict == obs.UNKNOWN


def test_workload_tables():
    from paradnn.analysis import workloads as wl

    base = fc_frame(lambda n, b, layers: 0.2).assign(platform="cpu", dtype="float32", examples_per_sec=100.0,
                                                      source="measured")  # fmt: skip
    half = base.assign(dtype="mixed_bfloat16", utilization=0.1, examples_per_sec=150.0)
    other = base.assign(platform="gpu:0", utilization=0.4, examples_per_sec=400.0)
    df = pd.concat([base, half, other], ignore_index=True)
    precision = wl.precision_table(df[df["platform"] == "cpu"], "mixed_bfloat16").set_index("family")
    assert precision.loc["fc", "float32"] == pytest.approx(0.2) and precision.loc["fc", "speedup"] == pytest.approx(1.5)
    platforms = wl.platform_table(df, "float32")
    assert platforms.loc["fc", "cpu"] == pytest.approx(0.2) and platforms.loc["fc", "gpu:0"] == pytest.approx(0.4)
    pairs = wl.pair_speedups(df[df["dtype"] == "float32"])
    assert pairs[["baseline", "target"]].values.tolist() == [["cpu", "gpu:0"]] and pairs["median"].iloc[0] == pytest.approx(4)


def test_parameter_ranges_of_the_smoke_grids():
    from paradnn.analysis import workloads as wl

    table = wl.parameter_ranges("smoke").set_index("family")
    assert table.loc["fc", "kind"] == "range" and table.loc["squeezenet", "kind"] == "model"
    assert table.loc["fc", "min"] == 2000 * 64 + 64 * 64 + 64 * 1000 + 2 * 64 + 1000  # layers 2, nodes 64
    assert table.loc["squeezenet", "max"] == 1_248_424
