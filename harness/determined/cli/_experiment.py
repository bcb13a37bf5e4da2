"""`det experiment ...` (alias `e`)."""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
from typing import Any

from determined.cli import _edits, _follow, _forks, _render, _workspace
from determined.cli._base import Context
from determined.cli._experiment_create import create
from determined.cli._render import shown_state
from determined.common.states import TERMINAL_EXPERIMENT_STATES

# ---------------------------------------------------------------------------------------------
# reading


def list_experiments(args: argparse.Namespace, ctx: Context) -> int:
    params = {} if args.all else {"archived": "false"}
    experiments = ctx.session.get("/experiments", params)["experiments"]
    if args.json:
        _render.print_json(experiments)
        return 0
    # Determined's columns: the owner second; --show_project puts workspace and project first.
    headers = ["ID", "Owner", "Name", "State", "Progress", "Trials", "Started", "Ended"]
    if args.show_project:
        headers = ["Workspace", "Project", *headers]
    if args.all:
        headers.append("Archived")
    rows = []
    for e in experiments:
        row = [
            e["id"],
            e.get("username"),
            e.get("name"),
            shown_state(e),
            _render.format_progress(e.get("progress")),
            e.get("num_trials"),
            _render.format_time(e.get("start_time")),
            _render.format_time(e.get("end_time")),
        ]
        if args.show_project:
            row = [e.get("workspaceName"), e.get("projectName"), *row]
        if args.all:
            row.append("yes" if e.get("archived") else "no")
        rows.append(row)
    _render.print_table(headers, rows, as_csv=getattr(args, "csv", False))
    return 0


def trial_rows(trials: list[dict]) -> list[list[Any]]:
    return [
        [
            t["id"],
            t["state"],
            t.get("hparams"),
            t.get("steps_completed"),
            _render.format_metrics(t.get("latest_training")),
            _render.format_metrics(t.get("latest_validation")),
            _render.format_time(t.get("start_time")),
            _render.format_time(t.get("end_time")),
        ]
        for t in sorted(trials, key=lambda t: t["id"])
    ]


TRIAL_HEADERS = [
    "Trial ID",
    "State",
    "H-Params",
    "Steps",
    "Latest Training",
    "Latest Validation",
    "Started",
    "Ended",
]


def describe(args: argparse.Namespace, ctx: Context) -> int:
    answer = ctx.session.get(f"/experiments/{args.experiment_id}")
    if args.json:
        _render.print_json(answer)
        return 0
    e = answer["experiment"]
    print(
        _render.format_record(
            [
                ("ID", e["id"]),
                ("Name", e.get("name")),
                ("Description", e.get("description")),
                ("State", shown_state(e)),
                ("Progress", _render.format_progress(e.get("progress"))),
                ("Started", _render.format_time(e.get("start_time"))),
                ("Ended", _render.format_time(e.get("end_time"))),
                ("Archived", e.get("archived")),
                ("Labels", ", ".join(e.get("labels") or [])),
                ("Searcher", (e.get("searcher") or {}).get("name")),
                ("Metric", (e.get("searcher") or {}).get("metric")),
                ("Best validation", e.get("best_validation")),
            ]
        )
    )
    print("\nTrials:")
    print(_render.format_table(TRIAL_HEADERS, trial_rows(answer.get("trials") or [])))
    print("\nConfig:")
    print(_yaml(e.get("config") or {}).rstrip())
    return 0


def _yaml(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False)


def show_config(args: argparse.Namespace, ctx: Context) -> int:
    experiment = ctx.session.get(f"/experiments/{args.experiment_id}")["experiment"]
    print(_yaml(experiment.get("config") or {}), end="")
    return 0


def download_model_def(args: argparse.Namespace, ctx: Context) -> int:
    data = ctx.session.get_bytes(f"/experiments/{args.experiment_id}/context")
    out_dir = pathlib.Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"experiment_{args.experiment_id}_model_def.tgz"
    path.write_bytes(data)
    print(f"Wrote the model definition of experiment {args.experiment_id} to {path}")
    return 0


def list_trials(args: argparse.Namespace, ctx: Context) -> int:
    trials = ctx.session.get(f"/experiments/{args.experiment_id}/trials")["trials"]
    if args.json:
        _render.print_json(trials)
        return 0
    _render.print_table(TRIAL_HEADERS, trial_rows(trials), as_csv=args.csv)
    return 0


def list_checkpoints(args: argparse.Namespace, ctx: Context) -> int:
    from determined.cli import _checkpoint

    return _checkpoint.render_checkpoints(
        ctx.session.get(f"/experiments/{args.experiment_id}/checkpoints")["checkpoints"],
        as_json=args.json,
        as_csv=args.csv,
    )


# ---------------------------------------------------------------------------------------------
# lifecycle


def action(args: argparse.Namespace, ctx: Context) -> int:
    verb = {"unpause": "activate"}.get(args.verb, args.verb)
    experiment = ctx.session.post(f"/experiments/{args.experiment_id}/{verb}")["experiment"]
    print(f"Experiment {experiment['id']}: {verb} requested (state {experiment['state']})")
    return 0


def wait(args: argparse.Namespace, ctx: Context) -> int:
    exp_id = args.experiment_id
    experiment = ctx.session.get(f"/experiments/{exp_id}")["experiment"]
    if experiment["state"] not in TERMINAL_EXPERIMENT_STATES:
        print(f"Waiting for experiment {exp_id} to complete...", flush=True)
        experiment = _follow.wait_for_experiment(
            ctx.session, exp_id, interval=args.polling_interval, use_events=False
        )
    print(f"Experiment {exp_id} is in state {experiment['state']}")
    return 0 if experiment["state"] == "COMPLETED" else 1


