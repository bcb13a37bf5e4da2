"""Run a legacy Trial class: ``python3 -m determined.exec.harness model_def:MyTrial``.

`PyTorchTrial` classes run through `det.pytorch.init()` + `Trainer.fit()`; `TFKerasTrial`
classes through `determined.keras._run.run_keras_trial` (same arguments).

On the master (inside a trial) everything comes from the cluster: hyperparameters, config and
the searcher operations, each trained to its length, validated and reported (this is how ASHA
promotes Trial classes). A PyTorchTrial with several slots re-executes itself under
`determined.launch.torch_distributed`. Off the master, pass ``--config FILE``
(hyperparameters: ``--hparams JSON``, else one point of the config's space).

The module is imported from the current working directory (the experiment's context directory).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import determined as det

logger = logging.getLogger("determined.exec.harness")


def load_trial_class(spec: str) -> type[Any]:
    """`"model_def:MyTrial"` -> the class, importing `model_def` from the working directory."""
    module_name, sep, qualname = spec.partition(":")
    if not sep or not module_name or not qualname:
        raise ValueError(f"trial class {spec!r}: expected MODULE:CLASS, e.g. model_def:MyTrial")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    module: Any = importlib.import_module(module_name)
    obj = module
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(
                f"trial class {spec!r}: module {module_name!r} has no attribute {qualname!r}"
            ) from None
    return obj


def choose_keras(spec: str) -> None:
    """Make `tf.keras` tf_keras (Keras 2) for a Keras 2 era trial module, before it is imported.

    TensorFlow reads `TF_USE_LEGACY_KERAS` once, at import: this looks at the module's source
    text (not importing it) by `determined.common.keras_version`'s rule; the environment's own
    `TF_USE_LEGACY_KERAS` or `DET_KERAS_VERSION=3` wins."""
    from determined.common import keras_version

    if "tensorflow" in sys.modules:
        return  # too late to choose; whatever tf.keras is stays
    module_name = spec.partition(":")[0]
    base = os.path.join(os.getcwd(), *module_name.split("."))
    files = [Path(base + ".py"), Path(base, "__init__.py")]
    added, line = keras_version.legacy_environment(os.environ, [f for f in files if f.is_file()])
    os.environ.update(added)
    if line:
        logger.info("%s", line)


def _subclasses(trial_class: Any, qualified_name: str) -> bool:
    # By name, so checking a class never imports a framework the trial does not use.
    mro = getattr(trial_class, "__mro__", ())
    return isinstance(trial_class, type) and any(
        f"{c.__module__}.{c.__qualname__}" == qualified_name for c in mro
    )


def runner_for(trial_class: Any) -> Callable[..., Any] | None:
    """The function that trains this kind of Trial class (same signature as run_pytorch_trial)."""
    if _subclasses(trial_class, "determined.pytorch._trial.PyTorchTrial"):
        return run_pytorch_trial
    if _subclasses(trial_class, "determined.keras._trial.TFKerasTrial"):
        from determined.keras._run import run_keras_trial

        return run_keras_trial
    if _subclasses(trial_class, "determined.estimator._trial.EstimatorTrial"):
        from determined.estimator._run import run_estimator_trial

        return run_estimator_trial
    return None


def default_hparams(hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """One point of a config's hyperparameter space for local runs (no searcher off the master)."""
    point: dict[str, Any] = {}
    for name, spec in hyperparameters.items():
        if not isinstance(spec, dict):
            point[name] = spec
        elif "type" not in spec:
            point[name] = default_hparams(spec)
        elif spec["type"] == "const":
            point[name] = spec.get("val")
        elif spec["type"] == "categorical":
            point[name] = spec["vals"][0]
        elif spec["type"] == "log":
            point[name] = float(spec.get("base", 10)) ** spec["minval"]
        else:  # int / double
            point[name] = spec["minval"]
    return point


def _period(config: dict[str, Any], key: str, global_batch_size: int | None) -> Any:
    from determined import pytorch

    length = config.get(key) or {"batches": 0}
    return pytorch.TrainUnit._from_values(**length, global_batch_size=global_batch_size)


def _training_length(
    config: dict[str, Any], global_batch_size: int | None, *, on_cluster: bool, test_mode: bool
) -> tuple[Any, bool]:
    """(max_length, driven by searcher operations?) for this run.

    On the master, the searcher's operations say how far to train (in the unit of
    `searcher.max_length`, or of `time_metric` for 0.38-style `time_metric`/`max_time` searchers,
    which stop losing trials early through preemption). Off the master the length is
    `searcher.max_length`, else `max_time` in `time_metric` units.
    """
    from determined import pytorch

    searcher = config.get("searcher") or {}
    if test_mode:
        return None, False
    time_metric, max_time = searcher.get("time_metric"), searcher.get("max_time")
    time_driven = time_metric in ("batches", "epochs") and isinstance(max_time, int)
    if on_cluster and (searcher.get("max_length") is not None or time_driven):
        return None, True  # the master's searcher operations say how far to train
    if searcher.get("max_length") is not None:
        return pytorch.TrainUnit._from_length(searcher["max_length"], global_batch_size), False
    if time_driven:
        return pytorch.TrainUnit._from_values(**{str(time_metric): max_time}), False
    raise ValueError(
        "the config says neither how long to train nor in which unit: set searcher.max_length "
        "(e.g. {batches: 1000}) or searcher.time_metric (batches or epochs) with searcher.max_time"
    )


