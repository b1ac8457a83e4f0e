# The README's two commands: `make quick` (the main job) and `make test`.
# Each sets itself up on a fresh machine: .venv, the package with its test extras,
# and a Jupyter kernel named `paradnn`.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup quick test lint bench clean gpu

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m ipykernel install --sys-prefix --name paradnn --display-name "Python (paradnn)" >/dev/null
	touch $(STAMP)

# Main job: measure the quick preset of every family on this machine and print a table.
quick: $(STAMP)
	$(BIN)/paradnn platform
	@for family in fc cnn rnn; do $(BIN)/paradnn sweep $$family --preset quick --store outputs/quick/results.sqlite || exit 1; done

test: $(STAMP)
	$(BIN)/ruff check paradnn tests
	$(BIN)/python -m pytest

# CUDA-enabled TensorFlow for machines with an NVIDIA GPU.
gpu: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[gpu,test]'

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
