"""The smoke pipeline end to end: notebooks executed, HTML reports and index checked."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paradnn.store import Store

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ("architecture", "platform_comparison", "software_stack", "workloads", "prediction", "scorecard")
JUDGING = NOTEBOOKS[:4]  # the reports that judge the paper's observations


def report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "paradnn.cli", "report", *args], capture_output=True, text=True,
                          env=os.environ.copy(), cwd=ROOT)  # fmt: skip


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    """The smoke pipeline, as a user runs it: no option, so the original study comes from the shipped copy."""
    out = tmp_path_factory.mktemp("plain")
    first = report("smoke", "--outputs", str(out))
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.strip().splitlines()[-1] == str(out / "smoke" / "index.html")
    return out / "smoke"


def images(html: str) -> int:
    return len(re.findall(r'<img[^>]+src="data:image/png;base64,', html))


def test_every_report_has_its_figures_and_no_errors(smoke):
    out = smoke
    minimum = {"architecture": 6, "platform_comparison": 4, "software_stack": 2, "workloads": 5, "prediction": 3,
               "scorecard": 2}
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
        assert name not in JUDGING or "holds" in page or "not enough data" in page
        assert f"<title>{name.replace('_', ' ')} — paradnn smoke</title>" in page and "<h1" in page
        assert "No description has been provided" not in page  # every figure's title is its alt text
        if name in JUDGING:
            assert "the paper&#x27;s observations in this report" in page or "the paper's observations in this report" in page


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
    assert "JAX 0." in page and "TensorFlow 2." in page and "measured here" in page  # the two framework rows
    assert "JAX through Keras 3 against TensorFlow on identical models" in page
    assert "BigDL" in page and "DeepLearning4j" in page  # Table II as printed
    verdicts = json.loads((smoke / "observations-scorecard.json").read_text())
    checks = {v["check"]: v["verdict"] for v in verdicts}
    assert checks["ASICs lead in computing performance"] == "holds"
    assert checks["ASICs lead in energy efficiency"] == "not enough data"
    assert checks["Keras runs the same models on several backends at one speed (paradnn's check)"] in ("holds",
                                                                                                      "does not hold")


def test_every_observation_is_accounted_for(smoke):
    rows = json.loads((smoke / "observations.json").read_text())
    assert {r["id"] for r in rows} == {f"O{i}" for i in range(1, 15)}
    assert all({"id", "claim", "platform", "verdict", "evidence", "figures"} <= set(r) for r in rows)
    verdicts = {r["verdict"].split(" ")[0] for r in rows}
    assert verdicts <= {"holds", "does", "not", "needs"}
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
    assert "FC throughput at 64 layers on cpu, tpu-v2-8, v100 (Fig. 7)" in comparison
    assert "here 2 64-layer configurations were measured on cpu" in comparison
    # Projection checked against this machine (cpu[threads=1] -> cpu), then onto an H100's datasheet
    assert "Projected, not measured: 2 FC configurations of cpu onto h100" in comparison
    checks = {r.get("check"): r for r in json.loads((smoke / "observations-platform_comparison.json").read_text())}
    check = checks["projection reproduces a platform measured here"]
    assert check["verdict"] in ("holds", "does not hold") and check["platform"] == "cpu[threads=1] -> cpu"
    with Store(smoke / "results.sqlite") as s:
        profiled = s.traces().groupby("source")["label"].nunique()
    assert profiled["profile:cpu[threads=1]:float32"] == profiled["profile:cpu:float32"] == 2
    workloads = (smoke / "workloads.html").read_text()
    assert "cpu (real workloads): share of step time waiting for the input pipeline" in workloads
    rows = json.loads((smoke / "observations-workloads.json").read_text())
    fed = [r for r in rows if r["id"] == "O4"]
    assert fed and fed[0]["platform"] == "cpu (real workloads)"


def test_index_links_resolve(smoke):
    index = (smoke / "index.html").read_text()
    links = set(re.findall(r'href="([^"]+)"', index))
    assert links == {f"{n}.html" for n in NOTEBOOKS}
    assert all((smoke / link).exists() for link in links)
    assert index.count(">ok<") == len(NOTEBOOKS)


def test_the_original_study_is_in_every_report_without_options(smoke):
    page = (smoke / "platform_comparison.html").read_text()
    assert "tpu-v2-8 over v100: median speedup 3.79x" in page
    assert re.search(r"v100 wins on \d+", page)
    arch = (smoke / "architecture.html").read_text()
    assert "the best-utilised trace" in arch and "75 FLOPs/byte ridge" in arch
    with Store(smoke / "results.sqlite") as s:
        platforms = set(s.results()["platform"])
        traces = s.traces()
        original = traces[~traces["source"].str.startswith("profile:")]
        assert {"tpu-v2-8", "v100"} <= platforms and len(original) == 230 + 2029


def test_a_users_own_copy_of_the_original_data_still_works(tmp_path, reference):
    """--reference DIR imports that folder's files instead of the shipped ones (here: the V100 and TPU sweeps only)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("gpu_fc.json", "tpu_fc.json"):
        shutil.copy(reference / name, mine / name)
    pipeline = tmp_path / "legacy_only.yaml"
    pipeline.write_text("name: legacy_only\nnotebooks:\n  - notebook: notebooks/platform_comparison.ipynb\n"
                        "    parameters: {measure_missing: false}\n")  # fmt: skip
    result = report(str(pipeline), "--outputs", str(tmp_path), "--reference", str(mine))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "tpu-v2-8 over v100: median speedup 3.79x" in (tmp_path / "legacy_only" / "platform_comparison.html").read_text()
    with Store(tmp_path / "legacy_only" / "results.sqlite") as s:
        assert s.traces().empty  # the user's folder had no traces, and nothing else was imported


