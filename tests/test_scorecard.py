"""Dai & Berleant's tables as shipped: complete, as printed, and platforms placed by class."""

from __future__ import annotations

import pytest

from paradnn.analysis import scorecard
from paradnn.analysis.results import Results


def test_the_version_followed_has_7_principles_12_hardware_and_7_framework_metrics_over_16_frameworks():
    assert len(scorecard.principles()) == 7
    table = scorecard.hardware_table()
    assert table.shape == (12, 4) and list(table.columns) == ["ASICs", "FPGAs", "GPUs", "favourable"]
    frameworks = scorecard.framework_table()
    assert frameworks.shape == (16, 7)
    assert "7 principles, 12 hardware metrics, 7 framework metrics, 16 frameworks" in scorecard.paper()["source"]["version"]


def test_every_cell_is_filled_with_a_printed_rating():
    table = scorecard.hardware_table()
    assert set(table[["ASICs", "FPGAs", "GPUs"]].to_numpy().ravel()) == {"High", "Moderate", "Low", "Good"}
    assert set(table["favourable"]) == {"High", "Low"}
    assert (scorecard.framework_table() != "").all().all()
    assert table.loc["Energy efficiency", "GPUs"] == "Good"  # as printed, though the text ranks GPUs third
    assert scorecard.framework_table().loc["TensorFlow", "Hardware Devices"] == "CPU/GPU /TPU/Mobile"


@pytest.mark.parametrize(
    "platform,kind",
    [
        ("tpu-v2-8", "ASICs"),
        ("v100", "GPUs"),
        ("gpu:0", "GPUs"),
        ("cpu", scorecard.CPU_CLASS),
        ("cpu[threads=1]", scorecard.CPU_CLASS),
    ],
)
def test_platforms_are_placed_by_class(platform, kind):
    assert scorecard.device_class(platform) == kind


def test_a_platform_gets_its_class_ratings_and_a_cpu_none():
    placed = scorecard.platforms_by_class(["tpu-v2-8", "cpu"])
    assert placed.loc["tpu-v2-8", "Computing Performance"] == "High" and placed.loc["tpu-v2-8", "class"] == "ASICs"
    assert placed.loc["cpu", "Computing Performance"] == ""


def test_the_principle_audit_reads_numbers_from_the_store():
    import pandas as pd

    rows = pd.DataFrame(
        [
            {
                "family": "fc",
                "label": "a",
                "platform": "cpu",
                "dtype": "float32",
                "xla": True,
                "state": "ok",
                "params": 1e4,
                "step_time_s": 1.0,
                "step_time_cv": 0.02,
                "wall_time_s": 1800.0,
                "source": None,
            },
            {
                "family": "fc",
                "label": "a",
                "platform": "cpu",
                "dtype": "float32",
                "xla": True,
                "state": "ok",
                "params": 1e4,
                "step_time_s": 1.1,
                "step_time_cv": 0.04,
                "wall_time_s": 1800.0,
                "source": None,
            },
            {
                "family": "fc",
                "label": "b",
                "platform": "tpu-v2-8",
                "dtype": "mixed_bfloat16",
                "xla": True,
                "state": "ok",
                "params": 1e9,
                "step_time_s": 0.1,
                "source": "legacy:tpu_fc.json",
            },
        ]
    )
    for column in scorecard.PROVENANCE:
        rows[column] = ["x", None, "x"]
    audit = scorecard.principles_audit(rows)
    assert list(audit.index) == [
        "relevance",
        "representativeness",
        "equity",
        "repeatability",
        "cost-effectiveness",
        "scalability",
        "transparency",
    ]
    assert audit["rule"].str.len().min() > 20  # every principle states its rule
    repeat = audit.loc["repeatability", "this store"]
    # Rows a and a share a label but not their software stack (one lacks provenance): not a rerun, and
    # a store in which nothing was measured twice does not pass repeatability.
    assert repeat == "CV 3.0% (2 rows); no reruns (no run identity measured twice)"
    assert audit.loc["repeatability", "pass"] is None and audit.loc["repeatability", "outcome"] == "inconclusive"
    same_stack = rows.assign(**{c: "x" for c in scorecard.PROVENANCE})
    again = scorecard.principles_audit(same_stack).loc["repeatability"]
    assert again["this store"] == (
        "CV 3.0% (2 rows); rerun difference 10.0% over the measurements pooled (1 run "
        "identities measured more than once); 10.0% over every measurement, contended ones "
        "included"
    )
    assert again["pass"] is None  # one rerun is too few to judge (at least 3), whatever its difference
    assert again["record"].rule.min_n == 3 and again["record"].effect == pytest.approx(0.1)
    scalability = "2 configurations per hour; 1 platform(s): cpu; framework(s): tensorflow; 0 data-parallel rows; 1 machine(s)"
    assert audit.loc["scalability", "this store"] == scalability and audit.loc["scalability", "pass"] is False
    assert audit.loc["transparency", "this store"] == "50% of 2 rows" and audit.loc["transparency", "pass"] is False
    # no row reports throughput or utilisation (imported rows excluded): the accepted metrics are missing
    assert audit.loc["representativeness", "pass"] is False
    assert audit.loc["representativeness", "this store"] == (
        "0 of 2 rows report all three (none reports throughput (examples/s), FLOPS utilisation (% of peak))"
    )
    assert audit.loc["relevance", "pass"] is False  # no real workload
    assert audit.loc["cost-effectiveness", "pass"] is False  # half an hour per configuration
    assert audit.loc["equity", "pass"] is True  # one measured platform: one dtype set, XLA recorded
    assert "✗" in set(scorecard.checklist(audit)[""]) and "✓" in set(scorecard.checklist(audit)[""])


