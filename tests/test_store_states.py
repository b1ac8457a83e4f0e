"""Stores as a state machine (Hypothesis, bounded): sweeps, merges, renames, imports of the
original study, exports and interrupted merges in any order over a few stores, with every
invariant checked after every step: no row lost or duplicated, no name over two machines, no
platform record without rows and no measured row without its record, and every input
byte-identical unless it was the destination. A planted fold (the name check switched off) is
found, so the machine can fail."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from paradnn.identity import fingerprint
from paradnn.store import Store, StoreError
from paradnn.store.merge import merge
from paradnn.vocabulary import MEASURED
from tests.test_merge import SOFTWARE

# Three machines, two of one CPU model and core count (told apart by memory and vector units).
MACHINES = [
    ("AMD EPYC", 2, 24 * 2**30, ["avx2", "avx512f", "fma"]),
    ("AMD EPYC", 2, 4 * 2**30, ["avx2", "fma"]),
    ("Intel Xeon 8480", 64, 256 * 2**30, ["amx_bf16", "avx2", "avx512f"]),
]
NAMES = ["cpu", "lab-a", "lab-b"]
STORES = 3
NO_SHRINKING = (Phase.explicit, Phase.reuse, Phase.generate)  # a planted fold only has to be found, not minimised
GPU_FILE = Path(__file__).resolve().parents[1] / "paradnn" / "data" / "paradnn-2019" / "gpu_fc.json"
BOUNDED = settings(
    max_examples=20,
    stateful_step_count=10,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def info_of(machine: int) -> dict:
    device, cores, memory, isa = MACHINES[machine]
    return {"id": "cpu", "name": device, "cores": cores, "memory_bytes": memory, "isa": isa, "software": SOFTWARE}


def sweep_rows(machine: int, name: str, labels: list[int], finished: float) -> list[dict]:
    """What a sweep of ``labels`` on ``machine`` named ``name`` stores (no TensorFlow)."""
    info = info_of(machine)
    return [
        {
            "family": "fc",
            "label": f"layer_1-node_{8 * 2**i}-input_8-output_8-bs_8",
            "layers": 1,
            "nodes": 8 * 2**i,
            "input": 8,
            "output": 8,
            "batch": 8,
            "platform": name,
            "platform_id": None if name == "cpu" else "cpu",
            "platform_fingerprint": fingerprint(info),
            "device_name": info["name"],
            "software": SOFTWARE,
            "state": "ok",
            "step_time_s": 0.01 * (i + 1),
            "finished_at": finished + i,
        }
        for i in labels
    ]


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def identities(path: Path) -> list[tuple]:
    """Every row of a store as what it is (a measurement: its machine's fingerprint, label and finish
    time; an imported row: its source, the platform it was measured as, label and state), with its name."""
    if not path.exists():
        return []
    with Store(path, create=False, readonly=True) as s:
        rows = s.conn.execute(
            "SELECT source, platform_fingerprint, label, finished_at, COALESCE(platform_id, platform), "
            "state, platform FROM results"
        ).fetchall()
    return [((r[1], r[2], r[3]) if r[0] == MEASURED else (r[0], r[4], r[2], r[5]), r[6]) for r in rows]


class Stores(RuleBasedStateMachine):
    """A few stores and a model of the rows each must hold (identity -> name)."""

    @initialize()
    def start(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="paradnn-states-"))
        self.paths = [self.folder / f"s{i}.sqlite" for i in range(STORES)]
        self.model: list[dict[tuple, str]] = [{} for _ in self.paths]
        self.clock = 1_000.0

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _written(self, index: int, write) -> bool:
        """Run a write into store ``index``; a refusal leaves it byte for byte as it was."""
        before = digest(self.paths[index])
        try:
            write()
        except StoreError:
            assert digest(self.paths[index]) == before, "a refused write changed the store"
            return False
        return True

    @rule(
        store=st.integers(0, STORES - 1),
        machine=st.integers(0, len(MACHINES) - 1),
        name=st.sampled_from(NAMES),
        labels=st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True),
    )
    def sweep(self, store: int, machine: int, name: str, labels: list[int]) -> None:
        self.clock += 100
        rows = sweep_rows(machine, name, labels, self.clock)

        def write() -> None:
            with Store(self.paths[store]) as s:
                s.put_platform(fingerprint(info_of(machine)), name, info_of(machine), None, "measured")
                s.add_results(rows)

        if self._written(store, write):
            self.model[store].update({(r["platform_fingerprint"], r["label"], r["finished_at"]): name for r in rows})

    @rule(
        source=st.integers(0, STORES - 1),
        store=st.integers(0, STORES - 1),
        rename=st.dictionaries(st.sampled_from(NAMES), st.sampled_from(["lab-x", "lab-y", *NAMES]), max_size=1),
    )
    def merge_into(self, source: int, store: int, rename: dict[str, str]) -> None:
        src, dst = self.paths[source], self.paths[store]
        if source == store or not src.exists():
            return
        kept = digest(src)
        incoming = identities(src)
        if not self._written(store, lambda: merge([src], dst, rename)):
            assert digest(src) == kept
            return
        assert digest(src) == kept, "a merge wrote into its source"
        for identity, name in incoming:  # what it lacked, under its new name; what it had stays as it was
            self.model[store].setdefault(identity, rename.get(name, name))

    @rule(store=st.integers(0, STORES - 1))
    def import_the_original_study(self, store: int) -> None:
        from paradnn.store.legacy import PLATFORMS, import_files, load_file

        study = load_file(GPU_FILE)
        path = self.paths[store]
        name = "v100"  # or the name a merge renamed the study's record to
        if path.exists():
            with Store(path, create=False, readonly=True) as s:
                name = (s.platform(PLATFORMS["v100"].fingerprint) or {}).get("platform", name)
        if self._written(store, lambda: _import(path, GPU_FILE, import_files)):
            for r in study.results:
                self.model[store].setdefault((r["source"], "v100", r["label"], r["state"]), name)

    @rule(store=st.integers(0, STORES - 1), onto=st.integers(0, STORES - 1))
    def export_onto_a_store(self, store: int, onto: int) -> None:
        from paradnn.cli import main

        if not self.paths[store].exists() or not self.paths[onto].exists():
            return
        kept = digest(self.paths[onto])
        result = CliRunner().invoke(
            main, ["results", "--store", str(self.paths[store]), "--format", "csv", "--output", str(self.paths[onto]), "--force"]
        )
        assert result.exit_code == 2 and digest(self.paths[onto]) == kept, "an export overwrote a store"

    @rule(source=st.integers(0, STORES - 1), store=st.integers(0, STORES - 1))
    def interrupted_merge(self, source: int, store: int) -> None:
        import paradnn.store.merge as module

        src, dst = self.paths[source], self.paths[store]
        if source == store or not src.exists():
            return
        kept, written = digest(dst), module._write

        def interrupted(conn, *args):
            written(conn, *args)
            raise KeyboardInterrupt  # after every row is in, before the commit

        module._write = interrupted
        try:
            with pytest.raises((KeyboardInterrupt, StoreError)):  # a refused merge never reaches its write
                merge([src], dst)
        finally:
            module._write = written
        assert digest(dst) == kept, "an interrupted merge changed its destination"
        assert not list(self.folder.glob(".*merging*")), "an interrupted merge left its temporary file"

    @invariant()
    def nothing_lost_or_duplicated(self) -> None:
        for path, model in zip(self.paths, getattr(self, "model", [])):
            found = identities(path)
            assert len(found) == len({i for i, _ in found}), f"{path.name}: a row stored twice"
            assert dict(found) == model, f"{path.name}: rows lost, added or renamed unasked"

    @invariant()
    def one_name_one_machine_and_every_row_its_record(self) -> None:
        for path in getattr(self, "paths", []):
            if not path.exists():
                continue
            with Store(path, create=False, readonly=True) as s:
                records = {
                    fp: (name, info) for fp, name, info in s.conn.execute("SELECT fingerprint, platform, info FROM platforms")
                }
                rows = s.conn.execute("SELECT DISTINCT platform, platform_fingerprint, source FROM results").fetchall()
            machines: dict[str, set] = {}
            for name, fp, _ in rows:  # one machine may carry two names (merged so): they share its one record
                assert fp in records, f"{path.name}: rows of {name} without their platform record"
                machines.setdefault(name, set()).add(_machine(records[fp][1]))
            measured_on = {fp for _, fp, _ in rows}
            for fp, (name, info) in records.items():
                assert fp in measured_on, f"{path.name}: a record of {name} without rows"
                machines.setdefault(name, set()).add(_machine(info))
            folded = {name: found for name, found in machines.items() if len(found) > 1}
            assert not folded, f"{path.name}: one name over two machines: {folded}"


def _machine(info: str) -> tuple:
    import json

    parsed = json.loads(info)
    return parsed.get("name"), parsed.get("cores"), parsed.get("memory_bytes"), tuple(parsed.get("isa") or ())


def _import(path: Path, file: Path, import_files) -> None:
    with Store(path) as s:
        import_files(s, [file])


def test_stores_keep_every_invariant_through_any_sequence_of_writes():
    run_state_machine_as_test(Stores, settings=BOUNDED)


def test_the_state_machine_finds_a_planted_fold(monkeypatch):
    """With the name check switched off, some sequence puts two machines under one name."""
    import paradnn.store.names as names

    monkeypatch.setattr(names, "same", lambda a, b: True)
    with pytest.raises(AssertionError, match="one name over two machines"):
        run_state_machine_as_test(Stores, settings=settings(BOUNDED, max_examples=60, phases=NO_SHRINKING, derandomize=True))
