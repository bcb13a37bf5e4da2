"""`det experiment create`: load and check the config, upload it with the context directory,
and `--test` (one batch on the master, or `--local` in this process)."""

from __future__ import annotations

import argparse
import base64
import os
import pathlib
import sys
from typing import Any

from determined.cli import _follow
from determined.cli._base import CliError, Context
from determined.common import context as context_mod
from determined.common import expconf
from determined.common.expconf import test_mode_config


def load_config(path: str, overrides: list[str]) -> dict:
    """Load, override and validate a config file; raises expconf.InvalidConfig listing every error."""
    config = expconf.load_file(path)
    if overrides:
        config = expconf.apply_overrides(config, overrides)
    expconf.check(config)
    return config


def _check_trial_api(args: argparse.Namespace, config: dict) -> None:
    """A Trial class entrypoint or Native config checked against the local context before
    anything is packed (the master checks the same on upload): expconf.InvalidConfig."""
    from determined.common import trial_checks

    read = None
    if args.context:
        read = trial_checks.directory_reader(args.context, args.include or ())
    problems = trial_checks.trial_api_problems(config, read)
    if problems:
        raise expconf.InvalidConfig(problems)


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
    body = {
        "config": config_field,
        "context": base64.b64encode(packed).decode("ascii") if packed is not None else None,
        "activate": not args.paused,
        "archived": archived,
    }
    if getattr(args, "project_id", None) is not None:
        body["projectId"] = args.project_id  # Determined's --project_id
    return body


def create(args: argparse.Namespace, ctx: Context) -> int:
    if args.local and not args.test:
        raise CliError("--local requires --test (det e create --local --test CONFIG CONTEXT)")
    config = load_config(args.config_file, args.config or [])
    _check_trial_api(args, config)
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
    # The logs on stdout, as Determined's CLI prints them (its tests grep them there).
    for trial in ctx.session.get(f"/experiments/{exp_id}/trials")["trials"]:
        for log in ctx.session.get(f"/trials/{trial['id']}/logs")["logs"]:
            print(_follow.format_log(log), flush=True)
    return 1
