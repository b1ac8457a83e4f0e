"""Projection onto a platform not at hand (issue 26): the arithmetic, the bundled TPU v2 profiles, bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pandas as pd
import pytest

import paradnn
from paradnn.analysis import projection as pj
from paradnn.config import ConfigError
from paradnn.store import Store

P = pj.Peaks("p", "float32", flops=100.0, bandwidth=10.0, source="test")  # ridge: 10 FLOPs/byte
Q = pj.Peaks("q", "float32", flops=300.0, bandwidth=20.0, source="test")
LABEL = "layer_4-node_512-input_2000-output_1000-bs_8192"


def synthetic() -> pd.DataFrame:
    """A 4 s step: 1 s of matmul (intensity 20: compute-bound), 2 s element-wise (0.1: memory), 0.5 s infeed."""
    return pd.DataFrame(
        {
            "category": ["matmul", "element-wise", "infeed"],
            "time_s": [1.0, 2.0, 0.5],
            "flops": [200.0, 10.0, 0.0],
            "bytes": [10.0, 100.0, 8.0],
        }
    )


def test_each_category_scales_by_its_bound_and_the_rest_is_kept():
    out = pj.project_step(synthetic(), 4.0, P, Q)
    # matmul 1/3 s, element-wise 2 x 10/20 = 1 s, infeed 0.5 s and 0.5 s untraced kept
    assert out["projected_step_time_s"] == pytest.approx(1 / 3 + 1 + 0.5 + 0.5)
    assert out["speedup"] == pytest.approx(4 / (7 / 3))
    assert out["bound"] == {"compute": 0.25, "memory": 0.5, "overhead": 0.25}
    assert out["interval_s"] == pytest.approx([1 + 3 * (1 / 3), 1 + 3 * 0.5])  # every scaled op at each ratio


def test_the_bracket_holds_the_projection_exactly_when_one_ratio_decides_it():
    """One memory-bound category on a platform twice as slow: the projection is the bracket's
    upper end, and rounding must not leave it outside (it did for 30 of these 2,000 steps)."""
    outside = []
    for i in range(2000):
        step, share = 1e-4 * (1 + i / 20), 0.05 + 0.9 * (i % 97) / 97
        profile = pd.DataFrame(
            {
                "category": ["element-wise", "infeed"],
                "time_s": [step * share, step * (1 - share)],
                "flops": [1.0, 0.0],
                "bytes": [10.0, 1.0],
            }
        )
        out = pj.project_step(profile, step, Q, P)
        low, high = out["interval_s"]
        if not low <= out["projected_step_time_s"] <= high:
            outside.append((step, share))
    assert outside == []


def test_the_ridge_point_separates_compute_from_memory():
    at_ridge = pj.scale_factor(100.0, 10.0, "matmul", P, Q)
    below = pj.scale_factor(99.0, 10.0, "matmul", P, Q)
    assert at_ridge == ("compute", pytest.approx(1 / 3)) and below == ("memory", pytest.approx(0.5))
    assert pj.scale_factor(0.0, 0.0, "element-wise", P, Q) == ("overhead", 1.0)
    assert pj.scale_factor(1e9, 1.0, "infeed", P, Q) == ("overhead", 1.0)


def test_between_two_measured_curves_a_compute_category_scales_by_the_rates_at_its_size():
    """Intensity 64/6 FLOPs/byte in float32 is a 64 x 64 matmul: p reaches 10, q 8 FLOP/s there (q slower)."""
    p = pj.Peaks("p", "float32", 100.0, 10.0, "test", curve=((64, 10.0), (256, 90.0)))  # ridge 10 FLOPs/byte
    q = pj.Peaks("q", "float32", 200.0, 20.0, "test", curve=((64, 8.0), (256, 180.0)))
    assert pj.matmul_size(64 / 6, "float32") == pytest.approx(64) and pj.matmul_size(64 / 3, "bfloat16") == pytest.approx(64)
    assert p.flops_at(128) == pytest.approx(50.0) and p.flops_at(16) == 10.0 and p.flops_at(4096) == 90.0  # log-linear, ends held
    assert pj.scale_factor(64 / 6, 1.0, "matmul", p, q) == ("compute", pytest.approx(10 / 8))
    assert pj.scale_factor(1e9, 1.0, "matmul", p, q) == ("compute", pytest.approx(0.5))  # beyond the curve: its last point
    assert pj.scale_factor(64 / 6, 1.0, "matmul", p, Q) == ("compute", pytest.approx(100 / 300))  # no curve on q: the peaks
    out = pj.project_step(pd.DataFrame({"category": ["matmul"], "time_s": [1.0], "flops": [64 / 6], "bytes": [1.0]}), 1.0, p, q)
    assert out["projected_step_time_s"] == pytest.approx(1.25) and out["interval_s"] == pytest.approx([0.5, 1.25])


def test_a_category_s_matrix_products_decide_its_size_on_the_curves_not_its_intensity():
    """A skinny product has a small matmul's intensity and a large one's work: its work decides."""
    p = pj.Peaks("p", "float32", 100.0, 10.0, "test", curve=((64, 10.0), (256, 90.0)))
    q = pj.Peaks("q", "float32", 200.0, 20.0, "test", curve=((64, 8.0), (256, 180.0)))
    assert pj.scale_factor(64 / 6, 1.0, "matmul", p, q, size=256.0) == ("compute", pytest.approx(0.5))
    assert pj.scale_factor(64 / 6, 1.0, "matmul", p, q, size=128.0) == ("compute", pytest.approx(50 / 94))
    assert pj.scale_factor(64 / 6, 1.0, "matmul", p, pj.Peaks("q", "float32", 200.0, 20.0, "test"), size=256.0) == (
        "compute",
        pytest.approx(0.5),
    )  # no curve on q: the peaks
    profile = pd.DataFrame(
        {
            "category": ["matmul", "element-wise"],
            "time_s": [1.0, 1.0],
            "flops": [64 / 6, 1.0],
            "bytes": [1.0, 1.0],
            "op_size": [256.0, math.nan],
        }
    )
    assert pj.project_step(profile, 2.0, p, q)["projected_step_time_s"] == pytest.approx(0.5 + 0.5)  # memory: 10 -> 20 GB/s


def test_the_size_of_matrix_products_is_their_flop_weighted_geometric_mean_cube_root():
    from paradnn.engine.profiler import op_sizes

    sizes = op_sizes(
        [
            ("MatMul", 2 * 8**3),
            ("_FusedMatMul", 2 * 64**3),
            ("Conv2DBackpropFilter", 2 * 64 * 1024 * 1024),
            ("Relu", 10**6),
            ("MatMul", 0),
        ]
    )
    w8, w64 = 2 * 8**3, 2 * 64**3
    assert sizes["matmul"] == pytest.approx(math.exp((w8 * math.log(8) + w64 * math.log(64)) / (w8 + w64)))
    assert sizes["convolution"] == pytest.approx((64 * 1024 * 1024) ** (1 / 3))  # 406: an FC layer's 64 x 1024 x 1024
    assert set(sizes) == {"matmul", "convolution"}  # element-wise work has no size


def test_measured_peaks_carry_the_best_curve_of_the_platform_s_fingerprints(tmp_path):
    with Store(tmp_path / "c.sqlite") as s:
        for fp, rate in (("a", 10.0), ("b", 12.0)):
            ceilings = {
                "matmul_flops": {"float32": {"no_xla": 100.0}},
                "copy_bandwidth": {"x": 1.0},
                "matmul_curve": {"float32": {"64": rate, "2048": 100.0}},
            }
            s.put_platform(fp, "cpu", {"name": "cpu"}, ceilings, "measured")
        platforms = s.platforms()
    assert pj.measured_peaks("cpu", "float32", platforms).curve == ((64, 12.0), (2048, 100.0))


@pytest.fixture(scope="module")
def fresh_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("projection") / "fresh.sqlite"
    Store(path).close()
    return path


def test_tpu_v2_onto_v3_from_a_fresh_store_stays_within_the_datasheets(fresh_store):
    """The original study's traces ship with paradnn: a store without them still projects TPU v2 -> v3."""
    rows, summary = paradnn.project("tpu-v2-8", "tpu-v3-8", "fc", store=fresh_store)
    assert summary["profiles"] == "bundled" and summary["n"] == len(rows) == 230  # the 230 traced configurations
    assert summary["peak_ratio"] == pytest.approx(420 / 180) and summary["bandwidth_ratio"] == pytest.approx(1.5)
    assert (rows["speedup"] >= 1).all() and (rows["speedup"] <= 420 / 180 + 1e-9).all()
    low, high = zip(*rows["interval_s"])
    assert (pd.Series(low) <= rows["projected_step_time_s"] + 1e-12).all()
    assert (rows["projected_step_time_s"] <= pd.Series(high) + 1e-12).all()
    assert rows["measured_step_time_s"].isna().all()  # nobody measured a TPU v3 here
    assert Store(fresh_store).count() == 0  # read only


