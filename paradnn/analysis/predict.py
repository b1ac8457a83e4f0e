"""Predict unmeasured configurations from the store, with 90% intervals, and choose what to measure next.

The model works in log step time, relative to a base. For a configuration on a platform
the analytic counts give a lower bound on the step,
``max(flops_model / peak, bytes_estimate / bandwidth)`` (the platform's ceilings, measured
or from the datasheet); the base adds a per-step floor (half the fastest measured step:
launch, input and bookkeeping costs no roofline has). What the model learns is how far
above the base the step lands:

* a smooth mean: ridge regression on polynomial features of the log2 hyperparameters
  and the log compute and memory times, of degree 1-3 chosen by error on held-out grid
  *levels* (:func:`choose_degree`), so it interpolates between levels, which tree
  ensembles cannot (held-out batch levels cost them 30%+);
* a Gaussian process (RBF kernel with one length scale per feature, plus white noise) on
  what the mean leaves. The kernel is fitted on a seeded subsample (``KERNEL_ROWS``) to
  keep fitting to seconds, its length scales bounded below (``LENGTH_MIN``: shorter ones
  were degenerate optima that memorised rows);
* 90% intervals from the GP's predictive standard deviation, widened by one term fitted
  on 5-fold out-of-fold errors so that they cover 90% of them (see :func:`calibrate`).

Text axes (cell type, block kind), the dtype policy and XLA are one-hot features, so one
model covers a platform's whole family. Whether a configuration fits in memory is a
separate logistic regression on the memory estimate and the hyperparameters, fitted where
the store holds both outcomes (``ok`` against ``oom``/``skipped``).

Baselines, scored the same way: the roofline bound scaled by the training rows' median
efficiency, and the paper's linear regression (OLS of step time on standardised raw
hyperparameters).
"""

from __future__ import annotations

import functools
import math
import numbers
import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from paradnn import counting, families
from paradnn.analysis.results import Results, Rows, results_of
from paradnn.analysis.roofline import Ceilings, ceilings_for
from paradnn.config import ConfigError
from paradnn.settings import DEFAULTS

MIN_ROWS = 12  # fewer measured configurations than this do not constrain the model
KERNEL_ROWS = 300  # rows the GP's kernel hyperparameters are fitted on
MAX_DEGREE = 3  # of the polynomial mean (chosen per fit, see choose_degree)
FLOOR_SHARE = 0.5  # the per-step floor: this share of the fastest measured step
LENGTH_MIN = 0.1  # shortest GP length scale, in standard deviations of a feature (shorter ones overfit)
MAX_CANDIDATES = 2500  # cells an adaptive round weighs against each other (its covariance matrix is this squared)
CALIBRATION_FOLDS = 5  # out-of-fold refits that calibrate the intervals
RESTARTS = 2  # extra random starts of the kernel fit (one start can stall at "all noise")
GP_ROWS = 2000  # rows the GP conditions on (the mean uses all)
Z90 = 1.6448536269514722  # two-sided 90% normal quantile
FAILED_TO_FIT = ("oom", "skipped")
BASELINES = ("roofline", "paper_regression")
T = TypeVar("T")


def one_blas_thread(function: Callable) -> Callable:
    """Run ``function`` with NumPy's and SciPy's BLAS on one thread each.

    The model's matrices (a GP on at most ``GP_ROWS`` rows, ridge fits on a few hundred
    features) gain nothing from a second thread, and OpenBLAS's threads spin while they wait:
    beside another busy process (a sweep, a second test worker) two threads made the fits
    2-3x slower (docs/performance.md, section 15).
    """

    @functools.wraps(function)
    def limited(*args, **kwargs):
        import scipy.linalg  # noqa: F401  SciPy brings its own BLAS: load it first, so that the limit reaches it

        with threadpool_limits(limits=1, user_api="blas"):
            return function(*args, **kwargs)

    return limited


class PredictionError(ConfigError):
    """Too little data, or data of the wrong kind, to fit or apply a model."""

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)


@dataclass(frozen=True)
class Scores:
    """Held-out accuracy: absolute percentage errors of step time and interval coverage."""

    n: int
    mape: float
    median_ape: float
    p90_ape: float
    coverage: float | None  # share of points inside their 90% interval; None without intervals

    @staticmethod
    def of(
        predicted_s: np.ndarray, measured_s: np.ndarray, low_s: np.ndarray | None = None, high_s: np.ndarray | None = None
    ) -> Scores:
        ape = np.abs(predicted_s / measured_s - 1.0) * 100
        inside = None if low_s is None else float(np.mean((measured_s >= low_s) & (measured_s <= high_s)))
        return Scores(len(ape), float(ape.mean()), float(np.median(ape)), float(np.percentile(ape, 90)), inside)

    def as_dict(self) -> dict:
        return {"n": self.n, "mape": self.mape, "median_ape": self.median_ape, "p90_ape": self.p90_ape, "coverage": self.coverage}


