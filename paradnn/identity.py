"""Run identity: what makes two results the same measurement.

One definition serves the store's key, the sweep's skip logic and the ceilings cache:

* the **platform fingerprint** names a platform as measured: its id (``cpu``,
  ``cpu[threads=1]``, ``gpu:0``), the device's name, the core count and the software that
  shapes a timing (TensorFlow, Keras, CUDA);
* the **run key** names a measurement: the configuration (family and label), the
  family's version, the run settings (dtype policy, XLA, and every setting added later),
  the platform fingerprint and the whole software stack (except the git revision: a
  rerun from a new commit with the same versions skips what is already measured). The
  framework (TensorFlow, JAX or PyTorch) is a run setting; JAX's and PyTorch's versions join
  the key of their own runs only, so installing either changes no TensorFlow result's identity.

A platform's name (``sweep --name xeon-lab``, ``merge --rename cpu=xeon-lab``) is what its
rows' ``platform`` column holds and what reports address; the key holds the platform's id
(``platform_id`` where it was named, else ``platform``), so naming or renaming a platform
never changes a run key, and two machines' ``cpu`` stay apart by their fingerprints.

Identity fields added after the first store schema join the key only when they differ
from the value every older row implicitly had (``LATER_IDENTITY``), so old rows keep
their keys and a sweep with default settings still skips them.
"""

from __future__ import annotations

import hashlib
import json
import re

from paradnn import settings

SOFTWARE = ("tensorflow", "keras", "python", "numpy", "cuda", "cudnn", "paradnn", "git")
# Identity fields of schema 1, in key order: the configuration, the run settings declared
# since the start (dtype, XLA, platform), the platform's fingerprint.
BASE_IDENTITY = ("family", "label", *settings.identity_columns(schema=1), "platform_fingerprint")
# Identity fields added since, with the value rows written before them implicitly have:
# the family's version, the run settings declared later, JAX's and PyTorch's versions (their own rows only).
LATER_IDENTITY: dict[str, object] = {
    "family_version": 1,
    **settings.LEGACY,
    **dict.fromkeys(settings.FRAMEWORK_VERSION_COLUMNS.values()),
}


# The CPU features that tell two hosts of one model name apart (cloud VMs say "AMD EPYC" for
# every generation): the vector and matrix units TensorFlow's kernels use.
ISA_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
)


def hardware(info: dict) -> tuple[str | None, str | None]:
    """What tells two hosts of one CPU model and core count apart, as a platform record says it: the
    memory (whole GiB) and the vector units (``avx2+fma``); None where the record does not say
    (a record written before paradnn kept the units: it is matched on model and cores alone)."""
    memory, isa = info.get("memory_bytes"), info.get("isa")
    known = isinstance(memory, (int, float)) and not isinstance(memory, bool) and memory > 0
    return (
        f"{round(memory / 2**30)} GiB" if known else None,  # type: ignore[operator]
        ("+".join(isa) or "none") if isinstance(isa, list) else None,
    )


def fingerprint(info: dict) -> str:
    """A key that changes when the hardware (model, cores, memory, vector units), thread count or
    software stack changes."""
    sw = info["software"]
    parts = [info["id"], info["name"], str(info["cores"]), sw["tensorflow"], sw["keras"], sw["cuda"]]
    if "isa" in info:  # a record of this paradnn: two hosts of one model name get two fingerprints
        parts += [part or "-" for part in hardware(info)]
    return re.sub(r"[^A-Za-z0-9_.=\-]+", "_", "|".join(parts))


def run_key(record: dict) -> str:
    """The identity of a measurement record (a store row or a row-to-be); see the module docstring."""
    parts = [record.get(k) for k in BASE_IDENTITY]
    platform = BASE_IDENTITY.index("platform")
    parts[platform] = record.get("platform_id") or parts[platform]  # the id, never the name
    xla = BASE_IDENTITY.index("xla")
    parts[xla] = None if parts[xla] is None else bool(parts[xla])  # a row read back from SQLite holds 0/1
    parts += [record.get(f"sw_{s}") for s in SOFTWARE if s != "git"]
    later = {k: record[k] for k, default in LATER_IDENTITY.items() if record.get(k) not in (None, default)}
    if later:
        parts.append(sorted(later.items()))
    return hashlib.sha1(json.dumps(parts, default=str).encode()).hexdigest()[:20]


PROFILE_SOURCE = "profile"  # the traces table's ``source`` of this machine's profiles: profile:PLATFORM:DTYPE


def profile_source(platform: str, dtype: str) -> str:
    """The identity of a stored profile: its ``source`` in the traces table, one per platform and
    dtype policy (rows are unique per source, label and category). The engine names its profiles
    so; the store renames them with their platform; the analysis reads them by it."""
    return f"{PROFILE_SOURCE}:{platform}:{dtype}"
