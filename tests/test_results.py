"""The results object pairs like with like: planted unlike twins are never compared.

Every twin below shares a label with a base row but differs in one part of its run
identity (framework, software stack, input mode, devices, threads, family). No comparison
of another axis may pair it with the base, and no rerun may count it; each comparison
says what it held fixed.
"""

from __future__ import annotations

import pandas as pd
import pytest

from paradnn import settings
from paradnn.analysis.results import Results
from paradnn.config import ConfigError
from paradnn.identity import BASE_IDENTITY, LATER_IDENTITY
from paradnn.store import Store

FC = "layer_1-node_8-input_4-output_2-bs_4"
IMAGE = "image_64-bs_8"  # the label ResNet-50, DenseNet and SqueezeNet all use at this size


def row(label: str = FC, family: str = "fc", speed: float = 100.0, **changes: object) -> dict:
    base = {
        "family": family,
        "label": label,
        "dtype": "float32",
        "xla": False,
        "platform": "cpu",
        "state": "ok",
        "step_time_s": 4 / speed,
        "examples_per_sec": speed,
        "software": {"tensorflow": "2.21.0", "keras": "3.15"},
        "platform_fingerprint": "cpu|x|2|2.21.0",
    }
    if family == "fc":
        base.update(layers=1, nodes=8, input=4, output=2, batch=4)
    else:
        base.update(image=64, batch=8)
    software = changes.pop("software", {})
    return {**base, **changes, "software": {**base["software"], **software}}


BASE = row()
TWINS = {
    "framework": row(framework="jax", xla=True, software={"jax": "0.10"}, speed=300),
    "stack": row(software={"tensorflow": "2.16.2"}, platform_fingerprint="cpu|x|2|2.16.2", speed=400),
    "input": row(input_mode="host", speed=500),
    "devices": row(devices=2, speed=600),
    "threads": row(platform="cpu[threads=1]", platform_fingerprint="cpu[threads=1]|x|2|2.21.0", speed=50),
}
# The twins that differ from BASE in exactly one part of the run identity besides xla; the
# XLA comparison below must pair none of them.
XLA_ON = row(xla=True, speed=200)
BF16 = row(dtype="mixed_bfloat16", speed=150)
WORKLOADS = [row(IMAGE, family, speed) for family, speed in (("resnet50", 10.0), ("densenet", 20.0), ("squeezenet", 30.0))]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Results:
    path = tmp_path_factory.mktemp("twins") / "twins.sqlite"
    with Store(path) as store:
        store.add_results([BASE, XLA_ON, BF16, *TWINS.values(), *WORKLOADS])
    return Results.load(path)


def test_every_planted_twin_is_its_own_run(results):
    assert results.frame["run_key"].is_unique and len(results) == 3 + len(TWINS) + len(WORKLOADS)
    assert results.reruns().empty  # nothing was measured twice: no rerun, however many labels repeat


@pytest.mark.parametrize(
    "vary, baseline, target, speedup",
    [
        ("xla", False, True, 2.0),
        ("dtype", "float32", "mixed_bfloat16", 1.5),
        ("framework", "tensorflow", "jax", 1.5),  # JAX runs with XLA: paired with TensorFlow's XLA-on row, not the base
        ("input", "device", "host", 5.0),
        ("devices", 1, 2, 6.0),
        ("platform", "cpu", "cpu[threads=1]", 0.5),
        ("sw_tensorflow", "2.21.0", "2.16.2", 4.0),
    ],
)
def test_a_comparison_pairs_only_rows_that_differ_in_its_axis(results, vary, baseline, target, speedup):
    result = results.where(family="fc").matched(vary, baseline, target)
    assert result.n == 1 and result.table["speedup"].iloc[0] == pytest.approx(speedup)
    column = settings.BY_NAME[vary].column if vary in settings.BY_NAME else vary
    held = {c for c in settings.identity_columns() if c != column}
    assert held <= set(result.held_fixed)  # says what it held: every other run setting


def test_a_freed_setting_is_held_where_both_sides_have_it(results):
    # JAX always compiles with XLA, so the framework comparison frees XLA; TensorFlow has an XLA-on row,
    # so the pair is held like with like (200 against 300 examples/s), and says so.
    result = results.where(family="fc").matched("framework", "tensorflow", "jax")
    assert result.n == 1 and result.table["speedup"].iloc[0] == pytest.approx(1.5)
    assert result.sides["xla"]["held"] and result.sides["xla"]["values"] == ["True"] and "compiler" in result.sides["xla"]["why"]
    assert result.held_fixed["input_mode"] == "device" and result.held_fixed["devices"] == 1


