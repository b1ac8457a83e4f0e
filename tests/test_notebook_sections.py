"""The reports' section helpers (paradnn.sections) on small synthetic frames."""

from __future__ import annotations

import importlib
import pkgutil

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from paradnn import sections
from paradnn.analysis.observations import HOLDS, INCONCLUSIVE, Verdict
from paradnn.analysis.results import Results
from paradnn.analysis.roofline import Ceilings
from paradnn.sections import architecture, common, infeed, platform_comparison

SECTIONS = [importlib.import_module(f"paradnn.sections.{m.name}") for m in pkgutil.iter_modules(sections.__path__)]


def patch_everywhere(monkeypatch, name: str, value) -> None:
    """Replace a shared helper (``show``, ``load``) in every report module that calls it."""
    for module in SECTIONS:
        if hasattr(module, name):
            monkeypatch.setattr(module, name, value)


def rows(**columns) -> pd.DataFrame:
    return pd.DataFrame(columns)


@pytest.fixture
def shown(monkeypatch) -> dict:
    """What a section puts into the report: figure titles, captions and displayed tables."""
    seen: dict = {"figures": [], "captions": [], "tables": []}

    def show(fig) -> None:
        seen["figures"].append(common.figure_title(fig))
        plt.close(fig)

    patch_everywhere(monkeypatch, "show", show)
    patch_everywhere(monkeypatch, "caption", lambda text: seen["captions"].append(text))
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: seen["tables"].append(obj))
    return seen


def test_state_counts_names_every_state_most_common_first():
    df = rows(state=["ok", "ok", "oom", "ok", "timeout"])
    assert common.state_counts(df, "cpu") == "5 configurations of cpu in the store: 3 ok, 1 oom, 1 timeout"


def test_roofline_caption_counts_models_left_of_the_ridge_and_the_best_share_of_the_roof():
    ceilings = Ceilings(peak_flops=1e12, bandwidth=1e10, source="measured")  # ridge at 100 FLOPs/byte
    points = rows(intensity=[10.0, 50.0, 200.0, 400.0], achieved_flops=[1e10, 1e11, 4e11, 2e11])
    text = architecture.roofline_caption(points, ceilings)
    assert text.startswith("The paper found FC and CNN models span")
    assert text.endswith(
        "here 50% of the 4 models lie left of the ridge point (100 FLOPs/byte), reaching up to 40% of the compute roof."
    )


@pytest.mark.parametrize(("count", "expected"), [(0, []), (1, ["big"]), (2, ["small", "big"]), (5, ["small", "big"])])
def test_profile_picks_are_the_smallest_and_largest_finished_fc_models(count, expected):
    df = rows(
        family=["fc", "fc", "fc", "cnn", "fc"],
        label=["mid", "big", "small", "conv", "huge"],
        state=["ok", "ok", "ok", "ok", "oom"],
        flops_model=[5.0, 9.0, 1.0, 100.0, 50.0],
    )
    assert list(architecture.profile_picks(Results(df), count)["label"]) == expected


def test_profile_picks_of_a_single_model_profiles_it_once():
    df = rows(family=["fc"], label=["only"], state=["ok"], flops_model=[1.0])
    assert list(architecture.profile_picks(Results(df), 2)["label"]) == ["only"]
    assert architecture.profile_picks(Results(df.iloc[0:0]), 2).empty


def test_with_measure_missing_off_nothing_is_profiled_and_the_report_says_so(shown, monkeypatch, capsys):
    """A profile is measured live, not kept: a report of a store as it is profiles nothing, so it renders alike every time."""

    def profiled(*args, **kwargs):
        raise AssertionError("profiled with measure_missing off")

    monkeypatch.setattr("paradnn.engine.profiler.op_breakdown", profiled)
    results = Results(rows(family=["fc"], label=["only"], state=["ok"], flops_model=[1.0]))
    verdict = architecture.op_breakdown_section(results, None, pd.DataFrame(), "cpu", "float32", 2, measure=False)
    assert common.NOT_PROFILED in capsys.readouterr().out
    assert verdict.verdict == INCONCLUSIVE and shown["figures"] == []


def test_replicated_rows_and_the_communication_table():
    df = rows(
        family=["fc", "fc", "fc"],
        label=["fc_bs_64", "fc_bs_128", "fc_bs_64"],
        devices=[2, 2, 1],
        replica_batch=[32, 64, 64],
        step_time_s=[0.012345, 0.02, 0.01],
        replica_step_time_s=[0.01, 0.015, None],
        comm_share=[0.19, 0.25, None],
        allreduce_share=[0.1, 0.2, None],
        scaling_efficiency=[0.81, 0.75, None],
        state=["ok", "ok", "ok"],
    )
    replicated = architecture.replicated_rows(Results(df))
    assert list(replicated["devices"]) == [2, 2]  # the single-device row has no communication share
    table = architecture.communication_table(replicated)
    assert list(table.columns) == architecture.COMMUNICATION_COLUMNS and "state" not in table
    assert table["step_time_s"].iloc[0] == 0.0123


