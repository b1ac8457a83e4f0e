"""Regression, roofline and the paper's observations on data with known answers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from paradnn.analysis import observations as obs
from paradnn.analysis.regression import regress
from paradnn.analysis.results import Results
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
                rows.append(
                    {
                        "family": "fc",
                        "label": label,
                        **config.hyperparameters(),
                        "state": "ok",
                        "params": counting.count_params(config),
                        "flops_model": counting.flops_model(config),
                        "utilization": util(nodes, batch, layers),
                    }
                )
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
    verdict = obs.trend(rising, "batch", "fc", platform="cpu")
    assert verdict.verdict == obs.HOLDS and verdict.id == "O1" and verdict.platform == "cpu"
    assert verdict.numbers["median_by_value"] == {"32": 0.032, "64": 0.064, "128": 0.128, "256": 0.256}
    verdict = obs.trend(falling, "batch", "fc")
    assert verdict.verdict == obs.FAILS and verdict.numbers["groups"] == 8
    assert verdict.numbers["median_ratio"] == pytest.approx(32 / 256)
    assert obs.trend(falling, "batch", "fc", rising=False).verdict == obs.HOLDS
    assert obs.trend(rising, "batch", "cnn").verdict == obs.INCONCLUSIVE
    assert "The paper found" in obs.trend(rising, "nodes", "fc", paper="x").sentence


def test_a_plateau_is_reported_as_one():
    saturating = fc_frame(lambda n, b, layers: min(b, 64) / 100)  # rises 32 -> 64, then flat
    verdict = obs.trend(saturating, "batch", "fc")
    assert verdict.numbers["plateau_from"] == 64 and "plateau" in verdict.evidence
    assert verdict.verdict == obs.FAILS  # two of three steps are flat: it does not keep rising
    late = fc_frame(lambda n, b, layers: min(b, 128) / 100)  # rises over two steps, then flat
    verdict = obs.trend(late, "batch", "fc")
    assert verdict.verdict == obs.HOLDS and verdict.numbers["plateau_from"] == 128
    zigzag = fc_frame(lambda n, b, layers: {32: 1, 64: 2, 128: 1.2, 256: 2.2}[b])  # up overall, down in a third of steps
    assert obs.trend(zigzag, "batch", "fc").verdict == obs.HOLDS
    jagged = fc_frame(lambda n, b, layers: {32: 1, 64: 3, 128: 1.2, 256: 1.1}[b])
    assert obs.trend(jagged, "batch", "fc").verdict == obs.FAILS


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


def test_stack_speedup_right_of_the_ridge():
    base = fc_frame(lambda n, b, layers: 1.0).assign(dtype="float32", platform="cpu", examples_per_sec=100.0)
    base["bytes_estimate"] = base["flops_model"] / np.where(base["nodes"] * base["batch"] >= 128 * 64, 20.0, 5.0)
    # Lower precision doubles the throughput of the models right of a 10 FLOPs/byte ridge and halves the rest.
    right = base["flops_model"] / base["bytes_estimate"] >= 10
    fast = base.assign(dtype="mixed_bfloat16", examples_per_sec=np.where(right, 200.0, 50.0))
    result = compare(pd.concat([base, fast]), "float32", "mixed_bfloat16", by="dtype")
    verdict = obs.stack_speedup(result, "x", "y", ridge=10.0, id="O13")
    assert verdict.verdict == obs.HOLDS and verdict.numbers["n"] == int(right.sum()) and verdict.id == "O13"
    assert obs.stack_speedup(result, "x", "y").numbers["n"] == len(base)
    assert obs.stack_speedup(result, "x", "y", ridge=1e9).verdict == obs.INCONCLUSIVE  # nothing right of the ridge


def test_roofline_ceilings_and_points():
    ceilings = {"matmul_flops": {"float32": {"xla": 100e9, "no_xla": 120e9}}, "copy_bandwidth": {"xla": 10e9, "no_xla": 8e9}}
    platforms = pd.DataFrame([{"platform": "cpu", "source": "measured", "ceilings": json.dumps(ceilings)}])
    c = ceilings_for(platforms, "cpu", "float32")
    assert (c.peak_flops, c.bandwidth, c.ridge, c.source) == (120e9, 10e9, 12.0, "measured")
    assert ceilings_for(platforms, "tpu-v2-8", "mixed_bfloat16").ridge == pytest.approx(75.0)
    assert ceilings_for(platforms, "unknown-box") is None
    df = pd.DataFrame(
        {"state": ["ok", "oom"], "flops_model": [100.0, 5.0], "bytes_estimate": [10.0, 1.0], "flops_per_sec": [1e9, None]}
    )
    points = model_points(df)
    assert points["intensity"].tolist() == [10.0]


def breakdown_of(label: str, family: str, shares: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """A per-op breakdown: category -> (time share, intensity)."""
    rows = [
        {"family": family, "label": label, "category": c, "time_share": t, "intensity": i, "flops": i * 10.0, "bytes": 10.0}
        for c, (t, i) in shares.items()
    ]
    return pd.DataFrame(rows)


def test_memory_bound_time_checks_the_premise_on_the_roofline():
    breakdown = pd.concat(
        [
            breakdown_of("big", "resnet50", {"convolution": (0.8, 50.0), "element-wise": (0.2, 0.5)}),
            breakdown_of("rnn", "rnn", {"recurrent loop": (0.9, 0.0), "element-wise": (0.1, 0.5)}),
        ]
    )
    points = pd.DataFrame({"label": ["big", "rnn", "wide"], "intensity": [40.0, 2.0, 30.0]})
    alone = obs.compute_bound_memory_time(breakdown, ridge=10.0, points=points)
    assert alone.verdict == obs.INCONCLUSIVE and alone.n == 1  # one compute-bound model: a share of one never decides
    breakdown = pd.concat([breakdown, breakdown_of("wide", "cnn", {"convolution": (0.75, 40.0), "element-wise": (0.25, 0.5)})])
    verdict = obs.compute_bound_memory_time(breakdown, ridge=10.0, points=points)
    assert verdict.verdict == obs.HOLDS and "2 of 3" in verdict.evidence
    models = {m["label"]: m for m in verdict.numbers["models"]}
    assert models["big"]["memory_bound_share"] == pytest.approx(0.2)
    assert models["rnn"]["uncounted_share"] == pytest.approx(0.9)  # the loop is left out, not called memory-bound
    assert models["rnn"]["memory_bound_share"] == pytest.approx(1.0)
    little = pd.concat(
        [breakdown_of(label, "resnet50", {"convolution": (0.95, 50.0), "element-wise": (0.05, 0.5)}) for label in ("big", "wide")]
    )
    assert obs.compute_bound_memory_time(little, 10.0, points).verdict == obs.FAILS
    # The premise fails: no profiled model is right of the ridge.
    assert obs.compute_bound_memory_time(breakdown, 100.0, points).verdict == obs.INCONCLUSIVE
    assert obs.compute_bound_memory_time(pd.DataFrame(), 10.0, points).verdict == obs.INCONCLUSIVE


def test_utilisation_ratio_is_judged_on_matched_configurations():
    rows = []
    for family, label, tpu, v100 in (("fc", "a", 0.3, 0.1), ("fc", "b", 0.6, 0.2), ("cnn", "c", 0.4, 0.2)):
        for platform, util, dtype in (("tpu-v2-8", tpu, "mixed_bfloat16"), ("v100", v100, "mixed_float16")):
            rows.append(
                {"family": family, "label": label, "platform": platform, "dtype": dtype, "state": "ok", "utilization": util}
            )
    rows.append(
        {
            "family": "fc",
            "label": "only-tpu",
            "platform": "tpu-v2-8",
            "dtype": "mixed_bfloat16",
            "state": "ok",
            "utilization": 0.99,
        }
    )  # unmatched: never counted
    results = Results(pd.DataFrame(rows))
    verdict = obs.utilisation_ratio(results.matched("platform", "v100", "tpu-v2-8", metric="utilization", free=("dtype",)))
    assert verdict.verdict == obs.HOLDS and verdict.numbers["ratios"]["fc"] == pytest.approx(3.0) and verdict.n == 3
    assert verdict.held_fixed["free"] == ["dtype"]
    held = results.matched("platform", "v100", "tpu-v2-8", metric="utilization", hold=("dtype",))  # nothing pairs
    assert obs.utilisation_ratio(held).verdict == obs.INCONCLUSIVE


def test_batch_and_width_matter_and_depth_much_less():
    df = fc_frame(lambda n, b, layers: 0.1 * np.log2(n) + 0.05 * np.log2(b) + 0.01 * layers)
    noise = 1e-3 * np.random.default_rng(0).standard_normal(len(df))
    verdict = obs.weights_verdict(
        {"fc": regress(df.assign(utilization=df["utilization"] + noise), "utilization", family="fc")}, "cpu"
    )
    assert verdict.verdict == obs.HOLDS and verdict.numbers["fc"]["weaker_driver"] == "batch" and verdict.id == "O1"
    assert verdict.interval[0] > 0 and verdict.rule.threshold == 0 and "layers" in verdict.rule.statistic
    # Depth as strong as batch: the contrast's interval straddles 0, neither holds nor fails.
    even = fc_frame(lambda n, b, layers: 0.1 * np.log2(n) + 0.05 * np.log2(b) + 0.05 * np.log2(b) * 0 + 0.05 * layers)
    even = even.assign(utilization=even["utilization"] + 0.05 * np.random.default_rng(1).standard_normal(len(even)))
    assert obs.weights_verdict({"fc": regress(even, "utilization", family="fc")}).verdict in (obs.INCONCLUSIVE, obs.FAILS)
    deep = fc_frame(lambda n, b, layers: 0.3 * layers + 0.001 * np.log2(b) + 0.5 * np.log2(n))
    assert obs.weights_verdict({"fc": regress(deep, "utilization", family="fc")}).verdict == obs.FAILS  # depth outweighs batch
    assert obs.weights_verdict({}).verdict == obs.INCONCLUSIVE


def test_workload_tables():
    from paradnn.analysis import workloads as wl

    base = fc_frame(lambda n, b, layers: 0.2).assign(platform="cpu", dtype="float32", examples_per_sec=100.0, source="measured")
    half = base.assign(dtype="mixed_bfloat16", utilization=0.1, examples_per_sec=150.0)
    other = base.assign(platform="gpu:0", utilization=0.4, examples_per_sec=400.0)
    df = pd.concat([base, half, other], ignore_index=True)
    precision = wl.precision_table(df[df["platform"] == "cpu"], "mixed_bfloat16").set_index("family")
    assert precision.loc["fc", "float32"] == pytest.approx(0.2) and precision.loc["fc", "speedup"] == pytest.approx(1.5)
    platforms = wl.platform_table(df, "float32")
    assert platforms.loc["fc", "cpu"] == pytest.approx(0.2) and platforms.loc["fc", "gpu:0"] == pytest.approx(0.4)
    pairs = wl.pair_speedups(df[df["dtype"] == "float32"])
    assert pairs[["baseline", "target"]].values.tolist() == [["cpu", "gpu:0"]] and pairs["median"].iloc[0] == pytest.approx(4)
    assert pairs["held"].iloc[0] == "dtype held" and bool(pairs["chained"].iloc[0])  # the table has no XLA column


def test_fig_11_pairs_chain_on_one_common_set():
    from paradnn.analysis import workloads as wl

    grid = fc_frame(lambda n, b, layers: 0.2).assign(dtype="float32", source="measured")
    # Each platform measured a different, overlapping slice; the TPU's speed varies with batch.
    parts = [
        grid.assign(platform="cpu", examples_per_sec=100.0),
        grid[grid["nodes"] <= 256].assign(platform="gpu:0", examples_per_sec=400.0),
        grid[grid["batch"] >= 64].assign(platform="tpu-v2-8", examples_per_sec=1000.0 * grid["batch"] / 64),
    ]
    pairs = wl.pair_speedups(pd.concat(parts, ignore_index=True)).set_index(["baseline", "target"])
    assert pairs["chained"].all() and set(pairs["n"]) == {18}  # 3 node values x 3 batches x 2 depths, in every pair
    g = pairs["geomean"]
    assert g[("cpu", "tpu-v2-8")] == pytest.approx(g[("cpu", "gpu:0")] * g[("gpu:0", "tpu-v2-8")])  # the bars chain
    assert list(pairs.index) == [("cpu", "gpu:0"), ("cpu", "tpu-v2-8"), ("gpu:0", "tpu-v2-8")]  # the paper's orientation
    # A platform sharing nothing with the others is left out of the chain, its pair listed on its own set.
    lone = grid[grid["nodes"] == 512].assign(platform="v100", examples_per_sec=300.0)
    apart = wl.pair_speedups(pd.concat([*parts[:2], lone], ignore_index=True))
    assert set(apart.loc[apart["chained"], "target"]) == {"gpu:0"} and not apart["chained"].all()


def test_parameter_ranges_of_the_smoke_grids():
    from paradnn.analysis import workloads as wl

    table = wl.parameter_ranges("smoke").set_index("family")
    assert table.loc["fc", "kind"] == "range" and table.loc["squeezenet", "kind"] == "model"
    assert table.loc["fc", "min"] == 2000 * 64 + 64 * 64 + 64 * 1000 + 2 * 64 + 1000  # layers 2, nodes 64
    assert table.loc["squeezenet", "max"] == 1_248_424


def traces_frame(comm: dict[int, float], infeed_small: float = 20.0, infeed_large: float = 2.0) -> pd.DataFrame:
    """Synthetic TPU traces: an all-reduce share per batch; infeed share by model size."""
    rows = []
    for nodes in (32, 8192):
        for batch, share in comm.items():
            label = f"layer_4-node_{nodes}-input_2000-output_1000-bs_{batch}"
            rows.append(
                {
                    "label": label,
                    "category": "all",
                    "infeed": infeed_small if nodes == 32 else infeed_large,
                    "flops_perc": 10.0,
                    "intensity": 100.0,
                    "memory_bandwidth": 60.0,
                }
            )
            rows.append({"label": label, "category": "cross-replica-sum", "time_perc": share, "intensity": 0.1})
    return pd.DataFrame(rows)


def test_communication_share_falls_with_batch():
    verdict = obs.communication_share(traces_frame({256: 8.0, 1024: 4.0, 4096: 2.0}))
    assert verdict.verdict == obs.HOLDS and verdict.id == "O3" and verdict.numbers["median_by_value"]["256"] == 8.0
    assert obs.communication_share(traces_frame({256: 2.0, 1024: 4.0, 4096: 8.0})).verdict == obs.FAILS
    assert obs.communication_share(traces_frame({256: 0.2, 1024: 0.1, 4096: 0.05})).verdict == obs.FAILS  # negligible
    assert obs.communication_share(pd.DataFrame(columns=["label", "category", "time_perc"])).verdict == obs.INCONCLUSIVE


def test_smaller_models_wait_on_infeed_more():
    batches = {b: 1.0 for b in (64, 128, 256, 512, 1024, 2048, 4096, 8192)}
    held = obs.infeed_share(traces_frame(batches))
    assert held.verdict == obs.HOLDS and held.effect == pytest.approx(18.0) and held.interval[0] > 0
    assert obs.infeed_share(traces_frame(batches, 1.0, 5.0)).verdict == obs.FAILS
    assert obs.infeed_share(traces_frame({256: 1.0})).verdict == obs.INCONCLUSIVE


def host_fed(shares: list[float]) -> pd.DataFrame:
    """Host-fed rows, FLOPs per example growing with the index, with these infeed shares."""
    return pd.DataFrame(
        {
            "state": "ok",
            "infeed_share": shares,
            "flops_model": [64 * 10**k for k in range(len(shares))],
            "batch": 64,
            "input_mode": "host-prep",
        }
    )


def test_measured_infeed_is_judged_only_beyond_the_scatter_of_two_sweeps():
    assert obs.INFEED_MARGIN_POINTS == 10.0
    falling = [0.45, 0.42, 0.40, 0.38, 0.20, 0.18, 0.15, 0.12, 0.06, 0.05, 0.04, 0.03]
    held = obs.measured_infeed(host_fed(falling), "cpu")
    assert held.verdict == obs.HOLDS and held.numbers["smallest_third_percent"] == pytest.approx(41.0)
    assert held.numbers["largest_third_percent"] == pytest.approx(4.5) and held.interval[0] > 10
    assert obs.measured_infeed(host_fed(falling[::-1]), "cpu").verdict == obs.FAILS
    # Six configurations, 35 against 5 points: the bootstrap interval over so few reaches into the band.
    few = obs.measured_infeed(host_fed([0.40, 0.30, 0.20, 0.10, 0.05, 0.05]), "cpu")
    assert few.verdict == obs.INCONCLUSIVE and few.interval[0] <= 10 < few.effect
    # 2.2% against 0.8%, then -0.3% against 0.1%: the same six workloads in two main jobs
    for shares in ([0.03, 0.014, 0.02, 0.0, 0.01, 0.006], [-0.004, -0.002, 0.01, 0.0, 0.0, 0.002]):
        tied = obs.measured_infeed(host_fed(shares), "cpu (real workloads)")
        assert tied.verdict == obs.INCONCLUSIVE
        assert "within 10 points, what two sweeps of one configuration differed" in tied.evidence
    assert obs.measured_infeed(host_fed([0.4] * 5), "cpu").verdict == obs.INCONCLUSIVE  # fewer than six


def test_speedup_direction():
    base = fc_frame(lambda n, b, layers: 1.0).assign(platform="v100", examples_per_sec=1000.0, state="ok")
    noise = 1 + 0.01 * np.random.default_rng(1).standard_normal(len(base))
    tpu = base.assign(platform="tpu", examples_per_sec=1000.0 * base["batch"] / base["nodes"] * noise)
    table = compare(pd.concat([base, tpu]), "v100", "tpu").table
    assert obs.speedup_direction(table, "fc", "batch", True, "O7", "tpu vs v100", "x").verdict == obs.HOLDS
    assert obs.speedup_direction(table, "fc", "nodes", False, "O8", "tpu vs v100", "x").verdict == obs.HOLDS
    assert obs.speedup_direction(table, "fc", "batch", False, "O7", "tpu vs v100", "x").verdict == obs.FAILS
    assert obs.speedup_direction(table.head(3), "fc", "batch", True, "O7", "", "x").verdict == obs.INCONCLUSIVE


def test_out_of_memory_first():
    # A TPU v2-8 replicates the model on cores of 8 GiB each; a V100 has 16 GiB: the TPU holds less.
    grid = fc_frame(lambda n, b, layers: 0.5)
    small = grid.assign(platform="tpu-v2-8", state=np.where(grid["nodes"] >= 256, "oom", "ok"))
    large = grid.assign(platform="v100", state=np.where(grid["nodes"] >= 512, "oom", "ok"))
    verdict = obs.out_of_memory_first(pd.concat([small, large]))
    assert verdict.verdict == obs.HOLDS and verdict.numbers["oom"] == {"tpu-v2-8": 16, "v100": 8}
    assert verdict.numbers["memory_bytes"]["tpu-v2-8"] == 8 * 2**30 and verdict.numbers["on_largest"] == {"ok": 8, "oom": 8}
    flipped = pd.concat([small.assign(platform="v100"), large.assign(platform="tpu-v2-8")])
    assert obs.out_of_memory_first(flipped).verdict == obs.FAILS
    assert obs.out_of_memory_first(pd.concat([grid.assign(platform="a"), grid.assign(platform="b")])).verdict == obs.INCONCLUSIVE
    # The largest models did not finish on the V100 for no recorded reason: whether they run there is unknown.
    unfinished = large.assign(state=np.where(large["nodes"] >= 256, "timeout", "ok"))
    assert obs.out_of_memory_first(pd.concat([small, unfinished])).verdict == obs.INCONCLUSIVE


def test_version_chain_compares_like_with_like():
    rows = []
    for version, speed in (("2.16.2", 100.0), ("2.18.1", 110.0), ("2.21.0", 120.0)):
        for xla, factor in ((True, 1.0), (False, 0.5)):
            rows.append(
                fc_frame(lambda n, b, layers: 0.5).assign(
                    sw_tensorflow=version, xla=xla, dtype="float32", platform="cpu", examples_per_sec=speed * factor
                )
            )
    df = pd.concat(rows, ignore_index=True)
    verdict, results = obs.version_chain(df, "cpu")
    assert verdict.verdict == obs.HOLDS and verdict.id == "O12" and len(results) == 2  # one per version step
    assert verdict.held_fixed["platform"] == "cpu" and verdict.n in {r.n for r in results}
    assert all(r.median == pytest.approx(1.1, rel=0.1) for r in results)  # XLA on and off never mixed
    assert all(r.held_fixed["xla"] == "matched per pair" for r in results)
    # 0.97x: within the 5% that counts as no change, whatever its interval: never "holds"
    flat = df.assign(examples_per_sec=np.where(df["sw_tensorflow"] == "2.21.0", 97.0, 100.0) * np.where(df["xla"], 1.0, 0.5))
    flat = flat[flat["sw_tensorflow"] != "2.18.1"]
    noisy = flat.assign(
        examples_per_sec=flat["examples_per_sec"] * (1 + 0.05 * np.random.default_rng(0).standard_normal(len(flat)))
    )
    for data in (flat, noisy):
        assert obs.version_chain(data)[0].verdict != obs.HOLDS
    slower = df.assign(examples_per_sec=np.where(df["sw_tensorflow"] == "2.21.0", 50.0, df["examples_per_sec"]))
    assert obs.version_chain(slower)[0].verdict == obs.FAILS
    assert obs.version_chain(df[df["sw_tensorflow"] == "2.21.0"])[0].verdict == obs.INCONCLUSIVE


def test_registry_entries_and_merge(tmp_path):
    from paradnn.analysis import registry

    assert [o.id for o in registry.OBSERVATIONS] == [f"O{i}" for i in range(1, 15)]
    part = obs.median_part("share", [2.0, 3.0, 4.0], obs.Rule("median share (%)", 1.0, ">"))
    verdict = obs.judged("check", "paper", part, "numbers", {"x": np.float64(1.5), 64: 2}, id="O3", platform="tpu")
    table = registry.publish([verdict], tmp_path / "results.sqlite", "architecture")
    assert set(table["id"]) == {"O1", "O2", "O3", "O4"}  # the report's observations, judged or not
    rows = registry.merge(tmp_path, ["architecture"])
    assert [r["id"] for r in rows] == [f"O{i}" for i in range(1, 15)]
    o3 = next(r for r in rows if r["id"] == "O3")
    assert o3["verdict"] == obs.HOLDS and o3["figures"] == {"x": 1.5, "64": 2} and o3["platform"] == "tpu"
    assert all(r["verdict"].startswith(registry.NEEDS) for r in rows if r["id"] != "O3")


def plotted_points(ax) -> np.ndarray:
    return np.concatenate([c.get_offsets() for c in ax.collections if len(c.get_offsets())])


def test_every_plotted_op_point_lies_under_its_roof(reference, tmp_path):
    """The TPU traces credit a `while` loop with its body's FLOPs (up to 100x the peak): left out."""
    from paradnn.analysis import plots
    from paradnn.analysis.roofline import Ceilings
    from paradnn.store import Store
    from paradnn.store.legacy import import_files

    with Store(tmp_path / "r.sqlite") as s:
        import_files(s, [reference / "fc_trace_10sec.json", reference / "fc_trace_10sec_opbreakdown.json"])
        traces = s.traces()
    peak, bandwidth = 180e12, 2400e9
    fig = plots.trace_figures(traces, peak, bandwidth, "t")
    x, y = plotted_points(fig.axes[1]).T
    assert len(x) > 1000 and (y * 1e12 <= 1.1 * np.minimum(peak, bandwidth * x)).all()
    breakdown = pd.DataFrame(
        {
            "family": "fc",
            "label": "a",
            "category": ["matmul", "element-wise"],
            "time_share": [0.9, 0.1],
            "time_s": [1.0, 1.0],
            "flops": [50.0, 1e6],
            "bytes": [10.0, 1.0],
            "intensity": [5.0, 1e6],
            "flops_per_sec": [40.0, 1e6],
        }
    )
    fig = plots.op_breakdown(breakdown, Ceilings(100.0, 10.0, "test"), "t")
    x, y = plotted_points(fig.axes[1]).T
    assert list(x) == [5.0]  # the element-wise point claims 10,000x the peak: not drawn
    assert any("left out, above the roof" in t.get_text() for t in fig.axes[1].texts)