def test_a_setting_of_the_side_is_freed_where_the_sides_share_no_value(tmp_path):
    # Two platforms swept with automatic XLA: the probe chose XLA off on one and on on the other.
    here = row(platform="cpu", xla=False, xla_auto=1, speed=100)
    forced = row(platform="cpu", xla=True, speed=90)  # forced on, not the platform's choice
    threads = row(platform="cpu[threads=1]", platform_fingerprint="cpu[threads=1]|x|2|2.21.0", xla=True, xla_auto=1, speed=45)
    imported = row(platform="v100", platform_fingerprint="v100", xla=None, speed=1000, source="legacy:gpu_fc.json")
    path = tmp_path / "auto.sqlite"
    with Store(path) as store:
        store.add_results([here, forced, threads, imported])
    results = Results.load(path)
    # Both have XLA on: held there, like with like (90 against 45).
    assert results.matched("platform", "cpu", "cpu[threads=1]").table["speedup"].iloc[0] == pytest.approx(0.5)
    # Without the forced row they share no XLA setting: each at its automatic choice, said so.
    auto = results.where(id=[1, 3]).matched("platform", "cpu", "cpu[threads=1]")
    assert auto.n == 1 and auto.table["speedup"].iloc[0] == pytest.approx(0.45) and auto.free == ("xla",)
    assert auto.sides["xla"] == {
        "why": "each platform at its own XLA setting (its automatic choice where it made one)",
        "held": False,
        "baseline": ["False"],
        "target": ["True"],
    }
    # Against a platform that recorded no XLA setting, the CPU keeps its automatic choice, not the forced row.
    imported_pair = results.matched("platform", "cpu", "v100")
    assert imported_pair.n == 1 and imported_pair.table["speedup"].iloc[0] == pytest.approx(10.0)
    assert imported_pair.sides["xla"]["target"] == ["not recorded"]
    held = results.where(id=[1, 3]).matched("platform", "cpu", "cpu[threads=1]", hold=("xla",))
    assert held.n == 0 and held.why == (
        "xla differs: cpu has False, cpu[threads=1] has True (--free xla lets each side keep its own)"
    )
    assert results.where(id=[1]).matched("platform", "cpu", "v100").why == "no finished rows with platform v100"


def test_a_side_with_several_own_values_keeps_its_faster_one(tmp_path):
    # Each side has one precision the other lacks: the baseline keeps its faster precision.
    rows = [
        row(dtype="float32", speed=100),
        row(dtype="mixed_bfloat16", speed=180),
        row(platform="v100", platform_fingerprint="v100", dtype="mixed_float16", speed=900, source="legacy:gpu_fc.json"),
    ]
    path = tmp_path / "own.sqlite"
    with Store(path) as store:
        store.add_results(rows)
    result = Results.load(path).matched("platform", "cpu", "v100")
    assert result.n == 1 and result.table["speedup"].iloc[0] == pytest.approx(5.0)
    assert result.sides["dtype"]["baseline"] == ["mixed_bfloat16"] and result.sides["dtype"]["target"] == ["mixed_float16"]


def test_the_dominant_run_is_the_one_most_rows_used(results):
    run = results.where(family="fc").dominant_run()
    assert run == {"dtype": "float32", "xla": False, "framework": "tensorflow", "input": "device", "devices": 1}
    assert len(results.where(family="fc").for_run(run)) >= 1


def test_two_families_sharing_a_label_never_pair(results):
    workloads = results.where(label=IMAGE)
    assert len(workloads) == 3
    for vary, a, b in (("xla", False, True), ("dtype", "float32", "mixed_bfloat16"), ("platform", "cpu", "gpu:0")):
        assert workloads.matched(vary, a, b).n == 0
    assert workloads.reruns().empty


def test_for_settings_reads_the_declaration(results):
    default = results.for_settings(**{s.name: s.default for s in settings.stored() if s.name != "xla"})
    assert set(default.frame["label"]) == {FC, IMAGE}
    assert len(default.where(family="fc")) == 3  # base, XLA on, bfloat16: no framework, input, devices or stack twin
    assert len(results.for_settings(input="host")) == 1 and len(results.for_settings(platform="cpu[threads:1]")) == 1
    with pytest.raises(ConfigError, match="input: 'tape' is not valid; allowed: device, host, host-prep"):
        results.for_settings(input="tape")
    with pytest.raises(ConfigError, match="run setting"):
        results.for_settings(colour="red")


def test_reruns_are_the_same_identity_measured_again(tmp_path):
    path = tmp_path / "reruns.sqlite"
    with Store(path) as store:
        store.add_results([BASE, row(speed=110), TWINS["stack"]])  # the second BASE row is a --force rerun
    reruns = Results.load(path).reruns()
    assert list(reruns["n"]) == [2] and reruns["difference"].iloc[0] == pytest.approx(0.1)


