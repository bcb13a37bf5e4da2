"""The values the Python side and the labextension must agree on, defined once.

`scripts/gen_ts_contract.py` writes them (with the API types of the master's OpenAPI document)
into `labextension/src/api/contract.generated.ts`; `tests/jupyter/test_contract.py` fails when
the checked-in file differs from what the generator writes now. Change a value here, run
`python scripts/gen_ts_contract.py`, and both languages move together.

Only plain values (str, int, float, bool, and lists/tuples of them) belong here: each becomes
one `export const` in TypeScript.
"""

from __future__ import annotations

from determined.common import notebook_errors
from determined.common.states import TERMINAL_EXPERIMENT_STATES as _TERMINAL

# The notebook output a submission displays: the live widget in JupyterLab, a snapshot elsewhere.
EXPERIMENT_MIME_TYPE = "application/vnd.determined.experiment+json"
# The comm the labextension opens to push the notebook as the frontend holds it (unsaved edits
# included) to the kernel that exports it.
NOTEBOOK_COMM_TARGET = "jupyter_determined.notebook"
# The cell tag that leaves a cell out of an exported script.
SKIP_TAG = "det-skip"

# Where the server extension serves what the labextension calls, under the server's base_url.
URL_SEGMENT = "determined"
API_PATH = f"{URL_SEGMENT}/api/v1"
EXPORT_PREVIEW_PATH = f"{URL_SEGMENT}/export-preview"
TENSORBOARD_PATH = f"{URL_SEGMENT}/tensorboard"

# The log tail under a notebook widget: the latest lines of the newest trials, each line cut.
LOG_TAIL_LINES = 10
LOG_TAIL_TRIALS = 3
LOG_LINE_MAX_CHARS = 400
# The log line a failing notebook trial prints for the master (determined.common.notebook_errors);
# the widget's banner reads it, its log tail hides it.
NOTEBOOK_ERROR_MARKER = notebook_errors.MARKER + " "

# Experiment states after which nothing changes.
TERMINAL_EXPERIMENT_STATES = tuple(sorted(str(state) for state in _TERMINAL))

__all__ = [
    "API_PATH",
    "EXPERIMENT_MIME_TYPE",
    "EXPORT_PREVIEW_PATH",
    "LOG_LINE_MAX_CHARS",
    "LOG_TAIL_LINES",
    "LOG_TAIL_TRIALS",
    "NOTEBOOK_COMM_TARGET",
    "NOTEBOOK_ERROR_MARKER",
    "SKIP_TAG",
    "TENSORBOARD_PATH",
    "TERMINAL_EXPERIMENT_STATES",
    "URL_SEGMENT",
]