def test_the_papers_regression_form_standardises_raw_values():
    df = fc_frame(lambda n, b, layers: 0.001 * n)
    paper = regress(df, "utilization", family="fc", form="paper")
    # Utilisation is exactly linear in nodes: its standardised weight is 1 and the rest 0.
    assert paper.coefficients.loc["nodes", "coef"] == pytest.approx(1.0) and paper.form == "paper"
    assert abs(paper.coefficients.loc["batch", "coef"]) < 1e-9
    log2 = regress(df, "utilization", family="fc")
    assert log2.r_squared < paper.r_squared == pytest.approx(1.0)  # a linear effect is not linear in log2
    with pytest.raises(Exception, match="regression form"):
        regress(df, "utilization", family="fc", form="cubic")


def test_trace_memory_bound_share_and_the_bandwidth_wall():
    rows = []
    for nodes, util, bandwidth in ((256, 5.0, 10.0), (1024, 20.0, 40.0), (4096, 40.0, 70.0), (8192, 40.2, 75.0)):
        for batch in (256, 1024):
            label = f"layer_4-node_{nodes}-input_2000-output_1000-bs_{batch}"
            rows += [
                {
                    "label": label,
                    "category": "all",
                    "flops_perc": util,
                    "intensity": 100.0 if nodes >= 4096 else 20.0,
                    "memory_bandwidth": bandwidth,
                },
                {"label": label, "category": "loop fusion", "time_perc": 30.0, "intensity": 5.0},
                {"label": label, "category": "while", "time_perc": 1.0, "intensity": 2.0},
            ]
    traces = pd.DataFrame(rows)
    verdict = obs.trace_memory_bound_share(traces)
    assert verdict.verdict == obs.HOLDS and verdict.numbers["compute_bound"] == 4  # only nodes 4096 and 8192
    assert verdict.numbers["median_share_percent"] == 30.0  # the container category is left out
    light = traces.assign(time_perc=traces["time_perc"] / 10)
    assert obs.trace_memory_bound_share(light).verdict == obs.FAILS
    assert obs.trace_memory_bound_share(traces.assign(intensity=1.0)).verdict == obs.INCONCLUSIVE  # nothing right of the ridge

    tpu = pd.DataFrame(
        [
            {
                "family": "fc",
                "label": r["label"],
                "state": "ok",
                "layers": 4,
                "input": 2000,
                "output": 1000,
                "nodes": int(r["label"].split("_")[2].split("-")[0]),
                "batch": int(r["label"].split("_")[-1]),
                "utilization": r["flops_perc"] / 100,
            }
            for r in rows
            if r["category"] == "all"
        ]
    )
    wall = obs.bandwidth_wall(tpu, traces)
    assert wall.verdict == obs.HOLDS and wall.numbers["plateau_from"] == 4096
    assert obs.bandwidth_wall(tpu, traces.assign(memory_bandwidth=10.0)).verdict == obs.FAILS  # flat, but bandwidth idle
    assert obs.bandwidth_wall(tpu.head(0), traces).verdict == obs.INCONCLUSIVE


