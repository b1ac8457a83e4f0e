"""Merging, property by property (Hypothesis, bounded): random sources, renames and merges, one
after another and two at once, never end with one name over two machines, never lose or
duplicate a row, leave a refused merge's destination as it was, and a rename there and back is
the identity on what the reports read."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paradnn.identity import fingerprint
from paradnn.store import Store, StoreError
from paradnn.store.merge import merge
from tests.test_merge import ROOT, SOFTWARE

MACHINES = [("AMD EPYC 7B13", 2), ("Intel Xeon 8480", 64), ("Apple M2", 8)]
NAMES = ["cpu", "lab-a", "lab-b"]
BOUNDED = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# A source: name -> machine index, then rows as (name, label index, finished_at).
sources = st.dictionaries(st.sampled_from(NAMES), st.integers(0, len(MACHINES) - 1), min_size=1, max_size=2).flatmap(
    lambda names: st.tuples(
        st.just(names),
        st.lists(
            st.tuples(st.sampled_from(sorted(names)), st.integers(0, 3), st.sampled_from([1.0, 2.0])), min_size=1, max_size=6
        ),
    )
)
renames = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(NAMES), max_size=2)


def write_source(path: Path, spec) -> Path:
    names, rows = spec
    with Store(path) as s:
        for name, m in sorted(names.items()):
            device, cores = MACHINES[m]
            info = {"id": "cpu", "name": device, "cores": cores, "software": SOFTWARE}
            s.put_platform(fingerprint(info), name, info, None, "measured")
        records = {}
        for name, label, finished in rows:
            device, cores = MACHINES[names[name]]
            info = {"id": "cpu", "name": device, "cores": cores, "software": SOFTWARE}
            record = {
                "family": "fc",
                "label": f"layer_1-node_{8 * 2**label}-input_8-output_8-bs_8",
                "layers": 1,
                "nodes": 8 * 2**label,
                "input": 8,
                "output": 8,
                "batch": 8,
                "platform": name,
                "platform_id": None if name == "cpu" else "cpu",
                "platform_fingerprint": fingerprint(info),
                "device_name": device,
                "software": SOFTWARE,
                "state": "ok",
                "step_time_s": 0.01 * (label + 1),
                "finished_at": finished + 10 * NAMES.index(name),
            }  # one measurement has one name
            records[(name, label, finished)] = record
        s.add_results(list(records.values()))
    return path


def contents(path: Path) -> tuple[set, dict]:
    """(run key, finish time, name, device) of every row, and name -> devices."""
    if not path.exists():
        return set(), {}
    with Store(path, create=False, readonly=True) as s:
        rows = s.conn.execute("SELECT run_key, finished_at, platform, device_name FROM results").fetchall()
    marks = [tuple(r) for r in rows]
    assert len(marks) == len({m[:2] for m in marks}), "a row stored twice"
    held: dict = {}
    for _, _, name, device in marks:
        held.setdefault(name, set()).add(device)
    return set(marks), held


@BOUNDED
@given(
    specs=st.lists(sources, min_size=1, max_size=3), plan=st.lists(st.tuples(st.integers(0, 2), renames), min_size=1, max_size=4)
)
def test_merges_never_fold_lose_or_duplicate(specs, plan):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = [write_source(folder / f"s{i}.sqlite", spec) for i, spec in enumerate(specs)]
        dst = folder / "study.sqlite"
        for index, rename in plan:
            src = paths[index % len(paths)]
            before, _ = contents(dst)
            incoming, _ = contents(src)
            try:
                merge([src], dst, rename)
            except StoreError:
                assert contents(dst)[0] == before  # refused: as it was
                continue
            after, held = contents(dst)
            assert all(len(devices) == 1 for devices in held.values()), held  # one name, one machine
            assert {m[:2] for m in after} == {m[:2] for m in before} | {m[:2] for m in incoming}  # nothing lost or added twice
        assert not list(folder.glob(".*merging*"))


@BOUNDED
@given(spec=sources, new=st.sampled_from(["lab-x", "lab-y"]))
def test_a_rename_there_and_back_is_the_identity_on_what_reports_read(spec, new):
    from paradnn.analysis.results import Results

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        src = write_source(folder / "a.sqlite", spec)
        old = sorted({name for name, _, _ in spec[1]})[0]  # a name its rows carry (one machine's names share a record)
        merge([src], folder / "b.sqlite", {old: new})
        merge([folder / "b.sqlite"], folder / "c.sqlite", {new: old})
        columns = [
            "platform",
            "platform_id",
            "label",
            "run_key",
            "finished_at",
            "device_name",
            "step_time_s",
            "utilization",
            "platform_fingerprint",
        ]
        first = Results.load(src).frame[columns].sort_values(["run_key", "finished_at"]).reset_index(drop=True)
        again = Results.load(folder / "c.sqlite").frame[columns].sort_values(["run_key", "finished_at"]).reset_index(drop=True)
        assert first.equals(again)


@settings(max_examples=3, deadline=None)
@given(a=sources, b=sources)
def test_two_merges_at_once_never_fold(a, b):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = [write_source(folder / "a.sqlite", a), write_source(folder / "b.sqlite", b)]
        dst = folder / "study.sqlite"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", f"import paradnn; paradnn.merge([{str(p)!r}], {str(dst)!r})"],
                cwd=ROOT,
                stderr=subprocess.PIPE,
                text=True,
            )
            for p in paths
        ]
        codes = [p.wait(timeout=300) for p in procs]
        marks, held = contents(dst)
        assert all(len(devices) == 1 for devices in held.values()), held
        merged = [contents(p)[0] for p, code in zip(paths, codes) if code == 0]
        assert {m[:2] for m in marks} == set().union(*({m[:2] for m in s} for s in merged))
        assert any(code == 0 for code in codes)
