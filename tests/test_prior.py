"""The projection as prior for a platform with few or no rows (issue 26, item 5): exact arithmetic on synthetic parts."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from paradnn.analysis import prior as pri
from paradnn.analysis import projection as pj
from paradnn.config import ConfigError

P = pj.Peaks("p", "float32", flops=100.0, bandwidth=10.0, source="test")
Q = pj.Peaks("q", "float32", flops=300.0, bandwidth=20.0, source="test")


def fc(layers: int, nodes: int, batch: int) -> str:
    return f"layer_{layers}-node_{nodes}-input_2000-output_1000-bs_{batch}"


PROFILED = [fc(2, 64, 64), fc(4, 128, 128), fc(8, 256, 256), fc(16, 512, 512), fc(32, 1024, 1024)]
STEPS = {label: 0.01 * (i + 1) for i, label in enumerate(PROFILED)}
SHARES, FACTORS = [0.1, 0.2, 0.3, 0.4, 0.5], [0.5, 0.4, 0.3, 0.6, 0.7]


def prior(steps: dict | None = None, shares=SHARES, factors=FACTORS, model=None) -> pri.ProjectionPrior:
    source = pj.Source("p", "float32", pd.Series(steps or STEPS, dtype=float), pd.DataFrame(), "store")
    parts = pd.DataFrame({"kept_share": shares, "moved_factor": factors}, index=PROFILED)
    return pri.ProjectionPrior("fc", source, P, Q, parts, model)


def truth(p: pri.ProjectionPrior, labels: list[str], coef=(2.0, 0.5, 1e-5)) -> pd.DataFrame:
    x, _ = p.terms(labels)
    return pd.DataFrame({"label": labels, "step_time_s": x @ np.array(coef)})


def test_parts_of_a_projected_step_split_it_into_kept_and_scaled_time():
    """The 4 s synthetic step of test_projection: 1 s kept (0.5 s infeed, 0.5 s untraced), 3 s scaled to 4/3 s."""
    step = pd.DataFrame(
        {
            "category": ["matmul", "element-wise", "infeed"],
            "time_s": [1.0, 2.0, 0.5],
            "flops": [200.0, 10.0, 0.0],
            "bytes": [10.0, 100.0, 8.0],
        }
    )
    out = pj.project_step(step, 4.0, P, Q)
    assert out["kept_s"] == pytest.approx(1.0)
    parts = pri.parts_of(pd.DataFrame([{"label": "a", "source_step_time_s": 4.0, **out}]))
    assert parts.loc["a", "kept_share"] == pytest.approx(0.25)
    assert parts.loc["a", "moved_factor"] == pytest.approx((1 / 3 + 1) / 3)


def test_without_rows_of_q_the_prior_is_the_projection_and_has_no_interval():
    p = prior()
    out = p.predict([PROFILED[1]])
    assert out["step_time_s"].iloc[0] == pytest.approx(0.02 * (0.8 * 0.4 + 0.2))
    assert math.isnan(out["step_time_low_s"].iloc[0]) and out["parts_from"].iloc[0] == "profile"
    assert "not calibrated" in p.describe()


def test_one_row_of_q_scales_the_prior_by_its_ratio():
    p = prior()
    measured = pd.DataFrame({"label": [PROFILED[0]], "step_time_s": [3 * p.predict([PROFILED[0]])["step_time_s"].iloc[0]]})
    fitted = p.calibrated(measured)
    assert fitted.coef == pytest.approx((3.0, 3.0, 0.0)) and fitted.n == 1
    before, after = p.predict([PROFILED[4]]), fitted.predict([PROFILED[4]])
    assert after["step_time_s"].iloc[0] == pytest.approx(3 * before["step_time_s"].iloc[0])


def test_three_rows_recover_the_three_terms_and_five_give_an_interval():
    p = prior()
    fitted = p.calibrated(truth(p, PROFILED[:3]))
    assert fitted.coef == pytest.approx((2.0, 0.5, 1e-5), rel=1e-6) and math.isnan(fitted.half_width)
    assert fitted.predict(PROFILED[3:])["step_time_s"].to_numpy() == pytest.approx(truth(p, PROFILED[3:])["step_time_s"])
    noisy = truth(p, PROFILED).assign(step_time_s=lambda d: d["step_time_s"] * [1.1, 0.9, 1.0, 1.05, 0.95])
    wide = p.calibrated(noisy)
    assert wide.n == 5 and 0 < wide.half_width < 1
    out = wide.predict(PROFILED)
    assert (out["step_time_low_s"] < out["step_time_s"]).all() and (out["step_time_s"] < out["step_time_high_s"]).all()
    assert "calibrated on 5 measured rows of q" in wide.describe()


def test_an_unprofiled_configuration_takes_its_neighbours_parts():
    unprofiled = fc(8, 256, 512)
    p = prior({**STEPS, unprofiled: 0.05}, shares=[0.2] * 5, factors=[0.5] * 5)
    out = p.predict([unprofiled])
    assert out["parts_from"].iloc[0] == "neighbours"
    assert out["step_time_s"].iloc[0] == pytest.approx(0.05 * (0.8 * 0.5 + 0.2))


def test_a_configuration_p_did_not_measure_needs_p_s_model():
    unmeasured = fc(8, 256, 2048)
    with pytest.raises(ConfigError, match="a configuration p measured"):
        prior().predict([unmeasured])
    p = prior(model=lambda labels: np.full(len(labels), 0.08))
    out = p.predict([unmeasured])
    assert not out["source_measured"].iloc[0] and out["step_time_s"].iloc[0] > 0
