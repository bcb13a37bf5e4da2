"""`det experiment label|set|delete`: what a user changes about an experiment after creating
it, and its deletion."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from determined.cli._base import CliError, Context


def _patch(ctx: Context, experiment_id: int, body: dict) -> dict:
    answer: dict = ctx.session.patch(f"/experiments/{experiment_id}", body)["experiment"]
    return answer


def _labels(ctx: Context, experiment_id: int) -> list[str]:
    experiment = ctx.session.get(f"/experiments/{experiment_id}")["experiment"]
    return list(experiment.get("labels") or [])


def label(args: argparse.Namespace, ctx: Context) -> int:
    labels = _labels(ctx, args.experiment_id)
    if args.attribute == "add":
        if args.label not in labels:
            labels = _patch(ctx, args.experiment_id, {"labels": [*labels, args.label]})["labels"]
        print(f"Added label '{args.label}' to experiment {args.experiment_id}")
    else:
        if args.label in labels:
            remaining = [x for x in labels if x != args.label]
            labels = _patch(ctx, args.experiment_id, {"labels": remaining})["labels"]
        print(f"Removed label '{args.label}' from experiment {args.experiment_id}")
    return 0


# `det experiment set ATTR` -> the field of the config's `resources` it changes
_RESOURCE_FIELDS = {"priority": "priority", "max-slots": "max_slots", "weight": "weight"}


def set_attribute(args: argparse.Namespace, ctx: Context) -> int:
    attribute = args.attribute
    if attribute in ("name", "description"):
        _patch(ctx, args.experiment_id, {attribute: args.value})
        print(f"Set {attribute} of experiment {args.experiment_id} to '{args.value}'")
        return 0
    field = _RESOURCE_FIELDS[attribute]
    _patch(ctx, args.experiment_id, {"resources": {field: args.value}})
    shown = "unlimited" if args.value is None else args.value
    print(f"Set {attribute} of experiment {args.experiment_id} to {shown}")
    return 0


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        raise CliError(
            "det experiment delete asks for confirmation, but there is no terminal to ask on; "
            "pass --yes to delete without asking"
        )
    answer = input(f"{question} [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def delete(args: argparse.Namespace, ctx: Context) -> int:
    exp_id = args.experiment_id
    experiment = ctx.session.get(f"/experiments/{exp_id}")["experiment"]  # 404 before asking
    if not args.yes and not _confirm(
        f"Deleting experiment {exp_id} ({experiment.get('name')}) removes its trials, metrics, "
        "logs and checkpoint files for good (det experiment archive hides it instead). "
        "Delete it?"
    ):
        print("Nothing deleted.")
        return 1
    answer = ctx.session.delete(f"/experiments/{exp_id}")
    print(
        f"Deleted experiment {exp_id}: {answer['deleted_trials']} trial(s), "
        f"{answer['deleted_checkpoints']} checkpoint(s)"
    )
    return 0


def _max_slots(text: str) -> int | None:
    if text.lower() in ("none", "null", "unlimited"):
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of slots or 'none', got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _priority(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer 1..99, got {text!r}") from None
    if not 1 <= value <= 99:
        raise argparse.ArgumentTypeError(
            f"must be between 1 and 99 (smaller is more important), got {text}"
        )
    return value


def _weight(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def add_edit_parsers(verbs: Any) -> None:
    """Register `label add|remove`, `set ATTR` and `delete` under `det experiment`."""
    group = verbs.add_parser("label", help="add or remove an experiment label")
    actions = group.add_subparsers(dest="attribute", metavar="ACTION", required=True)
    for action in ("add", "remove"):
        p = actions.add_parser(action, help=f"{action} a label")
        p.add_argument("experiment_id", type=int, metavar="ID")
        p.add_argument("label", metavar="LABEL")
        p.set_defaults(handler=label)

    group = verbs.add_parser("set", help="set an experiment attribute")
    attributes = group.add_subparsers(dest="attribute", metavar="ATTR", required=True)
    settable: list[tuple[str, Any, str]] = [
        ("description", str, "the experiment's description"),
        ("name", str, "the experiment's name"),
        ("priority", _priority, "resources.priority, 1..99 (smaller first); waiting trials"),
        ("max-slots", _max_slots, "resources.max_slots (a number or 'none'); waiting trials"),
        (
            "weight",
            _weight,
            "resources.weight (the experiment's share of its user's slots under fair_share)",
        ),
    ]
    for name, kind, help_text in settable:
        p = attributes.add_parser(name, help=help_text)
        p.add_argument("experiment_id", type=int, metavar="ID")
        p.add_argument("value", type=kind, metavar=name.upper().replace("-", "_"))
        p.set_defaults(handler=set_attribute)

    p = verbs.add_parser(
        "delete", help="delete a finished experiment with its trials, logs and checkpoints"
    )
    p.add_argument("experiment_id", type=int, metavar="ID")
    p.add_argument("--yes", action="store_true", help="delete without asking")
    p.set_defaults(handler=delete)


__all__ = ["add_edit_parsers"]
