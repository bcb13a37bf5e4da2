"""Submit-time checks of the Trial and Native APIs on the client: the entrypoint's class
(found with `ast`, nothing imported), `global_batch_size` of a Native config, and `det e create`
refusing before anything is packed or sent."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from determined.common import expconf, trial_checks
from determined.experimental import build_native_config
from determined.experimental.keras import KERAS_DEFAULTS

REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "entrypoint, ref",
    [
        ("model_def:MnistTrial", "model_def:MnistTrial"),
        (["pkg.model:MnistTrial"], "pkg.model:MnistTrial"),
        (
            "python3 -m determined.launch.torch_distributed --trial model_def:MnistTrial",
            "model_def:MnistTrial",
        ),
        (
            "python3 -m determined.launch.deepspeed --trial model_def:CIFARTrial",
            "model_def:CIFARTrial",
        ),
        ("python3 train.py", None),
        ("python3 -m determined.launch.torch_distributed python3 train.py", None),
        (None, None),
    ],
)
def test_the_trial_class_of_an_entrypoint(entrypoint, ref):
    assert trial_checks.trial_class_ref({"entrypoint": entrypoint}) == ref


def write(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_class_that_is_defined_imported_or_missing(tmp_path):
    read = trial_checks.directory_reader(
        write(
            tmp_path,
            {
                "model_def.py": "from determined import keras\n"
                "from .impl import Other\n"
                "class Base(keras.TFKerasTrial):\n    pass\n"
                "class MnistTrial(Base):\n    pass\n",
                "pkg/__init__.py": "",
                "pkg/model.py": "import determined as det\nclass T(det.pytorch.PyTorchTrial): pass\n",
            },
        )
    )
    assert trial_checks.class_problems(read, "model_def:MnistTrial") == ([], "keras")
    assert trial_checks.class_problems(read, "model_def:Other") == ([], None)
    assert trial_checks.class_problems(read, "pkg.model:T") == ([], "pytorch")
    problems, _ = trial_checks.class_problems(read, "model_def:MnistTrail")
    assert problems == [
        "entrypoint: model_def:MnistTrail: model_def.py defines or imports no 'MnistTrail' "
        "(did you mean 'MnistTrial'?); classes there: Base, MnistTrial"
    ]


def test_a_class_that_visibly_is_no_trial_names_the_bases_to_use(tmp_path):
    read = trial_checks.directory_reader(
        write(tmp_path, {"model_def.py": "import torch\nclass Net(torch.nn.Module):\n    pass\n"})
    )
    [problem], kind = trial_checks.class_problems(read, "model_def:Net")
    assert kind is None
    assert problem.startswith(
        "entrypoint: model_def:Net: class Net in model_def.py (line 2) subclasses "
        "torch.nn.Module, not a Trial: make it subclass the one of its framework"
    )
    assert "det.pytorch.PyTorchTrial" in problem and "det.keras.TFKerasTrial" in problem


def test_a_star_import_may_bring_the_class(tmp_path):
    read = trial_checks.directory_reader(write(tmp_path, {"m.py": "from impl import *\n"}))
    assert trial_checks.class_problems(read, "m:T") == ([], None)


def test_a_base_from_another_module_is_not_judged(tmp_path):
    read = trial_checks.directory_reader(
        write(tmp_path, {"m.py": "from common import BaseTrial\nclass T(BaseTrial):\n    pass\n"})
    )
    assert trial_checks.class_problems(read, "m:T") == ([], None)


def test_a_native_keras_config_without_global_batch_size_fails_before_submitting():
    with pytest.raises(expconf.InvalidConfig) as refused:
        build_native_config({}, ["train.py"], defaults=KERAS_DEFAULTS, api="keras")
    [problem] = refused.value.errors
    assert problem.startswith(
        "hyperparameters.global_batch_size: required: det.experimental.keras (Native API) "
        "splits each batch over the slots; add e.g. `global_batch_size: 32` under hyperparameters"
    )
    config = build_native_config(
        {"hyperparameters": {"global_batch_size": 32}},
        ["train.py"],
        defaults=KERAS_DEFAULTS,
        api="keras",
    )
    assert config["internal"]["native"] == {"command": ["train.py"], "api": "keras"}


def _det(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd),
        # No master anywhere: the check must answer before any connection is tried.
        "DET_MASTER": "http://127.0.0.1:9",
        "PYTHONPATH": f"{REPO / 'harness'}:{REPO}",
    }
    return subprocess.run(
        [sys.executable, "-m", "determined.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_det_e_create_names_the_missing_class_and_batch_size_before_uploading(tmp_path):
    write(
        tmp_path,
        {
            "model_def.py": "from determined.keras import TFKerasTrial\n"
            "class MnistTrial(TFKerasTrial):\n    pass\n",
            "exp.yaml": "entrypoint: model_def:MnistTrail\n"
            "searcher: {name: single, metric: loss, max_length: 1}\n",
        },
    )
    result = _det("e", "create", "exp.yaml", ".", cwd=tmp_path)
    assert result.returncode != 0
    assert "'MnistTrail' (did you mean 'MnistTrial'?)" in result.stderr
    assert "Connection refused" not in result.stderr + result.stdout

    (tmp_path / "exp.yaml").write_text(
        "entrypoint: model_def:MnistTrial\nsearcher: {name: single, metric: loss, max_length: 1}\n"
    )
    result = _det("e", "create", "exp.yaml", ".", cwd=tmp_path)
    assert "hyperparameters.global_batch_size: required: TFKerasTrial MnistTrial" in result.stderr


def test_in_a_notebook_a_refused_native_config_shows_its_problem_not_a_traceback(capsys):
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    shell = InteractiveShell.instance(config=config)
    try:
        result = shell.run_cell(
            "from determined.experimental import build_native_config\n"
            "from determined.experimental.keras import KERAS_DEFAULTS\n"
            "build_native_config({}, ['t.py'], defaults=KERAS_DEFAULTS, api='keras')\n"
        )
    finally:
        InteractiveShell.clear_instance()
    assert isinstance(result.error_in_exec, expconf.InvalidConfig)
    shown = capsys.readouterr()
    text = shown.out + shown.err
    assert "invalid experiment config: hyperparameters.global_batch_size: required" in text
    assert "Traceback" not in text and "_native.py" not in text
