"""Which hyperparameters drive a metric: OLS of the metric on standardised hyperparameters (Fig. 2d-f).

Two formulations (``form``):

* ``log2`` (the default): each hyperparameter is log2-transformed (the grids are mostly
  powers of two) and standardised, so a coefficient reads as "change of the target per
  standard deviation of log2(hyperparameter)";
* ``paper``: as the paper does it, the raw hyperparameters *and* the target are
  standardised, so a coefficient is the change of the target in its standard deviations
  per standard deviation of the hyperparameter.

Either way coefficients are comparable across hyperparameters. A hyperparameter that
does not vary in the data is dropped (it has no effect to estimate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from paradnn import families


@dataclass(frozen=True)
class RegressionResult:
    """Coefficients with 95% confidence intervals, R^2 and the fitted statsmodels results."""

    target: str
    coefficients: pd.DataFrame  # index feature; columns coef, ci_low, ci_high, p_value
    r_squared: float
    n: int
    dropped: tuple[str, ...]
    fit: Any  # statsmodels' fitted results (untyped), or None
    form: str = "log2"

    def summary(self) -> dict:
        return {"target": self.target, "n": self.n, "r_squared": self.r_squared, "dropped": list(self.dropped), "form": self.form}


FORMS = ("log2", "paper")


def regress(
    df: pd.DataFrame, target: str, features: tuple[str, ...] | None = None, family: str | None = None, form: str = "log2"
) -> RegressionResult:
    """Fit ``target ~ standardised features`` by OLS on the rows where all are finite (see the module docstring)."""
    if form not in FORMS:
        from paradnn.config import ConfigError

        raise ConfigError("regression form", form, ", ".join(FORMS))
    features = features or families.get(family or str(df["family"].iloc[0])).numeric_axes
    data = df[[*features, target]].apply(pd.to_numeric, errors="coerce").replace([np.inf, -np.inf], np.nan).dropna()
    data = data[(data[list(features)] > 0).all(axis=1)]
    varying = tuple(f for f in features if data[f].nunique() > 1)
    dropped = tuple(f for f in features if f not in varying)
    empty = pd.DataFrame(columns=["coef", "ci_low", "ci_high", "p_value"])
    if not varying or len(data) <= len(varying) + 1 or data[target].nunique() < 2:
        return RegressionResult(target, empty, float("nan"), len(data), dropped, None, form)
    x = data[list(varying)].astype(float)
    x = np.log2(x) if form == "log2" else x
    x = (x - x.mean()) / x.std(ddof=0)
    y = data[target].astype(float)
    y = (y - y.mean()) / y.std(ddof=0) if form == "paper" else y
    from statsmodels.regression.linear_model import OLS  # here, not at import: 1.5 s that most callers never need
    from statsmodels.tools.tools import add_constant

    fit = OLS(y, add_constant(x)).fit()
    ci = fit.conf_int(0.05)
    table = pd.DataFrame({"coef": fit.params, "ci_low": ci[0], "ci_high": ci[1], "p_value": fit.pvalues}).drop(index="const")
    return RegressionResult(target, table, float(fit.rsquared), len(data), dropped, fit, form)