# ------------------------------------------------------------------ features


def counts(family: str, rows: pd.DataFrame) -> pd.DataFrame:
    """``flops_model``, ``bytes_estimate`` and ``memory_estimate`` of every row, from its configuration.

    Computed from the family's counter rather than read from the store, so imported rows
    (which lack a byte estimate) and unmeasured labels are treated alike. Each distinct
    configuration is counted once per process: an adaptive replay asks for the same grid's
    counts at every round, and counting was most of its time.
    """
    fam = families.get(family)
    names = [a.name for a in fam.axes]
    values = zip(*(rows[name].to_numpy() for name in names), rows["dtype"].astype(str).to_numpy())
    out = [_counted(family, tuple(_plain(v) for v in row[:-1]), row[-1]) for row in values]
    return pd.DataFrame(out, columns=["flops_model", "bytes_estimate", "memory_estimate"], index=rows.index, dtype=float)


@functools.lru_cache(maxsize=1 << 16)
def _counted(family: str, axes: tuple, dtype: str) -> tuple[int, int, int]:
    """The three counts of one configuration (``axes``: its axis values in the family's order)."""
    fam = families.get(family)
    config = fam.make(**{a.name: a.kind(v) for a, v in zip(fam.axes, axes)})  # store columns may read as floats
    return counting.flops_model(config), counting.bytes_estimate(config, dtype), counting.memory_estimate(config, dtype)


def _plain(value: object) -> object:
    """A numpy scalar as the Python value a family's configuration expects."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return int(value) if float(value).is_integer() else float(value)
    return value


@dataclass
class Featurizer:
    """Turns configurations (hyperparameters, dtype, XLA) into the model's feature matrix."""

    family: str
    ceilings: Callable[[str], Ceilings]
    categories: dict[str, list] = field(default_factory=dict)

    def learn(self, rows: pd.DataFrame) -> Featurizer:
        """Remember the categorical values seen in training (text axes, dtype, XLA)."""
        self.categories = {c: sorted(rows[c].astype(str).unique()) for c in self._categorical()}
        return self

    def _categorical(self) -> list[str]:
        return [a.name for a in families.get(self.family).axes if not a.numeric] + ["dtype", "xla"]

    def bound_s(self, rows: pd.DataFrame, c: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Roofline compute time and memory time of each row, in seconds."""
        peaks = np.array([self.ceilings(d).peak_flops for d in rows["dtype"]])
        bandwidth = np.array([self.ceilings(d).bandwidth for d in rows["dtype"]])
        return c["flops_model"].to_numpy() / peaks, c["bytes_estimate"].to_numpy() / bandwidth

    def matrix(self, rows: pd.DataFrame, c: pd.DataFrame) -> np.ndarray:
        fam = families.get(self.family)
        compute_s, memory_s = self.bound_s(rows, c)
        columns = [np.log2(rows[name].to_numpy(dtype=float)) for name in fam.numeric_axes]
        columns += [np.log(compute_s), np.log(memory_s)]
        for name, values in self.categories.items():
            if len(values) > 1:
                text = rows[name].astype(str).to_numpy()
                columns += [(text == v).astype(float) for v in values[1:]]
        return np.column_stack(columns)


def log_bound(compute_s: np.ndarray, memory_s: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(compute_s, memory_s))


# ------------------------------------------------------------------ the model


def choose_degree(xs: np.ndarray, y: np.ndarray, rows: pd.DataFrame, family: str) -> int:
    """Degree of the polynomial mean with the smallest error on held-out *levels*.

    Each interior level of each axis (with three levels or more) is held out whole in turn
    and predicted by a mean fitted on the rest: the error that matters for configurations
    between grid levels, which row-wise cross-validation would not see (a cubic can match
    every row and swing wildly between levels). Ridge fits are cheap, so this costs little.
    """
    holdouts = []
    for axis in families.get(family).numeric_axes:
        levels = np.sort(rows[axis].unique())
        holdouts += [(rows[axis] == level).to_numpy() for level in levels[1:-1]]
    if not holdouts:
        return 1
    errors = {}
    for d in range(1, MAX_DEGREE + 1):
        errors[d] = np.mean([np.mean(np.abs(fit_mean(xs[~h], y[~h], d).predict(xs[h]) - y[h])) for h in holdouts])
    return min(errors, key=errors.get)


def fit_mean(x: np.ndarray, y: np.ndarray, degree: int):
    """Ridge regression on polynomial features (alpha chosen by leave-one-out)."""
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler

    return make_pipeline(
        StandardScaler(), PolynomialFeatures(degree), StandardScaler(), RidgeCV(alphas=np.logspace(-4, 3, 15))
    ).fit(x, y)


def tune_kernel(xs: np.ndarray, y: np.ndarray, seed: int):
    """The GP kernel's hyperparameters, fitted by marginal likelihood on a seeded subsample."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    kernel = C(0.1, (1e-4, 10)) * RBF(np.ones(xs.shape[1]), (LENGTH_MIN, 1e3)) + WhiteKernel(1e-3, (1e-6, 1))
    sub = np.random.default_rng(seed).choice(len(xs), min(KERNEL_ROWS, len(xs)), replace=False)
    gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=seed, n_restarts_optimizer=RESTARTS)
    with warnings.catch_warnings():  # a length scale at its bound means "irrelevant feature", not an error
        warnings.simplefilter("ignore")
        return gp.fit(xs[sub], y[sub]).kernel_


