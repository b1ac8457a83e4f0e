"""What bound each step: the chip, or the input pipeline that fed it.

A comparison of chips is only about the chips where neither side's step waited on its input.
The 2019 study fed its TPU v2-8 and V100 from the host (tf.data, the TPU's infeed), and on its
cheapest FC configurations that pipeline, not the chip, set the pace: the V100 ran at a flat
27,000-34,000 examples/s from batch 64 to 16,384, and the TPU traces show 91-98% of the step
waiting on infeed for the 4-layer, 128-node model from batch 1,024.

The bound of a row, by the best evidence there is:

* a row of this machine with an input share (a host input mode): ``input`` when the step
  waited on its input for at least :data:`INPUT_SHARE` of its time; a device-resident input
  reads nothing during the step, so its row is ``chip``;
* a row of the original study whose configuration was traced: the trace's infeed share, by the
  same threshold;
* any other row of the original study: its rate against its platform's input ceiling at that
  batch (the median rate of its traced input-bound configurations at that batch, else its
  fastest configuration there): ``input`` at :data:`RATE_SHARE` of the ceiling or more. On the
  230 traced TPU configurations this rule marks every one of the 76 input-bound ones as input
  (and some compute-bound ones too: it errs on the safe side, leaving a pair out).
"""

from __future__ import annotations

import pandas as pd

from paradnn.vocabulary import is_finished, is_imported

INPUT, CHIP = "input", "chip"
BOUNDS = (INPUT, CHIP)
INPUT_SHARE = 0.5  # a step that waited on its input at least half its time
RATE_SHARE = 0.5  # an untraced 2019 step at half its platform's input ceiling at that batch or more
WHOLE = "all"  # the traces' category of a whole configuration (paradnn.store.legacy.WHOLE)


def _legacy(frame: pd.DataFrame) -> pd.Series:
    return is_imported(frame)


def traced_infeed(traces: pd.DataFrame) -> dict[tuple[str, str], float]:
    """(platform, label) -> share of the step spent waiting on infeed, from whole-configuration traces."""
    if traces is None or traces.empty or "infeed" not in traces:
        return {}
    whole = traces[(traces["category"] == WHOLE) & traces["infeed"].notna()]
    return {(p, label): float(v) / 100 for p, label, v in zip(whole["platform"], whole["label"], whole["infeed"])}


def input_ceilings(rows: pd.DataFrame, infeed: dict[tuple[str, str], float]) -> dict[tuple[str, int], float]:
    """(platform, batch) -> the input ceiling's rate: traced input-bound rows' median, else the fastest row."""
    ceilings: dict[tuple[str, int], float] = {}
    for (platform, batch), group in rows.groupby(["platform", "batch"]):
        traced = [
            rate
            for label, rate in zip(group["label"], group["examples_per_sec"])
            if infeed.get((platform, label), 0.0) >= INPUT_SHARE
        ]
        ceilings[(platform, int(batch))] = float(pd.Series(traced).median()) if traced else float(group["examples_per_sec"].max())
    return ceilings


def _original_bound(share: float | None, rate: float, ceiling: float, batch: int) -> tuple[str, str]:
    """A 2019 row's bound and its evidence: its traced infeed share, else its rate against the ceiling."""
    if share is not None:
        return INPUT if share >= INPUT_SHARE else CHIP, f"infeed {share:.0%} of the step (2019 trace)"
    ratio = rate / ceiling
    return INPUT if ratio >= RATE_SHARE else CHIP, f"{ratio:.2f} of its input ceiling at batch {batch} (2019 rates)"


def row_bounds(frame: pd.DataFrame, traces: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per row of ``frame`` (same index): ``bound`` (input, chip, or None where nothing tells) and
    ``bound_why`` (the evidence, in words). ``traces``: the store's traces table."""
    out = pd.DataFrame({"bound": None, "bound_why": None}, index=frame.index, dtype=object)
    if frame.empty:
        return out
    infeed = traced_infeed(traces)
    legacy = _legacy(frame)
    ok = is_finished(frame) & pd.to_numeric(frame["examples_per_sec"], errors="coerce").gt(0)
    old = frame[legacy & ok]
    if len(old) and "batch" in old:
        ceilings = input_ceilings(old, infeed)
        out.loc[old.index] = [
            _original_bound(infeed.get((p, label)), rate, ceilings[(p, int(batch))], int(batch))
            for p, label, rate, batch in zip(old["platform"], old["label"], old["examples_per_sec"], old["batch"])
        ]
    mine = frame[~legacy & ok]
    share = pd.to_numeric(mine.get("infeed_share", pd.Series(index=mine.index, dtype=float)), errors="coerce")
    mode = mine.get("input_mode", pd.Series(index=mine.index, dtype=object)).fillna("device")
    fed, resident = share.notna(), share.isna() & (mode == "device")
    if fed.any():
        out.loc[fed[fed].index] = [
            (INPUT if v >= INPUT_SHARE else CHIP, f"input {v:.0%} of the step (measured)") for v in share[fed]
        ]
    if resident.any():
        out.loc[resident[resident].index] = [(CHIP, "device-resident input")] * int(resident.sum())
    return out
