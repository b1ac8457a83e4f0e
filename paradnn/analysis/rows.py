"""What makes two rows of a store comparable: the run identity column by column.

The low level of the results object (:mod:`paradnn.analysis.results`): which columns a
comparison holds fixed, what varies with an axis, how software versions order. The
pairing itself is :func:`paradnn.analysis.speedup.compare`.
"""

from __future__ import annotations

import math

import pandas as pd

from paradnn import settings
from paradnn.identity import SOFTWARE
from paradnn.vocabulary import is_finished

# The software columns of a run's identity (the git revision is kept but never compared).
SOFTWARE_COLUMNS = tuple(f"sw_{s}" for s in SOFTWARE if s != "git") + tuple(settings.FRAMEWORK_VERSION_COLUMNS.values())
# A run's identity, column by column: what it is, how it ran, where, under which software.
IDENTITY = ("family", "family_version", "label", *settings.identity_columns(), "platform_fingerprint", *SOFTWARE_COLUMNS)
# What varies with an axis because it cannot be held while the axis varies.
COVARY: dict[str, tuple[str, ...]] = {
    "platform": ("platform_fingerprint", *SOFTWARE_COLUMNS),  # another machine has its own stack
    "sw_tensorflow": ("platform_fingerprint", *SOFTWARE_COLUMNS),  # a stack brings its own Keras, NumPy, ...
    "framework": tuple(settings.FRAMEWORK_VERSION_COLUMNS.values()),  # recorded on each framework's own rows only
}
# Run settings that belong to the side being compared, by axis, and why: a comparison of that
# axis frees them unless told to hold them. A freed setting is still held wherever both sides
# have a value in common (like with like first); only where they share none does each side
# keep its own (the original study's TPU in bfloat16 against its V100 in float16).
SIDE_OWNED: dict[str, dict[str, str]] = {
    "platform": {
        "dtype": "each platform at its own precision, as the paper ran the TPU in bfloat16 and the V100 in float16",
        "xla": "each platform at its own XLA setting (its automatic choice where it made one)",
        "input_mode": "each platform fed as it was measured: the 2019 study through the host's input pipeline, "
        "this machine from device-resident data unless swept with --input host",
    },
    "sw_tensorflow": {"xla": "each software stack at its automatically chosen XLA setting"},
    "framework": {
        "xla": "each framework with its own compiler (JAX always compiles with XLA; TensorFlow's XLA and "
        "torch.compile are each at the setting asked for)"
    },
}
# Side-owned settings each side keeps at its own value where one side is the original study's, even
# where both have a value in common: a chip measured here is compared with a 2019 chip in the mode
# where it, not its input pipeline, is the bound (paradnn.store.bounds).
NEVER_SHARED: dict[str, tuple[str, ...]] = {"platform": ("input_mode",)}
ANY = "any"  # for_settings: keep every value of this setting
MISSING = "<none>"  # stands for a missing value while pairing (NaN never equals NaN)


def comparison_key(df: pd.DataFrame, vary: str, free: tuple[str, ...] = ()) -> list[str]:
    """The identity columns of ``df`` a comparison of ``vary`` holds fixed (``free`` ones let go)."""
    loose = {vary, *COVARY.get(vary, ()), *free}
    return [c for c in IDENTITY if c in df.columns and c not in loose]


def held_fixed(rows: pd.DataFrame, key: list[str]) -> dict[str, object]:
    """What a comparison held: each run-setting column of ``key`` with its one value among
    ``rows``, or ``"matched per pair"`` when pairs differ in it (each pair still agrees)."""
    held: dict[str, object] = {}
    for column in key:
        if column in ("family", "label", "family_version", "platform_fingerprint") or column.startswith("sw_"):
            continue
        values = rows[column].dropna().unique() if column in rows else []
        held[column] = _plain(values[0]) if len(values) == 1 else ("matched per pair" if len(values) else None)
    return held


def _plain(value: object) -> object:
    """numpy scalars as Python values (for JSON); the store's 0/1 XLA column as a bool."""
    return value.item() if hasattr(value, "item") else value