def test_a_doubled_batch_projects_from_the_measurement_at_that_batch():
    rows, summary = paradnn.project("tpu-v2-8", "tpu-v3-8", "fc", [LABEL.replace("bs_8192", "bs_4096")], batch_scale=2)
    assert list(rows["projected_label"]) == [LABEL]
    single, _ = paradnn.project("tpu-v2-8", "tpu-v3-8", "fc", [LABEL])
    # examples/s at 2B on Q over examples/s at B on P
    expected = (2 / single["projected_step_time_s"].iloc[0]) / (1 / rows["source_step_time_s"].iloc[0])
    assert rows["speedup"].iloc[0] == pytest.approx(expected)


def test_the_target_s_own_rows_are_shown_beside_the_projection(tmp_path):
    """Imported V100 rows of configurations the TPU traces also cover come back as measured_step_time_s."""
    store = tmp_path / "legacy.sqlite"
    with Store(store) as s:
        from paradnn.store.legacy import import_bundled

        import_bundled(s)
        v100 = s.results(platform="v100", state="ok").set_index("label")["step_time_s"]
    rows, summary = paradnn.project("tpu-v2-8", "v100", "fc", store=store, dtype="float16")
    assert summary["profiles"] == "store" and summary["to"]["source"] == "datasheet:v100"
    shown = rows.dropna(subset=["measured_step_time_s"]).set_index("label")["measured_step_time_s"]
    assert len(shown) > 0 and set(shown.index) == set(rows["label"]) & set(v100.index)
    assert shown.to_dict() == pytest.approx(v100[shown.index].to_dict())


