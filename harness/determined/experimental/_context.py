"""The framework-free part of the Native and Trial contexts: config, hyperparameters, ids, batch sizes.

`det.experimental.NativeContext` and the Keras contexts (`determined.keras`) derive from
`TrialContextBase`; nothing here imports TensorFlow.
"""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Callable
from typing import Any

from determined import errors
from determined.common import expconf

logger = logging.getLogger("determined.experimental")


class DistributedInfo:
    """The old (horovod-era) distributed context: getters only, rank 0 of 1 unless told otherwise.

    Args:
        rank: this process's rank among all processes of the trial.
        size: the number of processes.
        local_rank: this process's rank among the processes on its agent.
        num_agents: the number of agents (machines) the trial runs on.
    """

    def __init__(
        self, rank: int = 0, size: int = 1, local_rank: int = 0, num_agents: int = 1
    ) -> None:
        self._rank, self._size, self._local_rank, self._num_agents = (
            rank,
            size,
            local_rank,
            num_agents,
        )

    @classmethod
    def from_core(cls, distributed: Any) -> DistributedInfo:
        """The getters of a Core API distributed context.

        Args:
            distributed: a `det.core.DistributedContext` (`core_context.distributed`).

        Returns:
            A `DistributedInfo` with its rank, size, local rank and, as the number of agents, its
            `cross_size`.
        """
        return cls(
            distributed.rank, distributed.size, distributed.local_rank, distributed.cross_size
        )

    def get_rank(self) -> int:
        """This process's rank among all processes of the trial, from 0 (0 is the chief)."""
        return self._rank

    def get_local_rank(self) -> int:
        """This process's rank among the processes on its agent, from 0."""
        return self._local_rank

    def get_size(self) -> int:
        """The number of processes training the trial."""
        return self._size

    def get_num_agents(self) -> int:
        """The number of agents (machines) the trial runs on."""
        return self._num_agents


def plain_hparams(hparams: dict) -> dict:
    """Hyperparameter values from a config section: `{type: const, val: v}` -> v, nested dicts kept."""
    values: dict = {}
    for path, spec in expconf.hparam_leaves(expconf.normalize_hparams(hparams or {})):
        if spec.get("type") != "const":
            raise errors.InvalidExperimentException(
                f"hyperparameters.{'.'.join(path)}: a {spec.get('type')!r} range has no single value; "
                "sample the hyperparameters first (local mode does this for you)"
            )
        node = values
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node[path[-1]] = spec.get("val")
    return values


def sample_hparams(hparams: dict, seed: int | None = None) -> dict:
    """One random point of the search space, as plain values (what a trial would receive)."""
    specs = expconf.sample_hparam_specs(
        expconf.normalize_hparams(hparams or {}), random.Random(seed)
    )
    return plain_hparams(specs)


