"""`det.EnvContext`: Determined's record of where a trial runs, as `context.env` of its Trial
contexts (`TFKerasTrialContext.env`, ...). Determined's own fixtures read it
(`self.context.env.hparams`) and even set fields on it (`context.env.container_gpus = []`), so
it is a plain object whose fields may be changed."""

from __future__ import annotations

from typing import Any

from determined._info import ClusterInfo


class EnvContext:
    """The trial's facts under Determined's `EnvContext` names: `master_url`,
    `master_cert_file`, `master_cert_name`, `experiment_config`, `hparams`, `latest_checkpoint`,
    `steps_completed`, `use_gpu`, `container_gpus`, `slot_ids`, `debug`, `det_trial_id`,
    `det_experiment_id`, `det_agent_id`, `det_cluster_id`, `trial_seed`, `trial_run_id`,
    `allocation_id`, `managed_training`, `test_mode`, `on_cluster`. Off the master the ids are
    None and `on_cluster` is False."""

    master_url: str | None
    master_cert_file: str | None
    master_cert_name: str | None
    experiment_config: dict
    hparams: dict
    latest_checkpoint: str | None
    steps_completed: int
    use_gpu: bool
    container_gpus: list[str]
    slot_ids: list[int]
    debug: bool
    det_trial_id: str | None
    det_experiment_id: str | None
    det_agent_id: str | None
    det_cluster_id: str | None
    trial_seed: int
    trial_run_id: int | None
    allocation_id: str | None
    managed_training: bool
    test_mode: bool
    on_cluster: bool

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    @classmethod
    def _of(
        cls,
        info: ClusterInfo | None,
        *,
        config: dict,
        hparams: dict,
        trial_seed: int,
        trial_id: int | None,
        experiment_id: int | None,
    ) -> EnvContext:
        trial = info._trial_info if info is not None else None
        gpus = list(info.gpu_uuids) if info is not None else []
        return cls(
            master_url=info.master_url if info else None,
            master_cert_file=info.master_cert_file if info else None,
            master_cert_name=info.master_cert_name if info else None,
            experiment_config=config,
            hparams=hparams,
            latest_checkpoint=info.latest_checkpoint if info else None,
            steps_completed=trial._steps_completed if trial else 0,
            use_gpu=bool(gpus),
            container_gpus=gpus,
            slot_ids=list(info.slot_ids) if info else [],
            debug=bool(trial._debug) if trial else False,
            det_trial_id=str(trial_id) if trial_id is not None else None,
            det_experiment_id=str(experiment_id) if experiment_id is not None else None,
            det_agent_id=info.agent_id if info else None,
            det_cluster_id=info.cluster_id if info else None,
            trial_seed=trial_seed,
            trial_run_id=trial._trial_run_id if trial else None,
            allocation_id=info.allocation_id if info else None,
            managed_training=info is not None,
            test_mode=False,
            on_cluster=info is not None,
        )

    def __repr__(self) -> str:
        return f"EnvContext(det_trial_id={self.det_trial_id!r}, on_cluster={self.on_cluster!r})"


__all__ = ["EnvContext"]
