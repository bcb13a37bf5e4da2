"""`%%det_submit --local`: the cell trains in this kernel, tracked by the master as an
unmanaged run (`det.experimental.core_v2`), instead of being submitted.

While the cell runs, `det.core.init()` in it returns the run's contexts, so the same Core API
cell that `%%det_submit` sends to the master reports to the master from here; the run's facts
(its hyperparameters, its trial) are `core_v2.info`. `det.get_cluster_info()` stays None, as
off the master in Determined, so Native API calls in the cell keep their notebook behaviour.
The run ends with the cell: COMPLETED, or ERROR when the cell raised (CANCELED when
interrupted).
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError


def local_hparams(config: dict) -> dict:
    """The one set of hyperparameter values a local run trains with: each constant's value;
    a searched range has no single value, which is an error naming it."""
    values: dict[str, Any] = {}
    for name, spec in (config.get("hyperparameters") or {}).items():
        if isinstance(spec, dict) and "type" in spec:
            if spec["type"] != "const":
                raise UsageError(
                    f"%%det_submit --local: hyperparameters.{name} is a {spec['type']!r} "
                    "range; a local run trains one trial: give it a constant value "
                    f"(e.g. {name}: {{type: const, val: ...}}) or submit without --local"
                )
            values[name] = spec.get("val")
        else:
            values[name] = spec
    return values


def run_locally(
    shell: Any, cell: str, config: dict, *, name: str | None, show_widget: bool = True
) -> None:
    """Open an unmanaged run for `config`, run `cell` in the kernel inside it, and close it;
    the cell's exception (after the run ended as ERROR) propagates."""
    from determined.experimental import core_v2

    run_config = core_v2.Config(
        name=name or config.get("name") or "local run",
        hparams=local_hparams(config),
        searcher={
            key: value
            for key, value in (config.get("searcher") or {}).items()
            if key in ("metric", "smaller_is_better")
        }
        or None,
        checkpoint_storage=config.get("checkpoint_storage"),
        description=config.get("description"),
        labels=config.get("labels"),
    )
    core_v2.init(config=run_config)
    info = core_v2.info
    print(
        f"Tracking local run: experiment {info.trial.experiment_id}, trial {info.trial.trial_id}",
        flush=True,
    )
    if show_widget:  # the live widget under the cell, as for a submitted experiment
        from jupyter_determined.kernel._widget import show_experiment

        show_experiment(info.trial.experiment_id)
    error: BaseException | None = None
    # The cell runs as the magic's own body (not a nested run_cell): its exception fails the
    # magic's cell, once, so papermill and "run all" stop at a failed local run.
    code = shell.transform_cell(cell)
    try:
        exec(compile(code, "<%%det_submit --local>", "exec"), shell.user_ns)  # noqa: S102
    except BaseException as exc:
        error = exc
        raise
    finally:
        core_v2.close_run(error)


__all__ = ["local_hparams", "run_locally"]
