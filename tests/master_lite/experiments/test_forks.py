"""Fork an experiment, re-run a trial with its hyperparameters, continue a trial from its
checkpoint (issue 28 item 10; Determined's fork / "Continue Trial" semantics): the new
experiment has its parent's model definition and notebook, the trial's hyperparameters as
constants of a `single` search, and (continue) the trial's latest checkpoint to start from."""

from __future__ import annotations

from typing import Any

import pytest

from determined.common.api import errors as api_errors
from master_lite.experiments import trial_config
from tests._support import CHECKPOINTING_SCRIPT, MasterProcess, context_tarball, wait_for_experiment

PARENT: dict[str, Any] = {
    "name": "search",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "hyperparameters": {
        "increment_by": {"type": "int", "minval": 1, "maxval": 8},
        "opt": {
            "kind": {"type": "const", "val": "sgd"},
            "mom": {"type": "double", "minval": 0, "maxval": 1},
        },
    },
    "searcher": {
        "name": "random",
        "metric": "x",
        "smaller_is_better": False,
        "max_trials": 2,
        "max_concurrent_trials": 2,
        "max_length": {"batches": 100},
    },
    "environment": {"environment_variables": ["STEP_SLEEP=0.002"]},
}


def test_a_trials_config_fixes_its_hyperparameters_in_a_single_search() -> None:
    hparams = {"increment_by": 3, "opt": {"kind": "sgd", "mom": 0.25}}
    rerun = trial_config(PARENT, 7, hparams, continue_from_checkpoint=False)
    assert rerun["searcher"] == {
        "name": "single",
        "metric": "x",
        "smaller_is_better": False,
        "max_length": {"batches": 100},
    }
    # Nested groups stay nested, each value a constant.
    assert rerun["hyperparameters"] == {
        "increment_by": {"type": "const", "val": 3},
        "opt": {"kind": {"type": "const", "val": "sgd"}, "mom": {"type": "const", "val": 0.25}},
    }
    assert rerun["name"] == "search (trial 7 re-run)"
    assert PARENT["searcher"]["name"] == "random"  # the parent's config is left alone

    continued = trial_config(PARENT, 7, hparams, continue_from_checkpoint=True, max_length=300)
    # The length keeps the parent's unit; the warm start is the trial's latest checkpoint.
    assert continued["searcher"]["max_length"] == {"batches": 300}
    assert continued["searcher"]["source_trial_id"] == 7
    assert continued["name"] == "search (trial 7 continued)"


@pytest.mark.slow
def test_rerun_continue_and_fork_make_experiments_from_the_parents_model(tmp_path) -> None:
    context = context_tarball({"train.py": CHECKPOINTING_SCRIPT})
    with MasterProcess(tmp_path / "root", cpu_slots=2) as master:
        parent_id = master.create_experiment(PARENT, context)
        assert wait_for_experiment(master, parent_id)["state"] == "COMPLETED"
        parent = master.session.get(f"/experiments/{parent_id}")["experiment"]
        source = master.trials(parent_id)[0]

        # Re-run: from scratch, with the trial's hyperparameters and the parent's context.
        rerun = master.session.post(f"/trials/{source['id']}/rerun")["experiment"]
        assert rerun["parent_id"] == parent_id
        assert rerun["context_hash"] == parent["context_hash"]
        assert rerun["searcher"]["name"] == "single"
        assert wait_for_experiment(master, rerun["id"])["state"] == "COMPLETED"
        [rerun_trial] = master.trials(rerun["id"])
        assert rerun_trial["hparams"] == source["hparams"]
        assert "starting at step 0 with x 0" in master.logs(rerun_trial["id"])

        # Continue: the trial's latest checkpoint is where the new trial starts.
        continued = master.session.post(f"/trials/{source['id']}/continue", {"max_length": 200})[
            "experiment"
        ]
        config = master.session.get(f"/experiments/{continued['id']}")["experiment"]["config"]
        assert config["searcher"]["source_trial_id"] == source["id"]
        assert config["searcher"]["max_length"] == {"batches": 200}
        assert wait_for_experiment(master, continued["id"])["state"] == "COMPLETED"
        [continued_trial] = master.trials(continued["id"])
        logs = master.logs(continued_trial["id"])
        assert f"latest checkpoint {source['latest_checkpoint']}" in logs
        start_x = 100 * source["hparams"]["increment_by"]
        assert f"starting at step 0 with x {start_x}" in logs

        # Fork (Determined's CreateExperiment with parentId): an edited config, no context.
        edited = {**PARENT, "name": "forked", "searcher": {**PARENT["searcher"], "max_trials": 1}}
        forked = master.session.post("/experiments", {"config": edited, "parent_id": parent_id})[
            "experiment"
        ]
        assert (forked["name"], forked["parent_id"]) == ("forked", parent_id)
        assert forked["context_hash"] == parent["context_hash"]
        assert wait_for_experiment(master, forked["id"])["state"] == "COMPLETED"

        # Clear refusals, naming what is wrong and what to do.
        with pytest.raises(api_errors.APIException, match="experiment 999 does not exist"):
            master.session.post("/experiments", {"config": edited, "parent_id": 999})
        unstarted = master.create_experiment(
            {**PARENT, "searcher": {**PARENT["searcher"], "max_trials": 1}},
            context,
            activate=False,
        )
        [fresh] = master.trials(unstarted)
        with pytest.raises(api_errors.APIException, match="has no checkpoint to continue from"):
            master.session.post(f"/trials/{fresh['id']}/continue")
        with pytest.raises(api_errors.APIException, match="max_length"):
            master.session.post(f"/trials/{source['id']}/rerun", {"max_length": 0})
        # A run that trained in a kernel (core_v2) left no model definition to run again.
        kernel_run = master.session.post("/unmanaged/runs", {"name": "in-a-kernel"})
        with pytest.raises(api_errors.APIException, match="trained in a Jupyter kernel"):
            master.session.post(f"/trials/{kernel_run['trial_id']}/rerun")
        with pytest.raises(api_errors.APIException, match="trained in a Jupyter kernel"):
            master.session.post(
                "/experiments", {"config": edited, "parent_id": kernel_run["experiment_id"]}
            )
