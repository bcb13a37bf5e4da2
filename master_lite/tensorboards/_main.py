"""`python -m master_lite.tensorboards._main ARGS`: TensorBoard's own command line, without
TensorFlow.

The master's TensorBoards read local event files only, which TensorBoard's TensorFlow-free stub
reads as well as TensorFlow does. Where TensorFlow is installed (the `tf` extra), TensorBoard
would import it on start: seconds of start-up and a large process, for nothing. TensorBoard skips
that import when the module `tensorboard.compat.notf` exists (its documented switch for
TensorFlow-free installs), so it is made to exist before TensorBoard starts.
"""

from __future__ import annotations

import os
import sys
import types

# Where the master puts the board's secret path prefix (`_process.PATH_PREFIX_ENV`; kept out of
# argv, which every local user can read in /proc/<pid>/cmdline).
PATH_PREFIX_ENV = "MASTER_LITE_TENSORBOARD_PATH_PREFIX"


def main() -> None:
    """Run TensorBoard with the arguments of this process (`--logdir`, `--port`, ...), under
    the path prefix in $MASTER_LITE_TENSORBOARD_PATH_PREFIX if set."""
    sys.modules.setdefault("tensorboard.compat.notf", types.ModuleType("tensorboard.compat.notf"))
    from tensorboard import main as tensorboard_main

    sys.argv[0] = "tensorboard"
    prefix = os.environ.pop(PATH_PREFIX_ENV, "")
    if prefix:
        sys.argv.append(f"--path_prefix={prefix}")
    tensorboard_main.run_main()


if __name__ == "__main__":
    main()
