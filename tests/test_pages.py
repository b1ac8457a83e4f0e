"""Sentences on the pages say what their numbers are (issue: comparisons that say what they compare)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from paradnn.reports import _software

STACK = {"tensorflow": "2.21.0", "keras": "3.15.1", "cuda": "12.5.1", "cudnn": "9"}


def test_the_provenance_names_cuda_only_where_a_gpu_was_there_to_use_it():
    assert _software(STACK, {"devices": {"CPU": 1, "GPU": 0}}) == "tensorflow 2.21.0, keras 3.15.1"
    assert _software(STACK, {"devices": {"CPU": 1, "GPU": 1}}) == "tensorflow 2.21.0, keras 3.15.1, cuda 12.5.1, cudnn 9"


def test_the_bandwidth_wall_names_each_utilisation_it_prints(reference):
    from paradnn.analysis.observations import bandwidth_wall
    from paradnn.store.legacy import load_file

    sweep, traces = load_file(reference / "tpu_fc.json"), load_file(reference / "fc_trace_10sec.json")
    verdict = bandwidth_wall(pd.DataFrame(sweep.results), pd.DataFrame(traces.traces))
    flops, bandwidth = verdict.evidence.split("; memory-bandwidth utilisation there is ")
    assert flops.startswith("FLOPS utilisation ")
    # the bandwidth medians printed are the traces' memory-bandwidth medians by nodes, not the FLOPS ones
    printed = {int(k): float(v) for k, v in re.findall(r"(\d+): (\d+)%", bandwidth)}
    assert printed and all(
        abs(printed[int(k)] - v) <= 0.5 for k, v in verdict.numbers["bandwidth_by_nodes"].items() if int(k) in printed
    )


def test_the_rooflines_colour_key_is_named_after_its_column():
    from paradnn.analysis.plots import roofline
    from paradnn.analysis.roofline import Ceilings

    points = pd.DataFrame({"intensity": [1.0, 10.0, 100.0], "achieved_flops": [1e9, 5e9, 9e9], "batch": [64, 256, 1024]})
    fig = roofline(points, Ceilings(1e10, 1e9, "datasheet"), "TPU v2-8", hue="batch")
    legend = fig.axes[0].get_legend()
    assert legend.get_title().get_text() == "batch" and len(legend.get_texts()) >= 3


def test_a_filtered_table_shows_no_row_numbers_and_a_pivot_keeps_its_index():
    from paradnn.sections.common import styled

    frame = pd.DataFrame({"family": ["fc", "cnn", "rnn"], "examples_per_sec": [1.0, 2.0, 3.0]})
    filtered = frame[frame["family"] != "fc"]  # index 1, 2: pandas row numbers
    assert "row_heading" not in styled(filtered).to_html().split("<tbody>")[1]
    assert "row_heading" in styled(frame.set_index("family")).to_html().split("<tbody>")[1]


def test_each_observation_has_one_line_that_says_where_it_stands():
    from paradnn.reports import standing

    def verdicts(*kinds: str) -> list[dict]:
        return [{"verdict": k} for k in kinds]

    assert standing(verdicts("holds", "holds")) == "overall: holds (all 2 verdict(s))"
    partly = "overall: holds (2 holds of 3 verdict(s); the others undecided)"
    assert standing(verdicts("holds", "inconclusive", "holds")) == partly
    mixed = "overall: mixed (1 holds, 1 does not hold, of 3 verdict(s))"
    assert standing(verdicts("holds", "does not hold", "inconclusive")) == mixed
    assert standing(verdicts("inconclusive", "needs a TPU")) == "overall: undecided (none of its 2 verdict(s) decided)"


def test_a_version_comparison_lists_what_else_differed_between_the_stacks():
    from paradnn.sections.software_stack import stack_differences

    rows = pd.DataFrame(
        {
            "sw_tensorflow": ["2.16.2", "2.21.0"],
            "sw_keras": ["3.4.1", "3.15.1"],
            "sw_numpy": ["1.26.4", "2.4.6"],
            "sw_python": ["3.11.2", "3.11.2"],
            "sw_cuda": ["", ""],
        }
    )
    assert stack_differences(rows, "2.16.2", "2.21.0") == (
        "TensorFlow 2.16.2 against 2.21.0: besides TensorFlow, the stacks differ in keras 3.4.1 against 3.15.1; "
        "numpy 1.26.4 against 2.4.6 (the same: python 3.11.2)."
    )


def test_a_speedup_map_marks_a_pair_whose_side_failed_as_failed():
    from paradnn.sections.platform_comparison import with_failed_sides

    def row(label: str, platform: str, state: str) -> dict:
        return {"family": "fc", "label": label, "platform": platform, "state": state, "nodes": 64, "batch": 64}

    pairs = pd.DataFrame([{"family": "fc", "label": "a", "nodes": 64, "batch": 64, "speedup": 2.0, "state": "ok"}])
    rows = pd.DataFrame(
        [
            row("a", "cpu", "ok"),
            row("a", "v100", "ok"),
            row("b", "v100", "oom"),
            row("b", "cpu", "ok"),
            row("c", "tpu-v2-8", "oom"),
        ]
    )
    shown = with_failed_sides(pairs, rows, "fc", "cpu", "v100").set_index("label")
    assert shown.loc["a", "state"] == "ok" and shown.loc["b", "state"] == "oom" and pd.isna(shown.loc["b", "speedup"])
    assert "c" not in shown.index  # a third platform's failure is not this pair's


def test_the_infeed_band_is_measured_from_the_stores_own_reruns():
    from paradnn.analysis.observations import INFEED_MARGIN_POINTS, infeed_margin

    def measured(*shares: float) -> list[dict]:
        return [{"infeed_share": s} for s in shares]

    fed = pd.DataFrame({"measurements": [measured(0.50, 0.53), measured(0.20, 0.28, 0.22), measured(0.9, 0.95), []]})
    band, words = infeed_margin(fed)  # spreads 3, 8 and 5 points: median 5
    assert band == pytest.approx(5.0) and words.startswith("5.0 points, the median spread of the 3 configurations")
    band, words = infeed_margin(fed.iloc[:2])
    assert band == INFEED_MARGIN_POINTS and "(2 configuration(s) here measured twice)" in words


def test_a_one_sample_box_is_told_apart_by_its_points_colour():
    from paradnn.analysis.plots import share_by_batch

    rows = pd.DataFrame(
        {
            "label": ["layer_4-node_64-input_2000-output_1000-bs_64"] * 2,
            "infeed_percent": [30.0, 60.0],
            "pipeline": ["fc, host", "fc, host-prep"],
        }
    )
    fig = share_by_batch(rows, "infeed_percent", "infeed", "infeed (% of the step)", hue="pipeline")
    points = [c for c in fig.axes[0].collections if len(c.get_offsets()) and c.get_facecolors().size]
    colours = {tuple(round(v, 3) for v in c.get_facecolors()[0][:3]) for c in points}
    assert len(colours) == 2 and (0.0, 0.0, 0.0) not in colours


def test_a_utilisation_table_sets_medians_over_one_common_set_side_by_side():
    from paradnn.analysis.workloads import platform_table

    def row(platform: str, label: str, utilisation: float) -> dict:
        return {
            "family": "fc",
            "platform": platform,
            "label": label,
            "state": "ok",
            "utilization": utilisation,
            "source": "legacy:x.json",
            "dtype": "float32",
        }

    rows = pd.DataFrame(
        [
            row("v100", "a", 0.1),
            row("v100", "b", 0.5),
            row("tpu-v2-8", "a", 0.2),
            row("tpu-v2-8", "c", 0.9),
            row("tpu-v2-8", "b", 0.4),
            row("tpu-v2-8", "d", 0.8),
        ]
    )
    table = platform_table(rows)
    # over a and b, which both measured: not the TPU's four against the V100's two
    assert table.loc["fc", "tpu-v2-8"] == pytest.approx(0.3) and table.loc["fc", "v100"] == pytest.approx(0.3)
    assert table.attrs["n"] == {"fc": 2}


def test_the_latency_cells_set_side_by_side_share_their_configurations():
    from paradnn.analysis import scorecard

    def row(platform: str, label: str, batch: int, step: float, family: str = "fc") -> dict:
        return {
            "family": family,
            "label": label,
            "platform": platform,
            "state": "ok",
            "batch": batch,
            "step_time_s": step,
            "dtype": "float32",
            "utilization": 0.5,
        }

    rows = pd.DataFrame(
        [
            row("v100", "a", 64, 0.008),
            row("v100", "b", 64, 0.020),
            row("tpu-v2-8", "a", 64, 0.004),
            row("tpu-v2-8", "c", 64, 0.001),
            row("tpu-v2-8", "r", 2, 0.050, "retinanet"),
        ]
    )
    cells = scorecard.hardware_metrics(rows, pd.DataFrame(columns=["platform", "ceilings"]))
    latency = cells[cells["metric"] == "Low Latency"].set_index("platform")
    assert latency.loc["v100", "value"] == "fc batch 64: 8 ms" and latency.loc["tpu-v2-8", "short"] == "4 ms at bs 64"
    assert "fc batch 64: 4 ms" in latency.loc["tpu-v2-8", "value"]  # over configuration a, the one both measured
