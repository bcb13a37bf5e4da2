"""`det model ...` (alias `m`): the model registry, as Determined's `det model` plus the edits
Determined makes in its web UI (archive, metadata, labels, names, notes, version deletion)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from determined.cli import _render
from determined.cli._base import CliError, Context
from determined.cli._checkpoint import add_list_output_arguments
from determined.common.experimental.model import model_path

MODEL_HEADERS = ["ID", "Name", "Description", "Versions", "Labels", "Archived", "Last Updated"]
VERSION_HEADERS = [
    "Version #",
    "Name",
    "Trial ID",
    "Batch #",
    "Checkpoint UUID",
    "Validation Metrics",
    "Metadata",
]
SORT_FIELDS = ("name", "description", "creation_time", "last_updated_time", "num_versions")


def _model_row(model: dict) -> list[Any]:
    return [
        model["id"],
        model["name"],
        model.get("description"),
        model.get("num_versions"),
        ", ".join(model.get("labels") or []),
        model.get("archived"),
        _render.format_time(model.get("last_updated_time")),
    ]


def _version_row(version: dict) -> list[Any]:
    checkpoint = version.get("checkpoint") or {}
    return [
        version["version"],
        version.get("name"),
        checkpoint.get("trial_id"),
        checkpoint.get("steps_completed"),
        version["checkpoint_uuid"],
        checkpoint.get("validation_metrics"),
        version.get("metadata"),
    ]


def model_text(model: dict) -> str:
    """`det model describe`'s record of one model."""
    return _render.format_record(
        [
            ("ID", model["id"]),
            ("Name", model["name"]),
            ("Description", model.get("description")),
            ("Notes", model.get("notes")),
            ("Labels", ", ".join(model.get("labels") or [])),
            ("Archived", model.get("archived")),
            ("Versions", model.get("num_versions")),
            ("Creation Time", _render.format_time(model.get("creation_time"))),
            ("Last Updated Time", _render.format_time(model.get("last_updated_time"))),
            ("Metadata", json.dumps(model.get("metadata") or {}, indent=4, sort_keys=True)),
        ]
    )


def _print_model(model: dict, as_json: bool) -> int:
    if as_json:
        _render.print_json(model)
    else:
        print(model_text(model))
    return 0


def _versions_table(versions: list[dict]) -> str:
    return _render.format_table(VERSION_HEADERS, [_version_row(v) for v in versions])


def _get(ctx: Context, name: str) -> dict:
    return dict(ctx.session.get(model_path(name))["model"])


def _patch(ctx: Context, name: str, changes: dict[str, Any]) -> dict:
    return dict(ctx.session.patch(model_path(name), changes)["model"])


def list_models(args: argparse.Namespace, ctx: Context) -> int:
    params: dict[str, Any] = {"sort_by": args.sort_by, "order_by": args.order_by}
    if args.name:
        params["name"] = args.name
    if args.label:
        params["labels"] = ",".join(args.label)
    if args.archived is not None:
        params["archived"] = args.archived
    models = ctx.session.get("/models", params=params)["models"]
    if args.json:
        _render.print_json(models)
    else:
        _render.print_table(MODEL_HEADERS, [_model_row(m) for m in models], as_csv=args.csv)
    return 0


