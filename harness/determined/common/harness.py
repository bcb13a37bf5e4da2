"""What the master knows of the harness it runs trials with (master_lite imports nothing of the
harness but `determined.common`): its version, which is the version of the API the master
implements, and the harness programs the master starts by path."""

from __future__ import annotations

import os

VERSION = "0.1.0"  # determined.__version__

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
# The local runner's pre-started interpreters (master_lite.runners.process._prestart).
PRESTARTED_SCRIPT = os.path.join(_PACKAGE_DIR, "exec", "prestarted.py")

__all__ = ["PRESTARTED_SCRIPT", "VERSION"]