def test_newest_stack_keeps_one_tensorflow_per_platform(results):
    newest = results.where(family="fc").newest_stack().frame
    assert "2.16.2" not in set(newest["sw_tensorflow"]) and len(newest) == len(results.where(family="fc")) - 1


def test_identity_is_built_from_the_declaration():
    assert BASE_IDENTITY == ("family", "label", "dtype", "xla", "platform", "platform_fingerprint")
    assert {k: v for k, v in LATER_IDENTITY.items() if k in settings.LEGACY} == {
        "framework": "tensorflow",
        "input_mode": "device",
        "devices": 1,
    }


def test_results_keep_pandas_inside():
    frame = pd.DataFrame([{**BASE, "id": 1, "run_key": "a", "source": "measured"}])
    assert Results(frame).frame is frame and len(Results(frame)) == 1


def _hand_filters(path) -> list[str]:
    """Lines of ``path`` that select rows by a run field by hand: a mask on ``state`` or a run
    setting's column inside a subscript (``df[df["state"] == "ok"]``, ``.loc[...]``), or ``.mode()``."""
    import ast

    fields = {"state", *settings.identity_columns()} - {"platform"}
    tree = ast.parse(path.read_text())
    found = []

    def is_field(node) -> bool:
        return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in fields

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "mode":
            found.append(f"{path.name}:{node.lineno} .mode()")
        if isinstance(node, ast.Subscript):
            for inner in ast.walk(node.slice):
                compared = isinstance(inner, ast.Compare) and any(is_field(x) for x in [inner.left, *inner.comparators])
                call = isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                isin = call and inner.func.attr == "isin" and is_field(inner.func.value)
                legacy = call and inner.func.attr == "startswith" and "legacy" in ast.unparse(inner)  # "my rows" by hand
                if compared or isin or legacy:
                    found.append(f"{path.name}:{inner.lineno} {ast.unparse(inner)[:80]}")
    return sorted(set(found))


def test_no_analysis_or_front_end_module_filters_run_fields_by_hand():
    from pathlib import Path

    import paradnn

    root = Path(paradnn.__file__).parent
    own = {"results.py", "rows.py"}  # the results object itself
    modules = [p for p in (root / "analysis").glob("*.py") if p.name not in own]
    modules += [*(root / "sections").glob("*.py"), *(root / name for name in ("cli.py", "api.py", "reports.py"))]
    found = [line for path in modules for line in _hand_filters(path)]
    assert found == [], "select rows through paradnn.analysis.results.Results:\n" + "\n".join(found)


def test_the_hand_filter_check_finds_what_it_looks_for(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        'ok = df[df["state"] == "ok"]\nx = df.loc[df["dtype"].isin(["float32"]), "label"]\n'
        'd = df["dtype"].mode()\nif record["state"] != "ok":\n    pass\n'
        'm = df[~df["source"].fillna("").str.startswith("legacy")]\n'
    )
    found = _hand_filters(planted)
    assert [f.split()[0] for f in found] == ["planted.py:1", "planted.py:2", "planted.py:3", "planted.py:6"]


def _store(tmp_path, rows: list[dict]) -> Results:
    path = tmp_path / "pool.sqlite"
    with Store(path) as store:
        store.add_results(rows)
    return Results.load(path)


def test_every_measurement_of_one_run_pools_into_one_estimate(tmp_path):
    results = _store(tmp_path, [row(speed=100), row(speed=80), row(speed=90), XLA_ON])
    pooled = results.pooled().frame.set_index("xla")
    assert len(pooled) == 2  # one row per run: the three measurements of BASE, XLA_ON alone
    base = pooled.loc[False]
    assert base["n_measurements"] == 3 and base["examples_per_sec"] == 90.0  # the median, not the latest (90 is neither)
    assert base["step_time_s"] == pytest.approx(4 / 90)
    assert sorted(base["measured_values"]) == pytest.approx(sorted([4 / 100, 4 / 80, 4 / 90]))
    assert base["rerun_spread"] == pytest.approx(100 / 80 - 1)
    assert pooled.loc[True, "n_measurements"] == 1 and pooled.loc[True, "rerun_spread"] == 0.0


def test_a_contended_measurement_is_never_pooled_with_quiet_ones(tmp_path):
    results = _store(tmp_path, [row(speed=100, contended=False), row(speed=50, contended=True), row(speed=98)])
    base = results.pooled().frame.iloc[0]
    assert base["n_measurements"] == 2 and base["examples_per_sec"] == 99.0 and not base["contended"]


