"""`make demo`: run notebooks/quickstart.ipynb headless against a JupyterLab server hosting the
master, then print the experiment's summary.

    python -m jupyter_determined._demo [--notebook notebooks/quickstart.ipynb] [--keep]

The server runs with a fresh root dir in a temporary directory (the master inside it), the
notebook is executed by papermill with the environment a kernel of that server gets
(DET_MASTER, DET_MASTER_TOKEN, JPY_SESSION_NAME), and the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _environment(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DET_")}
    # Works from a checkout without an install, too.
    paths = [str(REPO / "harness"), str(REPO)] if (REPO / "harness").is_dir() else []
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra)
    return env


def start_lab(work: Path) -> tuple[subprocess.Popen, str, str, Path]:
    config_dir = work / "jupyter-config"
    config_dir.mkdir(parents=True)
    (config_dir / "jupyter_server_config.json").write_text(
        json.dumps(
            {
                "ServerApp": {"jpserver_extensions": {"jupyter_determined": True}},
                "MasterLite": {"root_dir": str(work / "det-root")},
            }
        )
    )
    port, token = _free_port(), os.urandom(12).hex()
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={work}",
        "--ServerApp.port_retries=0",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    log = open(work / "jupyterlab.log", "ab")
    env = _environment(
        JUPYTER_CONFIG_DIR=str(config_dir), JUPYTER_RUNTIME_DIR=str(work / "runtime")
    )
    process = subprocess.Popen(
        argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    master = f"http://127.0.0.1:{port}/determined"
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            raise SystemExit(
                f"demo: JupyterLab exited ({process.returncode}); see {work / 'jupyterlab.log'}"
            )
        try:
            requests.get(
                f"{master}/api/v1/master", timeout=2, headers={"Authorization": f"token {token}"}
            ).raise_for_status()
            return process, master, token, work / "det-root"
        except requests.RequestException as exc:
            if time.monotonic() > deadline:
                process.terminate()
                raise SystemExit(
                    f"demo: JupyterLab did not serve the master within 120 s; see "
                    f"{work / 'jupyterlab.log'}"
                ) from exc
            time.sleep(0.3)


def summarize(master: str, token: str) -> str:
    headers = {"Authorization": f"token {token}"}
    lines = []
    for experiment in requests.get(
        f"{master}/api/v1/experiments", headers=headers, timeout=30
    ).json()["experiments"]:
        answer = requests.get(
            f"{master}/api/v1/experiments/{experiment['id']}", headers=headers, timeout=30
        ).json()
        searcher = experiment["searcher"]
        lines.append(
            f"Experiment {experiment['id']} {experiment['name']!r}: "
            f"{experiment['state']}, best {searcher['metric']} = "
            f"{experiment['best_validation']}"
        )
        for trial in answer["trials"]:
            latest = (trial.get("latest_validation") or {}).get("metrics") or {}
            lines.append(
                f"  trial {trial['id']}: {trial['state']}, {trial['steps_completed']} "
                f"steps, hparams {trial['hparams']}, validation {latest}"
            )
        notebook = experiment.get("notebook") or {}
        if notebook:
            lines.append(
                f"  exported from {notebook.get('path')} "
                f"(cells {', '.join(notebook.get('cell_ids') or [])})"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jupyter_determined._demo")
    parser.add_argument("--notebook", default=str(REPO / "notebooks" / "quickstart.ipynb"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="det-demo-"))
    # The notebook's directory is the experiment's context: keep the master's files out of it.
    (work / "notebook").mkdir()
    notebook = work / "notebook" / Path(args.notebook).name
    shutil.copy(args.notebook, notebook)
    print(f"demo: starting JupyterLab with the embedded master (work dir {work})", flush=True)
    process, master, token, _ = start_lab(work)
    try:
        print(f"demo: running {Path(args.notebook).name} with papermill", flush=True)
        env = _environment(
            DET_MASTER=master, DET_MASTER_TOKEN=token, JPY_SESSION_NAME=str(notebook)
        )
        executed = work / f"{notebook.stem}.executed.ipynb"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "papermill",
                str(notebook),
                str(executed),
                "-k",
                "python3",
                "--cwd",
                str(notebook.parent),
                "--no-progress-bar",
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            print(result.stdout[-3000:] + result.stderr[-3000:], file=sys.stderr)
            print("demo: the notebook failed", file=sys.stderr)
            return 1
        print(summarize(master, token), flush=True)
        if args.keep:
            print(f"demo: executed notebook at {executed}", flush=True)
        return 0
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
