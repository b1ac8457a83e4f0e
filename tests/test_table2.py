"""Table 2: the grids as printed, as the paper preset runs them and as a report ran them."""

from __future__ import annotations

from paradnn import space
from paradnn.analysis.table2 import PRINTED, REASONS, departure, printed_text, printed_values, table2


def test_printed_ranges_expand_as_the_table_writes_them():
    assert printed_values((4, 128, "x2")) == [4, 8, 16, 32, 64, 128]
    assert printed_values((200, 300, "+50")) == [200, 250, 300]
    assert printed_values((2, 1024, None)) is None and printed_text((2, 1024, None)) == "2-1024"
    assert printed_values(("rnn", "lstm", "gru")) == ["rnn", "lstm", "gru"]
    assert printed_text((64, 16384, "x2")) == "64-16384 (x2)"


def test_the_paper_preset_departs_from_the_print_only_where_a_reason_is_recorded():
    marked = {(f, a) for f, axes in PRINTED.items() for a in axes if departure(f, a, space.grid(f, "paper")[a])}
    assert marked == set(REASONS) == {("rnn", "vocab"), ("rnn", "batch")}
    assert departure("fc", "layers", [4, 8, 16]) == "differs from the print (no reason recorded)"


def test_the_table_names_every_printed_axis_and_the_values_this_run_used():
    table = table2(["fc", "cnn", "resnet50"], "quick", {"fc": {"layers": [4]}})
    assert list(table["family"].unique()) == ["fc", "cnn"]  # real workloads are not in Table 2
    assert set(table[table["family"] == "cnn"]["axis"]) == set(space.grid("cnn", "paper"))
    fc = table[table["family"] == "fc"].set_index("axis")
    assert fc.loc["layers", "this run (quick)"] == "4" and fc.loc["nodes", "this run (quick)"] == "64, 256, 1024"
    assert fc.loc["batch", "Table 2 (printed)"] == "64-16384 (x2)" and fc.loc["nodes", "paper preset"].startswith("32, 64")
