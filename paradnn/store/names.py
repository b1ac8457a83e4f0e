"""One name, one machine: the platform names of a store, checked inside every write.

A platform's name (``cpu``, ``xeon-lab``, ``v100``) is what reports and comparisons group by,
so a name that covered two machines would quietly average them. Every path that writes
platform rows (a sweep's results and platform record, a merge, an import of the original
study) calls :func:`check_writes` *inside* its write transaction, so two writers racing
cannot both win: SQLite serialises the transactions and the second sees the first's rows.

* A **machine** is the fingerprint less its software stack: platform id, device name and
  core count (:func:`machine`). One machine under several software stacks is one machine.
* **Reserved names**: the datasheets' names (``v100``, ``h100``, ``tpu-v2-8``, ...) belong to
  their datasheet and to the original study's imported rows; measured rows never take them.
* **Stored names** read from a source store are checked too (:func:`name_problem`): not
  empty, not padded, printable (no newline), at most :data:`MAX_NAME` characters.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping

from paradnn.identity import hardware
from paradnn.platform import DATASHEETS, device_id, folded
from paradnn.store.errors import StoreError

__all__ = ["MAX_NAME", "FoldError", "check_writes", "machine", "name_problem", "reserved"]

MAX_NAME = 100
Machine = tuple  # (platform id, device name, cores, memory, vector units; each but the id None where unknown)


class FoldError(StoreError):
    """A write that would put two machines under one platform name, or a machine under a reserved name."""


def machine(info: Mapping, platform_id: object, device: object) -> Machine:
    """A machine: platform id, device name, core count, memory and vector units (its fingerprint
    without the software stack; :func:`paradnn.identity.hardware`)."""
    return (info.get("id") or platform_id, info.get("name") or device, info.get("cores"), *hardware(dict(info)))


def describe(found: Machine) -> str:
    platform_id, device, cores, memory, isa = found
    said = [f"{cores} cores" if cores else "", memory or "", isa or ""]
    return (
        f"{device or 'an unnamed device'}" + (f" ({', '.join(p for p in said if p)})" if any(said) else "") + f" as {platform_id}"
    )


def same(a: Machine, b: Machine) -> bool:
    """One machine: the same id, and the same device, cores, memory and vector units where both say
    (a row without its platform's record, or a record of an older paradnn, may not say them)."""
    return a[0] == b[0] and all(x is None or y is None or x == y for x, y in zip(a[1:], b[1:]))


def reserved(name: str) -> bool:
    """True for a datasheet's name, which only its datasheet and the original study's rows may use, in any
    case or width (``V100``, a full-width ``ｖ１００``)."""
    return folded(name) in DATASHEETS


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a stored platform name (None when it can)."""
    if not isinstance(name, str) or not name:
        return "an empty platform name"
    if not name.isprintable():
        return "a platform name with a newline or control character"
    if name != name.strip():
        return "a platform name padded with spaces"
    if len(name) > MAX_NAME:
        return f"a platform name of {len(name)} characters (at most {MAX_NAME})"
    return None


def records(conn: sqlite3.Connection) -> dict[str, Machine]:
    """Fingerprint -> machine, from a store's platform records."""
    out = {}
    for fingerprint, platform, name, info in conn.execute("SELECT fingerprint, platform, name, info FROM platforms"):
        try:
            parsed = json.loads(info or "{}")
        except json.JSONDecodeError:
            parsed = {}
        out[fingerprint] = machine(parsed if isinstance(parsed, dict) else {}, platform, name)
    return out


def row_machine(row: Mapping, known: Mapping[str, Machine]) -> Machine:
    """The machine a result row was measured on: its platform record's, else what the row says."""
    return known.get(str(row.get("platform_fingerprint"))) or machine(
        {}, row.get("platform_id") or row.get("platform"), row.get("device_name")
    )


def stored(conn: sqlite3.Connection, names: Iterable[str], known: Mapping[str, Machine]) -> dict[str, set[Machine]]:
    """The machines a store holds under each of ``names`` (its rows and its platform records)."""
    names = sorted(set(names))
    out: dict[str, set[Machine]] = {n: set() for n in names}
    if not names:
        return out
    marks = ", ".join("?" * len(names))
    sql = f"SELECT DISTINCT platform, platform_id, platform_fingerprint, device_name FROM results WHERE platform IN ({marks})"
    for row in conn.execute(sql, names):
        out[row[0]].add(row_machine(dict(zip(("platform", "platform_id", "platform_fingerprint", "device_name"), row)), known))
    for fingerprint, platform in conn.execute(f"SELECT fingerprint, platform FROM platforms WHERE platform IN ({marks})", names):
        out[platform].add(known[fingerprint])
    return out


def check_writes(
    conn: sqlite3.Connection,
    incoming: Mapping[str, Iterable[tuple[Machine, str]]],
    measured: Iterable[str],
    store: str,
    hint: Callable[[str, str], str],
) -> None:
    """Refuse (:class:`FoldError`) a write whose names would cover two machines.

    ``incoming``: name -> (machine, where it comes from) about to be written through ``conn``
    (inside the caller's write transaction), in the order met; ``measured``: the names that
    measured rows take (a reserved name is refused for them). ``hint(name, where)`` ends the
    message: how to name apart the name at fault, met in ``where``.
    """
    for name in sorted(n for n in set(measured) if isinstance(n, str)):
        if reserved(name):
            raise FoldError(
                f"platform name {name!r} is reserved for its datasheet and the original study's rows; {hint(name, 'it')}"
            )
    names = [n for n in incoming if isinstance(n, str)]
    seen = {name: [(m, store) for m in sorted(found, key=str)] for name, found in stored(conn, names, records(conn)).items()}
    _check_spelling(conn, incoming, names, [name for name in names if not seen[name]], hint)
    for name in names:
        before = seen[name]
        for new, where in dict.fromkeys(incoming[name]):
            clash = next((b for b in before if not same(new, b[0])), None)
            if clash:
                raise FoldError(
                    f"platform {name!r} would fold two machines into one: {describe(clash[0])} in {clash[1]} "
                    f"and {describe(new)} in {where}; {hint(name, where)}"
                )
            before.append((new, where))


def _check_spelling(
    conn: sqlite3.Connection,
    incoming: Mapping[str, Iterable[tuple[Machine, str]]],
    names: list[str],
    new: list[str],
    hint: Callable[[str, str], str],
) -> None:
    """Refuse a name that passes for another: a device id (``GPU``, a full-width ``ｇｐｕ``) naming a
    machine measured as something else, or a name ``new`` to the store that differs from one it (or
    this write) holds only in case or width (``Lab-X`` beside ``lab-x``), which people would read as
    one. A name the store already holds was checked when it came in, so a sweep's rows under their
    platform's name read no other name."""
    for name in names:
        for found, where in incoming[name]:
            if device_id(name) and name != found[0]:
                raise FoldError(
                    f"platform name {name!r} is a device id, but {where} measured that machine as {found[0]!r}; "
                    f"{hint(name, where)}"
                )
    if not new:
        return
    held = conn.execute("SELECT platform FROM results UNION SELECT platform FROM platforms").fetchall()
    spelt = {folded(str(row[0])): str(row[0]) for row in held}
    for name in new:
        other = spelt.setdefault(folded(name), name)
        if other != name:
            where = next(iter(incoming[name]))[1]
            raise FoldError(
                f"platform names {other!r} and {name!r} differ only in case or width (one name to a reader); {hint(name, where)}"
            )