def logs(args: argparse.Namespace, ctx: Context) -> int:
    """Logs of the experiment's first (lowest id) trial."""
    from determined.cli import _trial

    trials = ctx.session.get(f"/experiments/{args.experiment_id}/trials")["trials"]
    if not trials:
        if not args.follow:
            print(f"Experiment {args.experiment_id} has no trials yet.", file=sys.stderr)
            return 0
        first = _follow.wait_for_first_trial(ctx.session, args.experiment_id)
        if first is None:
            print(f"Experiment {args.experiment_id} ended without trials.", file=sys.stderr)
            return 0
    else:
        first = min(trials, key=lambda t: t["id"])
    args.trial_id = first["id"]
    return _trial.logs(args, ctx)


# ---------------------------------------------------------------------------------------------
# parser


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def add_parser(subparsers: Any) -> None:
    from determined.cli import _checkpoint, _trial

    parser = subparsers.add_parser("experiment", aliases=["e"], help="manage experiments")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    parser.set_defaults(handler=list_experiments, all=False, json=False, csv=False)

    p = verbs.add_parser(
        "create", help="create an experiment from a config and a context directory"
    )
    p.add_argument("config_file", metavar="CONFIG", help="experiment config (YAML or JSON)")
    p.add_argument(
        "context", metavar="CONTEXT", nargs="?", help="model directory (or file) to upload"
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "-f",
        "--follow-first-trial",
        dest="follow",
        action="store_true",
        help="follow the first trial's logs until the experiment ends",
    )
    mode.add_argument("--paused", action="store_true", help="create the experiment paused")
    mode.add_argument(
        "-t",
        "--test-mode",
        "--test",
        dest="test",
        action="store_true",
        help="run one batch of training, validation and checkpointing as a test",
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="with --test: test one batch of a Trial class in this process (no master needed)",
    )
    p.add_argument(
        "--config",
        action="append",
        metavar="KEY=VALUE",
        help="override a config field, e.g. --config searcher.max_trials=8 (repeatable)",
    )
    p.add_argument(
        "-i",
        "--include",
        action="append",
        metavar="PATH",
        help="extra file or directory added at the top level of the context (repeatable)",
    )
    p.add_argument(
        "--project_id",
        "--project-id",
        dest="project_id",
        type=int,
        help="place this experiment inside this project",
    )
    p.set_defaults(handler=create)

    for name, aliases in (("list", ["ls"]),):
        p = verbs.add_parser(
            name, aliases=aliases, help="list experiments (unarchived unless --all)"
        )
        p.add_argument("-a", "--all", action="store_true", help="include archived experiments")
        p.add_argument(
            "--show_project",
            "--show-project",
            dest="show_project",
            action="store_true",
            help="include columns for workspace name and project name",
        )
        _checkpoint.add_list_output_arguments(p)
        p.set_defaults(handler=list_experiments)

    p = verbs.add_parser("describe", help="the experiment, its config and its trials")
    p.add_argument("experiment_id", type=int, metavar="ID")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=describe)

    for verb, help_text in [
        ("pause", "pause"),
        ("activate", "activate (resume)"),
        ("unpause", "activate (resume)"),
        ("cancel", "cancel (trials checkpoint and stop)"),
        ("kill", "kill (trials stop now)"),
        ("archive", "archive"),
        ("unarchive", "unarchive"),
    ]:
        p = verbs.add_parser(verb, help=f"{help_text} an experiment")
        p.add_argument("experiment_id", type=int, metavar="ID")
        p.set_defaults(handler=action)

    p = verbs.add_parser("wait", help="wait until the experiment ends; exit 0 only if COMPLETED")
    p.add_argument("experiment_id", type=int, metavar="ID")
    p.add_argument(
        "--polling-interval",
        "--polling_interval",
        type=_positive_float,
        default=5.0,
        metavar="SECONDS",
    )
    p.set_defaults(handler=wait)

    p = verbs.add_parser("logs", help="logs of the experiment's first trial")
    p.add_argument("experiment_id", type=int, metavar="ID")
    _trial.add_log_arguments(p)
    p.set_defaults(handler=logs)

    p = verbs.add_parser("config", help="the experiment's expanded config as YAML")
    p.add_argument("experiment_id", type=int, metavar="ID")
    p.set_defaults(handler=show_config)

    p = verbs.add_parser("download-model-def", help="download the experiment's context as a .tgz")
    p.add_argument("experiment_id", type=int, metavar="ID")
    p.add_argument("-o", "--output-dir", default=os.curdir, metavar="DIR")
    p.set_defaults(handler=download_model_def)

    p = verbs.add_parser("list-trials", aliases=["lt"], help="the experiment's trials")
    p.add_argument("experiment_id", type=int, metavar="ID")
    _checkpoint.add_list_output_arguments(p)
    p.set_defaults(handler=list_trials)

    p = verbs.add_parser("list-checkpoints", aliases=["lc"], help="the experiment's checkpoints")
    p.add_argument("experiment_id", type=int, metavar="ID")
    _checkpoint.add_list_output_arguments(p)
    p.set_defaults(handler=list_checkpoints)

    _edits.add_edit_parsers(verbs)
    _forks.add_experiment_parsers(verbs)

    p = verbs.add_parser("move", help="move experiment to another project")
    p.add_argument("experiment_id", type=int, metavar="ID", help="experiment ID to move")
    p.add_argument("workspace_name", help="Name of destination workspace")
    p.add_argument("project_name", help="Name of destination project")
    p.set_defaults(handler=_workspace.move_experiment)