def newest_rows(df):
    """The rows of ``df`` measured under the newest TensorFlow version of their platform, plus imported
    ones (no version recorded).

    Rows of other stacks in the same store serve version comparisons only; every other
    analysis reads one version per platform, so an older version's rows never mix into it.
    """
    if "sw_tensorflow" not in df or df["sw_tensorflow"].isna().all():
        return df
    measured = df.dropna(subset=["sw_tensorflow"])
    newest = measured.groupby("platform")["sw_tensorflow"].agg(lambda v: max(v.unique(), key=version_key))
    keep = df["sw_tensorflow"].isna() | (df["sw_tensorflow"] == df["platform"].map(newest))
    return df[keep]


def version_key(version: str) -> tuple:
    """Sorts versions numerically (2.9 before 2.16; a part that is not a number sorts first)."""
    return tuple(int(p) if p.isdigit() else -1 for p in str(version).split(".")[:3])


def side_by_side(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """Rows measured side by side with rows of another value of ``column``: those of a sweep
    (``extra["sweep"]``) that measured more than one value of it, with the sweep as a ``sweep``
    column for comparisons to hold (``compare(..., within=("sweep",))``). Pooled rows are taken
    measurement by measurement (:func:`unpool`), each with its own sweep. Rows no sweep stamped
    (imported, measured before sweeps stamped their rows, or reused from another report's sweep)
    are never a side. A table without ``extra`` (built by hand) is taken as one sweep."""
    df = unpool(df)
    if "extra" not in df and "sweep_id" not in df:
        return df.assign(sweep=MISSING)
    sweep = sweep_ids(df)
    stamped = df.assign(sweep=sweep)[sweep.notna()]
    several = stamped.groupby("sweep")[column].nunique()
    return stamped[stamped["sweep"].isin(several[several > 1].index)]


# The figures of a measurement that pool: each the median over a run identity's measurements.
POOLED_METRICS = (
    "step_time_s",
    "step_time_mad_s",
    "step_time_mean_s",
    "step_time_std_s",
    "step_time_min_s",
    "step_time_p5_s",
    "step_time_p95_s",
    "step_time_cv",
    "examples_per_sec",
    "flops_per_sec",
    "utilization",
    "compile_time_s",
    "peak_memory_bytes",
    "energy_per_step_j",
    "examples_per_joule",
    "device_step_time_s",
    "infeed_share",
    "replica_step_time_s",
    "comm_share",
    "allreduce_share",
    "scaling_efficiency",
    "contention_cores",
    "steal_cores",
)


def finished_with(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows of ``df`` that finished with a positive ``metric``: what a comparison pairs."""
    return df[is_finished(df) & (pd.to_numeric(df[metric], errors="coerce") > 0)]


def quiet_first(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` less its contended rows (timed without a quiet window) wherever the same run identity
    (``run_key``) has a quiet one: a contended measurement is never mixed with quiet ones, and
    stands only where nothing else measured that run. Rows from before contention was read count as quiet."""
    if "contended" not in df or "run_key" not in df or df.empty:
        return df
    contended = df["contended"].fillna(0).astype(bool)
    if not contended.any():
        return df
    has_quiet = set(df.loc[~contended, "run_key"])
    return df[~contended | ~df["run_key"].isin(has_quiet)]


def pool(df: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """One row per ``key`` (a configuration under one run on one platform) from every measurement of it.

    The row that stands is the latest finished one (the latest attempt where none finished); the
    measurements pooled with it are the finished rows of its run identity (``run_key``: rows of an
    older software stack or paradnn version are not), quiet ones first (:func:`quiet_first`). Each
    of :data:`POOLED_METRICS` is the median over them; ``n_measurements`` counts them,
    ``measured_values`` lists their step times, ``rerun_spread`` is slowest / fastest - 1,
    ``samples_s`` holds every one's samples and ``measurements`` each one's figures and round
    (:func:`unpool` turns them back into rows, so a comparison pairs pooled rows round by round).
    ``contended`` is set only when every pooled row was."""
    df = df.sort_values("id") if "id" in df else df
    standing = pd.concat([df, df[is_finished(df)]]).drop_duplicates(key, keep="last")  # the latest ok, else the latest
    out = standing.reset_index(drop=True)
    ok = quiet_first(df[is_finished(df) & df["run_key"].isin(set(out.loc[is_finished(out), "run_key"]))])
    by = ok.groupby("run_key", sort=False)
    out["n_measurements"] = out["run_key"].map(by.size()).fillna(0).astype(int)
    steps = by["step_time_s"].agg(lambda v: [float(x) for x in v if pd.notna(x)])
    out["measured_values"] = out["run_key"].map(steps).map(lambda v: v if isinstance(v, list) else [])
    out["rerun_spread"] = [max(v) / min(v) - 1 if v and min(v) > 0 else math.nan for v in out["measured_values"]]
    out["measurements"] = out["run_key"].map(_measurements(ok)).map(lambda v: v if isinstance(v, list) else [])
    pooled = out["n_measurements"] > 1
    if not pooled.any():
        return out
    many = ok[ok["run_key"].isin(set(out.loc[pooled, "run_key"]))]
    many_by = many.groupby("run_key", sort=False)
    for metric in (m for m in POOLED_METRICS if m in many):
        out.loc[pooled, metric] = out.loc[pooled, "run_key"].map(many_by[metric].median())
    if "samples_s" in many:
        samples = many_by["samples_s"].agg(lambda v: [x for s in v if isinstance(s, list) for x in s])
        out.loc[pooled, "samples_s"] = out.loc[pooled, "run_key"].map(samples)
    if "contended" in many:
        every = many_by["contended"].agg(lambda v: float(v.fillna(0).astype(bool).all()))
        out.loc[pooled, "contended"] = out.loc[pooled, "run_key"].map(every)
    return out


def round_ids(rows: pd.DataFrame) -> pd.Series:
    """Each row's round as ``sweep:round`` (None for rows no sweep timed in rounds): rows of one
    round of one sweep were timed one after another, alternatives interleaved."""
    if "round_id" in rows:
        return rows["round_id"]
    if "extra" not in rows:
        return pd.Series([None] * len(rows), index=rows.index, dtype=object)
    return rows["extra"].map(
        lambda e: f"{e['sweep']}:{e['round']}" if isinstance(e, dict) and "round" in e and "sweep" in e else None
    )


def sweep_ids(rows: pd.DataFrame) -> pd.Series:
    """The sweep that measured each row (``extra["sweep"]``; a pooled measurement's own), None if none stamped it."""
    if "sweep_id" in rows:
        return rows["sweep_id"]
    if "extra" not in rows:
        return pd.Series([None] * len(rows), index=rows.index, dtype=object)
    return rows["extra"].map(lambda e: e.get("sweep") if isinstance(e, dict) else None)


def looks_of(rows: pd.DataFrame) -> pd.Series:
    """The how-many-th look at its comparison each row was measured in (1 unless a report looked again)."""
    if "look" in rows:
        return rows["look"].fillna(1).astype(int)
    if "extra" not in rows:
        return pd.Series(1, index=rows.index, dtype=int)
    return rows["extra"].map(lambda e: int(e.get("look", 1)) if isinstance(e, dict) else 1)


def _measurements(ok: pd.DataFrame) -> pd.Series:
    """Per run key, each pooled measurement's figures (:data:`POOLED_METRICS`) and round."""
    metrics = [m for m in POOLED_METRICS if m in ok]
    records = ok[metrics].astype(object).where(ok[metrics].notna(), None).to_dict("records")
    for record, round_id, sweep, look in zip(records, round_ids(ok), sweep_ids(ok), looks_of(ok)):
        record["round_id"], record["sweep_id"], record["look"] = round_id, sweep, look
    return pd.Series(records, index=ok.index, dtype=object).groupby(ok["run_key"], sort=False).agg(list)


def unpool(df: pd.DataFrame) -> pd.DataFrame:
    """Pooled rows (:func:`pool`) back as one row per measurement, each with its own figures and
    round (``round_id``); rows that were never pooled, or hold no measurement, as they are."""
    if "measurements" not in df or df.empty:
        return df
    measured = df["measurements"].map(lambda m: isinstance(m, list) and len(m) > 0)
    if not measured.any():
        return df
    rows = df[measured].explode("measurements")
    figures = pd.DataFrame(list(rows["measurements"]), index=rows.index)
    rows = rows.drop(columns=[c for c in figures.columns if c in rows] + ["measurements"]).join(figures)
    return pd.concat([df[~measured].drop(columns=["measurements"]), rows], ignore_index=True)