def test_fed_rows_keep_the_requested_pipelines_with_a_measured_share():
    df = rows(
        family=["fc", "fc", "fc", "cnn"],
        input_mode=["host", "host-prep", "device", "host-prep"],
        infeed_share=[0.3, 0.5, None, 0.2],
    )
    assert list(infeed.fed_rows(df, ["host", "host-prep"])["input_mode"]) == ["host", "host-prep", "host-prep"]
    assert list(infeed.fed_rows(df, ["host-prep"])["family"]) == ["fc", "cnn"]
    assert infeed.fed_rows(df, []).empty


def test_infeed_plot_rows_group_by_family_and_pipeline_in_percent():
    df = rows(family=["fc", "cnn"], input_mode=["host", "host-prep"], infeed_share=[0.25, 0.5])
    plotted = infeed.infeed_plot_rows(df)
    assert list(plotted["pipeline"]) == ["fc, host", "cnn, host-prep"]
    assert list(plotted["infeed_percent"]) == [25.0, 50.0]


def test_collect_keeps_the_order_spreads_lists_and_drops_skipped_sections():
    a, b, c = (Verdict(n, "p", INCONCLUSIVE, "e") for n in "abc")
    assert common.collect([a], None, b, [], (c,)) == [a, b, c]


def test_measuring_replicas_and_inputs_needs_a_local_platform_and_measure_missing(monkeypatch):
    calls = []
    patch_everywhere(monkeypatch, "ensure_measured", lambda store, families, **kw: calls.append(kw) or ["measured"])
    common = {"preset": "smoke", "overrides": {}, "budget_minutes": 4.0, "max_seconds": 0.5}
    assert architecture.measure_replicas("s", ["fc"], 1, platform="cpu", measure_missing=True, **common) == []
    assert architecture.measure_replicas("s", ["fc"], 2, platform="tpu-v2-8", measure_missing=True, **common) == []
    assert architecture.measure_replicas("s", ["fc"], 2, platform="cpu", measure_missing=False, **common) == []
    assert infeed.measure_inputs("s", ["fc"], ["host"], platform="v100", measure_missing=True, **common) == []
    assert infeed.measure_inputs("s", ["fc"], [], platform="cpu", measure_missing=True, **common) == []
    assert not calls
    assert infeed.measure_inputs("s", ["fc"], ["host", "host-prep"], platform="cpu", measure_missing=True, **common) == [
        "measured"
    ]
    (call,) = calls  # one sweep of both pipelines' runs, within the whole budget
    assert call["variants"] == [{"input": "host"}, {"input": "host-prep"}] and call["budget_minutes"] == 4.0
    architecture.measure_replicas("s", ["fc"], 2, platform="cpu", measure_missing=True, **common)
    assert calls[-1]["devices"] == 2 and calls[-1]["budget_minutes"] == 4.0


def test_variants_are_measured_in_one_sweep_and_one_line_names_every_run(monkeypatch, tmp_path):
    from paradnn.config import ConfigError
    from paradnn.sweeps import loop
    from paradnn.sweeps.plan import SweepSummary

    seen = []
    monkeypatch.setattr(
        loop,
        "sweep",
        lambda configs, store, options, backend, runs=(), progress=None: (
            seen.append((options, runs)) or SweepSummary(planned=len(configs) * len(runs))
        ),
    )
    variants = [{"dtype": "float32"}, {"dtype": "mixed_bfloat16"}]
    lines = common.ensure_measured(tmp_path / "s.sqlite", ["fc"], variants=variants, xla=False, platform="cpu", budget_minutes=3)
    ((options, runs),) = seen
    assert [(r.dtype, r.xla) for r in runs] == [("float32", False), ("mixed_bfloat16", False)]
    assert options.max_minutes == 3  # the whole budget, for both runs
    assert len(lines) == 1 and "float32" in lines[0] and "mixed_bfloat16" in lines[0]
    with pytest.raises(ConfigError, match="variants"):
        common.ensure_measured(tmp_path / "s.sqlite", ["fc"], variants=[{}, {"platform": "cpu[threads=1]"}], platform="cpu")


def test_replica_and_infeed_sections_without_rows_say_what_they_need(shown):
    empty = rows(family=[], label=[], state=[], comm_share=[], infeed_share=[], input_mode=[], batch=[])
    assert architecture.replica_section(empty, "cpu").verdict == INCONCLUSIVE
    assert infeed.infeed_section(empty, "cpu").verdict == INCONCLUSIVE
    assert shown["figures"] == [] and shown["tables"] == []
    assert "needs data-parallel measurements" in shown["captions"][0]
    assert "needs host-fed measurements" in shown["captions"][1]


