"""Which hyperparameters drive a metric: OLS on standardised log2 features (paper Fig. 2d-f).

Each hyperparameter is log2-transformed (the grids are mostly powers of two) and
standardised, so a coefficient reads as "change of the target per standard deviation of
log2(hyperparameter)" and coefficients are comparable across hyperparameters. A
hyperparameter that does not vary in the data is dropped (it has no effect to estimate).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.api as sm

from paradnn import families


@dataclass(frozen=True)
class RegressionResult:
    """Coefficients with 95% confidence intervals, R^2 and the fitted statsmodels results."""

    target: str
    coefficients: pd.DataFrame  # index feature; columns coef, ci_low, ci_high, p_value
    r_squared: float
    n: int
    dropped: tuple[str, ...]
    fit: object | None

    def summary(self) -> dict:
        return {"target": self.target, "n": self.n, "r_squared": self.r_squared, "dropped": list(self.dropped)}


def regress(
    df: pd.DataFrame, target: str, features: tuple[str, ...] | None = None, family: str | None = None
) -> RegressionResult:
    """Fit ``target ~ standardised log2(features)`` by OLS on the rows where all are finite."""
    features = features or families.get(family or str(df["family"].iloc[0])).numeric_axes
    data = df[[*features, target]].apply(pd.to_numeric, errors="coerce").replace([np.inf, -np.inf], np.nan).dropna()
    data = data[(data[list(features)] > 0).all(axis=1)]
    varying = tuple(f for f in features if data[f].nunique() > 1)
    dropped = tuple(f for f in features if f not in varying)
    empty = pd.DataFrame(columns=["coef", "ci_low", "ci_high", "p_value"])
    if not varying or len(data) <= len(varying) + 1 or data[target].nunique() < 2:
        return RegressionResult(target, empty, float("nan"), len(data), dropped, None)
    x = np.log2(data[list(varying)].astype(float))
    x = (x - x.mean()) / x.std(ddof=0)
    fit = sm.OLS(data[target].astype(float), sm.add_constant(x)).fit()
    ci = fit.conf_int(0.05)
    table = pd.DataFrame({"coef": fit.params, "ci_low": ci[0], "ci_high": ci[1], "p_value": fit.pvalues}).drop(index="const")
    return RegressionResult(target, table, float(fit.rsquared), len(data), dropped, fit)