def test_stack_speedup_and_speedup_shape_edge_cases():
    base = fc_frame(lambda n, b, layers: 1.0).assign(dtype="float32", platform="cpu", examples_per_sec=100.0)
    slower = base.assign(dtype="mixed_bfloat16", examples_per_sec=80.0)
    result = compare(pd.concat([base, slower]), "float32", "mixed_bfloat16", by="dtype")
    assert obs.stack_speedup(result, "x", "y").verdict == obs.FAILS
    assert obs.speedup_depends_on(result.table.head(3), "fc").verdict == obs.INCONCLUSIVE


def test_a_share_below_zero_is_within_noise_never_drawn_below_it():
    from paradnn.analysis import plots

    shares = [0.45, 0.42, 0.40, 0.38, 0.20, 0.18, 0.15, 0.12, 0.06, 0.05, -0.076, -0.02]  # SqueezeNet host-prep: -7.6%
    verdict = obs.measured_infeed(host_fed(shares), "cpu")
    assert verdict.numbers["largest_third_percent"] == pytest.approx(2.5)  # the two below zero count as no wait
    rows = host_fed(shares).assign(label=[f"x-bs_{b}" for b in (64, 128, 256) * 4], infeed_percent=100 * np.array(shares))
    fig = plots.share_by_batch(rows, "infeed_percent", "t", "share of step time (%)")
    ax = fig.axes[0]
    assert ax.get_ylim()[0] == 0 and any("2 within noise" in t.get_text() for t in ax.texts)
    drawn = [y for c in ax.collections for y in np.asarray(c.get_offsets())[:, 1]] if ax.collections else []
    assert min(drawn) >= 0


