# Fresh machine: `make run` (start lahar with the demo of examples/) and `make test` (lint, layers, tests).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean devcluster peers

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/lahar up --demo

devcluster: $(STAMP)
	$(BIN)/lahar devcluster

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# The real programs the `real` tests run against (kube-apiserver, etcd, ...), built from Go modules into a cache
# outside the tree; without Go it says so and those tests skip. A warm cache makes this take seconds.
peers:
	$(PY) tests/peers/build.py

# loadgroup: the tests of one xdist_group (the real cluster's) share one worker and so one cluster.
test: lint
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q

bench: $(STAMP)
	$(BIN)/python bench/quick.py

clean:
	rm -rf $(VENV) .lahar .pytest_cache
