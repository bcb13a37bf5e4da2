# Two commands do all set-up on a fresh machine: `make lab` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
# configurable-http-proxy, JupyterHub's proxy, for `master-lite --jupyterhub` and its tests:
# `make install` puts it in node_modules/.bin (git-ignored) unless one is on PATH.
CHP := node_modules/.bin/configurable-http-proxy
CHP_VERSION := 5
TRIALS_VENV := .venv-trials
TRIALS_STAMP := $(VENV)/.trials-venv-made
# torch and the torchvision release built against it, pinned here only (pyproject names both
# unpinned): torchvision 0.28.0's wheels require torch==2.13.0. CPU wheels of both come from
# TORCH_INDEX_URL; PyPI's torchvision is a CUDA build, which beside a CPU torch fails on import
# (it links libc10_cuda.so), so it is removed again where no CPU build was reachable.
TORCH_VERSION := 2.13.0
TORCHVISION_VERSION := 0.28.0
TORCH_INDEX_URL ?= https://download.pytorch.org/whl/cpu
# Keras 2 for Determined-era Keras code (TF_USE_LEGACY_KERAS=1), the release matching TensorFlow's;
# --no-deps: tf-keras requires the `tensorflow` distribution, which would land over tensorflow-cpu.
TF_KERAS_VERSION := 2.21.*
PYTEST_ARGS ?=
# pytest-xdist: one worker per core (`auto`); each file runs whole on one worker (`loadfile`), so
# a module's shared fixtures (a master, a JupyterLab, a browser) start once. PYTEST_WORKERS=0
# runs serially.
PYTEST_WORKERS ?= auto
PYTEST_PARALLEL = $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)
ROOT_DIR ?=
PORT ?= 8080
# A second venv for the Estimator tests: tf.estimator ends with TensorFlow 2.15 (wheels for Python <= 3.11).
TF215_PYTHON ?= $(PYTHON)
TF215_VENV := .venv-tf215
TF215_PY := $(TF215_VENV)/bin/python
TF215_STAMP := $(TF215_VENV)/.installed
TF215_PACKAGES := 'tensorflow-cpu==2.15.1' 'tensorflow-estimator==2.15.*' 'numpy<2' 'pytest>=8' 'pytest-timeout>=2.2' 'pytest-xdist>=3.5' 'scikit-learn>=1.4'
ESTIMATOR_PYTEST_ARGS ?=

.PHONY: install lab master demo lint format test test-fast test-deps test-estimator bench soak clean image

## install: create or update .venv with the project and everything it needs (idempotent), and
## configurable-http-proxy (JupyterHub's proxy, from npm) unless one is on PATH already, and
## .venv-trials, the interpreter of trials run as other Unix users (scripts/make_trial_venv.py)
install: $(STAMP) $(TRIALS_STAMP) $(CHP)

# JupyterHub's proxy (CHP, above): skipped when one is on PATH or already there. Needs npm
# (Node.js, as the sidebar's build does); Debian's is installed where it is missing.
$(CHP):
	@command -v configurable-http-proxy >/dev/null || { \
		command -v npm >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; }; \
		npm install --no-save --no-package-lock --no-audit --no-fund --prefix . configurable-http-proxy@$(CHP_VERSION) >/dev/null; }

# .venv-trials: an interpreter (and console scripts) that trials run as other Unix users can
# execute (.venv's may resolve under /root, 0700): docs/team.md, "What runs as whom". Redone
# after every change of .venv (new console scripts), never fatal: only such trials need it.
$(TRIALS_STAMP): $(STAMP) scripts/make_trial_venv.py
	$(PY) scripts/make_trial_venv.py --venv $(VENV) --out $(TRIALS_VENV)
	@touch $(TRIALS_STAMP)

LABEXT_SOURCES := $(shell find labextension/src labextension/style -type f 2>/dev/null) labextension/package.json

# Redone only when the dependencies or the sidebar's sources change: the Python packages are an
# editable install, but the labextension is built (by hatch-jupyter-builder) at install time.
$(STAMP): pyproject.toml $(LABEXT_SOURCES)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip wheel
	@# torch first: an unpinned torch pulled in by another package would be a multi-GB CUDA build
	@# The CPU index only where it answers: pip retries an unreachable index for every package.
	index=$$($(PY) -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' \
		'$(TORCH_INDEX_URL)/' 2>/dev/null && echo '--extra-index-url $(TORCH_INDEX_URL)'); \
	$(PIP) install -q torch==$(TORCH_VERSION) torchvision==$(TORCHVISION_VERSION) $$index
	@$(PY) -c 'import torchvision' 2>/dev/null || { \
		echo "torchvision $(TORCHVISION_VERSION): no CPU build reachable (TORCH_INDEX_URL); uninstalled"; \
		$(PIP) uninstall -q -y torchvision; }
	$(PIP) install -q -e '.[all]'
	$(PIP) install -q --no-deps 'tf-keras==$(TF_KERAS_VERSION)'
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

## test-deps: what only the tests need beyond the Python packages: Debian's chromium, openssl
## (the report courier's HTTPS tests make a self-signed certificate), podman with runc (the
## container runner's tests; Debian's default crun refuses some hosts' cgroup setups), and
## docker-registry with apache2-utils' htpasswd (a registry on loopback for the pull tests),
## iproute2 and iptables (the multi-node Ray suite puts each node in a network namespace of its
## own, tests/_support/ray_cluster.py, and cuts one off with iptables)
test-deps:
	@command -v chromium >/dev/null && command -v openssl >/dev/null && command -v podman >/dev/null && command -v runc >/dev/null && command -v docker-registry >/dev/null && command -v htpasswd >/dev/null && command -v ip >/dev/null && command -v iptables >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium openssl podman runc docker-registry apache2-utils iproute2 iptables >/dev/null; }

