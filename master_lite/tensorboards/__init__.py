"""TensorBoards over trials' metrics and files (`TensorBoards`).

_logdir.py writes a trial's metrics as TensorBoard event files; _process.py starts and stops the
TensorBoard process, which runs `python -m master_lite.tensorboards._main` (_main.py:
TensorBoard's command line without importing TensorFlow).
"""

from master_lite.tensorboards._tensorboards import TensorBoards, experiment_files_dir

__all__ = ["TensorBoards", "experiment_files_dir"]