def fit_gp(xs: np.ndarray, y: np.ndarray, kernel, seed: int):
    """A GP with a fixed kernel conditioned on (at most GP_ROWS of) the rows."""
    from sklearn.gaussian_process import GaussianProcessRegressor

    keep = np.random.default_rng(seed).choice(len(xs), min(GP_ROWS, len(xs)), replace=False)
    return GaussianProcessRegressor(kernel, normalize_y=True, optimizer=None).fit(xs[keep], y[keep])


def calibrate(xs: np.ndarray, y: np.ndarray, degree: int, kernel, seed: int) -> float:
    """Extra log-scale spread so that 90% of out-of-fold errors fall inside their intervals.

    The GP's own standard deviation ignores the error of the polynomial mean and is
    overconfident where rows are few; a 5-fold refit (kernel fixed) measures the real
    errors, and the smallest added term ``s`` with ``Z90 * sqrt(sd^2 + s^2)`` covering 90%
    of them is kept (0 when the GP alone covers them).
    """
    from sklearn.model_selection import KFold

    errors, sds = [], []
    for train, test in KFold(CALIBRATION_FOLDS, shuffle=True, random_state=seed).split(xs):
        mean = fit_mean(xs[train], y[train], degree)
        gp = fit_gp(xs[train], y[train] - mean.predict(xs[train]), kernel, seed)
        mu, sd = gp.predict(xs[test], return_std=True)
        errors.append(np.abs(y[test] - mean.predict(xs[test]) - mu))
        sds.append(sd)
    e, sd = np.concatenate(errors), np.concatenate(sds)

    def coverage(extra: float) -> float:
        return float(np.mean(e <= Z90 * np.sqrt(sd**2 + extra**2)))

    low, high = 0.0, float(e.max()) + 1e-9
    if coverage(low) >= 0.9:
        return 0.0
    for _ in range(40):  # bisection: coverage grows with the extra term
        middle = (low + high) / 2
        low, high = (low, middle) if coverage(middle) >= 0.9 else (middle, high)
    return high