def test_replica_section_shows_the_share_by_batch_and_the_table(shown):
    batches = [64, 64, 128, 128, 256, 256]
    replicated = rows(
        family=["fc"] * 6,
        label=[f"fc_bs_{b}_n{i}" for i, b in enumerate(batches)],
        batch=batches,
        devices=[2] * 6,
        replica_batch=[b // 2 for b in batches],
        step_time_s=[0.01] * 6,
        replica_step_time_s=[0.008] * 6,
        comm_share=[0.4, 0.3, 0.2, 0.2, 0.1, 0.05],
        allreduce_share=[0.1] * 6,
        scaling_efficiency=[0.8] * 6,
        state=["ok"] * 6,
    )
    verdict = architecture.replica_section(replicated, "cpu")
    assert verdict.id == "O3" and verdict.verdict == HOLDS
    assert shown["figures"] == ["cpu: communication share of the data-parallel step (all-reduce and waiting)"]
    assert list(shown["tables"][0].columns) == architecture.COMMUNICATION_COLUMNS
    assert shown["captions"] == [verdict.sentence]


def test_infeed_section_shows_one_box_per_family_and_pipeline(shown):
    fed = rows(
        family=["fc"] * 6,
        label=[f"fc_bs_{b}" for b in (64, 128, 256, 64, 128, 256)],
        batch=[64, 128, 256] * 2,
        input_mode=["host"] * 3 + ["host-prep"] * 3,
        flops_model=[1e6, 4e6, 16e6, 2e6, 8e6, 32e6],
        infeed_share=[0.6, 0.4, 0.1, 0.7, 0.5, 0.2],
        state=["ok"] * 6,
    )
    verdict = infeed.infeed_section(fed, "cpu")
    assert verdict.id == "O4" and verdict.platform == "cpu"
    assert shown["figures"] == ["cpu: share of step time waiting for the input pipeline, by family and pipeline"]
    assert shown["captions"] == [verdict.sentence]


def test_fig7_sets_the_64_layer_slice_measured_here_beside_the_original_platforms(shown, monkeypatch):
    def fc(platform: str, layers: int, dtype: str, scale: float) -> list[dict]:
        return [
            {
                "family": "fc",
                "platform": platform,
                "layers": layers,
                "nodes": n,
                "batch": b,
                "input": 2000,
                "output": 1000,
                "state": "ok",
                "dtype": dtype,
                "examples_per_sec": scale * b / n,
            }
            for n in (64, 256)
            for b in (64, 1024)
        ]

    here = pd.DataFrame(fc("cpu", 64, "float32", 1.0) + fc("cpu", 4, "float32", 9.0))
    theirs = pd.DataFrame(
        fc("v100", 64, "mixed_float16", 50.0) + fc("tpu-v2-8", 64, "mixed_bfloat16", 80.0) + fc("gpu:0", 64, "float32", 5.0)
    )
    patch_everywhere(monkeypatch, "load", lambda store, platform=None, **kw: Results(here if platform else theirs))
    checks = platform_comparison.fig7_section("unused.sqlite", "cpu", "float32", "auto")
    assert [c.verdict for c in checks] == [HOLDS, HOLDS] and all(c.platform == "cpu" and not c.id for c in checks)
    assert shown["figures"] == ["FC throughput at 64 layers on cpu, tpu-v2-8, v100 (Fig. 7)"]  # gpu:0 is no reference
    assert "here 4 64-layer configurations were measured on cpu" in shown["captions"][0]
    assert "cpu float32, tpu-v2-8 mixed_bfloat16, v100 mixed_float16" in shown["captions"][0]


def test_the_original_tpu_models_sit_on_the_boards_roofline_at_their_counted_intensity(shown):
    from paradnn.analysis.roofline import reference_points

    labels = ["layer_4-node_32-input_2000-output_1000-bs_64", "layer_4-node_4096-input_2000-output_1000-bs_8192"]
    tpu = rows(
        family=["fc"] * 3,
        label=[*labels, labels[0]],
        platform=["tpu-v2-8"] * 3,
        state=["ok", "ok", "timeout"],
        batch=[64, 8192, 64],
        flops_per_sec=[1e12, 9e13, None],
        flops_model=[1e9, 1e13, 1e9],
        bytes_estimate=[1e8, 1e10, None],
        extra=['{"intensity": 300.0}', '{"intensity": 3000.0, "fl": 1}', "{}"],
    )
    points = reference_points(tpu)
    assert list(points["intensity"]) == [10.0, 1000.0] and list(points["reported_intensity"]) == [300.0, 3000.0]
    traces = pd.DataFrame({"label": labels, "category": "all", "intensity": [5.0, 20.0]})
    architecture.reference_roofline_section(Results(tpu), traces)
    title = "Roofline of the original study's FC models on the TPU v2-8 (Fig. 3a)"
    assert len(shown["figures"]) == 1 and shown["figures"][0].startswith(title)
    assert (
        "here 50% of the 2 models lie left of the ridge point (75 FLOPs/byte), reaching up to 50% of the compute roof."
    ) in shown["captions"][0]  # 9e13 of 180e12
    assert "it puts 50% on the same side of the ridge as the profiler's intensity" in shown["captions"][0]


def test_the_notebooks_workers_reach_plain_cpu_sweeps_only(monkeypatch, tmp_path):
    from paradnn.config import ConfigError
    from paradnn.sweeps import loop
    from paradnn.sweeps.plan import SweepSummary

    seen = []
    monkeypatch.setattr(loop, "sweep", lambda configs, store, opts, backend, **kw: seen.append(opts.workers) or SweepSummary())
    lanes = common.Lanes("local", 2)  # the notebook's backend and workers, handed over explicitly
    for run in ({}, {"devices": 2}):  # replicas are processes of their own: one worker
        common.ensure_measured(tmp_path / "s.sqlite", ["fc"], preset="smoke", max_seconds=0.3, xla=False, lanes=lanes, **run)
    common.ensure_measured(tmp_path / "s.sqlite", ["fc"], preset="smoke", max_seconds=0.3, xla=False)  # no lanes: one
    assert seen == [2, 1, 1]
    assert "SWEEP_WORKERS" not in vars(common)  # no module global carries it
    with pytest.raises(ConfigError, match=r"\(workers\): 5 is not valid"):
        common.setup("local", 5)


def test_tables_say_not_measured_and_show_no_row_numbers(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj))
    common.table(pd.DataFrame({"platform": ["cpu", "v100"], "median": [1.23456, None]}))
    page = shown[0].to_html()
    assert "not measured" in page and "nan" not in page.lower() and "1.235" in page
    assert 'class="row_heading' not in page  # no pandas row numbers
    common.table(pd.DataFrame({"cpu": [1.0]}, index=pd.Index(["Computing Performance"], name="metric")))
    assert "Computing Performance" in shown[1].to_html()  # a meaningful index is kept


