"""The smoke pipeline end to end: notebooks executed, HTML reports and index checked."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from paradnn.store import Store

pytestmark = pytest.mark.slow

NOTEBOOKS = ("architecture", "platform_comparison", "software_stack", "workloads", "prediction", "scorecard")
JUDGING = NOTEBOOKS[:4]  # the reports that judge the paper's observations


FIXTURE = Path(__file__).with_name("fixtures") / "smoke.sqlite"  # tests/fixtures/build_smoke_store.py


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, report) -> Path:
    """The six smoke reports rendered from a copy of the store the smoke pipeline left (measured once, by
    ``make fixture``), measuring nothing; ``tests/test_report_runs.py`` measures a report end to end.
    With a TMPDIR of its own (``tmp`` beside the reports), to see what it leaves there."""
    out = tmp_path_factory.mktemp("plain")
    (out / "tmp").mkdir()
    (out / "smoke").mkdir()
    store = out / "smoke" / "results.sqlite"
    shutil.copyfile(FIXTURE, store)
    first = report(
        "smoke", "--outputs", str(out), "--store", str(store), "-p", "measure_missing=false", env={"TMPDIR": str(out / "tmp")}
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.strip().splitlines()[-1] == str(out / "smoke" / "index.html")
    return out / "smoke"


def test_the_smoke_store_fixture_is_current():
    """The fixture needs no migration: its schema version and columns are today's (else: ``make fixture``)."""
    from paradnn.store.db import SCHEMA_VERSION, result_columns

    with sqlite3.connect(f"file:{FIXTURE}?immutable=1", uri=True) as db:
        version = int(dict(db.execute("SELECT key, value FROM meta").fetchall())["schema_version"])
        columns = {row[1] for row in db.execute("PRAGMA table_info(results)")}
    missing = sorted({c for c, _ in result_columns()} - columns)
    assert (version, missing) == (SCHEMA_VERSION, []), "tests/fixtures/smoke.sqlite is stale: run `make fixture`"


def images(html: str) -> int:
    return len(re.findall(r'<img[^>]+src="data:image/png;base64,', html))


