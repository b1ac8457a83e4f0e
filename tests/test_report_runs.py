"""`paradnn report` beyond the smoke pipeline: reruns, the user's own data, failures, bad and hostile input.

Apart from tests/test_reports.py (the shared smoke pipeline), so that these run on another worker meanwhile.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from paradnn.store import Store
from paradnn.store.legacy import import_files

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


UNUSED_BY_REPORTS = """
import sys
from pathlib import Path
from paradnn import parameters, reports
print("after_import", sorted({"statsmodels", "papermill"} & set(sys.modules)))
parameters.declared(Path("notebooks/prediction.ipynb"))
print("after_papermill", "papermill" in sys.modules, "rfc3987_syntax" in sys.modules)
import rfc3987_syntax
print("importable_after", callable(rfc3987_syntax.is_valid_syntax))
"""


def test_the_report_command_loads_neither_statsmodels_nor_rfc3987_syntax_yet_both_stay_importable():
    """A bad-input `paradnn report` took 4.4 s, 3 of them these two imports that no report process uses."""
    import subprocess
    import sys

    pytest.importorskip("rfc3987_syntax")
    done = subprocess.run([sys.executable, "-c", UNUSED_BY_REPORTS], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["after_import []", "after_papermill True False", "importable_after True"]


def test_a_users_own_copy_of_the_original_data_still_works(tmp_path, reference, report):
    """--reference DIR imports that folder's files instead of the shipped ones (here: the V100 and TPU sweeps only)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("gpu_fc.json", "tpu_fc.json"):
        shutil.copy(reference / name, mine / name)
    pipeline = tmp_path / "legacy_only.yaml"
    pipeline.write_text(
        "name: legacy_only\nnotebooks:\n  - notebook: notebooks/platform_comparison.ipynb\n"
        "    parameters: {measure_missing: false}\n"
    )
    result = report(str(pipeline), "--outputs", str(tmp_path), "--reference", str(mine))
    assert result.returncode == 0, result.stdout + result.stderr
    page = (tmp_path / "legacy_only" / "platform_comparison.html").read_text()
    # Without the traces the TPU's bound comes from its rates alone: 29 pairs where neither chip waited on its input
    # (30 with the traces, tests/test_bounds.py)
    assert "tpu-v2-8 over v100: median speedup 0.33x (geometric mean" in page and "over 29 configurations" in page
    with Store(tmp_path / "legacy_only" / "results.sqlite") as s:
        assert s.traces().empty  # the user's folder had no traces, and nothing else was imported


def test_rerun_with_new_parameters_measures_only_what_is_new(tmp_path, report):
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
        everything = s.results()
    after = everything[everything["source"] == "measured"]
    new = after[~after["id"].isin(before["id"])]
    assert len(before) == 4 and set(new["batch"]) == {128} and len(new) == 2
    assert {"tpu-v2-8", "v100"} <= set(everything["platform"])  # no option: the shipped copy of the original study
    assert after["label"].is_unique


def test_a_failing_notebook_gets_a_red_row_and_the_others_run(tmp_path, report):
    """Every parameter is checked before anything runs, so the failure comes from inside a notebook."""
    import nbformat

    source = nbformat.read(ROOT / "notebooks" / "software_stack.ipynb", as_version=4)
    source.cells = [
        source.cells[0],
        nbformat.v4.new_code_cell(
            "from paradnn.store import Store\nStore(store).close()  # the store the next notebook reads\n"
            "raise RuntimeError('the sky fell on float8')"
        ),
    ]
    broken = tmp_path / "falling.ipynb"
    nbformat.write(source, broken)
    pipeline = tmp_path / "broken.yaml"
    pipeline.write_text(
        "name: broken\nnotebooks:\n"
        f"  - notebook: {broken}\n    parameters: {{families: [fc]}}\n"
        "  - notebook: notebooks/software_stack.ipynb\n    parameters: {families: [fc], measure_missing: false}\n"
    )
    result = report(str(pipeline), "--outputs", str(tmp_path))
    assert result.returncode == 1
    out = tmp_path / "broken"
    index = (out / "index.html").read_text()
    assert index.count(">failed") == 1 and index.count(">ok<") == 1
    assert (out / "software_stack.html").exists() and (out / "falling.html").exists()
    assert "the sky fell on float8" in (out / "falling.html").read_text()


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
def test_bad_report_input_exits_2(args, needle, report):
    result = report(*args)
    assert result.returncode == 2 and needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