def test_a_table_shows_what_users_typed_as_text(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj))
    common.table(pd.DataFrame({"platform": ["<script>alert(1)</script>"]}))
    page = shown[0].to_html()
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_this_machine_beside_the_2019_chips_uses_only_pairs_where_they_were_the_bound(shown, tmp_path):
    from paradnn.families import parse_label
    from paradnn.store import Store
    from paradnn.store.legacy import import_bundled, overlap_configs

    chips = [c.label for c in overlap_configs(2)]  # neither 2019 platform waited on its input
    fed = "layer_4-node_32-input_2000-output_1000-bs_64"  # the V100 at 0.93 of its input ceiling
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        import_bundled(s)
        s.add_results(
            [
                {
                    "family": "fc",
                    "label": label,
                    **parse_label("fc", label).hyperparameters(),
                    "dtype": "float32",
                    "xla": True,
                    "platform": "cpu",
                    "state": "ok",
                    "examples_per_sec": 1000.0,
                    "step_time_s": 0.064,
                    "software": {"tensorflow": "2.21.0", "keras": "3.15"},
                    "platform_fingerprint": "cpu|x|2|2.21.0",
                }
                for label in [*chips, fed]
            ]
        )
    platform_comparison.original_beside_section(path, "cpu")
    listed = shown["tables"][0].data
    assert set(listed["label"]) == {fed} and "input" in set(listed["bound"])  # listed, not compared
    assert shown["captions"][0].startswith("1 configuration(s) measured here were input-bound on a 2019 platform")
    assert shown["captions"][1].startswith("2 FC configurations were measured here and by both")
    assert "geometric means multiply" in shown["captions"][1] or "do not multiply" in shown["captions"][1]
    bounds = [t.data for t in shown["tables"] if any(str(c).endswith(" bound") for c in t.data.columns)]
    assert len(bounds) == 3 and all(set(b["label"]) == set(chips) for b in bounds)  # every pair's bound shown
    assert all(set(b.iloc[:, -1]) == set(b.iloc[:, -2]) == {"chip"} for b in bounds)
    figures = " ".join(shown["figures"])
    assert "FC speedup of v100 over cpu" in figures and "FC speedup of tpu-v2-8 over v100" not in figures  # Fig. 8 once