def test_every_principle_can_pass():
    import pandas as pd

    rows = pd.DataFrame(
        [
            {
                "family": family,
                "label": label,
                "platform": platform,
                "dtype": "float32",
                "xla": False,
                "state": "ok",
                "params": params,
                "step_time_s": step,
                "examples_per_sec": 64 / step,
                "utilization": 0.3,
                "step_time_cv": 0.01,
                "wall_time_s": 3.0,
                "source": "measured",
                "devices": 1,
                **{c: "x" for c in scorecard.PROVENANCE},
                "host": host,
            }
            for family, label, params in (("fc", "small", 1e4), ("resnet50", "image_32-bs_2", 2.5e7))
            for platform, host in (("cpu", "vm-1"), ("xeon-lab", "lab-2"))
            for step in (1.0, 1.02)
        ]
    )
    audit = scorecard.principles_audit(rows)
    assert audit["pass"].tolist() == [True] * 7, audit[["this store", "pass"]]


def test_every_platform_gets_all_12_hardware_metrics_each_with_a_source(tmp_path):
    from paradnn.store import Store, legacy

    with Store(tmp_path / "r.sqlite") as store:
        legacy.import_bundled(store)
        table = scorecard.hardware_metrics(store.results(), store.platforms())
    assert len(table) == 2 * 12 and set(table["platform"]) == {"tpu-v2-8", "v100"}
    assert (table["source"] != "").all()
    tpu = table[table["platform"] == "tpu-v2-8"].set_index("metric")
    assert tpu.loc["Computing Performance", "value"].startswith(
        "mixed_bfloat16 peak 1.8e+14 FLOP/s (datasheet:tpu-v2-8); utilisation fc median"
    )
    assert tpu.loc["Compatibility", "value"] == "ran fc (mixed_bfloat16) under tensorflow; did not finish: 220 oom"
    assert tpu.loc["Compatibility", "short"] == "1 families, 220 failed"
    assert tpu.loc["Energy efficiency", "short"] == "not measurable"
    assert tpu.loc["Chip Price", "evidence"] == "paper's class rating" and tpu.loc["Chip Price", "short"] == "Low"
    assert set(table["evidence"]) <= set(scorecard.EVIDENCE)
    assert tpu.loc["Low Latency", "value"].startswith("fc batch 64:")
    assert tpu.loc["Energy efficiency", "source"] == "not measurable here"
    assert tpu.loc["Computing Performance", "paper rating of class"] == "High"
    v100 = table[table["platform"] == "v100"].set_index("metric")
    assert v100.loc["Die Size", "value"].startswith("815 mm²") and v100.loc["Die Size", "source"].startswith("datasheet:")
    assert tpu.loc["Scalability", "value"].startswith("not measured: no data-parallel rows of this platform")


def test_scalability_needs_replicas_or_two_machines_not_a_thread_limit():
    import pandas as pd

    row = {
        "family": "fc",
        "state": "ok",
        "step_time_s": 0.2,
        "wall_time_s": 1.0,
        "source": "measured",
        "framework": None,
        "device_name": "AMD EPYC 9B14",
        "host": "vm-1",
    }
    one_machine = pd.DataFrame(
        [
            {**row, "platform": "cpu", "platform_fingerprint": "cpu|AMD_EPYC_9B14|2|2.21.0"},
            {**row, "platform": "cpu[threads=1]", "platform_fingerprint": "cpu_threads=1_|AMD_EPYC_9B14|1|2.21.0"},
        ]
    )
    value, part = scorecard._scalability(one_machine)
    assert part.outcome == "does not hold" and "2 platform(s)" in value and "1 machine(s)" in value
    two_machines = pd.concat([one_machine, one_machine.head(1).assign(host="lab-2", platform="xeon-lab")])
    assert scorecard._scalability(two_machines)[1].outcome == "holds"
    replicated = one_machine.head(1).assign(devices=2)
    assert scorecard._scalability(replicated)[1].outcome == "holds"