@pytest.mark.parametrize(
    "args,kwargs,needle",
    [
        (("tpu-v2-8", "tpu-v9", "fc"), {}, "--to: 'tpu-v9' is not valid"),
        (("tpu-v2-8", "tpu-v3-8", "cnn"), {}, "--family: 'cnn' is not valid; allowed: a family with op profiles on tpu-v2-8"),
        (("cpu", "tpu-v3-8", "fc"), {}, "--from: 'cpu' is not valid; allowed: a platform with op profiles of fc"),
        (("tpu-v2-8", "tpu-v3-8", "fc", ["layer_1-node_8-input_8-output_8-bs_8"]), {}, "LABEL: 'layer_1-node_8"),
        (("tpu-v2-8", "v100", "fc"), {}, "--dtype: 'bfloat16' is not valid; allowed: a compute dtype of v100's datasheet"),
        (("tpu-v2-8", "tpu-v3-8", "fc"), {"batch_scale": 0}, "--batch-scale: 0 is not valid"),
        (("tpu-v2-8", "tpu-v2-8", "fc"), {}, "--to: 'tpu-v2-8' is not valid; allowed: a platform other than"),
        (("tpu-v2-8", "tpu-v2-8", "fc"), {"dtype": "bfloat16"}, "--to: 'tpu-v2-8' is not valid"),  # its compute dtype
    ],
)
def test_bad_input_names_what_was_wrong(args, kwargs, needle):
    with pytest.raises(ConfigError) as info:
        paradnn.project(*args, **kwargs)
    assert needle in str(info.value)


