"""The hostile tester's cases (issue 28): bounds, one error path everywhere, confined pipelines.

Every front end turns bad input into one line on stderr and exit status 2, with no
traceback and nothing written. Most cases are generated (Hypothesis, bounded so the whole
module runs in well under a minute on 2 cores); the rest are the issue's examples as
written. Everything runs in-process through ``click.testing.CliRunner`` except where a
separate process is the point.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import shutil
import sqlite3
import string
import threading
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paradnn
from paradnn import families
from paradnn.cli import main
from paradnn.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]

BOUNDED = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
ANALYTIC = ("fc", "cnn", "rnn", "transformer")  # families counted without TensorFlow: describe stays instant


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=True)


def one_line_or_success(result, allowed=(0, 2)) -> None:
    """Exit 0, or exit 2 with exactly one line on stderr; never a traceback (an exception escaping)."""
    assert not (result.exception and not isinstance(result.exception, SystemExit)), repr(result.exception)
    assert result.exit_code in allowed, (result.exit_code, result.output)
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("paradnn: error:"), result.stderr
        assert "Traceback" not in result.output


def one_line(result, needle: str = "") -> None:
    one_line_or_success(result, allowed=(2,))
    assert needle in result.stderr, result.stderr


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A small store: the original study's V100 sweep (270 rows)."""
    from paradnn.store.legacy import bundled_dir

    path = tmp_path_factory.mktemp("store") / "s.sqlite"
    result = cli("import-legacy", str(bundled_dir() / "gpu_fc.json"), "--store", str(path))
    assert result.exit_code == 0, result.output
    return path


# ------------------------------------------------------------------ 1. values without bounds

NUMBERS = st.one_of(
    st.integers(-5, 2**40),
    st.sampled_from([0, 1, 2**31 - 1, 2**31, 2**63]),
    st.text(string.digits + ".-e", min_size=1, max_size=12),
)


@BOUNDED
@given(family=st.sampled_from(ANALYTIC), data=st.data())
def test_generated_labels_are_described_or_refused_in_one_line(family, data):
    """A label within the axes' declared maxima is counted analytically; any other is one line (issue: MemoryError, int32)."""
    fam = families.get(family)
    parts = [f"{a.key}_{data.draw(NUMBERS)}" for a in fam.axes if a.numeric]
    parts += [data.draw(st.sampled_from(a.choices + ("dense", ""))) for a in fam.axes if not a.numeric]
    result = cli("describe", family, "-".join(parts), "--memory-budget", "0.001", "--json")
    one_line_or_success(result)
    if result.exit_code == 0:
        assert json.loads(result.stdout)["memory_estimate_bytes"] > 0


def test_every_axis_declares_a_maximum_its_grids_respect():
    for fam in families.all_families():
        for a in fam.axes:
            if a.numeric:
                assert a.maximum < 2**31
                with pytest.raises(ConfigError, match=f"up to {int(a.maximum):,}" if a.kind is int else "up to"):
                    a.check(a.kind(a.maximum * 2))


HUGE = "2147483647"


@pytest.mark.parametrize(
    "label",
    ["layer_2147483647-node_16-input_32-output_8-bs_16", f"layer_{HUGE}-node_{HUGE}-input_{HUGE}-output_{HUGE}-bs_{HUGE}"],
)
def test_the_issues_huge_fc_labels_are_refused_before_counting(label, store):
    one_line(cli("describe", "fc", label), "layers")
    one_line(cli("predict", "--store", str(store), "--platform", "v100", "--family", "fc", label), "layers")


def test_the_issues_rnn_length_is_refused_before_tensorflow():
    one_line(cli("describe", "rnn", "layer_1-maxlength_2147483647-vocab_5-embedding_5-bs_5-lstm"), "maxlength")