## image: build the default trial image for `environment.image` into the container runtime's
## local store (Debian's essential packages with python3 and numpy; the master mounts the
## harness into every trial container, so the image does not need it). No registry needed: the
## root file system is made by mmdebstrap and imported. IMAGE and IMAGE_SUITE override.
IMAGE ?= localhost/jupyter-determined-trial:latest
IMAGE_SUITE ?= $(shell . /etc/os-release 2>/dev/null && echo $$VERSION_CODENAME || echo bookworm)
IMAGE_PACKAGES ?= python3,python3-numpy,ca-certificates
CONTAINER_RUNTIME ?= $(shell command -v podman || command -v docker || echo podman)
image:
	@command -v mmdebstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null; }
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
		mmdebstrap --quiet --variant=essential --include=$(IMAGE_PACKAGES) $(IMAGE_SUITE) "$$tmp/rootfs.tar" && \
		$(CONTAINER_RUNTIME) import "$$tmp/rootfs.tar" $(IMAGE) >/dev/null && \
		echo "built $(IMAGE): use it with environment: {image: $(IMAGE)}"

## lint: ruff (rules and formatting) and mypy on the Python packages; eslint, prettier and tsc on
## the sidebar. `make format` applies the formatters.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	cd labextension && ../$(VENV)/bin/jlpm lint:check

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
	cd labextension && ../$(VENV)/bin/jlpm lint

## test: install test dependencies, lint, and run the whole suite (sidebar unit tests, pytest, then
## the Estimator tests in .venv-tf215)
test:
	@# The three installs are independent (two venvs, Debian's packages): side by side they take
	@# about as long as the longest one, not the sum (minutes on a fresh clone).
	$(MAKE) --no-print-directory --output-sync=target -j3 install test-deps $(TF215_STAMP)
	$(MAKE) --no-print-directory lint
	cd labextension && ../$(VENV)/bin/jlpm test
	$(PY) -m pytest $(PYTEST_PARALLEL) --durations=30 $(PYTEST_ARGS)
	$(TF215_PY) -m pytest $(PYTEST_PARALLEL) tests/estimator $(ESTIMATOR_PYTEST_ARGS)

## test-estimator: only the Estimator tests, in .venv-tf215 (TensorFlow 2.15 + tensorflow-estimator)
test-estimator: $(TF215_STAMP)
	$(TF215_PY) -m pytest $(PYTEST_PARALLEL) tests/estimator $(ESTIMATOR_PYTEST_ARGS)

# The project's runtime dependencies (read from pyproject.toml) and TensorFlow 2.15, without
# installing the project itself (that would build the labextension): a .pth file puts harness/
# and the repository on the venv's path instead.
$(TF215_STAMP): pyproject.toml
	@$(TF215_PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] > (3, 11))' || { echo "$(TF215_VENV) needs Python <= 3.11 (TensorFlow 2.15 has no wheels for newer ones): run make with TF215_PYTHON=python3.11"; exit 1; }
	@test -x $(TF215_PY) || $(TF215_PYTHON) -m venv $(TF215_VENV)
	$(TF215_PY) -m pip install -q --upgrade pip wheel
	$(TF215_PY) -c "import sys; t = __import__('tomllib' if sys.version_info >= (3, 11) else 'pip._vendor.tomli', fromlist=['load']); print('\n'.join(t.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > $(TF215_VENV)/requirements.txt
	$(TF215_PY) -m pip install -q $(TF215_PACKAGES) -r $(TF215_VENV)/requirements.txt
	printf '%s\n' "$(CURDIR)/harness" "$(CURDIR)" > "$$($(TF215_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/jupyter_determined_dev.pth"
	@touch $(TF215_STAMP)

## test-fast: the suite without the slow tests (no real master, trials, containers, kernels,
## Jupyter server or browser: tests/_support/slow.py), on every core
test-fast: install
	$(PY) -m pytest $(PYTEST_PARALLEL) -m "not slow" --durations=10 $(PYTEST_ARGS)

## bench: benchmarks against baselines measured in the same run (not part of `make test`); the
## render benchmarks (bench_sidebar_render.py, bench_widget_render.py) drive Debian's chromium
bench: $(VENV)/.bench-installed test-deps
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

$(VENV)/.bench-installed: $(STAMP)
	$(PIP) install -q -e '.[all,bench]'
	@touch $@

## soak: long reliability runs (loopback only, a few minutes)
soak: install
	$(PY) soak/soak_faults.py
	$(PY) soak/soak_load.py

clean:
	rm -rf $(VENV) $(TF215_VENV) build dist *.egg-info .pytest_cache
