"""Pipelines: execute the notebooks with papermill, export HTML, write an index page.

A pipeline file (``pipelines/<name>.yaml``) names its store, its kernel, parameters shared
by all notebooks and the notebooks with their own parameters. ``run_pipeline`` executes
each notebook on the ``paradnn`` kernel into ``outputs/<name>/``, exports it to HTML
without code cells and with a parameters-and-provenance summary at the top, and writes
``index.html`` with one row per report. A failing notebook still gets its HTML (with the
error) and a red row; the others still run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import html
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePath

import yaml

from paradnn.analysis import registry
from paradnn.analysis.registry import NEEDS
from paradnn.config import PROGRESS_ENV, ConfigError, load_yaml, read_bounded
from paradnn.imports import papermill
from paradnn.markup import literal
from paradnn.parameters import check_platforms, check_reference_dir, declared, validate_overrides
from paradnn.vocabulary import (
    DECIDED,
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    LEGACY,
    MEASURED,
    OK,
    PROJECTED_FAILS,
    PROJECTED_HOLDS,
    plain_outcome,
)

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "paradnn"
PIPELINE_BYTES = 1_000_000  # a pipeline file: a few dozen lines in practice


@dataclass(frozen=True)
class Pipeline:
    name: str  # one plain folder name under --outputs
    store: str  # relative to the pipeline's output folder, and inside it
    kernel: str
    parameters: dict
    notebooks: list[dict]  # each: "notebook" (as written), "source" (resolved Path), "output" (its reports' stem), "parameters"
    path: Path


@dataclass
class Report:
    notebook: str
    status: str  # ok | failed
    duration_s: float
    parameters: dict
    html: Path
    error: str = ""


def pipeline_path(name: str) -> Path:
    """``smoke`` -> ``pipelines/smoke.yaml``; a path to a YAML file is taken as is."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    candidate = ROOT / "pipelines" / f"{name}.yaml"
    if not candidate.exists():
        known = sorted(p.stem for p in (ROOT / "pipelines").glob("*.yaml"))
        raise ConfigError("PIPELINE", name, ", ".join(known) + " or a path to a pipeline .yaml file")
    return candidate


# A pipeline's name and each report's output name: one plain file name (no folder, no "..").
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def load_pipeline(name: str) -> Pipeline:
    """The pipeline ``name`` (see :func:`pipeline_path`), every field checked; ConfigError (one line) else.

    ``name`` and ``store`` stay inside the pipeline's output folder; a relative ``notebook``
    path resolves against the pipeline file's folder, then the project; each entry writes
    its reports under its own ``output`` name (default: the notebook's file name), and two
    entries with one output name are refused.
    """
    path = pipeline_path(name)
    text = read_bounded(path, "PIPELINE", PIPELINE_BYTES)
    try:
        spec = load_yaml(text, "PIPELINE", str(path))
    except yaml.YAMLError as exc:
        raise ConfigError("PIPELINE", str(path), f"a readable YAML pipeline file ({type(exc).__name__})") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("notebooks"), list) or not spec["notebooks"]:
        raise ConfigError("PIPELINE", str(path), "a YAML mapping with a non-empty list 'notebooks'")
    pipeline_name = _safe_name("name", spec.get("name", path.stem))
    store = spec.get("store", "results.sqlite")
    if not isinstance(store, str) or not store.strip() or PurePath(store).is_absolute() or ".." in PurePath(store).parts:
        raise ConfigError("store", store, "a file name inside the pipeline's output folder (no absolute path, no '..')")
    kernel = spec.get("kernel", KERNEL)
    if not isinstance(kernel, str) or not SAFE_NAME.fullmatch(kernel):
        raise ConfigError("kernel", kernel, "a Jupyter kernel name such as paradnn")
    parameters = spec.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise ConfigError("parameters", parameters, "a mapping of NAME: VALUE shared by every notebook")
    notebooks, outputs = [], set()
    for entry in spec["notebooks"]:
        entry = {"notebook": entry} if isinstance(entry, str) else entry
        if not isinstance(entry, dict) or not isinstance(entry.get("notebook"), str):
            raise ConfigError("notebooks", entry, "entries with 'notebook: PATH.ipynb' (and optional parameters, output)")
        source = _notebook_source(entry["notebook"], path)
        output = _safe_name("output", entry.get("output", source.stem))
        if output in outputs:
            raise ConfigError(
                "notebooks",
                entry["notebook"],
                f"entries with distinct output names ({output!r} is taken; give the repeated entry its own 'output: NAME')",
            )
        outputs.add(output)
        own = entry.get("parameters") or {}
        if not isinstance(own, dict):
            raise ConfigError("parameters", own, f"a mapping of NAME: VALUE for {entry['notebook']}")
        notebooks.append({**entry, "source": source, "output": output, "parameters": own})
    return Pipeline(name=pipeline_name, store=store, kernel=kernel, parameters=parameters, notebooks=notebooks, path=path)


