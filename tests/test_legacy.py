"""Importing the original study's JSON files: counts, units, idempotence, refusal of bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paradnn.store import Store
from paradnn.store.legacy import LegacyError, import_files, load_file, state_of

LABEL_A = "layer_4-node_512-input_2000-output_1000-bs_8192"
LABEL_B = "layer_1-node_32-input_100-output_10-bs_64"


def sweep_data() -> dict:
    """A small valid sweep file: two finished configurations and two that failed."""
    return {
        "labels": [LABEL_A, LABEL_B],
        "params": [2330000.0, 3600.0],
        "fl": [14.32, 0.01],
        "flops": [612.5, 1.5],
        "step_per_sec": [42.5, 150.0],
        "example_per_sec": [348160.0, 9600.0],
        "intensity": [3072.9, 694.4],
        "err_jobs": ["layer_32-node_8192-input_8000-output_1000-bs_16384", "layer_2-node_8-input_8-output_8-bs_8"],
        "states": ["OOM", "Segmentation fault"],
    }


def write(folder: Path, name: str, data: object) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def store_bytes(store: Store) -> dict[str, bytes]:
    """The database file and its write-ahead log: everything a write would change."""
    files = [store.path, store.path.with_name(store.path.name + "-wal")]
    return {p.name: p.read_bytes() for p in files if p.exists()}


# ------------------------------------------------------------------ the reference data


@pytest.fixture(scope="module")
def imported(reference, tmp_path_factory) -> tuple[Store, dict]:
    store = Store(tmp_path_factory.mktemp("legacy") / "store.db")
    summary = import_files(store, [reference / "tpu_fc.json", reference / "gpu_fc.json"])
    yield store, summary
    store.close()


def test_sweeps_give_the_documented_counts(imported):
    store, summary = imported
    counts = store.results().groupby(["platform", "state"]).size().to_dict()
    assert counts == {("tpu-v2-8", "ok"): 1724, ("tpu-v2-8", "oom"): 220, ("v100", "ok"): 176, ("v100", "timeout"): 94}
    assert summary["results_added"] == 1724 + 220 + 176 + 94
    assert summary["files"]["tpu_fc.json"] == {"kind": "sweep", "platform": "tpu-v2-8", "rows": 1944, "added": 1944}
    assert summary["files"]["gpu_fc.json"] == {"kind": "sweep", "platform": "v100", "rows": 270, "added": 270}


def test_importing_again_adds_nothing(imported, reference):
    store, _ = imported
    before = store.count()
    summary = import_files(store, [reference / "tpu_fc.json", reference / "gpu_fc.json"])
    assert summary["results_added"] == 0
    assert store.count() == before


def test_rows_carry_run_settings_and_provenance(imported):
    df = imported[0].results()
    tpu, gpu = df[df.platform == "tpu-v2-8"], df[df.platform == "v100"]
    assert set(tpu.dtype) == {"mixed_bfloat16"} and set(tpu.compute_dtype) == {"bfloat16"}
    assert set(gpu.dtype) == {"mixed_float16"} and set(gpu.compute_dtype) == {"float16"}
    assert set(tpu.xla) == {True} and gpu.xla.isna().all()
    assert set(tpu.device_name) == {"TPU v2-8"} and set(gpu.device_name) == {"NVIDIA V100"}
    assert set(tpu.source) == {"legacy:tpu_fc.json"} and set(gpu.source) == {"legacy:gpu_fc.json"}
    assert set(tpu.peak_flops) == {180e12} and set(gpu.peak_flops) == {125e12}
    assert set(df.peak_source) == {"datasheet:tpu-v2-8", "datasheet:v100"}
    assert set(df.family) == {"fc"} and df.n_samples.isna().all()


def test_unfinished_rows_keep_the_original_state_text(imported):
    df = imported[0].results()
    assert set(df[df.state == "oom"].error) == {"OOM"}
    assert set(df[df.state == "timeout"].error) == {"no error but not finished"}
    assert df[df.state != "ok"].examples_per_sec.isna().all()
    assert df[df.state == "ok"].error.isna().all()


def test_figures_are_whole_device_and_originals_kept(imported):
    df = imported[0].results(state="ok")
    gpu = df[(df.platform == "v100") & (df.label == LABEL_A)].iloc[0]
    assert gpu.flops_graph == pytest.approx(114.23e9)  # the README's example
    assert gpu.extra["fl"] == 114.23 and set(gpu.extra) == {"params", "fl", "flops", "intensity", "step_per_sec"}
    assert gpu.step_time_s == pytest.approx(1 / gpu.extra["step_per_sec"])
    assert (gpu.layers, gpu.nodes, gpu.input, gpu.output, gpu.batch) == (4, 512, 2000, 1000, 8192)
    tpu = df[df.platform == "tpu-v2-8"]
    per_core = tpu.extra.map(lambda e: e["flops"])
    assert (tpu.flops_per_sec == per_core * 1e9 * 8).all()  # per core -> board
    assert tpu.utilization.max() == pytest.approx(0.64, abs=0.005)  # "reaches 64% of the peak"
    assert (tpu.utilization == tpu.flops_per_sec / 180e12).all()


def test_analytic_params_match_the_study_within_half_a_percent(imported):
    df = imported[0].results(state="ok")
    file_params = df.extra.map(lambda e: e["params"])
    assert ((df.params - file_params).abs() / file_params).max() < 0.005
    assert (df.flops_model == 6 * df.params * df.batch).all()


def test_platforms_are_recorded_once(imported, reference):
    store, _ = imported
    tpu = store.platform("legacy:tpu-v2-8")
    assert tpu["platform"] == "tpu-v2-8" and tpu["source"] == "legacy" and tpu["ceilings"] is None
    assert tpu["info"] == {"name": "TPU v2-8", "datasheet": "tpu-v2-8", "source": "ParaDnn 2019"}
    assert store.platform("legacy:v100")["info"]["datasheet"] == "v100"
    import_files(store, [reference / "gpu_fc.json"])
    assert store.platform("legacy:tpu-v2-8") == tpu  # not rewritten on re-import


def test_traces_import_once(reference, tmp_path):
    with Store(tmp_path / "store.db") as store:
        files = [reference / "fc_trace_10sec.json", reference / "fc_trace_10sec_opbreakdown.json"]
        summary = import_files(store, files)
        assert summary["traces_added"] == 230 + 2029 and summary["results_added"] == 0
        assert import_files(store, files)["traces_added"] == 0
        traces = store.traces()
    assert len(traces) == 230 + 2029 and set(traces.platform) == {"tpu-v2-8"}
    whole = traces[traces.category == "all"]
    assert len(whole) == 230 and whole.infeed_mean.notna().all() and whole.raw_mb.notna().all()
    ops = traces[traces.category != "all"]
    assert {"cross-replica-sum", "input fusion", "data formatting", "after-all"} <= set(ops.category)
    assert set(ops.label) == set(whole.label)  # labels split into configuration and category
    assert ops.infeed.isna().all()
    assert ops[ops.category == "after-all"].intensity.isna().all()  # NaN (0/0) in the file -> NULL


def test_the_tpu_roofline_agrees_with_the_traces_on_each_side_of_the_ridge(imported, reference, tmp_path):
    from paradnn.analysis.roofline import reference_points, ridge_agreement

    store, _ = imported
    tpu = store.results(platform="tpu-v2-8")
    assert tpu["bytes_estimate"].notna().all()  # paradnn's own count, one replica's bytes times the 8 cores
    points = reference_points(tpu)
    with Store(tmp_path / "traces.db") as traced:
        import_files(traced, [reference / "fc_trace_10sec.json"])
        traces = traced.traces()
    agree, n = ridge_agreement(points, traces, 75.0)
    assert n == 230 and agree >= 0.85  # 90% of the traced configurations on the profiler's side of the ridge
    on_traced = points[points["label"].isin(set(traces["label"]))]
    assert (on_traced["intensity"] < 75).mean() >= 0.7  # the traces put 83% left of it
    # The sweep file's own figure is FLOPs per weight byte: it put none of them left of the ridge.
    assert (on_traced["reported_intensity"] < 75).mean() == 0
    # A store imported before the count was stored gets the same points.
    assert reference_points(tpu.assign(bytes_estimate=None))["intensity"].tolist() == points["intensity"].tolist()


# ------------------------------------------------------------------ small synthetic files


def test_states_and_platform_override(tmp_path):
    path = write(tmp_path, "my_sweep.json", sweep_data())
    with pytest.raises(LegacyError, match="my_sweep.json.*platform"):
        load_file(path)
    loaded = load_file(path, platform="v100")
    assert loaded.kind == "sweep" and loaded.platform.name == "v100"
    assert [r["state"] for r in loaded.results] == ["ok", "ok", "oom", "error"]
    assert loaded.results[-1]["error"] == "Segmentation fault"
    assert state_of("no error but not finished") == "timeout" and state_of("OOM") == "oom"
    with pytest.raises(LegacyError, match="expected tpu-v2-8 or v100"):
        load_file(path, platform="h100")


def test_per_core_figures_only_on_the_tpu(tmp_path):
    tpu = load_file(write(tmp_path, "tpu_small.json", sweep_data())).results[0]
    gpu = load_file(write(tmp_path, "gpu_small.json", sweep_data())).results[0]
    assert tpu["flops_graph"] == pytest.approx(8 * gpu["flops_graph"]) == pytest.approx(8 * 14.32e9)
    assert tpu["flops_per_sec"] == pytest.approx(8 * 612.5e9)
    assert tpu["examples_per_sec"] == gpu["examples_per_sec"] == 348160.0


def _truncated(folder: Path) -> Path:
    return write(folder, "tpu_bad.json", json.dumps(sweep_data())[:-20])


def _replace(**changes):
    def make(folder: Path) -> Path:
        return write(folder, "tpu_bad.json", {**sweep_data(), **changes})

    return make


def _without(key: str):
    def make(folder: Path) -> Path:
        data = sweep_data()
        del data[key]
        return write(folder, "tpu_bad.json", data)

    return make


BAD_FILES = {
    "truncated JSON": (_truncated, "not valid JSON"),
    "not an object": (lambda f: write(f, "tpu_bad.json", [1, 2]), "JSON list, not an object"),
    "missing key": (_without("step_per_sec"), "missing key.*step_per_sec"),
    "unequal lengths": (_replace(fl=[1.0]), "unequal length.*fl: 1"),
    "unequal error lists": (_replace(states=["OOM"]), "unequal length.*err_jobs: 2"),
    "bad label": (_replace(labels=[LABEL_A, "layer_4-node_512-bs_8"]), r"labels\[1\].*not an FC label"),
    "bad error label": (_replace(err_jobs=["cnn", LABEL_B]), r"err_jobs\[0\].*not an FC label"),
    "non-numeric value": (_replace(flops=[612.5, "fast"]), r"flops\[1\] is 'fast'.*expected a number"),
    "boolean value": (_replace(fl=[True, 0.01]), r"fl\[0\] is True"),
    "not a list": (_replace(params=7), "'params' holds a number.*expected a list"),
    "duplicate label": (_replace(labels=[LABEL_A, LABEL_A]), "appears more than once"),
    "zero rate": (_replace(step_per_sec=[0.0, 1.0]), "positive rate"),
    "trace label without category": (
        lambda f: write(
            f,
            "fc_trace_opbreakdown_bad.json",
            {k: [1.0] for k in ("flops_perc", "memory_bandwidth", "intensity", "rawMB", "time_perc")} | {"labels": [LABEL_A]},
        ),
        "no op category",
    ),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_malformed_files_leave_the_store_untouched(case, tmp_path):
    make, message = BAD_FILES[case]
    good, bad = write(tmp_path, "tpu_good.json", sweep_data()), make(tmp_path)
    with Store(tmp_path / "store.db") as store:
        assert import_files(store, [good])["results_added"] == 4
        before, count = store_bytes(store), store.count()
        with pytest.raises(LegacyError, match=message) as info:
            import_files(store, [write(tmp_path, "gpu_new.json", sweep_data()), bad])  # valid file first
        assert bad.name in str(info.value) and "expected" in str(info.value)
        assert store_bytes(store) == before and store.count() == count
    assert isinstance(info.value, ValueError)


def test_unreadable_file_is_a_legacy_error(tmp_path):
    with pytest.raises(LegacyError, match="cannot be read"):
        load_file(tmp_path / "tpu_missing.json")
    (tmp_path / "tpu_binary.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(LegacyError, match="tpu_binary.json: cannot be read"):
        load_file(tmp_path / "tpu_binary.json")


def test_store_file_is_unchanged_after_close(tmp_path):
    good = write(tmp_path, "tpu_good.json", sweep_data())
    with Store(tmp_path / "store.db") as store:
        import_files(store, [good])
    before = (tmp_path / "store.db").read_bytes()
    with Store(tmp_path / "store.db") as store, pytest.raises(LegacyError):
        import_files(store, [_truncated(tmp_path)])
    assert (tmp_path / "store.db").read_bytes() == before


def test_the_shipped_files_are_the_original_release(reference, oracle):
    from paradnn.store.legacy import BUNDLED

    for name in BUNDLED:
        assert (reference / name).read_bytes() == (oracle / name).read_bytes(), name
    assert "Apache License" in (reference / "LICENSE").read_text()
    notice = (reference / "NOTICE").read_text()
    assert "github.com/Emma926/paradnn" in notice and "1907.10701" in notice and "Apache" in notice


def test_an_altered_shipped_file_is_refused(tmp_path, monkeypatch):
    import shutil

    from paradnn.store import legacy

    copy = tmp_path / "paradnn-2019"
    shutil.copytree(legacy.bundled_dir(), copy)
    with open(copy / "gpu_fc.json", "a") as f:
        f.write(" ")
    monkeypatch.setattr(legacy, "bundled_dir", lambda: copy)
    with pytest.raises(legacy.LegacyError, match="gpu_fc.json: SHA-256"):
        legacy.bundled_files()


def test_import_legacy_without_files_imports_the_shipped_set(tmp_path):
    from click.testing import CliRunner

    from paradnn.cli import main

    store = tmp_path / "r.sqlite"
    result = CliRunner().invoke(main, ["import-legacy", "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert "tpu_fc.json: sweep of tpu-v2-8, 1944 rows, 1944 added" in result.output
    again = CliRunner().invoke(main, ["import-legacy", "--store", str(store)])
    assert "1944 rows, 0 added" in again.output


def test_the_original_grid_as_a_preset_is_cheapest_first_and_on_both_platforms():
    from paradnn.config import ConfigError
    from paradnn.store.legacy import overlap_configs

    both = overlap_configs()  # both finished, and neither waited on its input (tests/test_bounds.py)
    assert len(both) == 30 and len(overlap_configs(within="either")) == 1724
    eight = overlap_configs(8)
    flops = [c.layers * c.nodes**2 * c.batch for c in eight]  # the hidden layers' share of the step, cheapest first
    assert eight[0].label == "layer_64-node_32-input_2000-output_1000-bs_64" and flops[0] == min(flops)
    assert {c.label for c in eight} <= {c.label for c in both}
    assert all(c.nodes in (32, 128) for c in overlap_configs(overrides={"nodes": [32, 128]}))
    with pytest.raises(ConfigError, match="within"):
        overlap_configs(within="neither")
    with pytest.raises(ConfigError, match="an FC axis"):
        overlap_configs(overrides={"filters": [16]})


def test_the_paper_overlap_preset_is_the_original_grid_both_platforms_finished():
    from paradnn.config import ConfigError
    from paradnn.store.legacy import grid_of, overlap_configs

    configs = grid_of("fc", "paper-overlap", {"layers": [128], "nodes": [128]})
    assert [c.label for c in configs] == [
        "layer_128-node_128-input_2000-output_1000-bs_64",
        "layer_128-node_128-input_2000-output_1000-bs_256",
    ]
    assert len(grid_of("fc", "paper-overlap")) == len(overlap_configs()) == 30  # of the V100's 176, where neither was input-bound
    with pytest.raises(ConfigError, match="fc family only"):
        grid_of("cnn", "paper-overlap")
    assert [c.label for c in grid_of("fc", "smoke")] == [c.label for c in grid_of("fc", "smoke", None)]
