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

.PHONY: install lab master demo test test-fast test-deps bench soak clean

## install: create or update .venv with the project and everything it needs (idempotent)
install: $(STAMP)

LABEXT_SOURCES := $(shell find labextension/src labextension/style -type f 2>/dev/null) labextension/package.json

# Redone only when the dependencies or the sidebar's sources change: the Python packages are an
# editable install, but the labextension is built (by hatch-jupyter-builder) at install time.
$(STAMP): pyproject.toml $(LABEXT_SOURCES)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel
	@# torch first: an unpinned torch pulled in by another package would be a multi-GB CUDA build
	$(PIP) install -q torch==$(TORCH_VERSION)
	$(PIP) install -q -e '.[all]'
	@touch $(STAMP)

## lab: start JupyterLab with the Determined sidebar and the embedded master
lab: install
	$(VENV)/bin/jupyter lab $(if $(ROOT_DIR),--MasterLite.root_dir=$(ROOT_DIR))

## master: the standalone master, for servers without JupyterLab
master: install
	$(VENV)/bin/master-lite --port $(PORT) $(if $(ROOT_DIR),--root-dir $(ROOT_DIR))

## demo: run the quickstart notebook headless and print the experiment summary
demo: install
	$(PY) -m jupyter_determined._demo

## test-deps: what only the tests need beyond the Python packages: Debian's chromium
test-deps:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

## test: install test dependencies and run the whole suite (sidebar unit tests, then pytest)
test: install test-deps
	cd labextension && ../$(VENV)/bin/jlpm test
	$(PY) -m pytest $(PYTEST_ARGS)

## test-fast: the suite without the slow end-to-end tests
test-fast: install
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

## bench: benchmarks against baselines measured in the same run (not part of `make test`)
bench: $(VENV)/.bench-installed
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

$(VENV)/.bench-installed: $(STAMP)
	$(PIP) install -q -e '.[all,bench]'
	@touch $@

## soak: long reliability runs (loopback only, a few minutes)
soak: install
	$(PY) soak/soak_faults.py
	$(PY) soak/soak_load.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
