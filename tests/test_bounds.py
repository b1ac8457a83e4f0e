"""What bound each step (the chip or its input pipeline), and comparisons of chips that use only chip-bound pairs."""

from __future__ import annotations

import sqlite3

import pandas as pd
import pytest

from paradnn.store import Store
from paradnn.store.bounds import CHIP, INPUT, RATE_SHARE, input_ceilings, row_bounds, traced_infeed
from paradnn.store.legacy import import_bundled, load_file, overlap_configs

FC = "input_2000-output_1000"


@pytest.fixture(scope="module")
def original(reference) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The original study's finished rows and its traces, as the importer reads them."""
    loaded = [load_file(path) for path in sorted(reference.glob("*.json"))]
    rows = pd.DataFrame([r for f in loaded for r in f.results if r["state"] == "ok"])
    return rows, pd.DataFrame([t for f in loaded for t in f.traces])


def bound_of(bounds: pd.DataFrame, rows: pd.DataFrame, platform: str, label: str) -> tuple[str, str]:
    row = bounds[(rows["platform"] == platform) & (rows["label"] == label)].iloc[0]
    return row["bound"], row["bound_why"]


def test_a_traced_tpu_step_is_bound_by_its_infeed_share(original):
    rows, traces = original
    bounds = row_bounds(rows, traces)
    bound, why = bound_of(bounds, rows, "tpu-v2-8", f"layer_4-node_128-{FC}-bs_1024")
    assert bound == INPUT and why == "infeed 91% of the step (2019 trace)"
    bound, why = bound_of(bounds, rows, "tpu-v2-8", f"layer_128-node_1024-{FC}-bs_512")
    assert bound == CHIP and why.startswith("infeed 0% of the step")


def test_an_untraced_v100_step_is_bound_by_its_rate_against_its_input_ceiling(original):
    rows, traces = original
    bounds = row_bounds(rows, traces)
    v100_64 = rows[(rows["platform"] == "v100") & (rows["batch"] == 64)]["examples_per_sec"].max()  # 28,755 examples/s
    assert v100_64 == pytest.approx(28755, abs=1)
    bound, why = bound_of(bounds, rows, "v100", f"layer_4-node_32-{FC}-bs_64")  # 26,755 examples/s: on the plateau
    assert bound == INPUT and why == "0.93 of its input ceiling at batch 64 (2019 rates)"
    bound, why = bound_of(bounds, rows, "v100", f"layer_32-node_32-{FC}-bs_64")  # 11,518 examples/s
    assert bound == CHIP and why == "0.40 of its input ceiling at batch 64 (2019 rates)"


def test_the_rate_rule_calls_every_traced_input_bound_tpu_step_input(original):
    rows, traces = original
    infeed = traced_infeed(traces)
    tpu = rows[rows["platform"] == "tpu-v2-8"]
    ceilings = input_ceilings(tpu, infeed)
    fed = tpu[[infeed.get(("tpu-v2-8", label), 0.0) >= 0.5 for label in tpu["label"]]]
    assert len(fed) == 76
    ratios = [r.examples_per_sec / ceilings[("tpu-v2-8", r.batch)] for r in fed.itertuples()]
    assert min(ratios) >= RATE_SHARE


def test_this_machines_rows_are_bound_by_their_measured_input_share():
    frame = pd.DataFrame(
        {
            "source": ["measured"] * 3,
            "state": ["ok"] * 3,
            "platform": ["cpu"] * 3,
            "label": ["a", "b", "c"],
            "examples_per_sec": [10.0, 10.0, 10.0],
            "input_mode": ["device", "host", "host"],
            "infeed_share": [None, 0.7, 0.1],
        }
    )
    bounds = row_bounds(frame)
    assert list(bounds["bound"]) == [CHIP, INPUT, CHIP]
    assert bounds["bound_why"].iloc[1] == "input 70% of the step (measured)"


def test_the_overlap_preset_picks_configurations_where_both_2019_chips_were_the_bound(original):
    rows, traces = original
    bounds = rows.join(row_bounds(rows, traces))
    picked = overlap_configs()
    assert len(picked) == 30
    for config in picked:
        on = bounds[bounds["label"] == config.label]
        assert sorted(on["platform"]) == ["tpu-v2-8", "v100"] and set(on["bound"]) == {CHIP}
    flops = [float(bounds.loc[bounds["label"] == c.label, "flops_model"].iloc[0]) for c in picked]
    assert flops == sorted(flops)
    assert [c.label for c in overlap_configs(2)] == [f"layer_64-node_32-{FC}-bs_64", f"layer_128-node_32-{FC}-bs_64"]


