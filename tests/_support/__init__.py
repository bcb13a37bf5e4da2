"""Shared test support: one way to start a master or a Jupyter server, wait, and pack a context.

* `master`: `MasterProcess`, a real `python -m master_lite` process, and helpers that drive it
  through its REST API (`submit`, `trials`, `trial_logs`, `all_logs`, `wait_for_experiment`).
* `jupyter`: `JupyterServer`, a real JupyterLab / jupyter_server with jupyter_determined enabled
  (optionally with the built labextension, for the browser tests).
* `process`: `ServerProcess`, what both share (a child in its own session, its log, stop/kill),
  `REPO`, `child_env`, `free_port` and `free_ports`.
* `checkpointing`: `CHECKPOINTING_SCRIPT`, the fault-tolerance tests' trial, and what reads its
  reports (`clean_series`, `assert_clean_series`, `reported_steps`, `resumed_from`).
* `waiting`: `wait_until`, the one polling loop (`wait_until_async` inside an event loop).
* `context`: `tar_gz` / `context_tarball` (base64), the one context-tarball builder, and
  `directory_files` to pack a directory.
* `states`: the terminal-state sets, from `determined.common.states`.
* `fixtures`: the pytest fixtures every folder may use (`start_master`, `start_jupyter`,
  `lab_server`, `refused_port`, `container_images`), loaded by tests/conftest.py.
* `slow` and `parallel`: plugins tests/conftest.py loads too: the `slow` marker (applied by
  fixture use, and a guard that fails an unmarked test starting a master, trials, containers,
  kernels, Jupyter or a browser) and what keeps pytest-xdist workers apart (a private HOME per
  process, the `rendezvous_ports` lock).
* `containers`: tiny test images (`build_tiny_image`, run with the host's /usr: `HOST_USR`) and
  the containers a master made (`containers_of`, `remove_containers_of`).
* `browser`: `Lab` (a `JupyterServer` with the labextension) and the page helpers of tests/browser
  (`set_theme`, `show_sidebar`).
* `hosted`: the master hosted in pytest-jupyter's in-process server (`hosted_server_config`,
  `start_hosted`, `hosted_api`).
* `ray_cluster`: `NetnsCluster`, a multi-node Ray cluster on one machine (each node in a network
  namespace with its own address and directories; kill, partition, stop the head; root only),
  and `NodeMaster`, master-lite on one of its nodes; `s3_server`: moto's S3 server;
  `gcs_server`: a Google Cloud Storage emulator.
* `parts`: the master's parts over a real store without a Master (`started_parts`,
  `run_with_parts`); `stored`: rows written straight into a store (`finished_experiment`).
"""

from __future__ import annotations

from tests._support.checkpointing import (
    CHECKPOINTING_SCRIPT,
    assert_clean_series,
    clean_series,
    reported_steps,
    resumed_from,
)
from tests._support.context import context_tarball, directory_files, tar_gz
from tests._support.master import (
    MasterProcess,
    all_logs,
    marked_values,
    submit,
    trial_logs,
    trials,
    wait_for_experiment,
)
from tests._support.process import REPO, ServerProcess, child_env, free_port, free_ports
from tests._support.states import TERMINAL_EXPERIMENT_STATES, TERMINAL_TRIAL_STATES
from tests._support.waiting import wait_until, wait_until_async

__all__ = [
    "CHECKPOINTING_SCRIPT",
    "MasterProcess",
    "REPO",
    "ServerProcess",
    "TERMINAL_EXPERIMENT_STATES",
    "TERMINAL_TRIAL_STATES",
    "all_logs",
    "assert_clean_series",
    "child_env",
    "clean_series",
    "context_tarball",
    "directory_files",
    "free_port",
    "free_ports",
    "marked_values",
    "reported_steps",
    "resumed_from",
    "submit",
    "tar_gz",
    "trial_logs",
    "trials",
    "wait_for_experiment",
    "wait_until",
    "wait_until_async",
]
