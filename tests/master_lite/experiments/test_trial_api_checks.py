"""Submit-time checks of Trial and Native API experiments: a 400 naming the field, at
submission, instead of a trial that exits with code 1 ten seconds later."""

from __future__ import annotations

import asyncio

import pytest

from master_lite import errors
from tests._support.context import tar_gz
from tests._support.parts import started_parts

KERAS_TRIAL = """
import determined as det
from determined import keras


class MnistTrial(keras.TFKerasTrial):
    def build_model(self):
        ...
"""
PYTORCH_TRIAL = """
from determined.pytorch import PyTorchTrial


class MnistTrial(PyTorchTrial):
    pass
"""


def config(entrypoint, hparams=None, **extra) -> dict:
    return {
        "name": "trial-api",
        "entrypoint": entrypoint,
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 10}},
        "hyperparameters": hparams if hparams is not None else {"lr": 0.1},
        **extra,
    }


def submit(tmp_path, cfg, files, *, via_api=True):
    async def body():
        async with started_parts(tmp_path / "root") as (parts, _):
            context = tar_gz(files)
            if via_api:
                return await parts.experiments.submit_experiment(cfg, context)
            return parts.experiments.create_experiment(cfg, context)

    return asyncio.run(asyncio.wait_for(body(), 60))


@pytest.mark.parametrize("via_api", [True, False])
def test_a_keras_trial_without_global_batch_size_is_a_400_naming_the_field(tmp_path, via_api):
    with pytest.raises(errors.InvalidRequest) as refused:
        submit(
            tmp_path, config("model_def:MnistTrial"), {"model_def.py": KERAS_TRIAL}, via_api=via_api
        )
    [problem] = refused.value.errors
    assert problem.startswith(
        "hyperparameters.global_batch_size: required: TFKerasTrial MnistTrial"
    )
    assert "add e.g. `global_batch_size: 32` under hyperparameters" in problem


def test_did_you_mean_a_batch_size_under_another_name(tmp_path):
    cfg = config(
        "python3 -m determined.launch.horovod --autohorovod --trial model_def:MnistTrial",
        {"batch_size": 64},
    )
    with pytest.raises(errors.InvalidRequest) as refused:
        submit(tmp_path, cfg, {"model_def.py": KERAS_TRIAL})
    assert "(did you mean 'batch_size'? rename it to global_batch_size)" in refused.value.errors[0]


@pytest.mark.parametrize(
    "value, says",
    [
        (0, "must be a positive integer, got 0"),
        (32.0, "must be a positive integer, got 32.0"),
        ({"type": "double", "minval": 1, "maxval": 4}, "not a 'double' hyperparameter"),
        ({"type": "categorical", "vals": [32, -1]}, "the categorical values [-1] are not"),
    ],
)
def test_a_global_batch_size_that_is_not_a_positive_int_is_refused(tmp_path, value, says):
    cfg = config("model_def:MnistTrial", {"global_batch_size": value})
    with pytest.raises(errors.InvalidRequest) as refused:
        submit(tmp_path, cfg, {"model_def.py": KERAS_TRIAL})
    assert says in refused.value.errors[0]


def test_a_native_keras_config_without_global_batch_size_is_refused(tmp_path):
    cfg = config(
        "python3 -m determined.exec.native",
        internal={"native": {"command": ["train.py"], "api": "keras"}},
    )
    with pytest.raises(errors.InvalidRequest) as refused:
        submit(tmp_path, cfg, {"train.py": "print(1)"})
    assert refused.value.errors[0].startswith(
        "hyperparameters.global_batch_size: required: det.experimental.keras (Native API)"
    )


def test_a_missing_class_or_module_is_named_with_a_suggestion(tmp_path):
    cfg = config("model_def:MnistTrail", {"global_batch_size": 32})
    with pytest.raises(errors.InvalidRequest) as refused:
        submit(tmp_path, cfg, {"model_def.py": KERAS_TRIAL})
    assert refused.value.errors == [
        "entrypoint: model_def:MnistTrail: model_def.py defines or imports no 'MnistTrail' "
        "(did you mean 'MnistTrial'?); classes there: MnistTrial"
    ]
    cfg = config("model:MnistTrial", {"global_batch_size": 32})
    with pytest.raises(errors.InvalidRequest, match="no module 'model' in the context"):
        submit(tmp_path, cfg, {"model_def.py": KERAS_TRIAL})


@pytest.mark.parametrize(
    "entrypoint, files, hparams",
    [
        # Core API scripts are not Trial experiments: no global_batch_size needed.
        ("python3 train.py", {"train.py": "print(1)"}, {"lr": 0.1}),
        # A PyTorchTrial whose lengths are in batches needs none (as in Determined).
        ("model_def:MnistTrial", {"model_def.py": PYTORCH_TRIAL}, {"lr": 0.1}),
        # Determined's DeepSpeed examples set no global_batch_size (the DeepSpeed config has it).
        (
            "python3 -m determined.launch.deepspeed --trial model_def:CIFARTrial",
            {
                "model_def.py": "from determined.pytorch import deepspeed as det_ds\n"
                "class CIFARTrial(det_ds.DeepSpeedTrial):\n    pass\n"
            },
            {"deepspeed_config": "ds_config.json"},
        ),
        # Determined's Keras examples: global_batch_size set.
        ("model_def:MnistTrial", {"model_def.py": KERAS_TRIAL}, {"global_batch_size": 32}),
        # A class imported into the module exists; what it is shows when it runs.
        ("model_def:MnistTrial", {"model_def.py": "from .impl import MnistTrial\n"}, {}),
    ],
)
def test_valid_trial_and_core_api_experiments_are_accepted(tmp_path, entrypoint, files, hparams):
    assert submit(tmp_path, config(entrypoint, hparams), files)["state"] == "ACTIVE"


def test_a_pytorch_trial_counting_records_needs_global_batch_size(tmp_path):
    cfg = config("model_def:MnistTrial", {"lr": 0.1}, records_per_epoch=100)
    cfg["searcher"]["max_length"] = {"epochs": 1}
    with pytest.raises(errors.InvalidRequest, match="lengths in records or epochs"):
        submit(tmp_path, cfg, {"model_def.py": PYTORCH_TRIAL})