def _safe_name(field: str, value: object) -> str:
    if not isinstance(value, str) or not SAFE_NAME.fullmatch(value) or value in (".", ".."):
        raise ConfigError(field, value, "a plain name of letters, digits, '_', '.' and '-' (no folder, no '..')")
    return value


def _notebook_source(text: str, pipeline_file: Path) -> Path:
    """A notebook entry's file: an absolute path as is; a relative one against the pipeline file's folder, then the project."""
    given = Path(text)
    candidates = [given] if given.is_absolute() else [pipeline_file.resolve().parent / given, ROOT / given]
    found = next((c.resolve() for c in candidates if c.suffix == ".ipynb" and c.is_file()), None)
    if found is None:
        raise ConfigError("notebook", text, "an existing .ipynb file, relative to the pipeline file or the project")
    try:  # papermill needs the notebook's language; a file that is no notebook is named, never echoed
        metadata = json.loads(found.read_text(encoding="utf-8")).get("metadata") or {}
        language = (metadata.get("kernelspec") or {}).get("language") or (metadata.get("language_info") or {}).get("name")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        language = None
    if not language:
        raise ConfigError("notebook", text, "a Jupyter notebook with kernel metadata (kernelspec.language)")
    return found


def outputs_folder(outputs: Path, pipeline: Pipeline) -> Path:
    """``outputs/<pipeline name>``, created and writable, with the pipeline's store inside it; ConfigError else."""
    try:
        out = (outputs / pipeline.name).resolve()
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        allowed = f"a folder that can be created and written ({exc.strerror or exc})"
        raise ConfigError("--outputs", str(outputs), allowed) from None
    try:  # a real write: permissions alone do not say it (root, read-only mounts)
        probe = out / f".write-probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise ConfigError("--outputs", str(outputs), f"a folder that can be written ({exc.strerror or exc})") from None
    store = (out / pipeline.store).resolve()
    if not store.is_relative_to(out) or store == out:
        raise ConfigError("store", pipeline.store, f"a file inside {out}")
    return out


def ensure_kernel(name: str = KERNEL) -> None:
    """Register this interpreter as Jupyter kernel ``name`` if it is not registered yet."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(name)
        if Path(spec.argv[0]).resolve() == Path(sys.executable).resolve():
            return
    except NoSuchKernel:
        pass
    subprocess.run(
        [sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", name, "--display-name", f"Python ({name})"],
        check=True,
        capture_output=True,
    )


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def progress_shown(path: Path, step: str):
    """While a notebook runs, show its sweeps' progress (written to ``path`` by the kernel, see
    :class:`paradnn.sections.common.ProgressFile`): one updating line on a terminal, and in a log
    only each sweep's last line (no carriage returns)."""
    path.unlink(missing_ok=True)
    os.environ[PROGRESS_ENV] = str(path)  # the kernel inherits it
    stop = threading.Event()
    terminal = sys.stderr.isatty()

    def follow() -> None:
        shown = ""
        while not stop.wait(1.0):
            try:
                lines = path.read_text().splitlines()
            except OSError:
                continue
            if lines and lines[-1] != shown:
                shown = lines[-1]
                if terminal:
                    print(f"\r{step}: {shown}\033[K", end="", file=sys.stderr, flush=True)
        if terminal and shown:
            print(file=sys.stderr, flush=True)
        elif shown:  # a log: the last state of each sweep, once
            finished = [line for line in path.read_text().splitlines() if line.startswith("finished")]
            for line in finished:
                _say(f"{step}: {line}")

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        os.environ.pop(PROGRESS_ENV, None)
        path.unlink(missing_ok=True)