@dataclass
class PerformanceModel:
    """A fitted model of one platform's step times for one family (see the module docstring)."""

    featurizer: Featurizer
    seed: int = 0
    mean: object = None
    gp: object = None
    scaler: object = None
    extra_sd: float = 0.0  # calibration term added to the GP's standard deviation (log scale)
    fits_model: object = None
    n: int = 0
    floor_s: float = 0.0  # fixed cost per step (launch, input, bookkeeping) added to the roofline bound
    ranges: dict = field(default_factory=dict)  # each numeric axis's (min, max) in the training rows

    def base(self, rows: pd.DataFrame, c: pd.DataFrame) -> np.ndarray:
        """Log of the roofline bound plus the per-step floor: what the model's residual is measured from."""
        compute_s, memory_s = self.featurizer.bound_s(rows, c)
        return np.log(np.maximum(compute_s, memory_s) + self.floor_s)

    @classmethod
    @one_blas_thread
    def fit(
        cls, rows: pd.DataFrame, featurizer: Featurizer, seed: int = 0, failed: pd.DataFrame | None = None
    ) -> PerformanceModel:
        """Fit to ``ok`` rows (``step_time_s`` known); ``failed`` rows (oom/skipped) train the fits-in-memory part."""
        from sklearn.preprocessing import StandardScaler

        if len(rows) < MIN_ROWS:
            raise PredictionError(f"{len(rows)} measured configurations; the model needs at least {MIN_ROWS}")
        model = cls(featurizer.learn(rows), seed, n=len(rows))
        c = counts(featurizer.family, rows)
        x = featurizer.matrix(rows, c)
        step = rows["step_time_s"].to_numpy(dtype=float)
        model.floor_s = FLOOR_SHARE * float(step.min())
        y = np.log(step) - model.base(rows, c)
        model.ranges = {a: (rows[a].min(), rows[a].max()) for a in families.get(featurizer.family).numeric_axes}
        model.scaler = StandardScaler().fit(x)
        xs = model.scaler.transform(x)
        d = choose_degree(xs, y, rows, featurizer.family)
        model.mean = fit_mean(xs, y, d)
        left = y - model.mean.predict(xs)
        kernel = tune_kernel(xs, left, seed)
        model.gp = fit_gp(xs, left, kernel, seed)
        model.extra_sd = calibrate(xs, y, d, kernel, seed)
        if failed is not None and len(failed):
            model._fit_fits(pd.concat([rows, failed]), np.r_[np.ones(len(rows)), np.zeros(len(failed))])
        return model

    def _fit_fits(self, rows: pd.DataFrame, fits: np.ndarray) -> None:
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        if min(fits.sum(), (1 - fits).sum()) < 3:  # both outcomes needed, a few of each
            return
        x = self._memory_features(rows)
        self.fits_model = make_pipeline(StandardScaler(), LogisticRegression(C=10.0, max_iter=1000)).fit(x, fits)

    def _memory_features(self, rows: pd.DataFrame) -> np.ndarray:
        fam = families.get(self.featurizer.family)
        memory = counts(self.featurizer.family, rows)["memory_estimate"].to_numpy()
        return np.column_stack([np.log(memory)] + [np.log2(rows[a].to_numpy(dtype=float)) for a in fam.numeric_axes])

    def features(self, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Scaled features of each row's nearest measured-range configuration, and which rows lay outside.

        Beyond the measured range of an axis the learned residual is the one at the range's
        edge (the configuration with that axis held to its nearest measured value) and the
        roofline base of the real configuration scales the step: a polynomial extrapolated
        past the data swings by orders of magnitude (a cubic put an unmeasured small CPU
        step at 7 us, 100x below any measured step). Such rows are flagged ``extrapolated``.
        """
        held = rows.copy()
        for axis, (low, high) in self.ranges.items():
            held[axis] = rows[axis].clip(low, high).astype(families.get(self.featurizer.family).axis(axis).kind)
        outside = (held[list(self.ranges)] != rows[list(self.ranges)]).any(axis=1).to_numpy()
        x = self.featurizer.matrix(held, counts(self.featurizer.family, held))
        return self.scaler.transform(x), outside

    @one_blas_thread
    def predict(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Step time with its 90% interval, examples/s, the probability the configuration fits, and
        whether it lies outside the measured range (``extrapolated``)."""
        c = counts(self.featurizer.family, rows)
        xs, outside = self.features(rows)
        mu, sd = self.gp.predict(xs, return_std=True)
        sd = np.sqrt(sd**2 + self.extra_sd**2)
        log_step = self.base(rows, c) + self.mean.predict(xs) + mu
        batch = rows["batch"].to_numpy(dtype=float)
        out = pd.DataFrame(index=rows.index)
        out["step_time_s"] = np.exp(log_step)
        out["step_time_low_s"] = np.exp(log_step - Z90 * sd)
        out["step_time_high_s"] = np.exp(log_step + Z90 * sd)
        out["examples_per_sec"] = batch / out["step_time_s"]
        out["examples_per_sec_low"] = batch / out["step_time_high_s"]
        out["examples_per_sec_high"] = batch / out["step_time_low_s"]
        out["relative_width"] = 2 * Z90 * sd  # width of the interval in log step time
        out["fits_probability"] = self.fits_model.predict_proba(self._memory_features(rows))[:, 1] if self.fits_model else np.nan
        out["extrapolated"] = outside
        return out


# ------------------------------------------------------------------ data from a store


def training_rows(results: Rows, family: str, framework: str = DEFAULTS["framework"]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A family's ``ok`` rows (the last measurement of each configuration and setting) and its oom/skipped
    rows, under one framework (a model learns one framework's timings), with the XLA setting as text."""
    mine = results_of(results).newest_stack().where(family=family).for_settings(framework=framework, input="device", devices=1)
    key = ["label", "dtype", "xla"]

    def with_xla_text(rows: pd.DataFrame) -> pd.DataFrame:
        xla = rows["xla"].map(lambda v: "auto" if v is None else str(bool(v)).lower())
        return rows.assign(xla=xla).drop_duplicates(key, keep="last")

    ok = with_xla_text(mine.ok().positive("step_time_s").frame)
    failed = with_xla_text(mine.where(state=list(FAILED_TO_FIT)).frame)
    return ok, failed[~failed.set_index(key).index.isin(ok.set_index(key).index)]


def platform_ceilings(platforms: pd.DataFrame, platform: str) -> Callable[[str], Ceilings]:
    """The ceilings of ``platform`` per dtype policy; PredictionError if the store has none."""
    cache: dict[str, Ceilings] = {}

    def of(dtype: str) -> Ceilings:
        if dtype not in cache:
            found = ceilings_for(platforms, platform, dtype)
            if found is None:
                raise PredictionError(f"no ceilings for platform {platform!r} in the store (measured or datasheet)")
            cache[dtype] = found
        return cache[dtype]

    return of


def fit_store(store, platform: str, family: str, seed: int = 0) -> tuple[PerformanceModel, pd.DataFrame]:
    """Fit a model to ``store``'s rows of one platform and family; returns it and the rows it learned from."""
    if platform not in store.platform_names():
        raise ConfigError("--platform", platform, ", ".join(store.platform_names()) or "a platform with results in the store")
    ok, failed = training_rows(Results.read(store, platform=platform), family)
    if len(ok) < MIN_ROWS:
        raise PredictionError(
            f"the store has {len(ok)} measured {family} configurations on {platform}; "
            f"prediction needs at least {MIN_ROWS} (or --prior-from a profiled platform)"
        )
    featurizer = Featurizer(family, platform_ceilings(store.platforms(), platform))
    return PerformanceModel.fit(ok, featurizer, seed, failed), ok


def label_rows(family: str, labels: Iterable[str], dtype: str, xla: str) -> pd.DataFrame:
    """Rows (hyperparameters, dtype, XLA) for labels of ``family``; ConfigError for a label of another family."""
    fam = families.get(family)
    rows = []
    for label in labels:
        config = fam.parse_label(label)
        rows.append({"label": config.label, **config.hyperparameters(), "dtype": dtype, "xla": xla})
    return pd.DataFrame(rows)


def predict_labels(model: PerformanceModel, measured: Rows, labels: list[str], dtype: str | None = None) -> pd.DataFrame:
    """Predictions for ``labels`` under one dtype (default: the one most rows have) and the XLA setting
    most rows of that dtype have, beside the measured step time of that setting where the store has one."""
    results = results_of(measured)
    dtypes = set(results.frame["dtype"])
    dtype = dtype or results.dominant_run(("dtype",))["dtype"]
    if dtype not in dtypes:
        raise ConfigError("--dtype", dtype, ", ".join(sorted(dtypes)) + " (the dtypes measured)")
    xla = results.where(dtype=dtype).dominant_run(("xla",))["xla"]  # the training rows hold "true", "false" or "auto"
    same = results.where(dtype=dtype, xla=xla).frame  # one row per label
    asked = label_rows(model.featurizer.family, labels, dtype, xla)
    out = asked[["label"]].join(model.predict(asked))
    out["measured_step_time_s"] = out["label"].map(same.set_index("label")["step_time_s"])
    return out


def grid_with_predictions(store, platform: str, family: str, labels: list[str], seed: int = 0) -> pd.DataFrame:
    """A grid of ``labels`` on ``platform``: measured step times where the store has them, predictions elsewhere.

    Columns: the family's axes, ``step_time_s``, ``examples_per_sec``, ``measured`` (bool),
    ``fits_probability``; ``state`` is ``ok``, or ``skipped`` for cells predicted not to fit.
    """
    model, ok = fit_store(store, platform, family, seed)
    out = predict_labels(model, ok, labels)
    measured = out["measured_step_time_s"].notna()
    grid = label_rows(family, list(out["label"]), "", "").drop(columns=["dtype", "xla"])
    grid["step_time_s"] = out["measured_step_time_s"].where(measured, out["step_time_s"])
    grid["examples_per_sec"] = grid["batch"] / grid["step_time_s"]
    grid["measured"] = measured
    grid["fits_probability"] = out["fits_probability"]
    unfit = ~measured & (out["fits_probability"] < 0.5)
    return grid.assign(family=family, platform=platform, state=np.where(unfit, "skipped", "ok"))


# ------------------------------------------------------------------ held-out evaluation


def baselines(train: pd.DataFrame, test: pd.DataFrame, featurizer: Featurizer) -> dict[str, np.ndarray]:
    """Predicted step times of ``test`` by the two baselines, fitted on ``train``."""
    fam = families.get(featurizer.family)
    featurizer.learn(train)
    bound = {}
    for name, rows in (("train", train), ("test", test)):
        bound[name] = np.exp(log_bound(*featurizer.bound_s(rows, counts(featurizer.family, rows))))
    efficiency = np.median(bound["train"] / train["step_time_s"].to_numpy(dtype=float))
    axes = [a for a in fam.numeric_axes if train[a].nunique() > 1]
    x_train, x_test = train[axes].to_numpy(dtype=float), test[axes].to_numpy(dtype=float)
    mu, sigma = x_train.mean(axis=0), x_train.std(axis=0)
    design = np.column_stack([np.ones(len(train)), (x_train - mu) / sigma])
    coef, *_ = np.linalg.lstsq(design, train["step_time_s"].to_numpy(dtype=float), rcond=None)
    linear = np.column_stack([np.ones(len(test)), (x_test - mu) / sigma]) @ coef
    return {"roofline": bound["test"] / efficiency, "paper_regression": np.maximum(linear, 1e-9)}


def in_parallel(calls: list[Callable[[], T]]) -> list[T]:
    """The results of independent fits, in order, computed in one process per core (joblib).

    Each fit keeps one core busy (one BLAS thread, :func:`one_blas_thread`) for a second or
    two, and a report runs dozens; processes, not threads, because the kernel fit's optimiser
    runs in Python. Every call gets its own copy of its arguments (a Featurizer learns its
    training rows' categories), so the results are those of running them one by one.
    """
    from joblib import Parallel, delayed

    jobs = min(len(calls), os.cpu_count() or 1)
    if jobs <= 1:
        return [call() for call in calls]
    return Parallel(n_jobs=jobs)(delayed(call)() for call in calls)


def _fold(rows: pd.DataFrame, featurizer: Featurizer, train: np.ndarray, test: np.ndarray, seed: int) -> dict:
    """One fold of :func:`out_of_fold`: its test rows' predictions (model with interval, baselines)."""
    tr, te = rows.iloc[train], rows.iloc[test]
    pred = PerformanceModel.fit(tr, featurizer, seed).predict(te)
    return {
        "predicted_s": pred["step_time_s"].to_numpy(),
        "low_s": pred["step_time_low_s"].to_numpy(),
        "high_s": pred["step_time_high_s"].to_numpy(),
        **baselines(tr, te, featurizer),
    }


def fold_calls(rows: pd.DataFrame, featurizer: Featurizer, k: int = 5, seed: int = 0) -> tuple[pd.DataFrame, list]:
    """:func:`out_of_fold`'s table before the folds are fitted, and one call per fold (``(test, fit)``)."""
    from sklearn.model_selection import KFold

    check_folds(k, len(rows))
    rows = rows.reset_index(drop=True)
    out = pd.DataFrame({"label": rows["label"], "measured_s": rows["step_time_s"].astype(float)})
    splits = KFold(k, shuffle=True, random_state=seed).split(rows)
    return out, [(test, functools.partial(_fold, rows, featurizer, train, test, seed)) for train, test in splits]


def filled_folds(out: pd.DataFrame, folds: list, results: list[dict]) -> pd.DataFrame:
    """``out`` with each fold's predictions in its test rows."""
    for (test, _), columns in zip(folds, results, strict=True):
        for name, values in columns.items():
            out.loc[test, name] = values
    return out


def out_of_fold(rows: pd.DataFrame, featurizer: Featurizer, k: int = 5, seed: int = 0) -> pd.DataFrame:
    """Every row predicted once by models that never saw it (K folds): the model with its interval, and both baselines."""
    out, folds = fold_calls(rows, featurizer, k, seed)
    return filled_folds(out, folds, in_parallel([fit for _, fit in folds]))


def check_folds(k: object, n: int) -> None:
    """ConfigError unless K folds of ``n`` rows leave every training fold the :data:`MIN_ROWS` a model needs."""
    fine = [j for j in range(2, n + 1) if enough_for_folds(n, j)]  # more folds, larger training folds
    least, most = (fine[0], fine[-1]) if fine else (0, 0)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not least <= k <= most or not fine:
        allowed = (
            f"a number of folds from {least} to {most} (each training fold keeps at least {MIN_ROWS} of the "
            f"{n} measured configurations)"
            if most
            else f"nothing yet: {n} measured configurations leave no training fold the {MIN_ROWS} a model needs"
        )
        raise ConfigError("--cv", k, allowed)


def check_fractions(fractions: list[float], n: int) -> None:
    """ConfigError unless every replay fraction of an ``n``-configuration grid measures fewer cells than the grid has."""
    if not fractions:
        raise ConfigError("--replay", "", "fractions of the grid between 0 and 1, comma-separated (0.05,0.1,0.2)")
    for fraction in fractions:
        budget = max(MIN_ROWS, int(round(fraction * n)))
        if not 0 < fraction < 1 or budget >= n:
            raise ConfigError(
                "--replay",
                fraction,
                f"fractions that leave part of the {n}-configuration grid to predict "
                f"(at least {MIN_ROWS} measured, fewer than {n})",
            )


def cross_validate(rows: pd.DataFrame, featurizer: Featurizer, k: int = 5, seed: int = 0) -> dict:
    """K-fold held-out scores of the model and of both baselines (see :func:`out_of_fold`)."""
    return {**oof_scores(out_of_fold(rows, featurizer, k, seed)), "folds": k, "seed": seed}


def oof_scores(oof: pd.DataFrame) -> dict[str, dict]:
    """Scores of the model (with coverage) and of each baseline from :func:`out_of_fold`'s table."""
    measured = oof["measured_s"].to_numpy()
    model = Scores.of(oof["predicted_s"].to_numpy(), measured, oof["low_s"].to_numpy(), oof["high_s"].to_numpy())
    return {"model": model.as_dict(), **{b: Scores.of(oof[b].to_numpy(), measured).as_dict() for b in BASELINES}}


def level_holdout(rows: pd.DataFrame, featurizer: Featurizer, seed: int = 0) -> pd.DataFrame:
    """Leave one level out: each interior value of each numeric axis held out whole, in turn."""
    out = []
    for axis in families.get(featurizer.family).numeric_axes:
        levels = sorted(rows[axis].unique())
        for level in levels[1:-1]:
            test = rows[axis] == level
            pred = PerformanceModel.fit(rows[~test], featurizer, seed).predict(rows[test])
            scores = Scores.of(
                pred["step_time_s"].to_numpy(),
                rows.loc[test, "step_time_s"].to_numpy(dtype=float),
                pred["step_time_low_s"].to_numpy(),
                pred["step_time_high_s"].to_numpy(),
            )
            out.append({"axis": axis, "level": _plain(level), **scores.as_dict()})
    return pd.DataFrame(out)


# ------------------------------------------------------------------ choosing what to measure


def log_axes(rows: pd.DataFrame, family: str) -> np.ndarray:
    """Numeric axes on a log2 scale, each scaled to [0, 1] over the grid: the space designs are spread over."""
    fam = families.get(family)
    x = np.column_stack([np.log2(rows[a].to_numpy(dtype=float)) for a in fam.numeric_axes])
    span = x.max(axis=0) - x.min(axis=0)
    return (x - x.min(axis=0)) / np.where(span > 0, span, 1.0)


def space_filling(rows: pd.DataFrame, family: str, n: int, seed: int = 0) -> list[int]:
    """Positions of ``n`` rows spread over the grid's log axes (greedy maximin from a seeded start)."""
    x = log_axes(rows, family)
    rng = np.random.default_rng(seed)
    chosen = [int(rng.integers(len(x)))]
    distance = np.linalg.norm(x - x[chosen[0]], axis=1)
    while len(chosen) < min(n, len(x)):
        pick = int(np.argmax(distance + rng.random(len(x)) * 1e-9))  # ties broken at random
        chosen.append(pick)
        distance = np.minimum(distance, np.linalg.norm(x - x[pick], axis=1))
    return chosen


def most_informative(model: PerformanceModel, candidates: pd.DataFrame, n: int) -> list:
    """Index labels of ``n`` candidates to measure next: where the model is least certain, counted by
    how much of everyone's uncertainty a measurement there would remove.

    Greedy variance reduction under the GP: each pick maximises the summed drop of the
    posterior variance over all candidates, ``sum_j cov(j, x)^2 / var(x)`` (``var`` with
    the measurement noise), then conditions on it. Picking the widest intervals alone
    chases the grid's corners, which inform few other cells; this prefers uncertain cells
    with many uncertain neighbours. Above ``MAX_CANDIDATES`` cells, the most uncertain
    ones are considered.
    """
    if candidates.empty or n <= 0:
        return []
    widths = model.predict(candidates)["relative_width"]
    pool = candidates.loc[widths.sort_values(ascending=False).index[:MAX_CANDIDATES]]
    _, cov = model.gp.predict(model.features(pool)[0], return_cov=True)
    chosen: list[int] = []
    for _ in range(min(n, len(pool))):
        gain = (cov**2).sum(axis=0) / np.maximum(np.diag(cov), 1e-12)
        gain[chosen] = -np.inf
        pick = int(np.argmax(gain))
        chosen.append(pick)
        cov = cov - np.outer(cov[:, pick], cov[pick, :]) / max(cov[pick, pick], 1e-12)
    return list(pool.index[chosen])


def replay(
    grid: pd.DataFrame, featurizer: Featurizer, fractions: Iterable[float], seeds: Iterable[int] = (0,), rounds: int = 4
) -> pd.DataFrame:
    """Replay a fully measured grid: error on the unmeasured rest, adaptive against random sampling at equal budgets.

    Adaptive: a space-filling design of half the budget, then ``rounds`` rounds each
    measuring the most informative cells (:func:`most_informative`). Random: the whole
    budget drawn at random.
    """
    grid = grid.reset_index(drop=True)
    fractions = list(fractions)
    check_fractions(fractions, len(grid))
    plans = [
        (seed, max(MIN_ROWS, int(round(fraction * len(grid)))), strategy)
        for seed in seeds
        for fraction in fractions
        for strategy in ("adaptive", "random")
    ]
    scores = in_parallel(
        [functools.partial(_replayed, grid, featurizer, budget, strategy, seed, rounds) for seed, budget, strategy in plans]
    )
    return pd.DataFrame(
        [
            {"seed": seed, "fraction": budget / len(grid), "budget": budget, "strategy": strategy, **score}
            for (seed, budget, strategy), score in zip(plans, scores, strict=True)
        ]
    )


def _replayed(grid: pd.DataFrame, featurizer: Featurizer, budget: int, strategy: str, seed: int, rounds: int) -> dict:
    """One replay: ``budget`` cells chosen by ``strategy``, the rest predicted; the rest's scores."""
    chosen = sample(grid, featurizer, budget, strategy, seed, rounds)
    rest = grid.drop(index=chosen)
    pred = PerformanceModel.fit(grid.loc[chosen], featurizer, seed).predict(rest)
    return Scores.of(
        pred["step_time_s"].to_numpy(),
        rest["step_time_s"].to_numpy(dtype=float),
        pred["step_time_low_s"].to_numpy(),
        pred["step_time_high_s"].to_numpy(),
    ).as_dict()


def sample(grid: pd.DataFrame, featurizer: Featurizer, budget: int, strategy: str, seed: int = 0, rounds: int = 4) -> list[int]:
    """Positions of ``budget`` rows of a measured grid chosen as an adaptive or a random sweep would."""
    if strategy == "random":
        return list(np.random.default_rng(seed).choice(len(grid), budget, replace=False))
    chosen = space_filling(grid, featurizer.family, max(MIN_ROWS, budget // 2), seed)
    for step in adaptive_steps(budget - len(chosen), rounds):
        rest = grid.drop(index=chosen)
        chosen += most_informative(PerformanceModel.fit(grid.loc[chosen], featurizer, seed), rest, step)
    return chosen


def adaptive_steps(remaining: int, rounds: int) -> list[int]:
    """How many configurations each adaptive round measures: ``remaining`` spread evenly over ``rounds``."""
    rounds = max(1, min(rounds, remaining))
    return [n for n in (remaining // rounds + (i < remaining % rounds) for i in range(rounds)) if n > 0]


# ------------------------------------------------------------------ for the report


def enough_for_folds(n: int, k: int) -> bool:
    """Whether every training fold of a K-fold split of ``n`` rows keeps at least MIN_ROWS."""
    return k >= 2 and n - math.ceil(n / k) >= MIN_ROWS


def evaluate_store(store, family: str, k: int = 5, seed: int = 0, max_rows: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Held-out scores of every platform with enough rows of ``family``, and their out-of-fold predictions.

    ``max_rows`` > 0 evaluates a seeded subsample of that many rows per platform (quick
    reports); platforms with too few rows get a row saying how many are needed.
    """
    scores, planned, names = [], [], store.platform_names()
    for platform in names:
        ok, _ = training_rows(Results.read(store, platform=platform), family)
        if 0 < max_rows < len(ok):
            ok = ok.sample(max_rows, random_state=seed)
        if not enough_for_folds(len(ok), k):
            needed = MIN_ROWS + math.ceil(MIN_ROWS / (k - 1))
            scores.append({"platform": platform, "n": len(ok), "note": f"needs at least {needed} measured rows"})
            continue
        featurizer = Featurizer(family, platform_ceilings(store.platforms(), platform))
        planned.append((platform, *fold_calls(ok, featurizer, k, seed)))
    results = iter(in_parallel([fit for *_, folds in planned for _, fit in folds]))  # every platform's folds at once
    tables = []
    for platform, out, folds in planned:
        oof = filled_folds(out, folds, [next(results) for _ in folds]).assign(platform=platform)
        held_out = oof_scores(oof)
        row = {"platform": platform, **held_out["model"], **{f"{b}_mape": held_out[b]["mape"] for b in BASELINES}}
        scores.append({**row, "note": ""})
        tables.append(oof)
    scores.sort(key=lambda row: names.index(row["platform"]))
    return pd.DataFrame(scores), (pd.concat(tables, ignore_index=True) if tables else pd.DataFrame())


def filled_grid(rows: pd.DataFrame, featurizer: Featurizer, chosen: list[int], seed: int = 0) -> pd.DataFrame:
    """A measured grid with every row outside ``chosen`` replaced by its prediction (``measured`` says which is which)."""
    grid = rows.reset_index(drop=True)
    model = PerformanceModel.fit(grid.loc[chosen], featurizer, seed)
    rest = grid.index.difference(chosen)
    out = grid.assign(measured=grid.index.isin(chosen), truth_s=grid["step_time_s"].astype(float))
    out.loc[rest, "step_time_s"] = model.predict(grid.loc[rest])["step_time_s"].to_numpy()
    out["examples_per_sec"] = out["batch"] / out["step_time_s"]
    out["error_pct"] = (out["step_time_s"] / out["truth_s"] - 1) * 100
    return out
