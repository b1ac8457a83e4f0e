"""One sweep request for every front end (paradnn.sweeps.request): what prepare makes of a report's
request (configurations given, several runs, a further look) and how its runs are measured."""

from __future__ import annotations

import pytest

from paradnn.config import ConfigError
from paradnn.families import parse_label
from paradnn.sweeps import loop
from paradnn.sweeps import request as req
from paradnn.sweeps.plan import SweepSummary

CONFIGS = [parse_label("fc", "layer_1-node_8-input_8-output_4-bs_8"), parse_label("fc", "layer_1-node_16-input_8-output_4-bs_8")]
VARIANTS = [{"dtype": "float32"}, {"dtype": "mixed_bfloat16"}]


@pytest.fixture
def sweeps(monkeypatch):
    """Every call of the sweep loop, as (options, runs, backend), instead of measuring."""
    seen = []

    def sweep(configs, store, options, backend, runs=(), progress=None):
        seen.append((options, list(runs), backend))
        return SweepSummary(planned=len(configs))

    monkeypatch.setattr(loop, "sweep", sweep)
    return seen


def test_configurations_given_replace_the_grid_and_an_empty_list_stays_empty():
    asked = req.SweepRequest(family="fc", configs=CONFIGS, run={"xla": False})
    assert req.prepare(asked, echo=lambda line: None).configs == CONFIGS
    assert req.prepare(req.SweepRequest(family="fc", configs=[]), echo=lambda line: None).configs == []
    assert len(req.prepare(req.SweepRequest(family="fc"), echo=lambda line: None).configs) > 2  # the smoke grid


def test_several_runs_are_one_local_sweep_with_the_whole_budget(sweeps):
    asked = req.SweepRequest(family="fc", configs=CONFIGS, run={"xla": False}, variants=VARIANTS, max_minutes=4)
    prepared = req.prepare(asked, echo=lambda line: None)
    assert prepared.together and [r.dtype for r in prepared.runs] == ["float32", "mixed_bfloat16"]
    assert len(req.measure_runs(prepared, store=None)) == 1
    ((options, runs, _),) = sweeps
    assert options.max_minutes == 4 and [r.dtype for r in runs] == ["float32", "mixed_bfloat16"]


def test_a_backend_without_several_runs_measures_each_with_its_share_and_a_backend_of_its_own(sweeps):
    asked = req.SweepRequest(
        family="fc", configs=CONFIGS, run={"xla": False}, variants=VARIANTS, stacks=("current",), max_minutes=4
    )
    prepared = req.prepare(asked, echo=lambda line: None)
    assert not prepared.together
    assert len(req.measure_runs(prepared, store=None, echo=lambda line: None)) == 2
    (first, none_1, b1), (second, none_2, b2) = sweeps
    assert [first.settings.dtype, second.settings.dtype] == ["float32", "mixed_bfloat16"]
    assert first.max_minutes == second.max_minutes == 2 and none_1 == none_2 == [] and b1 is not b2


def test_a_further_look_measures_again_in_the_order_given():
    prepared = req.prepare(req.SweepRequest(family="fc", configs=CONFIGS, run={"xla": False}, look=2), echo=lambda line: None)
    assert prepared.options.force and prepared.options.keep_order and prepared.options.look == 2
    plain = req.prepare(req.SweepRequest(family="fc", configs=CONFIGS, run={"xla": False}), echo=lambda line: None)
    assert not plain.options.force and not plain.options.keep_order


def test_runs_of_two_platforms_are_refused_in_one_line():
    asked = req.SweepRequest(family="fc", configs=CONFIGS, variants=[{}, {"platform": "cpu[threads=1]"}])
    with pytest.raises(ConfigError, match="variants.*runs of one platform"):
        req.prepare(asked, echo=lambda line: None)