KERNEL_LOG_ENV = "PARADNN_KERNEL_LOG"


def _kernel_manager_class(scratch: str):
    from jupyter_client.manager import AsyncKernelManager

    class LoggedKernelManager(AsyncKernelManager):
        """Launches the kernel with its stderr in a log file beside the report, not on the terminal
        (at shutdown ipykernel prints asyncio noise there; what matters reaches the notebook), and
        with ``scratch`` as its TMPDIR: papermill may end a kernel without its exit hooks (and its
        sweep workers with it), which would leave TensorFlow's autograph files and the workers'
        folders in /tmp; ``scratch`` is removed after the notebook."""

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            log = os.environ.get(KERNEL_LOG_ENV)
            if log:
                kw["stderr"] = open(log, "ab")  # noqa: SIM115 - the kernel process owns it from here
            kw["env"] = {**kw.get("env", os.environ), "TMPDIR": scratch}
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return LoggedKernelManager


def execute_notebook(source: Path, executed: Path, params: dict, kernel: str = KERNEL) -> None:
    """Run ``source`` with ``params`` through papermill into ``executed``.

    The kernel is local, so it talks over Unix sockets (IPC) rather than TCP: no ports are
    opened, and ipykernel has no reason to warn about unencrypted TCP traffic. Its sockets
    live in a directory of their own: jupyter_client's default, ``kernel-ipc-N`` relative to
    the working directory, lets two kernels started at the same moment (two reports at once)
    pick the same sockets, and the second then waits 60 s for a kernel that never answers. That
    directory is the kernel's TMPDIR too. Its stderr goes to ``<executed>.kernel.log``.
    """
    import tempfile

    from traitlets.config import Config

    pm = papermill()

    os.environ[KERNEL_LOG_ENV] = str(executed.with_suffix(".kernel.log"))
    try:
        with tempfile.TemporaryDirectory(prefix="paradnn-kernel-") as scratch:
            config = Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(scratch, "ipc")}})
            pm.execute_notebook(
                str(source),
                str(executed),
                parameters=params,
                kernel_name=kernel,
                cwd=str(ROOT),
                progress_bar=False,
                kernel_manager_class=_kernel_manager_class(scratch),
                config=config,
            )
    finally:
        os.environ.pop(KERNEL_LOG_ENV, None)


def notebook_parameters(pipeline: Pipeline, entry: dict, overrides: dict, store: Path, reference: Path | None) -> dict:
    """Pipeline-wide, then per-notebook, then command-line parameters; paths made absolute.

    ``reference_dir`` goes only to the notebooks that declare it.
    """
    params = {**pipeline.parameters, **(entry.get("parameters") or {}), **overrides}
    params["store"] = str(store)
    if reference is not None and "reference_dir" in declared(entry["source"]):
        params["reference_dir"] = str(reference.resolve())
    return params


