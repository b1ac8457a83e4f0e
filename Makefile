# The README's two commands: `make quick` (the main job) and `make test`.
# Each sets itself up on a fresh machine: .venv, the package with its test extras,
# and a Jupyter kernel named `paradnn`.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup quick test check format durations fixture chromium bench clean gpu lab torch

setup: $(STAMP)

# uv (a dependency of paradnn's software stacks) installs in about 25 s what pip takes 60 s for,
# resolving the same versions; where uv cannot reach an index, pip (and the machine's pip.conf) does.
# --compile-bytecode as pip does: where PYTHONDONTWRITEBYTECODE is set, a process importing
# TensorFlow from sources without .pyc files takes 11.8 s instead of 5.0 s, every worker and kernel.
UV_INSTALL = $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python

# PyTorch (the extra paradnn[torch]) through pip, not uv: pip takes the CPU build that lies on
# these machines' disk, where uv would download a CUDA build of about 3 GB. Elsewhere, pick the
# build, e.g. make TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu".
TORCH ?= torch==2.13.0

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet 'uv>=0.4'
	$(UV_INSTALL) -e '.[test]' || \
	  $(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m ipykernel install --sys-prefix --name paradnn --display-name "Python (paradnn)" >/dev/null
	touch $(STAMP)

# Main job: measure the quick preset on this machine and render the HTML reports;
# ends by printing the path of outputs/quick/index.html.
quick: $(STAMP)
	$(BIN)/paradnn report quick

# The notebooks in JupyterLab, on the paradnn kernel.
lab: $(STAMP)
	$(BIN)/paradnn lab

# The report test opens pages in Debian's headless Chromium; install it where we can.
chromium:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null); } || \
	  echo "chromium not installed: the browser test will be skipped"

test: $(STAMP) chromium
	$(BIN)/ruff check paradnn tests benchmarks notebooks
	$(BIN)/ruff format --check paradnn tests benchmarks
	$(BIN)/python -m pytest

# The edit-test loop: every test that neither measures nor renders (those that took over 2 s in the
# run recorded in tests/durations.json are left out), in about 3 minutes.
check: $(STAMP)
	$(BIN)/ruff check paradnn tests benchmarks notebooks
	$(BIN)/ruff format --check paradnn tests benchmarks
	PARADNN_TIER=check $(BIN)/python -m pytest -q

# Formats the code as `make check` and `make test` require.
format: $(STAMP)
	$(BIN)/ruff format paradnn tests benchmarks

# Records each test's time in tests/durations.json (the suite's order and the check tier read it);
# rerun after adding slow tests.
durations: $(STAMP) chromium
	PARADNN_RECORD_DURATIONS=1 $(BIN)/python -m pytest

# The store the report tests render from (tests/fixtures/smoke.sqlite): the smoke pipeline measured here,
# about 8 minutes; rerun when the store's schema or columns change (tests/test_reports.py says when).
fixture: $(STAMP)
	$(BIN)/python tests/fixtures/build_smoke_store.py

# Performance evidence for the harness itself: a table of ratios (about 30 minutes).
bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

# CUDA-enabled TensorFlow for machines with an NVIDIA GPU.
gpu: $(STAMP)
	$(UV_INSTALL) -e '.[gpu,test]' || \
	  $(BIN)/python -m pip install --quiet -e '.[gpu,test]'

# PyTorch alone, into an existing environment (setup installs it too).
torch:
	test -x $(BIN)/python || $(MAKE) setup
	$(BIN)/python -m pip install --quiet $(TORCH)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