def test_a_row_above_the_measured_ceiling_is_the_peak_and_the_page_says_so():
    from paradnn.analysis.roofline import peak_used

    rows = pd.DataFrame(
        {
            "label": ["a", "b"],
            "state": "ok",
            "flops_per_sec": [1.5e11, 2.2e11],
            "peak_flops": [2.2e11] * 2,
            "peak_source": ["achieved:b"] * 2,
            "utilization": [1.5 / 2.2, 1.0],
        }
    )
    words = peak_used(rows, ceiling=1.9e11)
    assert words == (
        "peak 2.2e+11 FLOP/s, the rate b achieved above the measured ceiling 1.9e+11 FLOP/s (100% there by construction)"
    )
    measured = rows.assign(peak_flops=3e11, peak_source="measured")
    assert peak_used(measured) == "peak 3e+11 FLOP/s (measured)"


def test_out_of_memory_timeout_error_and_unmeasured_cells_are_drawn_apart():
    from matplotlib.patches import Rectangle

    from paradnn.analysis import plots

    grid = fc_frame(lambda n, b, layers: 0.5).query("layers == 2").assign(examples_per_sec=1.0)
    states = {(512, 256): "oom", (512, 128): "timeout", (256, 256): "error"}
    grid["state"] = [states.get((n, b), "ok") for n, b in zip(grid["nodes"], grid["batch"])]
    grid = grid[~((grid["nodes"] == 64) & (grid["batch"] == 32))]  # one cell nobody measured
    fig = plots.heatmaps(grid, "fc", "examples_per_sec", "t", "examples/s")
    cells = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    styles = {(p.get_hatch(), tuple(p.get_edgecolor())) for p in cells}
    assert len(cells) == 4 and len(styles) == 4  # OOM, timeout, error and not measured: four different marks
    missing = [p for p in cells if p.get_hatch() == plots.CELL_MARKS["missing"][0]]
    assert len(missing) == 1 and missing[0].get_facecolor()[:3] != (1.0, 1.0, 1.0)  # never white like a 1.0x cell
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["OOM: out of memory", "t/o: timed out (or unfinished in the original data)", "err: error", "not measured"]


