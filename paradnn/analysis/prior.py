"""Predict a platform with few or no measured rows from another platform's: the projection as prior.

The performance model (:mod:`paradnn.analysis.predict`) needs a dozen measured rows of the
platform it predicts. Swapping one platform's roofline for another's does not replace them:
fitted on the original study's V100 sweep and moved onto the TPU v2's ceilings, it is 293%
off on the 176 configurations both sweeps measured. A projection
(:mod:`paradnn.analysis.projection`) carries P's measured step onto Q operation by operation
instead, in two parts per configuration: the time P's device spent, scaled by the two
platforms' ceilings (``moved``), and the time no device shortens (infeed, barriers, what the
profile did not see), kept as it was (``kept``). The prior of a step on Q is their sum:

* from P's measured step, or P's model's prediction where P did not measure the
  configuration (P then needs ``MIN_ROWS`` rows in the store);
* for a configuration P did not profile, with the two parts' shares taken from its nearest
  profiled neighbours (distance-weighted, over the log2 hyperparameters, ``NEIGHBOURS``).

Rows Q has measured calibrate the prior. From ``FULL_CALIBRATION`` rows on, Q's step is fitted
as ``a * moved + b * kept + c * batch`` (non-negative least squares on relative errors): ``a`` is
how far Q's device falls short of (or beats) the ratio of ceilings, ``b`` how Q's fixed costs
compare with P's, ``c`` a cost per example neither profile shows (feeding the data; the
original study's V100 steps carry about 30 us per example). With one or two rows, one factor:
the median ratio of measured to prior. A 90% prediction interval comes from the calibration's
residuals (Student's t) once there are ``MIN_INTERVAL_ROWS``; with no row of Q the prior has
no interval, because nothing has checked it on Q.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paradnn import families
from paradnn.analysis.projection import Peaks, Source, project, projection_inputs
from paradnn.config import ConfigError

NEIGHBOURS = 5  # profiled configurations whose parts stand in for an unprofiled one's
TERMS = ("moved", "kept", "batch")  # the calibration's terms (see the module docstring)
FULL_CALIBRATION = len(TERMS)  # rows needed to fit every term; fewer fit one factor
MIN_INTERVAL_ROWS = FULL_CALIBRATION + 2  # rows needed before the residuals give an interval
TEXT_DISTANCE = 10.0  # a different value of a text axis (cell type) counts as this many standard deviations
Z_T = 0.95  # one-sided quantile of the two-sided 90% interval


def axis_matrix(family: str, labels: list[str]) -> np.ndarray:
    """log2 of each label's numeric hyperparameters, and its text axes as 0/1 columns."""
    fam = families.get(family)
    params = [fam.parse_label(label).hyperparameters() for label in labels]
    columns = [np.log2([float(p[a]) for p in params]) for a in fam.numeric_axes]
    for axis in (a for a in fam.axes if not a.numeric):
        values = sorted({str(p[axis.name]) for p in params})
        columns += [np.array([str(p[axis.name]) == v for p in params], dtype=float) for v in values]
    return np.column_stack(columns)


def parts_of(projected: pd.DataFrame) -> pd.DataFrame:
    """Per profiled label (rows of :func:`~paradnn.analysis.projection.project`): the share of
    P's step that is kept as it is on Q, and the factor the rest of it is multiplied by."""
    step = projected["source_step_time_s"].to_numpy(dtype=float)
    projected_s = projected["projected_step_time_s"].to_numpy(dtype=float)
    kept = np.minimum(projected["kept_s"].to_numpy(dtype=float), step)  # a profile may add up to more than the step
    moved = step - kept
    factor = np.divide(projected_s - kept, moved, out=np.ones_like(moved), where=moved > 0)
    return pd.DataFrame({"kept_share": kept / step, "moved_factor": factor}, index=projected["label"].to_numpy())