def provenance(store: Path, params: dict, observations: Path | None = None) -> str:
    """Markdown summary placed at the top of each report: when, what, on what, how quiet the
    machine was while it timed, and the verdicts."""
    from paradnn.analysis.results import Results
    from paradnn.store import Store

    platform, software, others, timing, shown_for = "not measured yet", {}, [], "", {}
    try:
        timing = f"  \n**timing** {literal(Results.load(store).contention_line())}"
        with Store(store, create=False, readonly=True) as s:
            rows = s.platforms()
        measured = rows[rows["source"] == MEASURED].sort_values("measured_at")
        named = {name: json.loads(group.iloc[-1]["info"]) for name, group in measured.groupby("platform", sort=True)}
        if named:  # the newest record of the store (this machine, when it measured last) heads the header
            info = json.loads(measured.iloc[-1]["info"])
            platform = f"{_machine(info)}; measured as {', '.join(named)}"
            software, shown_for = info.get("software", {}), info
        if len(named) > 1:  # several platforms (a merged study): each one's machine and software stack
            others = [f"{name}: {_machine(i)}; {_software(i.get('software', {}), i)}" for name, i in named.items()]
    except Exception:  # noqa: BLE001 - provenance must never break a report
        pass
    if others:  # a merged study: every platform's machine and software stack
        platform = "; ".join(others)
        software = {}
    sw = _software(software, shown_for) if software else "per platform, above" if others else "unknown"
    shown = ", ".join(f"<code>{literal(k)}={literal(repr(v))}</code>" for k, v in params.items())
    return (
        f"**Report generated** {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z} · **store** <code>{literal(store)}</code>  \n"
        f"**{'platforms' if others else 'platform'}** {literal(platform)}  \n**software** {literal(sw)}  \n**parameters** {shown}"
        + timing
        + _verdict_summary(observations)
    )


def _machine(info: dict) -> str:
    memory = (info.get("memory_bytes") or 0) / 2**30
    return f"{info.get('name')} on {info.get('host')} ({info.get('cores')} cores, {memory:.0f} GiB)"


def _software(software: dict, info: dict | None = None) -> str:
    """The stack in words; TensorFlow's CUDA build only on a machine that had a GPU to use it."""
    gpu = (info or {}).get("devices", {}).get("GPU", 1)
    return ", ".join(f"{k} {v}" for k, v in software.items() if v and (gpu or k not in ("cuda", "cudnn"))) or "unknown"


def _verdict_summary(path: Path | None) -> str:
    """'**the paper's observations here** O1 holds x7, ...' from a report's published verdicts."""
    try:
        rows = json.loads(path.read_text()) if path else []
    except (OSError, ValueError):
        return ""
    counts: dict[str, int] = {}
    for row in rows:
        if row.get("id"):
            kind = "needs other hardware or data" if row["verdict"].startswith("needs") else row["verdict"]
            counts[kind] = counts.get(kind, 0) + 1
    if not counts:
        return ""
    shown = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    return f"  \n**the paper's observations in this report** {literal(shown)} (the table at the end has the numbers)"


def export_html(executed: Path, target: Path, header: str, title: str = "") -> None:
    """HTML without code cells: ``title`` as the page title, ``header`` under the notebook's
    first heading, and every figure's title as its image's alternative text."""
    papermill()  # nbformat and nbconvert validate with jsonschema: imported first without what they do not use
    import nbformat
    from bs4 import BeautifulSoup
    from nbconvert import HTMLExporter

    nb = nbformat.read(executed, as_version=4)
    first_heading = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("# ")), -1)
    nb.cells.insert(first_heading + 1, nbformat.v4.new_markdown_cell(header))
    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title or target.stem}})
    alts = [
        o.get("metadata", {}).get("image/png", {}).get("alt", "")
        for c in nb.cells
        for o in c.get("outputs", [])
        if "image/png" in o.get("data", {})
    ]
    soup = BeautifulSoup(body, "html.parser")
    for img, alt in zip(soup.select('img[src^="data:image/png"]'), alts):
        if alt:
            img["alt"] = alt
    target.write_text(str(soup))


@contextlib.contextmanager
def _report_dir(out: Path):
    """The reports executed inside write their verdicts into ``out`` (:data:`registry.REPORT_DIR_ENV`)."""
    os.environ[registry.REPORT_DIR_ENV] = str(out.resolve())
    try:
        yield
    finally:
        os.environ.pop(registry.REPORT_DIR_ENV, None)


