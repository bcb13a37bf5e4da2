"""Run a notebook as a trial with papermill: `python3 -m determined.exec.notebook train.ipynb`.

* The trial's hyperparameters (`DET_HPARAMS`) are injected as papermill parameters (one
  variable per top-level hyperparameter, after the cell tagged `parameters`), plus `hparams`
  holding them all.
* The kernel inherits the trial's environment, so `det.core.init()` inside the notebook talks to
  the master as this trial.
* The executed notebook is written beside the trial's run directories:
  `$DET_TRIAL_OUTPUT_DIR`, else the parent of the working directory (`<root_dir>/trials/<id>/`
  under master_lite), as `<stem>.run-<DET_TRIAL_RUN_ID>.ipynb`; a log line names it.
* A failing cell ends the trial with exit status 1, the cell's traceback in the logs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def output_path_for(notebook: Path) -> Path:
    directory = os.environ.get("DET_TRIAL_OUTPUT_DIR")
    base = Path(directory) if directory else Path.cwd().parent
    run_id = os.environ.get("DET_TRIAL_RUN_ID", "1")
    return base / f"{notebook.stem}.run-{run_id}.ipynb"


def trial_parameters() -> dict:
    """Papermill parameters from DET_HPARAMS: each identifier-named hparam, plus `hparams`."""
    raw = os.environ.get("DET_HPARAMS")
    hparams = json.loads(raw) if raw else {}
    parameters = {name: value for name, value in hparams.items() if str(name).isidentifier()}
    parameters["hparams"] = hparams
    return parameters


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m determined.exec.notebook",
        description="Run a notebook as a Determined trial (papermill).",
    )
    parser.add_argument("notebook", help="the .ipynb to run, relative to the context directory")
    parser.add_argument(
        "--kernel", default="python3", help="kernel name (default python3: this interpreter)"
    )
    parser.add_argument("--output", default=None, help="where to write the executed notebook")
    args = parser.parse_args(argv)

    notebook = Path(args.notebook)
    if not notebook.is_file():
        print(
            f"determined.exec.notebook: {notebook} not found in the context directory "
            f"{Path.cwd()} (the entrypoint names the notebook relative to the context)",
            file=sys.stderr,
        )
        return 2
    import papermill
    from papermill.exceptions import PapermillExecutionError

    output = Path(args.output) if args.output else output_path_for(notebook)
    output.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"determined.exec.notebook: running {notebook} with papermill; executed notebook: {output}",
        flush=True,
    )
    try:
        papermill.execute_notebook(
            str(notebook),
            str(output),
            parameters=trial_parameters(),
            kernel_name=args.kernel,
            progress_bar=False,
            log_output=True,
            stdout_file=sys.stdout,
            stderr_file=sys.stderr,
            cwd=str(notebook.parent.absolute()),
        )
    except PapermillExecutionError as exc:
        traceback = "\n".join(ANSI.sub("", line) for line in exc.traceback)
        print(
            f"determined.exec.notebook: cell {exc.cell_index} (execution count "
            f"{exc.exec_count}) failed:\n{traceback}",
            file=sys.stderr,
            flush=True,
        )
        print(
            f"determined.exec.notebook: the executed notebook with the error is at {output}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    print(f"determined.exec.notebook: executed notebook saved to {output}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
