"""`det experiment fork`, `det experiment continue`, `det trial rerun`, `det trial continue`:
new experiments made from existing ones (Determined's fork and Continue Trial semantics).

* fork: a new experiment from the parent's config (or `--config-file`), with `--config`
  overrides, and the parent's model definition (POST /experiments with `parent_id`);
* trial rerun: a `single` search with the trial's hyperparameters, from scratch;
* continue: the same, warm-started from the trial's latest checkpoint. `det experiment
  continue` continues the experiment's only trial (or `--trial`) as a new experiment; on
  Determined (0.26+) it resumes the experiment in place.
"""

from __future__ import annotations

import argparse
from typing import Any

from determined.cli import _follow
from determined.cli._base import CliError, Context
from determined.common import expconf


def _created(args: argparse.Namespace, ctx: Context, experiment: dict, what: str) -> int:
    print(f"Created experiment {experiment['id']} ({what})", flush=True)
    if getattr(args, "follow", False):
        return _follow.follow_experiment(ctx.session, experiment["id"])
    return 0


def fork(args: argparse.Namespace, ctx: Context) -> int:
    """POST /experiments with the parent's (or the given) config, overridden, and parent_id."""
    if args.config_file:
        config: Any = expconf.load_file(args.config_file)
    else:
        # Secrets come back redacted; the master restores them from the parent.
        config = ctx.session.get(f"/experiments/{args.experiment_id}")["experiment"]["config"]
    if args.config:
        config = expconf.apply_overrides(config, args.config)
    body = {"config": config, "parent_id": args.experiment_id, "activate": not args.paused}
    experiment = ctx.session.post("/experiments", body)["experiment"]
    return _created(args, ctx, experiment, f"forked from experiment {args.experiment_id}")


def _trial_body(args: argparse.Namespace) -> dict:
    body: dict = {"activate": not args.paused}
    if args.max_length is not None:
        body["max_length"] = args.max_length
    return body


def trial_rerun(args: argparse.Namespace, ctx: Context) -> int:
    experiment = ctx.session.post(f"/trials/{args.trial_id}/rerun", _trial_body(args))
    return _created(args, ctx, experiment["experiment"], f"trial {args.trial_id}'s hyperparameters")


def trial_continue(args: argparse.Namespace, ctx: Context) -> int:
    experiment = ctx.session.post(f"/trials/{args.trial_id}/continue", _trial_body(args))
    return _created(
        args, ctx, experiment["experiment"], f"continues trial {args.trial_id} from its checkpoint"
    )


def experiment_continue(args: argparse.Namespace, ctx: Context) -> int:
    """Continue the experiment's only trial (or `--trial`, one of its trials)."""
    trials = ctx.session.get(f"/experiments/{args.experiment_id}/trials")["trials"]
    ids = sorted(t["id"] for t in trials)
    if args.trial is not None:
        if args.trial not in ids:
            raise CliError(
                f"--trial {args.trial}: not a trial of experiment {args.experiment_id} "
                f"(its trials: {', '.join(map(str, ids)) or 'none'})"
            )
        args.trial_id = args.trial
    elif len(ids) == 1:
        args.trial_id = ids[0]
    else:
        raise CliError(
            f"experiment {args.experiment_id} has {len(ids)} trials: say which to continue "
            f"with --trial (one of {', '.join(map(str, ids)) or 'none'})"
        )
    return trial_continue(args, ctx)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _new_experiment_arguments(p: argparse.ArgumentParser) -> None:
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--paused", action="store_true", help="create the experiment paused")
    mode.add_argument(
        "-f",
        "--follow-first-trial",
        dest="follow",
        action="store_true",
        help="follow the first trial's logs until the experiment ends",
    )


def _length_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-length",
        type=_positive_int,
        metavar="N",
        help="the new experiment's searcher.max_length, in the parent's unit (default: the "
        "parent's)",
    )


def add_experiment_parsers(verbs: Any) -> None:
    """`fork` and `continue` under `det experiment`."""
    p = verbs.add_parser(
        "fork", help="a new experiment from this one's config (edited) and model definition"
    )
    p.add_argument("experiment_id", type=int, metavar="ID")
    p.add_argument(
        "--config-file", metavar="CONFIG", help="use this config instead of the parent's"
    )
    p.add_argument(
        "--config",
        action="append",
        metavar="KEY=VALUE",
        help="override a config field, e.g. --config searcher.max_trials=8 (repeatable)",
    )
    _new_experiment_arguments(p)
    p.set_defaults(handler=fork)

    p = verbs.add_parser(
        "continue",
        help="continue the experiment's trial from its latest checkpoint, as a new experiment",
    )
    p.add_argument("experiment_id", type=int, metavar="ID")
    p.add_argument("--trial", type=int, metavar="TRIAL_ID", help="which trial (if several)")
    _length_argument(p)
    _new_experiment_arguments(p)
    p.set_defaults(handler=experiment_continue)


def add_trial_parsers(verbs: Any) -> None:
    """`rerun` and `continue` under `det trial`."""
    for verb, handler, help_text in (
        ("rerun", trial_rerun, "a new experiment with this trial's hyperparameters, from scratch"),
        (
            "continue",
            trial_continue,
            "a new experiment with this trial's hyperparameters, from its latest checkpoint",
        ),
    ):
        p = verbs.add_parser(verb, help=help_text)
        p.add_argument("trial_id", type=int, metavar="TRIAL_ID")
        _length_argument(p)
        _new_experiment_arguments(p)
        p.set_defaults(handler=handler)


__all__ = ["add_experiment_parsers", "add_trial_parsers"]