def run_pipeline(
    name: str,
    overrides: dict | None = None,
    reference: Path | None = None,
    outputs: Path = Path("outputs"),
    store: Path | None = None,
) -> list[Report]:
    """Execute every notebook of pipeline ``name``; see the module docstring. ``store``: an existing
    store to report on (a merged study, say) instead of the pipeline's own in ``outputs/<name>/``."""
    pipeline = load_pipeline(name)
    if reference is not None:
        check_reference_dir("--reference", str(reference))
    overrides = validate_overrides(pipeline, overrides or {})  # from Python too: the bounds of the command line
    own = pipeline  # its store inside its output folder, which is checked before anything is created
    if store is not None:
        from paradnn.store import Store, StoreError
        from paradnn.store.db import check_undamaged

        try:
            Store(store, create=False, readonly=True, snapshot=True).close()  # a paradnn store at all
            check_undamaged(store)  # else six notebooks fail on it one after the other
        except (StoreError, sqlite3.DatabaseError) as exc:
            raise ConfigError("--store", str(store), f"an existing, undamaged paradnn store ({exc})") from None
        if not os.access(store, os.W_OK):  # report what it holds; measure nothing
            _say(f"{store} is read-only: the reports use what it holds and measure nothing")
            overrides = {**overrides, "measure_missing": False}
        pipeline = Pipeline(
            pipeline.name, str(store.resolve()), pipeline.kernel, pipeline.parameters, pipeline.notebooks, pipeline.path
        )
    check_platforms(
        [notebook_parameters(pipeline, entry, overrides, Path(), None) for entry in pipeline.notebooks],
        store if store is not None else outputs / own.name / own.store,
    )
    out = outputs_folder(outputs, own)  # created once nothing is refused
    store = out / pipeline.store  # an absolute store stays as it is
    store.parent.mkdir(parents=True, exist_ok=True)
    ensure_kernel(pipeline.kernel)
    reports = []
    for n, entry in enumerate(pipeline.notebooks, 1):
        source, stem = entry["source"], entry["output"]
        params = notebook_parameters(pipeline, entry, overrides or {}, store, reference)
        executed, page = out / f"{stem}.ipynb", out / f"{stem}.html"
        (out / f"observations-{stem}.json").unlink(missing_ok=True)  # never a stale verdict from an earlier run
        step = f"[{n}/{len(pipeline.notebooks)}] {stem}"
        _say(f"{step}: running (measuring within {params.get('budget_minutes', '?')} min)")
        start = time.monotonic()
        status, error = "ok", ""
        try:
            with progress_shown(out / f"progress-{stem}.log", step), _report_dir(out):
                execute_notebook(source, executed, params, pipeline.kernel)
        except Exception as exc:  # noqa: BLE001 - a failed notebook is a red row, not a crash
            status, error = "failed", f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        duration = time.monotonic() - start
        _say(f"{step}: {status} in {duration:.0f} s" + (f" ({error})" if error else ""))
        if executed.exists():
            export_html(
                executed,
                page,
                provenance(store, params, out / f"observations-{stem}.json"),
                f"{stem.replace('_', ' ')} — paradnn {pipeline.name}",
            )
        else:
            page.write_text(f"<html><body><h1>{html.escape(stem)}</h1><pre>{html.escape(error)}</pre></body></html>")
        reports.append(Report(stem, status, duration, params, page, error))
    observations = registry.merge(out, [r.notebook for r in reports])
    (out / "observations.json").write_text(json.dumps(observations, indent=1, default=str))
    write_index(out, pipeline, reports, observations)
    return reports


VERDICT_COLOURS = {HOLDS: "#e6f4ea", FAILS: "#fce8e6", PROJECTED_HOLDS: "#eef6f0", PROJECTED_FAILS: "#fbefed"}
# The figures a reader should see first, by report: (report, what it shows).
FIRST_FIGURES = (
    ("architecture", "Fig. 2: FLOPS utilisation over batch and width, with the regression of what drives it"),
    ("platform_comparison", "Fig. 9 and Table 3: this machine beside the 2019 V100 and TPU v2-8 on their own grid"),
    ("workloads", "Fig. 11: every family and real workload on every platform"),
)