HOSTILE = "<script>document.title='pwned'</script>`</code><img src=x onerror=\"document.title='pwned'\">*[x](javascript:alert(1))"


def test_hostile_values_show_literally_and_run_nothing(tmp_path, report, chromium_dom, reference):
    """A platform name flows from a store into parameters, the provenance header, captions and the index:
    every page must escape it. (A name the store holds is what ``target`` may take; a merge source's
    names are only required to be printable.)"""
    store = tmp_path / "hostile.sqlite"
    with Store(store) as s:
        import_files(s, [reference / "gpu_fc.json"])
        for table in ("results", "platforms"):
            s.conn.execute(f"UPDATE {table} SET platform = ?", (HOSTILE,))
    pipeline = tmp_path / "hostile.yaml"
    pipeline.write_text(
        "name: hostile\nnotebooks:\n  - notebook: notebooks/platform_comparison.ipynb\n    parameters: {measure_missing: false}\n"
    )
    result = report(str(pipeline), "--outputs", str(tmp_path), "--store", str(store), "-p", f"target={json.dumps(HOSTILE)}")
    assert result.returncode == 0, result.stdout + result.stderr
    out = tmp_path / "hostile"
    for name in ("platform_comparison.html", "index.html"):
        page = (out / name).read_text()
        assert "<script>document.title" not in page and "<img src=x" not in page and 'href="javascript' not in page
        dom = chromium_dom(out / name, tmp_path)
        assert "pwned" not in re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
        assert "&lt;script&gt;document.title=" in dom  # shown as typed


def test_papermill_alone_understands_list_parameters_given_as_text(tmp_path):
    """As the notebooks' own help suggests: papermill NOTEBOOK OUT -p families "[fc]"."""
    import papermill as pm

    store = tmp_path / "r.sqlite"
    Store(store).close()  # an empty store: reading never creates one
    pm.execute_notebook(
        str(ROOT / "notebooks" / "software_stack.ipynb"),
        str(tmp_path / "out.ipynb"),
        kernel_name="paradnn",
        parameters={"store": str(store), "families": "[fc]", "overrides": "{fc: {batch: [64]}}", "measure_missing": False},
        progress_bar=False,
        cwd=str(ROOT),
    )
    assert (tmp_path / "out.ipynb").exists()


def test_two_kernels_started_at_once_each_get_their_own_sockets(tmp_path):
    """Two reports at once (two users, two test workers) must not share kernel sockets.

    jupyter_client's default IPC address, ``kernel-ipc-N`` relative to the working directory,
    let two kernels started in the same moment pick the same sockets; the loser then failed
    after 60 s with "Kernel didn't respond".
    """
    import threading

    import nbformat

    from paradnn.reports import ensure_kernel, execute_notebook

    ensure_kernel()
    source = tmp_path / "where.ipynb"
    cell = "import ipykernel, json\nprint(json.load(open(ipykernel.get_connection_file()))['ip'])"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell)]), source)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            execute_notebook(source, tmp_path / f"out{n}.ipynb", {})
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert not errors
    ips = [nbformat.read(tmp_path / f"out{n}.ipynb", 4).cells[0].outputs[0]["text"].strip() for n in range(2)]
    assert ips[0] != ips[1] and all(Path(ip).is_absolute() and ROOT not in Path(ip).parents for ip in ips)