def test_rerun_with_new_parameters_measures_only_what_is_new(tmp_path):
    pipeline = tmp_path / "fc_only.yaml"
    pipeline.write_text(
        "name: fc_only\nnotebooks:\n  - notebook: notebooks/architecture.ipynb\n    parameters:\n"
        "      families: [fc]\n      low_precision: ''\n      profile_count: 0\n      max_seconds: 0.2\n      infeed_inputs: []\n"
        "      parallel_devices: 0\n"
    )
    assert report(str(pipeline), "--outputs", str(tmp_path), "-p", "overrides={fc: {batch: [64, 256]}}").returncode == 0
    store = tmp_path / "fc_only" / "results.sqlite"
    with Store(store) as s:
        before = s.results()
    before = before[before["source"] == "measured"]  # the original study's rows are imported too
    result = report(str(pipeline), "--outputs", str(tmp_path), "-p", "overrides={fc: {batch: [64, 128]}}")
    assert result.returncode == 0, result.stderr
    # What runs is shown while it runs; a log gets no carriage returns and no kernel shutdown noise.
    assert "[1/1] architecture: running" in result.stderr
    assert "[1/1] architecture: finished sweep cpu: 2/2 configurations" in result.stderr
    assert "\r" not in result.stderr and "Task was destroyed" not in result.stderr
    with Store(store) as s:
        after = s.results()
    after = after[after["source"] == "measured"]
    new = after[~after["id"].isin(before["id"])]
    assert len(before) == 4 and set(new["batch"]) == {128} and len(new) == 2
    assert after["label"].is_unique


def test_a_failing_notebook_gets_a_red_row_and_the_others_run(tmp_path):
    pipeline = tmp_path / "broken.yaml"
    pipeline.write_text(
        "name: broken\nnotebooks:\n"
        "  - notebook: notebooks/architecture.ipynb\n    parameters: {families: [fc], dtype: float8}\n"
        "  - notebook: notebooks/software_stack.ipynb\n    parameters: {families: [fc], measure_missing: false}\n"
    )
    result = report(str(pipeline), "--outputs", str(tmp_path))
    assert result.returncode == 1
    out = tmp_path / "broken"
    index = (out / "index.html").read_text()
    assert index.count(">failed") == 1 and index.count(">ok<") == 1
    assert (out / "software_stack.html").exists() and (out / "architecture.html").exists()
    assert "float8" in (out / "architecture.html").read_text()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["nonsense"], "PIPELINE"),
        (["smoke", "-p", "oops"], "NAME=VALUE"),
        (["smoke", "-p", "budget_minutes=abc"], "budget_minutes"),
        (["smoke", "-p", "nosuch=1"], "nosuch"),
        (["smoke", "-p", "store=elsewhere.sqlite"], "store"),
        (["smoke", "-p", "families={fc: 1}"], "families"),
    ],
)
def test_bad_report_input_exits_2(args, needle):
    result = report(*args)
    assert result.returncode == 2 and needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


CHECK_IMAGES = """<script>window.addEventListener("load", () => {
  const all = [...document.images];
  const ok = all.filter(i => i.complete && i.naturalWidth > 0);
  document.body.setAttribute("data-images", all.length + "/" + ok.length);
});</script>"""


def chromium_dom(page: Path, tmp_path: Path) -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", f"--user-data-dir={tmp_path / 'profile'}",
             "--virtual-time-budget=10000", "--dump-dom"]  # fmt: skip
    result = subprocess.run([browser, *flags, page.as_uri()], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_index_and_report_render_in_chromium(smoke, tmp_path):
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


HOSTILE = "<script>document.title='pwned'</script>`</code><img src=x onerror=\"document.title='pwned'\">*[x](javascript:alert(1))"


def test_hostile_values_show_literally_and_run_nothing(tmp_path):
    """A parameter value flows into the provenance header, captions and the index: every page must escape it."""
    pipeline = tmp_path / "hostile.yaml"
    pipeline.write_text("name: hostile\nnotebooks:\n  - notebook: notebooks/platform_comparison.ipynb\n"
                        "    parameters: {measure_missing: false}\n")  # fmt: skip
    result = report(str(pipeline), "--outputs", str(tmp_path), "-p", f"target={json.dumps(HOSTILE)}")
    assert result.returncode == 0, result.stdout + result.stderr
    out = tmp_path / "hostile"
    for name in ("platform_comparison.html", "index.html"):
        page = (out / name).read_text()
        assert "<script>document.title" not in page and "<img src=x" not in page and "href=\"javascript" not in page
        dom = chromium_dom(out / name, tmp_path)
        assert "pwned" not in re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
        assert "&lt;script&gt;document.title=" in dom  # shown as typed


def test_papermill_alone_understands_list_parameters_given_as_text(tmp_path):
    """As the notebooks' own help suggests: papermill NOTEBOOK OUT -p families "[fc]"."""
    import papermill as pm

    store = tmp_path / "r.sqlite"
    Store(store).close()  # an empty store: reading never creates one
    pm.execute_notebook(str(ROOT / "notebooks" / "software_stack.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="paradnn",
                        parameters={"store": str(store), "families": "[fc]", "overrides": "{fc: {batch: [64]}}",
                                    "measure_missing": False}, progress_bar=False, cwd=str(ROOT))  # fmt: skip
    assert (tmp_path / "out.ipynb").exists()