def _interval_words(row: dict) -> str:
    """A verdict's effect in a few words: the effect, its 95% interval and n, where it has them."""
    effect, interval = row.get("effect"), row.get("interval")
    if not isinstance(effect, (int, float)) or isinstance(effect, bool) or not math.isfinite(effect):
        return ""
    span = f" (95% {interval[0]:.3g} to {interval[1]:.3g})" if interval and None not in interval else ""
    statistic = (row.get("rule") or {}).get("statistic") or "effect"
    return f"{statistic} {effect:.3g}{span}" + (f", n {row['n']}" if row.get("n") is not None else "")


def observations_table(observations: list[dict]) -> str:
    """All 14 observations in one HTML table: the claim, then each verdict on one line with its
    interval, its evidence a click away (a ``<details>``) with the report that judged it."""
    rows = []
    for line in registry.summary(observations):
        mine = [r for r in observations if r["id"] == line["id"]]
        verdicts = []
        for r in mine:
            v, platform, report = r["verdict"], r.get("platform", ""), r.get("report", "")
            link = f' (<a href="{html.escape(report)}.html">{html.escape(report)}</a>)' if report else ""
            words = _interval_words(r)
            verdicts.append(
                f'<div style="background:{VERDICT_COLOURS.get(v, "#f1f3f4")};padding:2px 4px;margin:2px 0">'
                f"<b>{html.escape(v)}</b>{' on ' + html.escape(platform) if platform else ''}"
                f"{': ' + html.escape(words) if words else ''}"
                f"<details><summary><small>evidence</small></summary><small>{html.escape(registry.said(r))}"
                f"{link}</small></details></div>"
            )
        overall = f"<div><i>{html.escape(standing(mine))}</i></div>" if mine else ""
        rows.append(
            f"<tr><td>{line['id']}</td><td>{html.escape(line['claim'])}<br><small>section {line['section']}, "
            f"{html.escape(line['figure'])}</small></td><td>{overall}{''.join(verdicts)}</td></tr>"
        )
    return (
        "<h2>The paper's 14 observations</h2><p>Numbered as in Table 1 of the published paper (MLSys 2020); "
        "<code>observations.json</code> in this folder has every verdict with its figures.</p>"
        '<table class="obs"><tr><th>#</th><th>claim</th><th>verdicts</th></tr>' + "".join(rows) + "</table>"
    )


def standing(verdicts: list[dict]) -> str:
    """Where one observation stands over all its verdicts, counted: every decided verdict agrees,
    they disagree, or none decided."""
    decided = [v["verdict"] for v in verdicts if v["verdict"] in DECIDED]
    if not decided:
        return f"overall: undecided (none of its {len(verdicts)} verdict(s) decided)"
    counts = {kind: decided.count(kind) for kind in DECIDED if kind in decided}
    counted = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    if len(counts) == 1:
        return (
            f"overall: {decided[0]} ({counted} of {len(verdicts)} verdict(s); the others undecided)"
            if len(decided) < len(verdicts)
            else f"overall: {decided[0]} (all {len(verdicts)} verdict(s))"
        )
    return f"overall: mixed ({counted}, of {len(verdicts)} verdict(s))"


def platform_lines(store: str | Path) -> list[str]:
    """One line per platform of a store: its name, where its rows come from, its machine and
    software stack (measured here) and its rows."""
    from paradnn.store import Store

    try:
        with Store(store, create=False, readonly=True) as s:
            platforms, counts = (
                s.platforms(),
                s.conn.execute("SELECT platform, count(*), sum(state = ?) FROM results GROUP BY platform", (OK,)).fetchall(),
            )
    except Exception:  # noqa: BLE001 - the index must never break on its store
        return []
    lines = []
    for name, rows, ok in counts:
        records = platforms[platforms["platform"] == name].sort_values("measured_at")
        info = json.loads(records.iloc[-1]["info"]) if len(records) else {}
        if len(records) and records.iloc[-1]["source"] == LEGACY:
            where = f"the original study (2019), {info.get('name', name)}"
        elif info:
            where = f"{_machine(info)}; {_software(info.get('software', {}), info)}"
        else:
            where = "no platform record"
        lines.append(f"<b>{html.escape(name)}</b>: {html.escape(where)}; {ok or 0} of {rows} rows ok")
    return lines


