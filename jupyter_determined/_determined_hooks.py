"""What the Jupyter glue gives the harness in a kernel (`determined.common.hooks`): for the
Native API called in a notebook, the notebook exported as the experiment's script, and the
widget plus the exception that stops the cell once it is submitted."""

from __future__ import annotations

from determined.common import hooks
from jupyter_determined import current_notebook_script, notebook_submitted

hooks.register(hooks.NOTEBOOK_SCRIPT, current_notebook_script)
hooks.register(hooks.NOTEBOOK_SUBMITTED, notebook_submitted)