def test_the_original_rows_are_stored_as_fed_through_the_host(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        import_bundled(s)
        modes = s.conn.execute("SELECT DISTINCT input_mode FROM results WHERE source LIKE 'legacy:%'").fetchall()
    assert [m[0] for m in modes] == ["host"]


def test_a_version_3_store_gets_its_original_rows_fed_through_the_host(tmp_path):
    from paradnn.identity import run_key

    path = tmp_path / "old.sqlite"
    with Store(path) as s:
        import_bundled(s)
        before = s.count()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE results SET input_mode = 'device'")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.close()
    with Store(path) as s:
        assert s.schema_version == 4 and s.count() == before
        rows = s.results()
    assert set(rows["input_mode"]) == {"host"}
    assert all(k == run_key(r) for k, r in zip(rows["run_key"], rows.to_dict("records")))


def measured(label: str, speed: float, **changes: object) -> dict:
    """A row of this machine for an FC label of the original grid."""
    from paradnn.families import parse_label

    return {
        "family": "fc",
        "label": label,
        **parse_label("fc", label).hyperparameters(),
        "dtype": "float32",
        "xla": False,
        "platform": "cpu",
        "state": "ok",
        "examples_per_sec": speed,
        "step_time_s": 64 / speed,
        "software": {"tensorflow": "2.21.0", "keras": "3.15"},
        "platform_fingerprint": "cpu|x|2|2.21.0",
        **changes,
    }


def test_a_comparison_with_a_2019_chip_frees_the_input_mode_and_marks_input_bound_pairs(tmp_path):
    from paradnn.analysis.results import Results

    chip, fed = f"layer_32-node_32-{FC}-bs_64", f"layer_4-node_32-{FC}-bs_64"  # V100: 0.40 and 0.93 of its input ceiling
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        import_bundled(s)
        s.add_results([measured(chip, 2000.0), measured(fed, 9000.0), measured(chip, 1000.0, input_mode="host")])
    results = Results.load(path)
    result = results.matched("platform", "cpu", "v100", family="fc")
    # Both sides have host rows, but a chip here meets a 2019 chip as each was fed: here its fastest mode.
    assert result.sides["input_mode"] == {
        "why": result.sides["input_mode"]["why"],
        "held": False,
        "baseline": ["device"],
        "target": ["host"],
    }
    bounds = result.table.set_index("label")[["baseline_bound", "target_bound"]]
    assert bounds.loc[chip].tolist() == [CHIP, CHIP] and bounds.loc[fed].tolist() == [CHIP, INPUT]
    assert list(result.input_bound()) == [label == fed for label in result.table["label"]]
    assert result.chips_only().table["label"].tolist() == [chip]
    assert result.chips_only().table["baseline"].iloc[0] == 2000.0  # the device-fed row, not the host-fed one
    # The two 2019 platforms were both fed through the host: held, like with like.
    both = results.matched("platform", "v100", "tpu-v2-8", family="fc")
    assert both.sides["input_mode"] == {"why": both.sides["input_mode"]["why"], "held": True, "values": ["host"]}
    assert both.n == 176 and both.input_bound().sum() == 146 and both.chips_only().n == 30


def test_the_chain_caption_says_multiply_only_when_the_numbers_do():
    from paradnn.sections.platform_comparison import chain_words

    def chained(direct: float, n: tuple[int, int, int] = (6, 6, 6)) -> pd.DataFrame:
        legs = [("cpu", "v100", 0.5), ("v100", "tpu-v2-8", 4.0), ("cpu", "tpu-v2-8", direct)]
        return pd.DataFrame(
            [{"baseline": b, "target": t, "n": k, "geomean": g, "chained": True} for (b, t, g), k in zip(legs, n)]
        )

    words = chain_words(chained(2.0), "cpu")
    assert words.startswith("Over those 6 the geometric means multiply: ") and "is 2x; TPU v2-8 over cpu 2x." in words
    assert "do not multiply" in chain_words(chained(1.569), "cpu")
    assert chain_words(chained(2.0, (10, 9, 176)), "cpu") == (
        "The three pairs are not over one common set: their geometric means do not chain."
    )


def test_this_machine_meets_a_2019_chip_with_its_device_resident_rows(tmp_path):
    from paradnn.analysis.results import Results

    chip = f"layer_32-node_32-{FC}-bs_64"
    fed = [f"layer_4-node_32-{FC}-bs_64", f"layer_4-node_128-{FC}-bs_64"]  # host-fed here, on more configurations
    path = tmp_path / "s.sqlite"
    with Store(path) as s:
        import_bundled(s)
        s.add_results([measured(chip, 2000.0), *(measured(label, 9000.0, input_mode="host", infeed_share=0.6) for label in fed)])
    result = Results.load(path).matched("platform", "v100", "cpu", family="fc")
    assert result.table["label"].tolist() == [chip] and result.sides["input_mode"]["target"] == ["device"]