def test_table_3_sets_every_platform_of_the_store_beside_the_papers(tmp_path):
    from paradnn.analysis.table3 import table3
    from paradnn.store import Store
    from paradnn.store.legacy import import_bundled

    with Store(tmp_path / "t.sqlite") as store:
        import_bundled(store)
        ceilings = {"matmul_flops": {"float32": {"xla": 1.5e11, "no_xla": 1.2e11}}, "copy_bandwidth": {"no_xla": 4e9}}
        store.put_platform(
            "fp-cpu",
            "cpu",
            {"name": "AMD EPYC", "cores": 2, "memory_bytes": 24 * 2**30, "software": {"tensorflow": "2.21.0"}},
            ceilings,
            "measured",
        )
        rows = table3(store.platforms()).set_index("platform")
    assert list(rows.index) == ["cpu", "tpu-v2-8", "v100", "tpu-v3-8"]  # the paper's TPU v3 from its datasheet
    assert rows.loc["cpu", "float32 TFLOP/s (measured)"] == pytest.approx(0.15)  # the better of XLA on and off
    assert rows.loc["cpu", "bandwidth GB/s (measured)"] == pytest.approx(4.0) and rows.loc["cpu", "memory GiB"] == 24
    assert rows.loc["cpu", "machine"] == "AMD EPYC, 2 cores" and rows.loc["cpu", "source"] == "measured here"
    assert rows.loc["v100", "float16 TFLOP/s (datasheet)"] == 125 and rows.loc["v100", "memory GiB"] == 16
    assert rows.loc["tpu-v3-8", "source"] == "datasheet only" and rows.loc["tpu-v3-8", "bfloat16 TFLOP/s (datasheet)"] == 420
    # the TPUs' 180 and 420 TFLOP/s are bfloat16 matrix-unit rates: no float32 figure is stated for them
    assert rows.loc[["tpu-v2-8", "tpu-v3-8"], "float32 TFLOP/s (datasheet)"].isna().all()