class TrialContextBase:
    """What every Native/Trial context offers (Determined's `_TrainContext`).

    Args:
        config: the experiment config.
        hparams: the trial's hyperparameter values.
        trial_seed: the trial's random seed.
        trial_id: the trial's id on the master; None off it.
        experiment_id: the experiment's id on the master; None off it.
        distributed: rank information; a single process by default.
        core_context: the Core API context, when there is one.
    """

    def __init__(
        self,
        config: dict,
        hparams: dict,
        *,
        trial_seed: int = 0,
        trial_id: int | None = None,
        experiment_id: int | None = None,
        distributed: DistributedInfo | None = None,
        core_context: Any = None,
    ) -> None:
        self._config = config
        self._hparams = hparams
        self._trial_seed = trial_seed
        self._trial_id = trial_id
        self._experiment_id = experiment_id
        self.distributed = distributed or DistributedInfo()
        self._core = core_context
        self._stop_requested = False

    @classmethod
    def from_config(cls, config: dict) -> TrialContextBase:
        """A context for debugging off the master: hyperparameters sampled once from the config.

        Args:
            config: an experiment config; its defaults are filled in.

        Returns:
            A context with the filled-in config, one sample of its hyperparameters (seeded
            with `reproducibility.experiment_seed`) and that seed as the trial seed.
        """
        expanded = expconf.apply_defaults(config)
        seed = expanded["reproducibility"]["experiment_seed"]
        return cls(
            expanded, sample_hparams(config.get("hyperparameters") or {}, seed), trial_seed=seed
        )

    @property
    def env(self) -> Any:
        """Determined's `EnvContext` of this trial (`det.EnvContext`): `hparams`,
        `experiment_config`, `container_gpus`, `det_trial_id`, ... Made once; its fields may be
        set, as Determined's fixtures do."""
        if getattr(self, "_env", None) is None:
            from determined import _info
            from determined._env_context import EnvContext

            self._env = EnvContext._of(
                _info.get_cluster_info(),
                config=self._config,
                hparams=self._hparams,
                trial_seed=self._trial_seed,
                trial_id=self._trial_id,
                experiment_id=self._experiment_id,
            )
        return self._env

    # --- config and hyperparameters -----------------------------------------------------------
    def get_experiment_config(self) -> dict:
        """The experiment config.

        Returns:
            A deep copy: changing it changes nothing.
        """
        return copy.deepcopy(self._config)

    def get_data_config(self) -> dict:
        """The `data` section of the experiment config.

        Returns:
            A deep copy of it; an empty dict when the config has none.
        """
        return copy.deepcopy(self._config.get("data") or {})

    def get_hparams(self) -> dict:
        """The trial's hyperparameter values.

        Returns:
            A deep copy of the dict of hyperparameter name to value.
        """
        return copy.deepcopy(self._hparams)

    def get_hparam(self, name: str) -> Any:
        """One hyperparameter's value.

        Asking for `global_batch_size` logs a deprecation warning: use the batch size getters.

        Args:
            name: a top-level hyperparameter name (a nested section comes back as a dict).

        Returns:
            Its value (not a copy).

        Raises:
            ValueError: the trial has no hyperparameter called `name`.
        """
        if name == "global_batch_size":
            logger.warning(
                "get_hparam('global_batch_size') is deprecated in Determined; use get_global_batch_size() "
                "(or get_per_slot_batch_size() for the size each process trains on)"
            )
        if name not in self._hparams:
            raise ValueError(
                f"hyperparameter {name!r} is not in the experiment config; defined: "
                f"{', '.join(sorted(self._hparams)) or '(none)'}"
            )
        return self._hparams[name]

    # --- ids ----------------------------------------------------------------------------------
    def get_experiment_id(self) -> int:
        """The id of this trial's experiment on the master.

        Returns:
            The experiment id.

        Raises:
            ValueError: not running in an experiment (local mode).
        """
        if self._experiment_id is None:
            raise ValueError(
                "get_experiment_id(): this context does not run in an experiment (local mode)"
            )
        return self._experiment_id

    def get_trial_id(self) -> int:
        """The id of this trial on the master.

        Returns:
            The trial id.

        Raises:
            ValueError: not running as a trial (local mode).
        """
        if self._trial_id is None:
            raise ValueError("get_trial_id(): this context does not run in a trial (local mode)")
        return self._trial_id

    def get_trial_seed(self) -> int:
        """The trial's random seed.

        Returns:
            The seed the context was built with (0 when none was given).
        """
        return self._trial_seed

    # --- batch sizes --------------------------------------------------------------------------
    def _slots(self) -> int:
        resources = self._config.get("resources") or {}
        return max(1, int(resources.get("slots_per_trial") or 1))

    def get_global_batch_size(self) -> int:
        """The number of records in one training step, summed over all slots.

        Returns:
            Hyperparameter `global_batch_size`, as it is.

        Raises:
            det.errors.InvalidExperimentException: `global_batch_size` is missing or not a
                positive int.
        """
        value = self._hparams.get("global_batch_size")
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise errors.InvalidExperimentException(
                "hyperparameters.global_batch_size: a positive integer is required by the Trial/Native "
                f"APIs (got {value!r}); add e.g. `global_batch_size: 32` to hyperparameters"
            )
        return value

    def get_per_slot_batch_size(self) -> int:
        """The number of records each slot trains on per batch.

        Returns:
            `global_batch_size // resources.slots_per_trial` (slots from the config, at least 1).

        Raises:
            det.errors.InvalidExperimentException: `global_batch_size` is missing, not a positive
                int, or smaller than `resources.slots_per_trial`.
        """
        global_size, slots = self.get_global_batch_size(), self._slots()
        if global_size < slots:
            raise errors.InvalidExperimentException(
                f"hyperparameters.global_batch_size ({global_size}) is smaller than "
                f"resources.slots_per_trial ({slots}): every slot needs at least one record"
            )
        return global_size // slots

    # --- stopping -----------------------------------------------------------------------------
    def get_stop_requested(self) -> bool:
        """Whether a stop was asked for with `set_stop_requested`.

        Returns:
            The value last set; False at first.
        """
        return self._stop_requested

    def set_stop_requested(self, stop_requested: bool) -> None:
        """Ask the training loop to stop training early (or withdraw that request).

        The Keras training loop checks it after each span of batches it trains between two
        reports, validations or checkpoints, not after every batch.

        Args:
            stop_requested: True to stop, False to withdraw an earlier request.

        Raises:
            TypeError: `stop_requested` is not a bool.
        """
        if not isinstance(stop_requested, bool):
            raise TypeError(
                f"set_stop_requested() takes a bool, got {type(stop_requested).__name__}"
            )
        self._stop_requested = stop_requested


class NativeContext(TrialContextBase):
    """Base of the Native API contexts: holds the function that training enters (`_train_fn`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._train_fn: Callable[[], Any] | None = None

    def _set_train_fn(self, train_fn: Callable[[], Any]) -> None:
        self._train_fn = train_fn
