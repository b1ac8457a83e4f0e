"""Sentences on the pages say what their numbers are (issue: comparisons that say what they compare)."""

from __future__ import annotations

import re

import pandas as pd

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
    assert printed and all(abs(printed[int(k)] - v) <= 0.5 for k, v in verdict.numbers["bandwidth_by_nodes"].items()
                           if int(k) in printed)  # fmt: skip


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

    rows = pd.DataFrame({"sw_tensorflow": ["2.16.2", "2.21.0"], "sw_keras": ["3.4.1", "3.15.1"],
                         "sw_numpy": ["1.26.4", "2.4.6"], "sw_python": ["3.11.2", "3.11.2"], "sw_cuda": ["", ""]})  # fmt: skip
    assert stack_differences(rows, "2.16.2", "2.21.0") == (
        "TensorFlow 2.16.2 against 2.21.0: besides TensorFlow, the stacks differ in keras 3.4.1 against 3.15.1; "
        "numpy 1.26.4 against 2.4.6 (the same: python 3.11.2).")