def test_a_run_measured_only_under_contention_stands_flagged(tmp_path):
    results = _store(tmp_path, [row(speed=50, contended=True), row(speed=60, contended=True)])
    base = results.pooled().frame.iloc[0]
    assert base["n_measurements"] == 2 and base["examples_per_sec"] == 55.0 and base["contended"]


def test_a_failed_attempt_does_not_displace_a_finished_one_and_a_newer_stack_pools_apart(tmp_path):
    newer = row(speed=200, software={"paradnn": "9.0"})  # same configuration and settings, another run identity
    results = _store(tmp_path, [row(speed=100), row(speed=120), row(state="oom", speed=1)])
    pooled = results.pooled().frame.iloc[0]
    assert pooled["state"] == "ok" and pooled["n_measurements"] == 2 and pooled["examples_per_sec"] == 110.0
    results = _store(tmp_path / "b", [row(speed=100), row(speed=120), newer])
    pooled = results.pooled().frame.iloc[0]
    assert pooled["examples_per_sec"] == 200.0 and pooled["n_measurements"] == 1  # the standing identity's own


def test_only_failed_attempts_stand_as_the_latest_failure(tmp_path):
    results = _store(tmp_path, [row(state="oom", speed=1), row(state="error", speed=1)])
    pooled = results.pooled().frame.iloc[0]
    assert pooled["state"] == "error" and pooled["n_measurements"] == 0


def test_reruns_say_the_pooled_difference_with_the_raw_beside_it(tmp_path):
    results = _store(tmp_path, [row(speed=100), row(speed=90), row(speed=50, contended=True)])
    (rerun,) = results.reruns().to_dict("records")
    assert rerun["n"] == 2 and rerun["difference"] == pytest.approx(100 / 90 - 1)  # the contended one is not pooled
    assert rerun["raw_difference"] == pytest.approx(1.0)


def test_the_contention_line_counts_what_the_rows_say(tmp_path):
    results = _store(
        tmp_path,
        [
            row(speed=100, contended=False, refused_windows=2, steal_cores=0.03),
            row(speed=50, contended=True, refused_windows=2, steal_cores=0.0),
            row(speed=90),
        ],
    )
    assert results.contention_line() == (
        "3 measured rows: 4 timing window(s) refused for contention and timed again; "
        "1 row(s) never had a quiet window (kept apart, flagged contended); steal up to "
        "0.03 cores; 1 row(s) from before contention was read"
    )


def test_a_comparison_of_pooled_rows_still_pairs_round_by_round(tmp_path):
    rounds = {False: [100.0, 50.0, 90.0], True: [200.0, 60.0, 100.0]}  # per round 2.0, 1.2, 1.11
    rows = [
        row(speed=speed, xla=xla, extra={"sweep": "s", "round": r, "position": 0})
        for xla, speeds in rounds.items()
        for r, speed in enumerate(speeds, start=1)
    ]
    results = _store(tmp_path, rows)
    raw = results.matched("xla", False, True)
    pooled = results.pooled().matched("xla", False, True)  # as a report reads it: one row per run
    for result in (raw, pooled):
        (pair,) = result.table.to_dict("records")
        assert pair["rounds"] == 3 and pair["speedup"] == pytest.approx(1.2)


def test_stacks_measured_side_by_side_still_pair_after_a_later_sweep_measured_one_of_them(tmp_path):
    old = {"software": {"tensorflow": "2.16.2"}, "platform_fingerprint": "cpu|x|2|2.16.2"}
    labels = [FC, "layer_1-node_16-input_4-output_2-bs_4"]
    rows = [
        row(label, speed=speed, extra={"sweep": "stacks", "round": r}, **changes)
        for label in labels
        for r in (1, 2, 3)
        for changes, speed in ((old, 100.0), ({}, 150.0))
    ]
    rows += [row(label, speed=160.0, extra={"sweep": "later", "round": 1}) for label in labels]  # the current stack again
    results = _store(tmp_path, rows).pooled(per_stack=True)
    pairs = results.side_by_side("sw_tensorflow").matched("sw_tensorflow", "2.16.2", "2.21.0", within=("sweep",))
    assert pairs.n == 2 and set(pairs.table["sweep"]) == {"stacks"} and pairs.table["rounds"].eq(3).all()
    assert pairs.median == pytest.approx(1.5)


def test_a_subset_keeps_the_xla_choices_and_refuses_what_is_not_a_frame(results):
    kept = results.subset(results.frame.head(2))
    assert len(kept) == 2 and kept.xla_choices == results.xla_choices
    with pytest.raises(ConfigError, match="kept: 123 is not valid; allowed: a DataFrame"):
        results.subset(123)
