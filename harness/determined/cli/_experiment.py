"""`det experiment ...` (alias `e`)."""

from __future__ import annotations

import argparse
import base64
import os
import pathlib
import sys
from typing import Any

from determined.cli import _edits, _follow, _render
from determined.cli._base import CliError, Context
from determined.common import context as context_mod
from determined.common import expconf
from determined.common.expconf import test_mode_config
from determined.common.states import TERMINAL_EXPERIMENT_STATES

# ---------------------------------------------------------------------------------------------
# create


def load_config(path: str, overrides: list[str]) -> dict:
    """Load, override and validate a config file; raises expconf.InvalidConfig listing every error."""
    config = expconf.load_file(path)
    if overrides:
        config = expconf.apply_overrides(config, overrides)
    expconf.check(config)
    return config


def _upload_body(
    args: argparse.Namespace, config: dict, *, archived: bool = False, test: bool = False
) -> dict:
    if args.include and not args.context:
        raise CliError("-i/--include needs a CONTEXT directory to add the paths to")
    packed = None
    if args.context:
        packed = context_mod.pack(args.context, includes=args.include or ())
    if args.config or test:
        config_field: Any = config  # overrides applied: send the object (comments are lost anyway)
    else:
        config_field = pathlib.Path(args.config_file).read_text(encoding="utf-8")
    return {
        "config": config_field,
        "context": base64.b64encode(packed).decode("ascii") if packed is not None else None,
        "activate": not args.paused,
        "archived": archived,
    }


def create(args: argparse.Namespace, ctx: Context) -> int:
    if args.local and not args.test:
        raise CliError("--local requires --test (det e create --local --test CONFIG CONTEXT)")
    config = load_config(args.config_file, args.config or [])
    if args.local:
        return _test_locally(args, config)
    for warning in expconf.warnings(config):
        print(f"warning: {warning}", file=sys.stderr)
    if args.test:
        return _create_test(args, ctx, config)
    body = _upload_body(args, config)
    experiment = ctx.session.post("/experiments", body)["experiment"]
    print(f"Created experiment {experiment['id']}", flush=True)
    if args.follow:
        return _follow.follow_experiment(ctx.session, experiment["id"])
    return 0


def _test_locally(args: argparse.Namespace, config: dict) -> int:
    """`--local --test`: one batch of training, validation and a checkpoint in this process.

    As in Determined, only Trial classes (`entrypoint: module:Class`) can be tested this way;
    their module is imported from the context directory."""
    entrypoint = config.get("entrypoint")
    if not (isinstance(entrypoint, str) and expconf.is_legacy_trial_entrypoint(entrypoint)):
        raise CliError(
            f"--local --test needs a Trial class entrypoint such as 'model_def:MyTrial' "
            f"(entrypoint is {entrypoint!r}); run Core API scripts directly with python, "
            f"or drop --local to test on the master"
        )
    import importlib

    module_name, class_name = entrypoint.split(":")
    context_dir = os.path.abspath(
        args.context or os.path.dirname(os.path.abspath(args.config_file))
    )
    sys.path.insert(0, context_dir)
    previous_cwd = os.getcwd()
    os.chdir(context_dir)
    try:
        try:
            trial_class = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as e:
            raise CliError(
                f"entrypoint {entrypoint!r}: cannot load it from {context_dir} ({e})"
            ) from e
        from determined import experimental

        experimental.test_one_batch(trial_class, config)
    finally:
        os.chdir(previous_cwd)
        sys.path.remove(context_dir)
    print("Local test of one batch passed (training, validation, checkpointing).", flush=True)
    return 0


_TEST_STAGES = (
    "Scheduling task",
    "Testing training",
    "Testing validation",
    "Testing checkpointing",
)


def _test_stages(session: Any, experiment_id: int) -> list[bool]:
    trials = session.get(f"/experiments/{experiment_id}/trials")["trials"]
    if not trials:
        return [False, False, False, False]
    trial = trials[0]
    checkpoints = session.get(f"/experiments/{experiment_id}/checkpoints")["checkpoints"]
    return [
        bool(trial.get("start_time")) or trial["state"] != "ACTIVE",
        trial.get("latest_training") is not None,
        trial.get("latest_validation") is not None,
        bool(checkpoints),
    ]


def _create_test(args: argparse.Namespace, ctx: Context, config: dict) -> int:
    print("Validating experiment configuration... done", flush=True)
    test_config = test_mode_config(config)
    expconf.check(test_config)
    body = _upload_body(args, test_config, archived=True, test=True)
    experiment = ctx.session.post("/experiments", body)["experiment"]
    exp_id = experiment["id"]
    print(f"Created test experiment {exp_id} (archived)", flush=True)
    shown = [False] * len(_TEST_STAGES)

    def show_new_stages(_: dict) -> None:
        for i, done in enumerate(_test_stages(ctx.session, exp_id)):
            # Stages complete in order; print each the first time it (and all before it) is done.
            if done and all(shown[:i]) and not shown[i]:
                print(f"  [x] {_TEST_STAGES[i]}", flush=True)
                shown[i] = True

    experiment = _follow.wait_for_experiment(ctx.session, exp_id, on_poll=show_new_stages)
    if experiment["state"] == "COMPLETED":
        for i, done in enumerate(shown):
            if not done:
                print(f"  [ ] {_TEST_STAGES[i]} (not reached by the script)")
        print("Model definition test succeeded!")
        return 0
    print(
        f"Test experiment {exp_id} ended in state {experiment['state']}; trial logs:",
        file=sys.stderr,
    )
    for trial in ctx.session.get(f"/experiments/{exp_id}/trials")["trials"]:
        for log in ctx.session.get(f"/trials/{trial['id']}/logs")["logs"]:
            print(_follow.format_log(log), file=sys.stderr)
    return 1


# ---------------------------------------------------------------------------------------------
# reading


def list_experiments(args: argparse.Namespace, ctx: Context) -> int:
    params = {} if args.all else {"archived": "false"}
    experiments = ctx.session.get("/experiments", params)["experiments"]
    if args.json:
        _render.print_json(experiments)
        return 0
    headers = ["ID", "Name", "State", "Progress", "Trials", "Started", "Ended"]
    if args.all:
        headers.append("Archived")
    rows = []
    for e in experiments:
        row = [
            e["id"],
            e.get("name"),
            e["state"],
            _render.format_progress(e.get("progress")),
            e.get("num_trials"),
            _render.format_time(e.get("start_time")),
            _render.format_time(e.get("end_time")),
        ]
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
                ("State", e["state"]),
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
    p.set_defaults(handler=create)

    for name, aliases in (("list", ["ls"]),):
        p = verbs.add_parser(
            name, aliases=aliases, help="list experiments (unarchived unless --all)"
        )
        p.add_argument("-a", "--all", action="store_true", help="include archived experiments")
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