def _metadata_arg(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(
            f"--metadata: not valid JSON ({e}); give an object, e.g. '{{\"a\": 1}}'"
        ) from None
    if not isinstance(value, dict):
        raise CliError(f"--metadata: expected a JSON object, got {text!r}")
    return value


def create(args: argparse.Namespace, ctx: Context) -> int:
    body = {
        "name": args.name,
        "description": args.description or "",
        "labels": args.label or [],
        "metadata": _metadata_arg(args.metadata),
    }
    return _print_model(ctx.session.post("/models", body)["model"], args.json)


def describe(args: argparse.Namespace, ctx: Context) -> int:
    model = _get(ctx, args.name)
    path = f"{model_path(model['id'])}/versions"
    if args.version == -1:
        latest = ctx.session.get(path, params={"order_by": "desc"})["model_versions"][:1]
    else:
        latest = [ctx.session.get(f"{path}/{args.version}")["model_version"]]
    if args.json:
        _render.print_json({**model, "model_version": latest[0] if latest else None})
        return 0
    print(model_text(model))
    if latest:
        print(f"\n{_versions_table(latest)}")
    return 0


def list_versions(args: argparse.Namespace, ctx: Context) -> int:
    model = _get(ctx, args.name)
    versions = ctx.session.get(f"{model_path(model['id'])}/versions")["model_versions"]
    if args.json:
        _render.print_json(versions)
    elif args.csv:
        _render.print_table(VERSION_HEADERS, [_version_row(v) for v in versions], as_csv=True)
    else:
        print(model_text(model))
        print(f"\n{_versions_table(versions)}")
    return 0


def register_version(args: argparse.Namespace, ctx: Context) -> int:
    body = {"checkpoint_uuid": args.uuid, "name": args.version_name or "", "comment": args.comment}
    version = ctx.session.post(f"{model_path(args.name)}/versions", body)["model_version"]
    if args.json:
        _render.print_json(version)
    else:
        print(f"Registered checkpoint {args.uuid} as version {version['version']} of {args.name}")
        print(f"\n{_versions_table([version])}")
    return 0


def edit(args: argparse.Namespace, ctx: Context) -> int:
    changes: dict[str, Any] = {}
    for field in ("name", "description", "notes"):
        value = getattr(args, f"new_{field}" if field == "name" else field)
        if value is not None:
            changes[field] = value
    if args.label is not None:
        changes["labels"] = [label for label in args.label if label]
    if not changes:
        raise CliError(
            "det model edit: nothing to change (give --name, --description, --notes or --label)"
        )
    return _print_model(_patch(ctx, args.name, changes), args.json)


def _metadata_pairs(pairs: list[str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise CliError(f"add-metadata: expected KEY=VALUE, got {pair!r}")
        try:
            metadata[key] = json.loads(raw)  # numbers, booleans, lists, objects
        except json.JSONDecodeError:
            metadata[key] = raw  # a plain string
    return metadata


def add_metadata(args: argparse.Namespace, ctx: Context) -> int:
    model = _get(ctx, args.name)
    merged = {**(model.get("metadata") or {}), **_metadata_pairs(args.pairs)}
    return _print_model(_patch(ctx, str(model["id"]), {"metadata": merged}), args.json)


def remove_metadata(args: argparse.Namespace, ctx: Context) -> int:
    model = _get(ctx, args.name)
    kept = {k: v for k, v in (model.get("metadata") or {}).items() if k not in set(args.keys)}
    return _print_model(_patch(ctx, str(model["id"]), {"metadata": kept}), args.json)


def set_archived(args: argparse.Namespace, ctx: Context) -> int:
    action = "archive" if args.verb == "archive" else "unarchive"
    model = ctx.session.post(f"{model_path(args.name)}/{action}")["model"]
    print(f"{'Archived' if model['archived'] else 'Unarchived'} model {model['name']}")
    return 0


def delete(args: argparse.Namespace, ctx: Context) -> int:
    model = _get(ctx, args.name)
    ctx.session.delete(model_path(model["id"]))
    print(
        f"Deleted model {model['name']} and its {model.get('num_versions', 0)} version(s) "
        "(their checkpoints stay)"
    )
    return 0


def delete_version(args: argparse.Namespace, ctx: Context) -> int:
    ctx.session.delete(f"{model_path(args.name)}/versions/{args.version}")
    print(f"Deleted version {args.version} of model {args.name} (its checkpoint stays)")
    return 0


def edit_version(args: argparse.Namespace, ctx: Context) -> int:
    changes = {
        field: getattr(args, field)
        for field in ("name", "comment", "notes")
        if getattr(args, field) is not None
    }
    if not changes:
        raise CliError(
            "det model edit-version: nothing to change (give --name, --comment or --notes)"
        )
    path = f"{model_path(args.model)}/versions/{args.version}"
    version = ctx.session.patch(path, changes)["model_version"]
    if args.json:
        _render.print_json(version)
    else:
        print(_versions_table([version]))
    return 0


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser("model", aliases=["m"], help="manage the model registry")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("list", aliases=["ls"], help="list the models of the registry")
    p.add_argument("--sort-by", choices=SORT_FIELDS, default="last_updated_time")
    p.add_argument("--order-by", choices=["asc", "desc"], default="asc")
    p.add_argument("--name", help="only names containing this")
    p.add_argument("--label", action="append", help="only models with this label (repeatable)")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--archived", dest="archived", action="store_const", const="true")
    shown.add_argument("--unarchived", dest="archived", action="store_const", const="false")
    add_list_output_arguments(p)
    p.set_defaults(handler=list_models)

    p = verbs.add_parser("create", help="create a model")
    p.add_argument("name", help="unique name of the model")
    p.add_argument("--description", help="description of the model")
    p.add_argument("--label", action="append", help="a label (repeatable)")
    p.add_argument("--metadata", metavar="JSON", help="metadata as a JSON object")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=create)

    p = verbs.add_parser("describe", help="a model and one of its versions (the latest)")
    p.add_argument("name", help="name (or id) of the model")
    p.add_argument("--version", type=int, default=-1, help="the version to show (-1: latest)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=describe)

    p = verbs.add_parser("list-versions", help="the versions of a model")
    p.add_argument("name", help="name (or id) of the model")
    add_list_output_arguments(p)
    p.set_defaults(handler=list_versions)

    p = verbs.add_parser("register-version", help="register a checkpoint as the next version")
    p.add_argument("name", help="name (or id) of the model")
    p.add_argument("uuid", help="uuid of a COMPLETED checkpoint")
    p.add_argument("--name", dest="version_name", help="a name for the version")
    p.add_argument("--comment", default="", help="a comment on the version")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=register_version)

    p = verbs.add_parser("edit", help="rename a model, or change its description, notes, labels")
    p.add_argument("name", help="name (or id) of the model")
    p.add_argument("--name", dest="new_name", help="its new name")
    p.add_argument("--description")
    p.add_argument("--notes")
    p.add_argument("--label", action="append", help="its labels (repeatable; replaces them all)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=edit)

    p = verbs.add_parser("add-metadata", help="add or replace metadata keys of a model")
    p.add_argument("name", help="name (or id) of the model")
    p.add_argument("pairs", nargs="+", metavar="KEY=VALUE", help="VALUE as JSON, else text")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=add_metadata)

    p = verbs.add_parser("remove-metadata", help="remove metadata keys of a model")
    p.add_argument("name", help="name (or id) of the model")
    p.add_argument("keys", nargs="+", metavar="KEY")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=remove_metadata)

    for verb, text in (("archive", "archive a model (read-only)"), ("unarchive", "unarchive")):
        p = verbs.add_parser(verb, help=text)
        p.add_argument("name", help="name (or id) of the model")
        p.set_defaults(handler=set_archived)

    p = verbs.add_parser("delete", help="delete a model and its versions (checkpoints stay)")
    p.add_argument("name", help="name (or id) of the model")
    p.set_defaults(handler=delete)

    p = verbs.add_parser("delete-version", help="delete one version (its checkpoint stays)")
    p.add_argument("name", help="name (or id) of the model")
    p.add_argument("version", type=int)
    p.set_defaults(handler=delete_version)

    p = verbs.add_parser("edit-version", help="change a version's name, comment or notes")
    p.add_argument("model", help="name (or id) of the model")
    p.add_argument("version", type=int)
    p.add_argument("--name")
    p.add_argument("--comment")
    p.add_argument("--notes")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(handler=edit_version)