@BOUNDED
@given(
    axis=st.sampled_from(["layers", "nodes", "batch", "input", "nosuch"]),
    values=st.text(string.digits + ",.-abcx ", min_size=1, max_size=24),
)
def test_generated_set_values_are_one_line_and_create_no_store(axis, values, tmp_path, monkeypatch):
    """``sweep --set``: a bad value is one line; a good grid reaches the next check (no --address) without a store."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    target = tmp_path / "never.sqlite"
    result = cli("sweep", "fc", "--set", f"{axis}={values}", "--store", str(target), "--backend", "ray")
    one_line(result)
    assert not target.exists()


@BOUNDED
@given(
    overrides=st.one_of(
        st.text(max_size=5),
        st.integers(),
        st.dictionaries(
            st.sampled_from(["layers", "batch", "cell"]),
            st.one_of(
                st.text(max_size=4),
                st.integers(-3, 2**33),
                st.lists(st.one_of(st.integers(-3, 2**33), st.text(max_size=3), st.floats()), max_size=3),
            ),
            max_size=2,
        ),
    )
)
def test_generated_api_overrides_expand_or_raise_config_error(overrides):
    """``overrides={"layers": "abc"}`` no longer iterates the characters: a grid, or ConfigError."""
    from paradnn.space import expand

    try:
        configs = expand("fc", "smoke", overrides)
    except ConfigError:
        return
    assert configs and all(isinstance(c.layers, int) for c in configs)


def test_the_api_refuses_a_negative_budget_before_creating_a_store(tmp_path):
    target = tmp_path / "api.sqlite"
    for kwargs in (
        {"max_minutes": -1},
        {"max_minutes": float("nan")},
        {"overrides": {"layers": "abc"}},
        {"max_seconds": float("inf")},
    ):
        with pytest.raises(ConfigError):
            paradnn.sweep("fc", store=target, progress=False, **kwargs)
    assert not target.exists()


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"timeout_s": 0}, "--timeout: 0 is not valid; allowed: a positive number"),
        ({"memory_gb": -2}, "--memory-budget: -2 is not valid"),
        ({"backend": "ray"}, "--address: '(none)' is not valid"),
        ({"backend": "slurm"}, "--backend: 'slurm' is not valid; allowed: local, ray"),
        ({"budget": 10, "workers": 2}, "--workers: 2 is not valid; allowed: 1 with --adaptive"),
        ({"budget": "soon"}, "budget"),
    ],
)
def test_the_api_takes_the_command_lines_sweep_options_and_refuses_them_alike(tmp_path, kwargs, needle):
    """One sweep request for both front ends: the API's keywords are the command line's options, checked
    by the same code before a store is created."""
    target = tmp_path / "api.sqlite"
    with pytest.raises(ConfigError) as refused:
        paradnn.sweep("fc", store=target, progress=False, **kwargs)
    assert needle in str(refused.value)
    assert not target.exists()


def test_more_threads_than_cores_is_one_line():
    one_line(cli("measure", "fc", "layer_1-node_2-input_3-output_4-bs_5", "--platform", "cpu[threads=999999]"), "cores")
    one_line(cli("platform", "--platform", "cpu[threads=999999]"), "cores")


@pytest.mark.parametrize("seed", ["-1", "4294967296", "1e3"])
def test_predict_seed_is_bounded(seed, store):
    one_line(cli("predict", "--store", str(store), "--platform", "v100", "--family", "fc", "--cv", "3", "--seed", seed), "seed")


# ------------------------------------------------------------------ 2. one error path everywhere


@BOUNDED
@given(
    name=st.sampled_from(["budget_minutes", "max_seconds", "seed", "folds", "fill_fraction", "families", "nosuch"]),
    value=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-10, 10**12),
        st.sampled_from([".nan", "-.inf", "-5", "0", "abc", "[fc]", "{a: 1}", "1e309"]),
    ),
)
def test_generated_report_parameters_are_checked_before_anything_runs(name, value):
    """``report -p``: a bad value is one line naming it; a good one gets as far as --outputs (here unwritable)."""
    text = value if isinstance(value, str) else repr(value).replace("inf", ".inf").replace("nan", ".nan")
    result = cli("report", "smoke", "-p", f"{name}={text}", "--outputs", "/dev/null")
    one_line(result)
    assert "--outputs" in result.stderr or name in result.stderr


def test_the_issues_report_parameters(tmp_path):
    for value in (".nan", "-5", ".inf", "0"):
        one_line(cli("report", "smoke", "-p", f"budget_minutes={value}", "--outputs", str(tmp_path)), "budget_minutes")
    one_line(cli("report", "smoke", "-p", "project_to=h101", "--outputs", str(tmp_path)), "-p project_to: 'h101'")
    one_line(cli("report", "smoke", "-p", "projection_count=-1", "--outputs", str(tmp_path)), "-p projection_count")
    assert not any(tmp_path.iterdir())


def damage(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(data)


@BOUNDED
@given(
    page=st.integers(1, 40),
    noise=st.binary(min_size=16, max_size=4096),
    command=st.sampled_from(["results", "compare", "predict", "import"]),
)
def test_generated_damaged_stores_are_one_line_and_unchanged(store, tmp_path_factory, page, noise, command):
    damaged = tmp_path_factory.mktemp("damaged") / "d.sqlite"
    shutil.copy(store, damaged)
    damage(damaged, page * 4096, noise)
    before = digest(damaged)
    args = {
        "results": ["results"],
        "compare": ["compare", "--baseline", "v100", "--target", "cpu"],
        "predict": ["predict", "--platform", "tpu-v3", "--family", "fc", "--cv", "3"],  # reads the store, fits nothing
        "import": ["import-legacy", "nosuch.json"],
    }[command]
    result = cli(*args, "--store", str(damaged))
    one_line_or_success(result)
    if command != "import" or result.exit_code == 2:
        assert digest(damaged) == before


@pytest.mark.parametrize("version", ["abc", None, "", "-1"])
def test_a_bad_schema_version_is_one_line_and_nothing_is_migrated(store, tmp_path, version):
    copy = tmp_path / "v.sqlite"
    shutil.copy(store, copy)
    with sqlite3.connect(copy) as conn:
        if version is None:
            conn.execute("DELETE FROM meta WHERE key = 'schema_version'")
        else:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    conn.close()
    before = digest(copy)
    one_line(cli("results", "--store", str(copy)), "schema version")
    one_line(cli("sweep", "fc", "--store", str(copy), "--max-minutes", "0.01"), "schema version")
    assert digest(copy) == before


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "parquet"])
@pytest.mark.parametrize("where", ["/dev/full", "missing/x.out"])
def test_results_to_an_unwritable_output_is_one_line(store, tmp_path, fmt, where):
    target = where if where.startswith("/") else str(tmp_path / where)
    one_line(cli("results", "--store", str(store), "--format", fmt, "--output", target), "--output")


def test_predict_options_are_checked_before_the_model_is_fitted(store, tmp_path):
    base = ["predict", "--store", str(store), "--platform", "v100", "--family", "fc"]
    one_line(cli(*base, "--replay", ""), "--replay")
    one_line(cli(*base, "--replay", "1.5"), "--replay")
    one_line(cli(*base, "--cv", "3", "--replay", "0.1"), "one of them")
    one_line(cli(*base, "nonsense-label"), "label")
    binary = tmp_path / "labels.bin"
    binary.write_bytes(bytes(range(256)))
    one_line(cli(*base, "--labels-file", str(binary)), "--labels-file")
    one_line(cli(*base, "--labels-file", str(tmp_path / "missing.txt")), "labels-file")


def test_folds_and_replay_fractions_say_what_the_store_allows():
    from paradnn.analysis.predict import check_folds, check_fractions

    with pytest.raises(ConfigError, match="12 measured configurations leave no training fold"):
        check_folds(2, 12)  # the issue: "--cv 2 on 12 rows says 6 measured configurations"
    check_folds(2, 24)  # each training fold keeps 12
    with pytest.raises(ConfigError, match="from 13 to 13 "):
        check_folds(2, 13)  # 13 rows: only leave-one-out keeps 12 in every training fold
    with pytest.raises(ConfigError, match="fewer than 20"):
        check_fractions([0.99], 20)
    with pytest.raises(ConfigError):
        check_fractions([], 100)


def test_import_legacy_of_a_missing_or_bad_file_writes_no_store(tmp_path):
    target = tmp_path / "legacy.sqlite"
    one_line(cli("import-legacy", str(tmp_path / "nosuch.json"), "--store", str(target)), "does not exist")
    huge = tmp_path / "gpu_fc.json"
    huge.write_text(json.dumps({"layer_2147483647-node_16-input_32-output_8-bs_16": [1.0]}))
    one_line(cli("import-legacy", str(huge), "--store", str(target)))
    assert not target.exists()


# ------------------------------------------------------------------ 4. pipelines stay where they are put

NOTEBOOK = "notebooks/scorecard.ipynb"
HOSTILE_TEXT = st.one_of(
    st.sampled_from(
        [
            "../../../elsewhere",
            "/tmp/x",
            "..",
            ".",
            "a/b",
            "ok",
            "",
            "results.sqlite",
            "../x.sqlite",
            "/etc/passwd",
            "../../x.ipynb",
            NOTEBOOK,
        ]
    ),
    st.text(string.ascii_letters + "./_-", max_size=12),
    st.integers(),
    st.none(),
)


@BOUNDED
@given(
    name=HOSTILE_TEXT,
    store_name=HOSTILE_TEXT,
    notebooks=st.one_of(
        st.lists(st.one_of(HOSTILE_TEXT, st.fixed_dictionaries({"notebook": HOSTILE_TEXT})), max_size=3), HOSTILE_TEXT
    ),
)
def test_generated_pipeline_files_are_confined_or_refused(tmp_path_factory, name, store_name, notebooks):
    from paradnn.reports import load_pipeline, outputs_folder

    folder = tmp_path_factory.mktemp("pipelines")
    outputs = folder / "outputs"
    spec = {k: v for k, v in (("name", name), ("store", store_name), ("notebooks", notebooks)) if v is not None}
    path = folder / "p.yaml"
    path.write_text(yaml.safe_dump(spec))
    one_line(cli("report", str(path), "--outputs", "/dev/null"))  # valid or not, nothing runs: one line
    try:
        pipeline = load_pipeline(str(path))
        out = outputs_folder(outputs, pipeline)
    except ConfigError as exc:
        assert "root:" not in str(exc)  # a file's content is never echoed
        return
    assert out.is_relative_to(outputs.resolve()) and (out / pipeline.store).resolve().is_relative_to(out)
    assert len({e["output"] for e in pipeline.notebooks}) == len(pipeline.notebooks)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("name: ../../../elsewhere\nnotebooks: [{notebook: notebooks/scorecard.ipynb}]\n", "name"),
        ("store: ../../x.sqlite\nnotebooks: [{notebook: notebooks/scorecard.ipynb}]\n", "store"),
        ("store: /tmp/x.sqlite\nnotebooks: [{notebook: notebooks/scorecard.ipynb}]\n", "store"),
        ("notebooks: [{notebook: /etc/passwd}]\n", "notebook"),
        ("notebooks: [{notebook: ../../x.ipynb}]\n", "notebook"),
        ("notebooks: [5]\n", "notebooks"),
        ("notebooks: [{notebook: notebooks/scorecard.ipynb}, {notebook: notebooks/scorecard.ipynb}]\n", "output"),
        ("notebooks: [{notebook: bare.ipynb}]\n", "kernel metadata"),
    ],
)
def test_the_issues_pipeline_files(tmp_path, text, needle):
    (tmp_path / "bare.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    path = tmp_path / "p.yaml"
    path.write_text(text)
    result = cli("report", str(path), "--outputs", str(tmp_path / "out"))
    one_line(result, needle)
    assert "root:" not in result.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "elsewhere").exists()


def test_relative_notebooks_resolve_against_the_pipeline_file_and_repeats_take_their_own_names(tmp_path):
    from paradnn.reports import ROOT, load_pipeline

    shutil.copy(ROOT / NOTEBOOK, tmp_path / "mine.ipynb")
    path = tmp_path / "p.yaml"
    path.write_text(
        f"notebooks:\n  - notebook: mine.ipynb\n  - notebook: {NOTEBOOK}\n  - notebook: {NOTEBOOK}\n    output: scorecard-again\n"
    )
    pipeline = load_pipeline(str(path))
    assert [e["source"] for e in pipeline.notebooks] == [tmp_path / "mine.ipynb", ROOT / NOTEBOOK, ROOT / NOTEBOOK]
    assert [e["output"] for e in pipeline.notebooks] == ["mine", "scorecard", "scorecard-again"]


def test_report_on_a_folder_named_yaml_and_unusable_outputs_are_one_line(tmp_path):
    (tmp_path / "x.yaml").mkdir()
    one_line(cli("report", str(tmp_path / "x.yaml")), "PIPELINE")
    (tmp_path / "file").write_text("")
    one_line(cli("report", "smoke", "--outputs", str(tmp_path / "file")), "--outputs")


@pytest.fixture
def not_ray():
    """Something that listens and is not Ray: an HTTP server."""

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # its log would land in the captured stderr
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_ray_address_where_ray_does_not_answer_is_one_line_and_no_store(tmp_path, not_ray):
    pytest.importorskip("ray")
    target = tmp_path / "ray.sqlite"
    one_line(cli("sweep", "fc", "--backend", "ray", "--address", not_ray, "--store", str(target)), "Ray")
    assert not target.exists()
    one_line(cli("report", "smoke", "--backend", "ray", "--address", not_ray, "--outputs", str(tmp_path / "o")), "Ray")
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------ 3. the third visit: bounded input, one error path


@pytest.mark.parametrize("version", ["\u00b2", "9" * 5000])
def test_a_schema_version_of_digits_python_will_not_read_is_one_short_line(store, tmp_path, version):
    copy = tmp_path / "v.sqlite"
    shutil.copy(store, copy)
    with sqlite3.connect(copy) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    conn.close()
    for args in (["results"], ["scorecard", "--json"], ["compare", "--baseline", "v100", "--target", "cpu"]):
        result = cli(*args, "--store", str(copy))
        one_line(result, "schema version")
        assert len(result.stderr) < 400


def test_a_yaml_alias_bomb_is_refused_before_anything_runs(tmp_path):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi")
    )
    pipeline = tmp_path / "bomb.yaml"
    pipeline.write_text(bomb + "notebooks:\n  - notebook: architecture.ipynb\n")
    one_line(cli("report", str(pipeline), "--outputs", str(tmp_path / "out")), "aliases")
    one_line(cli("report", "smoke", "-p", "families=&a [fc, *a]", "--outputs", str(tmp_path / "out")), "aliases")
    assert not (tmp_path / "out").exists()


def test_a_pipeline_file_s_parameters_are_checked_against_the_notebooks(tmp_path):
    for text, needle in (
        ("budget_minutes: [1]", "parameter budget_minutes"),
        ("nosuch: 1", "parameters: 'nosuch'"),
        ("families: {a: 1}", "parameter families"),
    ):
        pipeline = tmp_path / "p.yaml"
        pipeline.write_text(f"parameters:\n  {text}\nnotebooks:\n  - notebook: {ROOT / 'notebooks' / 'architecture.ipynb'}\n")
        one_line(cli("report", str(pipeline), "--outputs", str(tmp_path / "out")), needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_labels_file_that_never_ends_or_blocks_is_refused(store, tmp_path):
    fifo = tmp_path / "labels"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo), str(tmp_path)):
        one_line(
            cli("predict", "--store", str(store), "--platform", "v100", "--family", "fc", "--labels-file", path), "--labels-file"
        )
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 10_000_001)
    one_line(
        cli("predict", "--store", str(store), "--platform", "v100", "--family", "fc", "--labels-file", str(big)),
        "at most 10,000,000 bytes",
    )


def test_error_lines_stay_one_line_and_short_whatever_the_value(tmp_path):
    for value in ("a\nb\nc", "x" * 100_000):
        result = cli("sweep", "fc", "--name", value, "--store", str(tmp_path / "s.sqlite"))
        one_line(result, "--name")
        assert len(result.stderr) < 1_100
    assert not (tmp_path / "s.sqlite").exists()


def test_a_damaged_store_s_error_names_the_store(store, tmp_path):
    copy = tmp_path / "d.sqlite"
    shutil.copy(store, copy)
    damage(copy, 3 * 4096, b"\xff" * 4096)
    result = cli("results", "--store", str(copy))
    one_line_or_success(result)
    if result.exit_code == 2:
        assert str(copy) in result.stderr


def test_scorecard_json_of_an_empty_store_is_a_valid_empty_scorecard(tmp_path):
    from paradnn.store import Store

    Store(tmp_path / "e.sqlite").close()
    result = cli("scorecard", "--json", "--store", str(tmp_path / "e.sqlite"))
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    assert card["hardware"] == [] and card["frameworks"] == [] and len(card["principles"]) == 7


def test_project_names_the_option_at_fault(tmp_path):
    from paradnn.engine.profiler import trace_rows
    from tests.test_projection import breakdown

    path = tmp_path / "p.sqlite"
    from paradnn.store import Store

    with Store(path) as s:
        s.put_platform(
            "fp",
            "lab",
            {"id": "cpu", "name": "lab"},
            {"matmul_flops": {"float32": {"0": 1e11}}, "copy_bandwidth": {"0": 1e10}},
            "measured",
        )
        s.add_traces(trace_rows(breakdown(), "lab", "float32"))
    one_line(
        cli("project", "--from", "tpu-v2-8", "--to", "lab", "--family", "fc", "--dtype", "float64", "--store", str(path)),
        "--dtype: 'float64' is not valid; allowed: a compute dtype with measured ceilings on lab (float32)",
    )
    one_line(
        cli(
            "predict",
            "--store",
            str(path),
            "--platform",
            "h100",
            "--family",
            "fc",
            "--prior-from",
            "v100",
            "layer_1-node_8-input_8-output_8-bs_8",
        ),
        "--prior-from: 'v100'",
    )


def test_a_report_run_writes_its_verdicts_under_its_outputs_not_beside_the_store(tmp_path, monkeypatch):
    from paradnn.analysis import registry

    store = tmp_path / "elsewhere" / "study.sqlite"
    store.parent.mkdir()
    monkeypatch.setenv(registry.REPORT_DIR_ENV, str(tmp_path))
    registry.publish([], store, "architecture")
    assert (tmp_path / "observations-architecture.json").exists() and not list(store.parent.iterdir())
    monkeypatch.delenv(registry.REPORT_DIR_ENV)
    registry.publish([], store, "architecture")  # a notebook run by hand: beside its store
    assert (store.parent / "observations-architecture.json").exists()


def test_a_read_only_store_is_reported_on_without_importing_into_it(tmp_path, monkeypatch):
    from paradnn.sections import common
    from paradnn.store import Store

    path = tmp_path / "ro.sqlite"
    Store(path).close()
    monkeypatch.setattr(common.os, "access", lambda p, mode: mode != os.W_OK)
    assert "read-only" in common.ensure_reference(path)
    with Store(path, create=False, readonly=True) as s:
        assert s.count() == 0


def test_a_sweep_on_a_gpu_this_machine_lacks_is_one_line_and_leaves_no_store(tmp_path):
    import shutil as sh

    if sh.which("nvidia-smi"):
        pytest.skip("this machine has a GPU")
    result = cli("sweep", "fc", "--platform", "gpu:0", "--store", str(tmp_path / "g.sqlite"))
    one_line(result, "--platform: 'gpu:0' is not valid; allowed: 0 GPU device(s)")
    assert result.stderr.count("is not valid") == 1 and not list(tmp_path.iterdir())