def test_the_command_prints_json_and_refuses_bad_input_in_one_line(fresh_store):
    command = [
        sys.executable,
        "-m",
        "paradnn.cli",
        "project",
        "--from",
        "tpu-v2-8",
        "--family",
        "fc",
        "--store",
        str(fresh_store),
    ]
    done = subprocess.run([*command, "--to", "tpu-v3-8", "--json", LABEL], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["summary"]["n"] == 1 and out["rows"][0]["label"] == LABEL
    assert {"projected_step_time_s", "speedup", "bound", "interval_s", "measured_step_time_s"} <= set(out["rows"][0])
    bad = subprocess.run([*command, "--to", "nowhere"], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "--to: 'nowhere' is not valid" in bad.stderr


def _rows(speedups: list[float], bounds: list[str]) -> pd.DataFrame:
    shares = [{b: float(b == bound) for b in pj.BOUNDS} for bound in bounds]
    return pd.DataFrame({"speedup": speedups, "bound": shares})


SUMMARY = {"from": {"platform": "tpu-v2-8"}, "to": {"platform": "tpu-v3-8"}, "peak_ratio": 2.0, "bandwidth_ratio": 1.5}


def test_observation_5_is_a_projected_verdict_that_can_fail():
    same = _rows([1.6, 1.62, 1.2, 1.21, 1.0], ["compute", "compute", "memory", "memory", "overhead"])  # 80% of 2.0, 1.5
    assert pj.generation_verdict(same, _rows([2.6, 2.7], ["compute"] * 2), SUMMARY).verdict == "holds (projected)"
    assert pj.generation_verdict(same, _rows([2.4, 2.3], ["compute"] * 2), SUMMARY).verdict == "does not hold (projected)"
    # A maximum never decides: one doubled configuration at 3.3x among slower ones is not "about 3x".
    mostly_slow = pj.generation_verdict(same, _rows([1.9, 2.0, 2.1, 3.3], ["compute"] * 4), SUMMARY)
    assert mostly_slow.verdict != "holds (projected)" and mostly_slow.numbers["median_doubled_speedup"] == pytest.approx(2.05)
    slow = _rows([1.4, 1.41, 1.2, 1.2], ["compute", "compute", "memory", "memory"])  # compute at 70% of the peak ratio
    assert pj.generation_verdict(slow, _rows([3.0, 3.1], ["compute"] * 2), SUMMARY).verdict == "does not hold (projected)"
    only_memory = _rows([1.5], ["memory"])  # nothing compute-dominated: half the claim cannot be judged
    verdict = pj.generation_verdict(only_memory, _rows([3.0], ["memory"]), SUMMARY)
    assert verdict.verdict == "inconclusive" and "no compute-dominated configuration among 1" in verdict.evidence


# ---------------------------------------------------------------- this machine's profiles

SMALL = "layer_1-node_8-input_8-output_8-bs_8"


def breakdown(label: str = SMALL) -> pd.DataFrame:
    """A profiled step of 10 ms wall: matmul 6 ms (600 MFLOPs over 10 MB: compute-bound at any
    ridge below 60), element-wise 2 ms (1 MFLOP over 40 MB: memory-bound), 2 ms not covered."""
    return pd.DataFrame(
        {
            "family": "fc",
            "label": label,
            "category": ["matmul", "element-wise"],
            "time_s": [0.006, 0.002],
            "flops": [6e8, 1e6],
            "bytes": [1e7, 4e7],
            "step_wall_s": 0.010,
        }
    )


def test_a_profile_becomes_trace_rows_whose_shares_cover_what_the_profile_saw():
    from paradnn.engine.profiler import trace_rows

    rows = {r["category"]: r for r in trace_rows(breakdown().assign(op_size=[406.0, math.nan]), "cpu[threads=1]", "float32")}
    assert rows["matmul"]["time_perc"] == pytest.approx(60.0) and rows["element-wise"]["time_perc"] == pytest.approx(20.0)
    assert rows["matmul"]["op_size"] == 406.0 and rows["element-wise"]["op_size"] is None
    assert rows["matmul"]["raw_mb"] == pytest.approx(10.0) and rows["matmul"]["intensity"] == pytest.approx(60.0)
    assert {r["source"] for r in rows.values()} == {"profile:cpu[threads=1]:float32"}


def _ok(platform: str, step: float, dtype: str = "float32", xla: int = 0, label: str = SMALL) -> dict:
    compute = "float32" if dtype == "float32" else "bfloat16"
    return {
        "family": "fc",
        "label": label,
        "platform": platform,
        "state": "ok",
        "dtype": dtype,
        "compute_dtype": compute,
        "xla": xla,
        "step_time_s": step,
        "run_key": f"{platform}{dtype}{xla}{step}",
    }


def local_store(tmp_path):
    """Two platforms of this machine with measured ceilings (p1: 100 GFLOP/s, 10 GB/s; p2: twice
    the FLOPs, 1.5x the bandwidth), p1's profile of SMALL, and rows that differ in settings."""
    from paradnn.engine.profiler import trace_rows

    path = tmp_path / "local.sqlite"
    with Store(path) as s:
        for platform, flops, bandwidth in (("p1", 100e9, 10e9), ("p2", 200e9, 15e9)):
            matmul = {"float32": {"0": flops}, "bfloat16": {"0": 4 * flops}}
            ceilings = {"matmul_flops": matmul, "copy_bandwidth": {"0": bandwidth}}
            s.put_platform(f"fp-{platform}", platform, {"name": platform}, ceilings, "measured")
        s.add_traces(trace_rows(breakdown(), "p1", "float32"))
        s.add_traces(trace_rows(breakdown().assign(time_s=[0.001, 0.001]), "p1", "mixed_bfloat16"))  # another dtype
        s.add_results(
            [
                _ok("p1", 0.020),
                _ok("p1", 0.050, xla=1),
                _ok("p1", 0.030, dtype="mixed_bfloat16"),
                _ok("p2", 0.012),
                _ok("p2", 0.001, xla=1),
                {**_ok("p2", 0.002), "input_mode": "host", "run_key": "h"},
                {**_ok("p2", 0.003), "devices": 2, "run_key": "d"},
            ]
        )  # fed by the host, or two replicas: not like p1's
    return path


def test_a_local_profile_projects_the_step_at_its_own_settings_and_meets_the_like_measurement(tmp_path):
    rows, summary = paradnn.project("p1", "p2", "fc", store=local_store(tmp_path))
    # p1's float32, XLA-off step of 20 ms: matmul 60% = 12 ms / 2, element-wise 20% = 4 ms / 1.5, 4 ms kept
    assert (
        summary["held_fixed"]
        == {"dtype": "float32", "xla": False, "framework": "tensorflow", "input_mode": "device", "devices": 1}
        and summary["profiles"] == "store"
    )
    row = rows.iloc[0]
    assert row["source_step_time_s"] == pytest.approx(0.020)
    assert row["projected_step_time_s"] == pytest.approx(0.006 + 0.004 / 1.5 + 0.004)
    assert row["measured_step_time_s"] == pytest.approx(0.012)  # p2's row at the same settings, not its XLA-on one
    assert row["bound"] == {"compute": 0.6, "memory": 0.2, "overhead": 0.2}


def test_a_stored_profile_keeps_its_matrix_product_size_and_the_projection_reads_the_curves_there(tmp_path):
    """p1 and p2 with curves: at 256 p2 is twice as fast as p1, at the n of the matmul's intensity (360) 1.72x."""
    from paradnn.engine.profiler import trace_rows

    path = tmp_path / "curves.sqlite"
    with Store(path) as s:
        for platform, at_256 in (("p1", 50e9), ("p2", 100e9)):
            curve = {"float32": {"256": at_256, "2048": 100e9}}
            ceilings = {"matmul_flops": {"float32": {"0": 100e9}}, "copy_bandwidth": {"0": 10e9}, "matmul_curve": curve}
            s.put_platform(f"fp-{platform}", platform, {"name": platform}, ceilings, "measured")
        s.add_traces(trace_rows(breakdown().assign(op_size=[256.0, math.nan]), "p1", "float32"))
        s.add_results([_ok("p1", 0.020), _ok("p2", 0.012)])
    rows, _ = paradnn.project("p1", "p2", "fc", store=path)
    # matmul 12 ms at 256: halved; element-wise 4 ms and the 4 ms not covered: the same bandwidth, kept
    assert rows.iloc[0]["projected_step_time_s"] == pytest.approx(0.006 + 0.004 + 0.004)


def test_a_platform_projects_onto_its_own_lower_precision_and_meets_that_measurement(tmp_path):
    """float32 onto bfloat16 on one platform: compute-bound categories gain the two ceilings' ratio (4x here)."""
    rows, summary = paradnn.project("p1", "p1", "fc", store=local_store(tmp_path), dtype="bfloat16")
    assert summary["to"]["flops"] == 400e9 and summary["peak_ratio"] == pytest.approx(4.0)
    row = rows.iloc[0]
    # matmul 12 ms / 4, element-wise 4 ms and 4 ms not covered kept (the same bandwidth)
    assert row["projected_step_time_s"] == pytest.approx(0.003 + 0.004 + 0.004)
    assert row["measured_step_time_s"] == pytest.approx(0.030)  # p1's mixed_bfloat16 row, XLA off as the source


def test_the_prior_from_a_local_profile_calibrates_on_the_like_measurement_only(tmp_path):
    """p1 -> p2 as predict's prior: p2's one row at p1's settings (12 ms) scales the 12.67 ms projection."""
    from paradnn.analysis.prior import projection_prior

    prior, measured = projection_prior(str(local_store(tmp_path)), "p1", "p2", "fc")
    assert measured.to_dict("records") == [{"label": SMALL, "step_time_s": pytest.approx(0.012)}]
    projected = 0.006 + 0.004 / 1.5 + 0.004
    assert prior.predict([SMALL])["step_time_s"].iloc[0] == pytest.approx(projected)
    fitted = prior.calibrated(measured)
    assert fitted.coef[0] == pytest.approx(0.012 / projected)
    assert fitted.predict([SMALL])["step_time_s"].iloc[0] == pytest.approx(0.012)


def test_a_projection_says_when_it_extrapolates_and_never_falls_below_the_targets_step_floor():
    rows, summary = pj.projection(None, "tpu-v2-8", "h100", "fc")
    # The V100's fastest FC step in the original study where its chip, not its input, was the bound
    # (layer_32-node_32-...-bs_64: 64 / 11,518 examples/s = 5.56 ms) is the floor a GPU's datasheet gets;
    # its fastest step of all (2.23 ms) waited on the host's input pipeline.
    assert summary["floor_s"] == pytest.approx(0.005556, rel=1e-3) and "v100" in summary["floor_source"]
    assert "not its input pipeline" in summary["floor_source"]
    assert rows["projected_step_time_s"].min() >= summary["floor_s"] and summary["floored"] == int(rows["floored"].sum()) > 0
    assert summary["extrapolated"] and rows["extrapolated"].all()  # an H100 is far beyond 1-2 CPU threads
    low, high = summary["speedup_interval"]
    assert low <= summary["median_speedup"] <= high
    _, near = pj.projection(None, "tpu-v2-8", "tpu-v3-8", "fc")
    assert near["extrapolated"] and near["peak_ratio"] == pytest.approx(420 / 180)  # 2.33x: beyond the 2x validated


def test_the_validation_scores_each_chip_and_the_tpu_over_v100_ratio():
    from paradnn.analysis.projection import ratio_errors, validation_summary, validation_verdict

    rows = pd.DataFrame(
        {
            "label": ["a", "b", "c", "a", "b"],
            "target": ["v100"] * 3 + ["tpu-v2-8"] * 2,
            "projected_step_time_s": [1.1, 2.0, 3.3, 0.5, 1.5],
            "measured_step_time_s": [1.0, 2.5, 3.0, 0.4, 1.0],
        }
    )
    rows["error"] = rows["projected_step_time_s"] / rows["measured_step_time_s"] - 1
    # the ratio on a and b: projected 0.5/1.1 against measured 0.4/1.0, and 1.5/2.0 against 1.0/2.5
    assert ratio_errors(rows).round(4).to_dict() == {"a": round((0.5 / 1.1) / 0.4 - 1, 4), "b": round(0.75 / 0.4 - 1, 4)}
    summary = validation_summary(rows)
    assert summary["v100"]["n"] == 3 and summary["v100"]["median_abs_error"] == pytest.approx(0.1)  # 10%, 20%, 10%
    assert summary["tpu-v2-8"]["median_abs_error"] == pytest.approx((0.25 + 0.5) / 2) and summary["ratio"]["n"] == 2
    verdict = validation_verdict(rows, "cpu")
    assert verdict.verdict in ("does not hold", "inconclusive") and "nothing fitted" in verdict.evidence
    assert validation_verdict(rows.iloc[:0], "cpu").verdict == "inconclusive"
