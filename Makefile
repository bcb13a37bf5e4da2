# Two commands do all set-up on a fresh machine: `make lab` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
TORCH_VERSION := 2.13.0
PYTEST_ARGS ?=
ROOT_DIR ?=
PORT ?= 8080

.PHONY: install lab master test test-fast bench clean

## install: create or update .venv with the project and everything it needs (idempotent)
install: $(STAMP)

# Rebuilt only when the dependency list changes; the project itself is an editable install.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel
	@# torch first: an unpinned torch pulled in by another package would be a multi-GB CUDA build
	$(PIP) install -q torch==$(TORCH_VERSION)
	$(PIP) install -q -e '.[all]'
	@touch $(STAMP)

## lab: start the standalone master (the JupyterLab server extension replaces this once it lands)
lab: install
	@echo "Starting master-lite (standalone master; JupyterLab integration is not built yet)."
	$(VENV)/bin/master-lite --port $(PORT) $(if $(ROOT_DIR),--root-dir $(ROOT_DIR))

master: lab

## test: install test dependencies and run the whole suite
test: install
	$(PY) -m pytest $(PYTEST_ARGS)

## test-fast: the suite without the slow end-to-end tests
test-fast: install
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

## bench: benchmarks (not part of `make test`)
bench: install
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
