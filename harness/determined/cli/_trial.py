"""`det trial ...` (alias `t`)."""

from __future__ import annotations

import argparse
import functools
import pathlib
import re
from typing import Any

from determined.cli import _attach, _checkpoint, _follow, _render
from determined.cli._base import CliError, Context


def describe(args: argparse.Namespace, ctx: Context) -> int:
    trial = ctx.session.get(f"/trials/{args.trial_id}")["trial"]
    if args.json:
        _render.print_json(trial)
        return 0
    print(
        _render.format_record(
            [
                ("Trial ID", trial["id"]),
                ("Experiment ID", trial.get("experiment_id")),
                ("State", trial["state"]),
                ("H-Params", trial.get("hparams")),
                ("Seed", trial.get("seed")),
                ("Steps completed", trial.get("steps_completed")),
                ("Progress", _render.format_progress(trial.get("progress"))),
                ("Restarts", trial.get("restarts")),
                ("Started", _render.format_time(trial.get("start_time"))),
                ("Ended", _render.format_time(trial.get("end_time"))),
                ("Exit code", trial.get("exit_code")),
                ("Latest checkpoint", trial.get("latest_checkpoint")),
                ("Latest training", _render.format_metrics(trial.get("latest_training"))),
                ("Latest validation", _render.format_metrics(trial.get("latest_validation"))),
                ("Best validation", _render.format_metrics(trial.get("best_validation"))),
            ]
        )
    )
    return 0


def kill(args: argparse.Namespace, ctx: Context) -> int:
    trial = ctx.session.post(f"/trials/{args.trial_id}/kill")["trial"]
    print(f"Trial {trial['id']}: kill requested (state {trial['state']})")
    return 0


def download_notebook(args: argparse.Namespace, ctx: Context) -> int:
    """The executed notebook of a notebook trial (`entrypoint: train.ipynb`)."""
    response = ctx.session.request("GET", f"/trials/{args.trial_id}/notebook")
    match = re.search(r'filename="([^"/]+)"', response.headers.get("Content-Disposition", ""))
    name = match.group(1) if match else f"trial-{args.trial_id}.ipynb"
    target = pathlib.Path(args.output) if args.output else pathlib.Path(name)
    if target.is_dir():
        target = target / name
    target.write_bytes(response.content)
    print(f"Saved the executed notebook of trial {args.trial_id} to {target}")
    return 0


def select_checkpoint(args: argparse.Namespace, ctx: Context) -> dict:
    """The checkpoint `det trial download` means: --uuid, --latest or --best (Determined's rules:
    --sort-by and --smaller-is-better together, and only with --best)."""
    if args.sort_by is not None and not args.best:
        raise CliError("--sort-by and --smaller-is-better flags can only be used with --best")
    if (args.sort_by is None) != (args.smaller_is_better is None):
        raise CliError("--sort-by and --smaller-is-better must be set together")
    trial_id = args.trial_id
    trial = ctx.session.get(f"/trials/{trial_id}")["trial"]
    if args.uuid:
        checkpoint = ctx.session.get(f"/checkpoints/{args.uuid}")["checkpoint"]
        if checkpoint.get("trial_id") != trial_id:
            raise CliError(
                f"checkpoint {args.uuid} belongs to trial {checkpoint.get('trial_id')}, "
                f"not to trial {trial_id}"
            )
        return dict(checkpoint)
    experiment_id = trial["experiment_id"]
    checkpoints = [
        c
        for c in ctx.session.get(f"/experiments/{experiment_id}/checkpoints")["checkpoints"]
        if c.get("trial_id") == trial_id
    ]
    if not checkpoints:
        raise CliError(f"No checkpoints found for trial {trial_id}")
    downloadable = [c for c in checkpoints if c.get("state") in _checkpoint.DOWNLOADABLE_STATES]
    if not downloadable:
        raise CliError(
            f"Download failed: no downloadable checkpoint found for trial {trial_id} "
            f"(states: {', '.join(sorted({str(c.get('state')) for c in checkpoints}))})"
        )
    # The SDK's rule (Trial.select_checkpoint), over the checkpoints that can be downloaded.
    from determined.common.experimental import checkpoint as sdk_checkpoint

    by_uuid = {str(c["uuid"]): c for c in downloadable}
    sdk_checkpoints = [sdk_checkpoint.Checkpoint._from_json(c, ctx.session) for c in downloadable]

    @functools.cache
    def searcher() -> dict:
        experiment = ctx.session.get(f"/experiments/{experiment_id}")["experiment"]
        return dict(experiment.get("searcher") or {})

    try:
        ranked = sdk_checkpoint.rank_checkpoints(
            sdk_checkpoints,
            latest=bool(args.latest),
            sort_by=args.sort_by,
            smaller_is_better=args.smaller_is_better,
            searcher=searcher,
        )
    except ValueError as e:  # best by the searcher metric, and the experiment has none
        raise CliError(
            f"experiment {experiment_id} has no searcher metric; name one with --sort-by "
            "and --smaller-is-better"
        ) from e
    chosen = ranked[0]
    if not args.latest:
        metric = args.sort_by or searcher().get("metric")
        # Checkpoints without the metric sort last: the first has none, so none has.
        if sdk_checkpoint.metric_value(chosen, str(metric)) is None:
            raise CliError(
                f"no checkpoint of trial {trial_id} has a validation metric {metric!r}; "
                "use --latest or --uuid"
            )
    return dict(by_uuid[chosen.uuid])