def run_pytorch_trial(
    trial_class: type[Any],
    config: dict[str, Any],
    hparams: dict[str, Any] | None,
    *,
    latest_checkpoint: str | None = None,
    on_cluster: bool,
    test_mode: bool = False,
) -> None:
    from determined import pytorch

    if hparams is None and not on_cluster:
        hparams = default_hparams(config.get("hyperparameters") or {})
    optimizations = config.get("optimizations") or {}
    with pytorch.init(
        hparams=hparams,
        exp_conf=config,
        aggregation_frequency=int(optimizations.get("aggregation_frequency", 1)),
    ) as context:
        gbs = (context._hparams or {}).get("global_batch_size")
        gbs = gbs if isinstance(gbs, int) else None
        trial = trial_class(context)
        max_length, use_operations = _training_length(
            config, gbs, on_cluster=on_cluster, test_mode=test_mode
        )
        pytorch.Trainer(trial, context).fit(
            checkpoint_period=_period(config, "min_checkpoint_period", gbs),
            validation_period=_period(config, "min_validation_period", gbs),
            max_length=max_length,
            reporting_period=pytorch.Batch(int(config.get("scheduling_unit") or 100)),
            checkpoint_policy=config.get("checkpoint_policy") or "best",
            latest_checkpoint=latest_checkpoint,
            step_zero_validation=bool(config.get("perform_initial_validation", False)),
            test_mode=test_mode,
            profiling_enabled=bool((config.get("profiling") or {}).get("enabled", False)),
            _searcher_operations=use_operations,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m determined.exec.harness", description=__doc__.split("\n")[0]
    )
    parser.add_argument("trial", help="the Trial class, MODULE:CLASS (e.g. model_def:MyTrial)")
    parser.add_argument("--config", help="experiment config file (off the master only)")
    parser.add_argument("--hparams", help="hyperparameters as JSON (off the master only)")
    parser.add_argument("--checkpoint", help="checkpoint uuid to resume from (off the master only)")
    parser.add_argument(
        "--test", action="store_true", help="train one batch, validate, checkpoint (off the master)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)

    info = det.get_cluster_info()
    on_cluster = info is not None and info.task_type == "TRIAL"
    if on_cluster:
        assert info is not None
        if args.config or args.hparams or args.checkpoint or args.test:
            print(
                "determined.exec.harness: --config/--hparams/--checkpoint/--test are for local runs only",
                file=sys.stderr,
            )
            return 2
        hparams: dict[str, Any] | None
        config, hparams, latest_checkpoint = (
            info.trial._config,
            info.trial.hparams,
            info.latest_checkpoint,
        )
    else:
        if not args.config:
            print(
                "determined.exec.harness: off the master, pass --config FILE (the experiment config)",
                file=sys.stderr,
            )
            return 2
        from determined.common import expconf

        config = expconf.load_file(args.config)
        hparams = json.loads(args.hparams) if args.hparams else None
        latest_checkpoint = args.checkpoint

    choose_keras(args.trial)
    try:
        trial_class = load_trial_class(args.trial)
    except (ValueError, ImportError) as e:
        print(f"determined.exec.harness: {e}", file=sys.stderr)
        return 1
    runner = runner_for(trial_class)
    if runner is None:
        print(
            f"determined.exec.harness: {args.trial} is not a Trial class (subclass "
            "det.pytorch.PyTorchTrial, det.keras.TFKerasTrial or det.estimator.EstimatorTrial)",
            file=sys.stderr,
        )
        return 1
    if (
        on_cluster
        and runner is run_pytorch_trial
        and (len(info.slot_ids) > 1 or len(info.container_addrs) > 1)  # type: ignore[union-attr]
        and not os.environ.get("USE_TORCH_DISTRIBUTED")
    ):
        # Several slots: one harness per slot under torchrun (Determined's launcher does this for
        # `module:Trial` entrypoints; the master may have started us directly).
        launcher = [sys.executable, "-m", "determined.launch.torch_distributed", "--"]
        os.execv(
            sys.executable, launcher + [sys.executable, "-m", "determined.exec.harness", args.trial]
        )
    runner(
        trial_class,
        config,
        hparams,
        latest_checkpoint=latest_checkpoint,
        on_cluster=on_cluster,
        test_mode=args.test,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
