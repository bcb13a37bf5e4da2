"""Make `.venv-trials`: an interpreter that trials run as other Unix users can execute.

`.venv/bin/python` may resolve into a directory other users cannot enter (pyenv under /root,
mode 0700), so a trial run as its owner's account (`MasterLite.run_trials_as = "owner"`) could
not start it. This makes a venv from a system interpreter of the same minor version (by default
/usr/bin/python3) whose site-packages add `.venv`'s (compiled wheels are built for the minor
version's ABI, so numpy and torch import the same), the repository and its harness; and copies
`.venv/bin`'s console scripts (det, jupyter, jupyterhub-singleuser, ...) with their `#!` line
pointing at the new interpreter, so that those run as other users too; `etc/jupyter` and
`share/jupyter` link to `.venv`'s (enabled server extensions, labextensions, kernelspecs).

Usage: python scripts/make_trial_venv.py [--venv .venv] [--out .venv-trials] [--base PYTHON]
       [--check-user USER]
Idempotent: run again after installing into .venv to pick up new console scripts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PTH_NAME = "_jupyter_determined_trials.pth"
SKIPPED_SCRIPTS = ("python", "activate", "pip", "Activate")


def _version(python: Path) -> str:
    out = subprocess.run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def _purelib(python: Path) -> str:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def make(venv: Path, out: Path, base: Path) -> None:
    """Make (or refresh) `out` from `base`, adding `venv`'s packages."""
    venv_python = venv / "bin" / "python"
    want, have = _version(venv_python), _version(base)
    if want != have:
        raise ValueError(
            f"{base} is Python {have} but {venv} has {want}: compiled packages need the same "
            f"minor version (give --base a python{want})"
        )
    python = out / "bin" / "python"
    if not python.exists() or _version(python) != want:
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([str(base), "-m", "venv", "--without-pip", str(out)], check=True)
    site = Path(_purelib(python))
    # Plain lines are appended to sys.path; the `import` line runs site.addsitedir, which also
    # processes .venv's own .pth files (the editable install's paths among them).
    lines = [
        str(REPO),
        str(REPO / "harness"),
        f"import site; site.addsitedir({_purelib(venv_python)!r})",
    ]
    (site / PTH_NAME).write_text("\n".join(lines) + "\n")
    _copy_scripts(venv, out)
    # Jupyter reads config and data under sys.prefix: .venv's (server extensions enabled,
    # labextensions, kernelspecs) serve the trial venv's jupyter-lab / jupyterhub-singleuser too.
    for relative in ("etc/jupyter", "share/jupyter"):
        source, link = venv / relative, out / relative
        if source.is_dir() and not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(source)
    for top, dirs, files in os.walk(out):
        for name in (*dirs, *files):
            path = Path(top) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))
    out.chmod(0o755)


def _copy_scripts(venv: Path, out: Path) -> None:
    """`venv/bin`'s Python console scripts, their `#!` line pointing at `out`'s interpreter."""
    prefixes = (f"#!{venv.resolve()}/bin/python".encode(), f"#!{venv}/bin/python".encode())
    for script in sorted((venv / "bin").iterdir()):
        if script.name.startswith(SKIPPED_SCRIPTS) or not script.is_file():
            continue
        try:
            head, _, rest = script.read_bytes().partition(b"\n")
        except OSError:
            continue
        if not head.startswith(prefixes):
            continue
        target = out / "bin" / script.name
        target.write_bytes(f"#!{out.absolute()}/bin/python".encode() + b"\n" + rest)
        target.chmod(0o755)


def check(out: Path, user: str) -> None:
    """Import the trial's packages as `user` (runuser): the venv works for that account."""
    code = "import numpy, torch, determined, master_lite; print('ok')"
    subprocess.run(
        ["runuser", "-u", user, "--", str(out / "bin" / "python"), "-c", code],
        check=True,
        cwd="/",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", default=str(REPO / ".venv"))
    parser.add_argument("--out", default=str(REPO / ".venv-trials"))
    parser.add_argument("--base", default="/usr/bin/python3")
    parser.add_argument("--check-user", help="import numpy, torch, determined as this user")
    args = parser.parse_args(argv)
    venv, out = Path(args.venv).absolute(), Path(args.out).absolute()
    if not (venv / "bin" / "python").exists():
        print(f"make_trial_venv: no {venv}/bin/python (run make install first)", file=sys.stderr)
        return 1
    if not Path(args.base).exists():
        print(f"make_trial_venv: no {args.base}: skipped (give --base)", file=sys.stderr)
        return 0
    try:
        make(venv, out, Path(args.base))
    except ValueError as exc:  # not fatal: only trials run as other users need it
        print(f"make_trial_venv: {exc}: skipped", file=sys.stderr)
        return 0
    if args.check_user:
        check(out, args.check_user)
    print(f"made {out}/bin/python (trials run as other Unix users use it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