@pytest.mark.parametrize("n,values", [(1, [0.227]), (1, [2.0])])
def test_a_measured_effect_on_one_value_never_decides(n, values):
    part = obs.median_part("share", values, obs.Rule("median share", 0.1, ">", min_n=1))
    assert part.interval == (values[0], values[0]) and part.n == n
    assert part.outcome == obs.INCONCLUSIVE  # its interval is itself: zero width, built from one value


def test_a_count_may_still_decide_on_what_it_counts():
    part = obs.exact_part("found", 1.0, 1, obs.Rule("a plateau (1: found)", 0.5, min_n=1))
    assert part.outcome == obs.HOLDS


def test_reruns_widen_a_speedup_s_interval():
    speedups = [1.30, 1.32, 1.31, 1.29]  # four configurations that agree, measured once each: a narrow interval
    tight = obs.median_part("speedup", speedups, obs.Rule("median speedup", 1.05, ">"), log=True)
    noisy = [[s * 0.8, s, s * 1.25] for s in speedups]  # the same medians, each from three rounds far apart
    wide = obs.median_part("speedup", speedups, obs.Rule("median speedup", 1.05, ">"), log=True, replicates=noisy)
    assert tight.effect == wide.effect
    assert tight.outcome == obs.HOLDS and tight.interval[0] > 1.25
    assert wide.interval[0] < tight.interval[0] and wide.interval[1] > tight.interval[1]
    assert wide.interval[0] < 1.05 and wide.outcome == obs.INCONCLUSIVE  # reruns that disagree undecide it