def test_scalability_is_measured_from_data_parallel_rows():
    import pandas as pd

    row = {"platform": "cpu", "family": "fc", "state": "ok", "step_time_s": 0.2, "batch": 64}
    rows = pd.DataFrame(
        [
            {**row, "devices": 1, "scaling_efficiency": None, "comm_share": None},
            {**row, "devices": 2, "scaling_efficiency": 0.4, "comm_share": 0.6},
            {**row, "devices": 2, "scaling_efficiency": 0.8, "comm_share": 0.2},
        ]
    )
    value, source = scorecard._hardware_cell("Scalability", "cpu", Results(rows), pd.DataFrame())
    assert source == "measured"
    assert value == "weak-scaling efficiency median 60%, best 80%; communication 40% of the step (2 rows on 2 replicas)"
    assert scorecard._short("Scalability", Results(rows)) == "60% eff. on 2"


def test_the_framework_that_measured_the_store_gets_a_row_from_facts():
    import pandas as pd

    rows = pd.DataFrame(
        [
            {
                "family": "fc",
                "platform": "cpu",
                "state": "ok",
                "sw_tensorflow": "2.21.0",
                "sw_keras": "3.15.1",
                "framework": "tensorflow",
                "sw_jax": None,
                "source": "measured",
            },
            {
                "family": "cnn",
                "platform": "cpu",
                "state": "ok",
                "sw_tensorflow": "2.21.0",
                "sw_keras": "3.15.1",
                "framework": "jax",
                "sw_jax": "0.10.2",
                "source": "measured",
            },
            {
                "family": "fc",
                "platform": "v100",
                "state": "ok",
                "sw_tensorflow": None,
                "sw_keras": None,
                "framework": "tensorflow",
                "sw_jax": None,
                "source": "legacy:gpu_fc.json",
            },
        ]
    )
    table = scorecard.framework_rows(rows)
    assert list(table.columns) == scorecard.paper()["framework_metrics"]
    row = table.loc["TensorFlow 2.21.0 (Keras 3.15.1), measured here"]
    assert row["Hardware Devices"] == "cpu (ran here)" and row["Tested Networks"] == "fc"  # the V100 row is imported
    assert "Apache" in row["License Type"]  # from the installed package's metadata
    jax = table.loc["JAX 0.10.2 (Keras 3.15.1), measured here"]
    assert jax["Tested Networks"] == "cnn" and "Apache" in jax["License Type"]
    assert "(installed jax, jaxlib)" in jax["Core Codes"] and "native libraries" in row["Core Codes"]  # from the files
    assert scorecard.framework_rows(rows.iloc[2:]).empty  # imported rows are not this machine's frameworks
    both = scorecard.framework_table_with_measured(rows)
    assert len(both) == 16 + 2 and list(both["source"]).count("measured here") == 2


def _pair(label: str, framework: str, examples: float, **extra) -> dict:
    return {
        "family": "fc",
        "label": label,
        "platform": "cpu",
        "dtype": "float32",
        "state": "ok",
        "framework": framework,
        "examples_per_sec": examples,
        "compile_time_s": 1.0,
        "source": "measured",
        "xla_auto": None,
        "xla": True,
        **extra,
    }


def test_framework_speed_pairs_identical_models_on_one_platform():
    import pandas as pd

    rows = pd.DataFrame(
        [
            _pair("a", "tensorflow", 100),
            _pair("a", "jax", 200),
            _pair("b", "tensorflow", 100),
            _pair("b", "jax", 50),
            _pair("c", "jax", 10),
        ]
    )
    speed = scorecard.framework_speed(rows)
    assert len(speed) == 1 and speed.loc[0, "n"] == 2  # "c" ran under JAX only
    assert speed.loc[0, "geomean"] == pytest.approx(1.0) and speed.loc[0, "min"] == 0.5 and speed.loc[0, "max"] == 2.0
    assert (speed.loc[0, "target"], speed.loc[0, "mode"]) == ("jax", "compiled")
    verdict = [v for v in scorecard.claims(rows) if v.observation.startswith("Keras")][0]
    # 2x and 0.5x: a geometric mean of 1.00 on two configurations is no evidence of one speed
    assert verdict.verdict == "inconclusive" and verdict.effect == pytest.approx(1.0) and verdict.n == 2
    close = pd.DataFrame(
        [
            _pair(label, fw, 100 * (1 + 0.01 * i) if fw == "jax" else 100)
            for i, label in enumerate("abcdef")
            for fw in ("tensorflow", "jax")
        ]
    )
    verdict = [v for v in scorecard.claims(close) if v.observation.startswith("Keras")][0]
    assert verdict.verdict == "holds" and 1.0 <= verdict.interval[0] <= verdict.interval[1] <= 1.1
    assert "within 1 ± 0.1" in verdict.sentence