def download(args: argparse.Namespace, ctx: Context) -> int:
    checkpoint = select_checkpoint(args, ctx)
    return _checkpoint.download_checkpoint(
        ctx, checkpoint, output_dir=args.output_dir, mode=args.mode, quiet=args.quiet
    )


def string_to_bool(text: str) -> bool:
    """Determined's true/false argument values."""
    value = text.strip().lower()
    if value in ("1", "true", "t", "yes", "y", "on"):
        return True
    if value in ("0", "false", "f", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def log_filters(args: argparse.Namespace) -> dict:
    return {"rank": getattr(args, "rank_id", None), "stream": getattr(args, "stdtype", None)}


def logs(args: argparse.Namespace, ctx: Context) -> int:
    params: dict[str, Any] = dict(log_filters(args))
    if args.head is not None:
        params["limit"] = args.head
    elif args.tail is not None:
        params["tail"] = args.tail
    lines = ctx.session.get(f"/trials/{args.trial_id}/logs", params)["logs"]
    _follow.print_logs(lines, as_json=args.json, write=print)
    if not args.follow:
        return 0
    # With --head, follow continues after the head; otherwise after the last line shown, so a
    # --tail followed by -f shows no line twice.
    after_id = max((int(log["id"]) for log in lines), default=0)
    if args.tail == 0 and not lines:
        latest = ctx.session.get(f"/trials/{args.trial_id}/logs", {**log_filters(args), "tail": 1})[
            "logs"
        ]
        after_id = max((int(log["id"]) for log in latest), default=0)
    _follow.follow_trial(
        ctx.session,
        args.trial_id,
        after_id=after_id,
        as_json=args.json,
        log_filters=log_filters(args),
        write=lambda line: print(line, flush=True),
    )
    return 0


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def add_log_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f", "--follow", action="store_true", help="keep printing new lines until the trial ends"
    )
    window = parser.add_mutually_exclusive_group()
    window.add_argument(
        "--head", type=_non_negative_int, metavar="N", help="only the first N lines"
    )
    window.add_argument("--tail", type=_non_negative_int, metavar="N", help="only the last N lines")
    parser.add_argument("--rank-id", type=int, metavar="N", help="only lines of this rank")
    parser.add_argument("--stdtype", choices=["stdout", "stderr"], help="only this stream")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("trial", aliases=["t"], help="inspect trials")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("describe", help="a trial's state, hparams and latest metrics")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=describe)

    from determined.cli import _forks

    _forks.add_trial_parsers(verbs)

    p = verbs.add_parser("logs", help="a trial's logs: [time] [rank=N] line")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    add_log_arguments(p)
    p.set_defaults(handler=logs)

    p = verbs.add_parser(
        "download-notebook",
        help="save the executed notebook of a notebook trial (entrypoint *.ipynb)",
    )
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    p.add_argument(
        "-o", "--output", metavar="PATH", help="file or directory (default: ./<name>.ipynb)"
    )
    p.set_defaults(handler=download_notebook)

    p = verbs.add_parser(
        "download", help="download a checkpoint of a trial (default: checkpoints/<uuid>)"
    )
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--best",
        action="store_true",
        help="the checkpoint with the best validation metric (the searcher's, or --sort-by)",
    )
    which.add_argument("--latest", action="store_true", help="the most recent checkpoint")
    which.add_argument("--uuid", metavar="UUID", help="the checkpoint with this UUID")
    _checkpoint.add_download_arguments(p)
    p.add_argument(
        "--sort-by", metavar="METRIC", help="with --best: the validation metric to sort on"
    )
    p.add_argument(
        "--smaller-is-better",
        type=string_to_bool,
        metavar="(true|false)",
        help="with --best and --sort-by: the sort order",
    )
    p.set_defaults(handler=download)

    p = verbs.add_parser("kill", help="kill a trial")
    p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
    p.set_defaults(handler=kill)

    _attach.add_attach_parser(verbs)