def test_every_report_has_its_figures_and_no_errors(smoke):
    out = smoke
    minimum = {"architecture": 6, "platform_comparison": 4, "software_stack": 2, "workloads": 5, "prediction": 3, "scorecard": 2}
    for name in NOTEBOOKS:
        executed = json.loads((out / f"{name}.ipynb").read_text())
        errors = [o for c in executed["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
        assert not errors, errors
        page = (out / f"{name}.html").read_text()
        assert "Traceback" not in page and 'data-mime-type="application/vnd.jupyter.stderr"' not in page
        assert images(page) >= minimum[name], name
        assert "Report generated" in page and "software" in page and "tensorflow" in page
        assert "The paper found" in page
        assert "def " not in page  # code cells are hidden
        assert name not in JUDGING or "holds" in page or "inconclusive" in page
        assert f"<title>{name.replace('_', ' ')} — paradnn smoke</title>" in page and "<h1" in page
        assert "No description has been provided" not in page  # every figure's title is its alt text
        if name in JUDGING:
            assert "the paper&#x27;s observations in this report" in page or "the paper's observations in this report" in page


def test_the_reports_leave_nothing_in_tmpdir(smoke):
    # Kernels and their sweep workers can end without their exit hooks (TensorFlow's autograph files,
    # the workers' own folders); each kernel's TMPDIR is a folder the report removes.
    assert sorted(p.name for p in (smoke.parent / "tmp").iterdir()) == []


def test_the_prediction_report_scores_the_original_sweeps(smoke):
    page = (smoke / "prediction.html").read_text()
    assert "held-out step time predicted vs measured" in page and "tpu-v2-8" in page and "v100" in page
    assert "error of the unmeasured rest vs share measured" in page and "adaptive" in page and "random" in page
    assert "measured, the rest predicted" in page  # the grid filled by prediction
    assert "needs at least 18 measured rows" in page  # too few local rows for 3-fold held-out error, and it says so
    assert "measured and predicted throughput" in page  # this machine's grid, filled between its measured cells


def test_the_scorecard_places_every_platform_and_measures_the_framework_row(smoke):
    page = (smoke / "scorecard.html").read_text()
    for platform in ("cpu", "tpu-v2-8", "v100"):
        assert platform in page
    assert "12 hardware metrics per platform" in page and "not measurable here" in page and "815 mm²" in page
    assert "JAX 0." in page and "TensorFlow 2." in page and "PyTorch 2." in page  # the three framework rows
    assert "JAX and PyTorch through Keras 3 against TensorFlow on identical models" in page
    assert "native libraries" in page  # Core Codes from the installed files
    assert "BigDL" in page and "DeepLearning4j" in page  # Table II as printed
    verdicts = json.loads((smoke / "observations-scorecard.json").read_text())
    checks = {v["check"]: v["verdict"] for v in verdicts}
    # on the 30 pairs where neither 2019 chip waited on its input the V100 is the faster (tests/test_scorecard.py)
    assert checks["ASICs lead in computing performance"] == "does not hold"
    assert checks["ASICs lead in energy efficiency"] == "inconclusive"
    keras = [v for v in verdicts if v["check"].startswith("Keras runs the same models")]
    assert all(v["rule"]["direction"] == "within" and v["interval"] is not None for v in keras)
    # JAX compiled; PyTorch compiled and eager: each against TensorFlow at the same setting
    assert sorted(v["figures"]["target"] + " " + v["figures"]["mode"] for v in keras) == [
        "jax compiled",
        "torch compiled",
        "torch eager",
    ]


def test_every_observation_is_accounted_for(smoke):
    rows = json.loads((smoke / "observations.json").read_text())
    assert {r["id"] for r in rows} == {f"O{i}" for i in range(1, 15)}
    record = {
        "id",
        "claim",
        "platform",
        "verdict",
        "outcome",
        "effect",
        "interval",
        "n",
        "rule",
        "held_fixed",
        "evidence",
        "figures",
    }
    assert all(record <= set(r) for r in rows)
    verdicts = {r["verdict"].split(" ")[0] for r in rows}
    assert verdicts <= {"holds", "does", "inconclusive", "needs"}
    for r in rows:  # a decided verdict's whole interval lies on one side of its threshold
        if r["outcome"].startswith(("holds", "does not hold")):
            low, high = r["interval"]
            rule = r["rule"]
            line = (rule["threshold"] - rule["margin"], rule["threshold"] + rule["margin"])
            assert r["n"] >= rule["min_n"], r
            assert low > line[1] or high < line[0] or rule["direction"] == "within", r
    o3 = {r["platform"]: r for r in rows if r["id"] == "O3"}
    assert set(o3["tpu-v2-8"]["figures"]["median_by_value"]) >= {"256", "16384"}
    assert "2 replicas" in o3["cpu"]["evidence"] or "2 in the store" in o3["cpu"]["evidence"]  # the smoke slice ran
    index = (smoke / "index.html").read_text()
    assert "The paper's 14 observations" in index and all(f"<td>O{i}</td>" in index for i in range(1, 15))


def test_every_comparison_says_what_it_held_fixed(smoke):
    rows = json.loads((smoke / "observations.json").read_text())
    compared = [r for r in rows if r["id"] in ("O7", "O8", "O10", "O12", "O13") and not r["verdict"].startswith("needs")]
    assert {r["id"] for r in compared} >= {"O7", "O8", "O10", "O12", "O13"}
    for r in compared:
        assert "held_fixed" in r and "n" in r, r
    assert all("xla" in r["held_fixed"] for r in compared if r["id"] == "O13")
    paper_pair = [r for r in compared if r["id"] in ("O7", "O10")]
    assert all(r["held_fixed"]["free"] == ["dtype", "xla"] for r in paper_pair)  # each platform at its own precision


def test_no_measured_utilisation_is_above_100_percent(smoke):
    with Store(smoke / "results.sqlite") as s:
        rows = s.results()
    measured = rows[(rows["source"] == "measured") & rows["utilization"].notna()]
    assert len(measured) > 10 and measured["utilization"].max() <= 1.0 + 1e-9
    assert set(measured["peak_source"]) <= {"measured"} | {p for p in measured["peak_source"] if p.startswith("achieved:")}


def test_the_papers_pieces_this_machine_can_show(smoke):
    arch = (smoke / "architecture.html").read_text()
    assert "Table 2 (printed)" in arch and "64-16384 (x2)" in arch and "read as thousands" in arch
    assert "FC models on the TPU v2-8 (Fig. 3a)" in arch  # the whole-model roofline on the paper's platform
    assert "float32 lanes" in arch  # the CPU's theoretical peak (or its FLOPs per cycle) beside its measured ceiling
    comparison = (smoke / "platform_comparison.html").read_text()
    assert "speedup of cpu over cpu[threads=1]" in comparison  # this machine's two platforms are compared
    # ... on the original study's grid, and beside its V100 and TPU v2-8 there (Fig. 9 and 8, three ways)
    assert "The V100 over this machine (Fig. 9): median speedup" in comparison
    assert "The TPU v2-8 over this machine: median speedup" in comparison
    assert "2 FC configurations were measured here and by both of the original study" in comparison
    assert "The paper&#x27;s Table 3 lists" in comparison or "The paper's Table 3 lists" in comparison
    from click.testing import CliRunner

    from paradnn.cli import main

    out = CliRunner().invoke(
        main, ["compare", "--baseline", "v100", "--target", "cpu", "--family", "fc", "--store", str(smoke / "results.sqlite")]
    )
    assert out.exit_code == 0 and re.search(r"^n\s+2$", out.output, re.M), out.output
    assert "FC throughput at 64 layers on cpu, tpu-v2-8, v100 (Fig. 7)" in comparison
    assert "here 3 64-layer configurations were measured on cpu" in comparison  # Fig. 7's two and the overlap's one
    # Projection checked against this machine (cpu[threads=1] -> cpu), then onto an H100's datasheet
    assert "Projected, not measured: 2 FC configurations of cpu onto h100" in comparison
    checks = {r.get("check"): r for r in json.loads((smoke / "observations-platform_comparison.json").read_text())}
    check = checks["projection reproduces a platform measured here"]
    assert check["rule"]["statistic"] == "median absolute error" and check["platform"] == "cpu[threads=1] -> cpu"
    with Store(smoke / "results.sqlite") as s:
        profiled = s.traces().groupby("source")["label"].nunique()
    assert profiled["profile:cpu[threads=1]:float32"] == profiled["profile:cpu:float32"] == 2
    # ... and the method scored against the 2019 chips on the two overlap configurations (both chips the bound)
    scored = checks["projection reproduces the 2019 V100 and TPU v2-8"]
    assert scored["platform"] == "cpu -> 2019 chips" and "nothing fitted" in scored["evidence"]
    assert scored["figures"]["v100"]["n"] == scored["figures"]["tpu-v2-8"]["n"] == scored["figures"]["ratio"]["n"] == 2
    assert "The projection method, scored before it draws what the 2019 study never measured" in comparison
    workloads = (smoke / "workloads.html").read_text()
    assert "cpu (real workloads): share of step time waiting for the input pipeline" in workloads
    rows = json.loads((smoke / "observations-workloads.json").read_text())
    fed = [r for r in rows if r["id"] == "O4"]
    assert fed and fed[0]["platform"] == "cpu (real workloads)"


def test_the_index_opens_with_the_answer(smoke):
    index = (smoke / "index.html").read_text()
    rows = json.loads((smoke / "observations.json").read_text())
    head = index[: index.index("<h2>Reports</h2>")]
    assert f"{len(rows)} verdicts on the paper's 14 observations" in head
    held = sum(r["verdict"].replace(" (projected)", "") == "holds" for r in rows)
    assert f"<b>{held} hold</b>" in head
    assert "<b>cpu</b>: " in head and "<b>v100</b>: the original study (2019)" in head  # every platform, one line each
    assert index.count("<summary><small>parameters</small></summary>") == len(NOTEBOOKS)  # folded away
    assert index.count("<summary><small>evidence</small></summary>") == len(rows)  # a click away


def test_index_links_resolve(smoke):
    index = (smoke / "index.html").read_text()
    links = set(re.findall(r'href="([^"]+)"', index))
    assert links == {f"{n}.html" for n in NOTEBOOKS}
    assert all((smoke / link).exists() for link in links)
    assert index.count(">ok<") == len(NOTEBOOKS)


def test_the_original_study_is_in_every_report_without_options(smoke):
    page = (smoke / "platform_comparison.html").read_text()
    assert "tpu-v2-8 over v100: median speedup 0.35x" in page  # on the 30 pairs neither chip waited on its input
    assert "146 pair(s) where a side was input-bound are left out" in page
    assert re.search(r"v100 wins on \d+", page)
    arch = (smoke / "architecture.html").read_text()
    assert "the best-utilised trace" in arch and "75 FLOPs/byte ridge" in arch
    with Store(smoke / "results.sqlite") as s:
        platforms = set(s.results()["platform"])
        traces = s.traces()
        original = traces[~traces["source"].str.startswith("profile:")]
        assert {"tpu-v2-8", "v100"} <= platforms and len(original) == 230 + 2029


CHECK_IMAGES = """<script>window.addEventListener("load", () => {
  const all = [...document.images];
  const ok = all.filter(i => i.complete && i.naturalWidth > 0);
  document.body.setAttribute("data-images", all.length + "/" + ok.length);
});</script>"""


def test_index_and_report_render_in_chromium(smoke, tmp_path, chromium_dom):
    site = tmp_path / "site"
    shutil.copytree(smoke, site, ignore=shutil.ignore_patterns("*.sqlite*", "*.ipynb"))
    for name in ("index.html", "architecture.html"):
        page = site / name
        page.write_text(page.read_text().replace("</body>", CHECK_IMAGES + "</body>"))
    index = chromium_dom(site / "index.html", tmp_path)
    assert "architecture.html" in index and 'data-images="0/0"' in index
    arch = chromium_dom(site / "architecture.html", tmp_path)
    loaded = re.search(r'data-images="(\d+)/(\d+)"', arch)
    assert loaded and int(loaded.group(1)) >= 6 and loaded.group(1) == loaded.group(2)