def verdict_counts(observations: list[dict]) -> str:
    """How the verdicts came out, in one sentence."""
    kinds = {HOLDS: 0, FAILS: 0, INCONCLUSIVE: 0, NEEDS: 0}
    for r in observations:
        v = str(r["verdict"])
        key = NEEDS if v.startswith(NEEDS) else plain_outcome(v)
        kinds[key] = kinds.get(key, 0) + 1
    return (
        f"{len(observations)} verdicts on the paper's 14 observations: <b>{kinds[HOLDS]} hold</b>, "
        f"<b>{kinds[FAILS]} do not hold</b>, {kinds[INCONCLUSIVE]} inconclusive (the 95% interval "
        f"crosses the threshold, or too few rows), {kinds[NEEDS]} need hardware or data not here."
    )


def write_index(out: Path, pipeline: Pipeline, reports: list[Report], observations: list[dict] | None = None) -> Path:
    """``index.html``: the answer first (the platforms of the store, how the verdicts came out, the
    figures to see first), then each report with its status and duration (parameters folded
    away), then the 14 observations, each verdict on one line."""
    rows = []
    for r in reports:
        colour = "#e6f4ea" if r.status == "ok" else "#fce8e6"
        params = "<br>".join(f"{html.escape(k)} = {html.escape(repr(v))}" for k, v in r.parameters.items() if k != "store")
        rows.append(
            f'<tr style="background:{colour}"><td><a href="{html.escape(r.html.name)}">{html.escape(r.notebook)}</a></td>'
            f"<td>{r.status}{'<br><small>' + html.escape(r.error) + '</small>' if r.error else ''}</td>"
            f"<td>{r.duration_s:.0f} s</td><td><details><summary><small>parameters</small></summary><small>{params}"
            f"</small></details></td></tr>"
        )
    store = Path(pipeline.store) if Path(pipeline.store).is_absolute() else out / pipeline.store
    machines = "".join(f"<li>{line}</li>" for line in platform_lines(store)) or "<li>nothing measured yet</li>"
    ran = {r.notebook for r in reports}
    first = "".join(
        f'<li><a href="{name}.html">{name.replace("_", " ")}</a>: {html.escape(what)}</li>'
        for name, what in FIRST_FIGURES
        if name in ran
    )
    counts = f"<p>{verdict_counts(observations)}</p>" if observations else ""
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>paradnn — {html.escape(pipeline.name)} reports</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:80em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.4em .8em;vertical-align:top;text-align:left}}
details summary{{cursor:pointer;color:#555}} table.obs td:nth-child(2){{width:35%}}</style></head>
<body><h1>paradnn reports — pipeline <code>{html.escape(pipeline.name)}</code></h1>
<p>Which platform suits which model, and why: the paper's sections measured on these platforms.</p>
<ul>{machines}</ul>
{counts}
{f"<p>See first:</p><ul>{first}</ul>" if first else ""}
<h2>Reports</h2>
<p>Generated {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z} from <code>{html.escape(str(pipeline.path))}</code>.
Store: <code>{html.escape(pipeline.store)}</code>{"" if Path(pipeline.store).is_absolute() else " in this folder"}.</p>
<table><tr><th>report</th><th>status</th><th>duration</th><th>parameters</th></tr>
{"".join(rows)}
</table>
{observations_table(observations) if observations is not None else ""}
</body></html>
"""
    index = out / "index.html"
    index.write_text(page)
    return index