@dataclass(frozen=True)
class ProjectionPrior:
    """Step times on ``dst``'s platform from ``source``'s steps and profiles (see the module docstring)."""

    family: str
    source: Source
    src: Peaks
    dst: Peaks
    parts: pd.DataFrame  # parts_of() the profiled configurations
    source_model: Callable[[list[str]], np.ndarray] | None = None  # P's predicted step of labels P did not measure
    coef: tuple[float, float, float] = (1.0, 1.0, 0.0)  # of TERMS, from calibration
    half_width: float = math.nan  # of the 90% prediction interval, in log step time (nan: none)
    n: int = 0  # calibration rows

    def terms(self, labels: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Each label's TERMS (moved and kept time on Q, batch) as columns, and whether its parts
        come from its own profile (else from its neighbours')."""
        own = np.array([label in self.parts.index for label in labels], dtype=bool)
        parts = self.parts.reindex(labels).to_numpy(dtype=float, copy=True)
        if (~own).any():
            parts[~own] = self._neighbours([label for label, o in zip(labels, own) if not o])
        step = self.source_steps(labels)
        batch = np.array([families.parse_label(self.family, label).batch for label in labels], dtype=float)
        moved = step * (1 - parts[:, 0]) * parts[:, 1]
        return np.column_stack([moved, step * parts[:, 0], batch]), own

    def _neighbours(self, labels: list[str]) -> np.ndarray:
        """kept_share and moved_factor of unprofiled labels from the nearest profiled ones (the
        factor averaged in logs)."""
        from sklearn.neighbors import KNeighborsRegressor

        known = list(self.parts.index)
        x = axis_matrix(self.family, known + labels)
        numeric = len(families.get(self.family).numeric_axes)
        scale = x[: len(known), :numeric].std(axis=0)
        x[:, :numeric] /= np.where(scale > 0, scale, 1.0)
        x[:, numeric:] *= TEXT_DISTANCE
        y = np.column_stack([self.parts["kept_share"], np.log(self.parts["moved_factor"])])
        knn = KNeighborsRegressor(n_neighbors=min(NEIGHBOURS, len(known)), weights="distance").fit(x[: len(known)], y)
        out = knn.predict(x[len(known) :])
        return np.column_stack([out[:, 0], np.exp(out[:, 1])])

    def source_steps(self, labels: list[str]) -> np.ndarray:
        """P's step of each label: measured where P measured it, else P's model's prediction."""
        steps = self.source.steps
        missing = [label for label in labels if label not in steps.index]
        if missing and self.source_model is None:
            raise ConfigError(
                "LABEL",
                missing[0],
                f"a configuration {self.source.platform} measured ({len(steps)} of "
                f"{self.family}, e.g. {steps.index[0]}), or a store with at least "
                "a dozen of its rows to predict the others from",
            )
        predicted = dict(zip(missing, self.source_model(missing))) if missing else {}
        return np.array([steps[label] if label in steps.index else predicted[label] for label in labels], dtype=float)

    def calibrated(self, measured: pd.DataFrame) -> ProjectionPrior:
        """The prior fitted to Q's ``measured`` rows (label, step_time_s; the last row of a label
        counts): every term from FULL_CALIBRATION rows on, one factor below that."""
        from scipy import optimize, stats

        measured = measured.drop_duplicates("label", keep="last")
        if self.source_model is None:  # rows P cannot reach say nothing about the prior
            measured = measured[measured["label"].isin(self.source.steps.index)]
        n = len(measured)
        if n == 0:
            return dataclasses.replace(self, coef=(1.0, 1.0, 0.0), half_width=math.nan, n=0)
        x, _ = self.terms(list(measured["label"]))
        y = measured["step_time_s"].to_numpy(dtype=float)
        if n < FULL_CALIBRATION:
            factor = float(np.exp(np.median(np.log(y / (x[:, 0] + x[:, 1])))))
            return dataclasses.replace(self, coef=(factor, factor, 0.0), half_width=math.nan, n=n)
        scale = np.maximum(x.max(axis=0), 1e-30)  # columns of comparable size for the solver
        coef, _ = optimize.nnls(x / scale / y[:, None], np.ones(n))
        coef = coef / scale
        residual = np.log(y / np.maximum(x @ coef, 1e-30))
        half_width = math.nan
        if n >= MIN_INTERVAL_ROWS:
            dof = n - len(TERMS)
            spread = math.sqrt(float(residual @ residual) / dof)
            half_width = float(stats.t.ppf(Z_T, dof) * spread * math.sqrt(1 + len(TERMS) / n))
        return dataclasses.replace(self, coef=tuple(float(c) for c in coef), half_width=half_width, n=n)

    def predict(self, labels: list[str]) -> pd.DataFrame:
        """Step time (with its 90% interval once calibrated on enough rows) and examples/s of each label on Q."""
        x, own = self.terms(labels)
        step = x @ np.array(self.coef)
        out = pd.DataFrame({"label": labels, "step_time_s": step})
        out["step_time_low_s"] = step * math.exp(-self.half_width)
        out["step_time_high_s"] = step * math.exp(self.half_width)
        out["examples_per_sec"] = x[:, 2] / step
        out["parts_from"] = np.where(own, "profile", "neighbours")
        out["source_measured"] = [label in self.source.steps.index for label in labels]
        return out

    def describe(self) -> str:
        """One line: where the prior comes from and how far it has been checked on Q."""
        origin = (
            f"projection prior from {self.source.platform} ({len(self.parts)} profiled configurations; "
            f"{self.src.source} -> {self.dst.source}, {self.dst.dtype})"
        )
        if self.n == 0:
            return f"{origin}; not calibrated: no measured row of {self.dst.platform} to check it on, so no interval"
        a, b, c = self.coef
        fitted = (
            f"moved x{a:.3g}, kept x{b:.3g}, {c * 1e6:.3g} us per example"
            if self.n >= FULL_CALIBRATION
            else f"one factor x{a:.3g}"
        )
        interval = (
            f"90% interval x/ {math.exp(self.half_width):.2f}"
            if self.n >= MIN_INTERVAL_ROWS
            else f"no interval (fewer than {MIN_INTERVAL_ROWS} rows)"
        )
        return f"{origin}; calibrated on {self.n} measured rows of {self.dst.platform}: {fitted}; {interval}"


SourceModel = Callable[[list[str]], np.ndarray]  # P's predicted step of labels P did not measure


def projection_prior(
    store: str | None, source: str, target: str, family: str, dtype: str | None = None, source_model: SourceModel | None = None
) -> tuple[ProjectionPrior, pd.DataFrame]:
    """The prior for ``target`` from ``source`` (``dtype``: the compute dtype on Q, default P's),
    uncalibrated, and Q's measured rows (label, step_time_s; empty if none) to calibrate it with."""
    start, src, dst, theirs = projection_inputs(store, source, target, family, dtype, ("--prior-from", "--platform"))
    prior = ProjectionPrior(family, start, src, dst, parts_of(project(start, src, dst, family)), source_model)
    theirs = theirs if theirs is not None else pd.DataFrame(columns=["label", "step_time_s"])
    return prior, theirs[["label", "step_time_s"]].reset_index(drop=True)


def source_model_from(store: str, platform: str, family: str, seed: int = 0) -> SourceModel | None:
    """P's performance model as a function of labels (fitted on first use: a fit takes seconds to
    a minute), or None where the store holds fewer than ``MIN_ROWS`` measured rows of P."""
    from paradnn.analysis import predict
    from paradnn.analysis.results import Results
    from paradnn.store import Store

    with Store(store, create=False, readonly=True, snapshot=True) as s:
        if platform not in s.platform_names():
            return None
        ok, _ = predict.training_rows(Results.read(s, platform=platform), family)
    if len(ok) < predict.MIN_ROWS:
        return None
    fitted: dict = {}

    def steps(labels: list[str]) -> np.ndarray:
        if not fitted:
            with Store(store, create=False, readonly=True, snapshot=True) as s:
                fitted["model"], fitted["rows"] = predict.fit_store(s, platform, family, seed)
        return predict.predict_labels(fitted["model"], fitted["rows"], labels)["step_time_s"].to_numpy(dtype=float)

    return steps
