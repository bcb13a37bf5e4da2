"""Fixtures and policies every test folder shares: they live in the tests._support package.

* `fixtures`: the fixtures (`start_master`, `start_jupyter`, `lab_server`, ...);
* `slow`: the `slow` marker, applied by fixture use and guarded (a test that starts a master,
  trials, containers, kernels, Jupyter or a browser without the mark fails);
* `parallel`: what makes the suite safe under pytest-xdist (a private HOME per process, the
  rendezvous-port lock).
"""

from __future__ import annotations

pytest_plugins = ["tests._support.fixtures", "tests._support.slow", "tests._support.parallel"]