def test_speedup_part_reads_a_comparison_s_rounds():
    table = pd.DataFrame({"speedup": [1.3, 1.3], "replicates": [[1.0, 1.3, 1.7], [1.0, 1.3, 1.7]]})
    part = obs.speedup_part("speedup", table, obs.Rule("median speedup", 1.05, ">"))
    assert part.n == 2 and part.interval[0] < 1.05 < part.interval[1]


def test_a_comparison_two_reports_judge_is_listed_once_as_the_later_judged_it(tmp_path):
    from paradnn.analysis import registry

    rule = obs.Rule("median speedup", 1.05, ">")
    earlier = obs.judged(
        "bf16 speeds up (XLA on)",
        "paper",
        obs.median_part("speedup", [1.1, 1.3], rule),
        "2 configs",
        id="O13",
        platform="cpu, XLA on",
    )
    later = obs.judged(
        "bf16 speeds up (XLA on)",
        "paper",
        obs.median_part("speedup", [1.2, 1.3, 1.4], rule),
        "3 configs",
        id="O13",
        platform="cpu, XLA on",
    )
    registry.publish([earlier], tmp_path / "results.sqlite", "architecture")
    registry.publish([later], tmp_path / "results.sqlite", "software_stack")
    rows = [r for r in registry.merge(tmp_path, ["architecture", "software_stack"]) if r["id"] == "O13"]
    assert len(rows) == 1 and rows[0]["evidence"] == "3 configs"