def test_framework_speed_compares_compiled_with_compiled_and_eager_with_eager():
    import pandas as pd

    rows = pd.DataFrame(
        [
            _pair("a", "tensorflow", 100, xla=True),
            _pair("a", "tensorflow", 10, xla=False),
            _pair("a", "jax", 150, xla=True),
            _pair("a", "torch", 120, xla=True),
            _pair("a", "torch", 20, xla=False),
        ]
    )
    speed = scorecard.framework_speed(rows).set_index(["target", "mode"])["geomean"]
    assert speed.to_dict() == pytest.approx({("jax", "compiled"): 1.5, ("torch", "compiled"): 1.2, ("torch", "eager"): 2.0})
    # TensorFlow measured only without XLA: JAX (always compiled) has nothing like with like to meet.
    assert scorecard.framework_speed(rows[rows["framework"] != "torch"].iloc[1:]).empty
    verdicts = [v for v in scorecard.claims(rows) if v.observation.startswith("Keras")]
    assert len(verdicts) == 3 and any(
        "PyTorch through Keras 3 trains fc against TensorFlow, both uncompiled" in v.evidence for v in verdicts
    )
    assert all(v.verdict == "inconclusive" and v.n == 1 for v in verdicts)  # one configuration decides nothing


def test_the_framework_bars_draw_one_configuration_whose_geomean_misses_it_by_a_rounding():
    import pandas as pd

    from paradnn.analysis import plots

    rows = pd.DataFrame([_pair("a", "tensorflow", 101), _pair("a", "jax", 7)])  # 7/101: exp(log(r)) != r
    speed = scorecard.framework_speed(rows)
    assert speed.loc[0, "n"] == 1 and not speed.loc[0, "min"] <= speed.loc[0, "geomean"] <= speed.loc[0, "max"]
    fig = plots.framework_speed_bars(speed, "JAX / TensorFlow")  # raised ValueError: negative yerr
    assert fig.axes[0].get_title() == "JAX / TensorFlow"


def test_the_headline_hardware_claims_are_judged_on_the_original_sweeps(tmp_path):
    from paradnn.store import Store, legacy

    with Store(tmp_path / "r.sqlite") as store:
        legacy.import_bundled(store)
    verdicts = {v.observation: v for v in scorecard.claims(Results.load(tmp_path / "r.sqlite"))}
    performance = verdicts["ASICs lead in computing performance"]
    # Of the 176 configurations both finished, the 30 where neither chip waited on its input (tests/test_bounds.py):
    # deep and wide models at small batches, where the V100 is the faster chip.
    assert performance.numbers["n"] == 30 and performance.numbers["median"] == pytest.approx(0.35, abs=0.005)
    assert performance.verdict == "does not hold" and performance.interval[1] < 1
    assert "where neither waited on its input" in performance.evidence
    assert performance.held_fixed["free"] == ["dtype", "xla"]
    latency = verdicts["ASICs have the lower latency"]
    assert latency.numbers["batch"] == 64 and latency.rule.threshold == 1.0
    assert latency.verdict == latency.rule.judge(latency.effect, latency.interval, latency.n)
    assert verdicts["ASICs lead in energy efficiency"].verdict == "inconclusive"
    assert verdicts["ASICs scale out best"].verdict == "inconclusive"
    assert "Keras runs the same models on several backends at one speed" not in verdicts  # no framework pairs


def test_the_scorecard_command_gives_seven_principles_that_can_fail(tmp_path):
    import json

    from click.testing import CliRunner

    from paradnn.cli import main
    from paradnn.store import Store, legacy

    path = tmp_path / "r.sqlite"
    with Store(path) as store:
        legacy.import_bundled(store)
    result = CliRunner().invoke(main, ["scorecard", "--store", str(path), "--json"])
    assert result.exit_code == 0, result.output
    card = json.loads(result.output)
    names = [p["name"] for p in card["principles"]]
    assert names == [
        "relevance",
        "representativeness",
        "equity",
        "repeatability",
        "cost-effectiveness",
        "scalability",
        "transparency",
    ]
    assert all(p["rule"] and p["pass"] in (True, False, None) for p in card["principles"])
    repeatability = card["principles"][3]
    assert repeatability["pass"] is None and "no reruns" in repeatability["value"]  # nothing measured twice: inconclusive
    assert repeatability["record"]["outcome"] == "inconclusive"
    assert {h["platform"] for h in card["hardware"]} == {"tpu-v2-8", "v100"} and len(card["hardware"]) == 24
    missing = CliRunner().invoke(main, ["scorecard", "--store", str(tmp_path / "none.sqlite")])
    assert missing.exit_code == 2 and missing.output.startswith("paradnn: error:")
