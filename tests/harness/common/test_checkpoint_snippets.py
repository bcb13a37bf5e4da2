"""The "Use in notebook" rule (determined.common.checkpoint_snippets): which loader fits a
checkpoint, from the metadata each Trial API writes, and a cell that is valid Python for it.
The PyTorch cell is run for real against a master in tests/jupyter/test_notebooks.py."""

from __future__ import annotations

import ast

import pytest

from determined.common.checkpoint_snippets import checkpoint_kind, checkpoint_snippet


@pytest.mark.parametrize(
    ("metadata", "kind"),
    [
        ({"framework": "torch-2.5.1", "format": "pickle", "steps_completed": 3}, "pytorch"),
        ({"framework": "tensorflow-2.18.0", "format": "keras"}, "keras"),
        ({"format": "keras"}, "keras"),  # DeterminedCallback records only the format
        ({"framework": "tensorflow-2.18.0", "format": "estimator"}, "estimator"),
        ({"steps_completed": 5}, "core"),
        ({}, "core"),
        (None, "core"),
    ],
)
def test_the_kind_comes_from_the_framework_and_format_the_checkpoint_records(metadata, kind):
    assert checkpoint_kind(metadata) == kind


LOADERS = {
    "pytorch": "pytorch.load_trial_from_checkpoint_path(path)",
    "keras": "keras.load_model_from_checkpoint_path(path)",
    "estimator": "estimator.load_estimator_from_checkpoint_path(path)",
    "core": "os.listdir(path)",
}


@pytest.mark.parametrize(
    ("metadata", "kind"),
    [
        ({"framework": "torch-2.5.1", "format": "pickle"}, "pytorch"),
        ({"framework": "tensorflow-2.18.0", "format": "keras"}, "keras"),
        ({"format": "estimator"}, "estimator"),
        ({}, "core"),
    ],
)
def test_each_cell_downloads_the_checkpoint_and_calls_its_loader(metadata, kind):
    checkpoint = {
        "uuid": "a1b2-c3",
        "trial_id": 4,
        "experiment_id": 2,
        "steps_completed": 30,
        "metadata": metadata,
    }
    snippet = checkpoint_snippet(checkpoint)
    assert snippet["kind"] == kind
    code = snippet["code"]
    ast.parse(code)  # a cell that runs, not a template
    assert 'client.get_checkpoint("a1b2-c3")' in code
    assert "path = checkpoint.download()" in code
    assert LOADERS[kind] in code
    assert "trial 4 (experiment 2), 30 batches" in code
    if kind == "pytorch":
        assert "client.get_experiment(2).download_code(" in code


def test_a_uuid_is_quoted_as_a_python_string_whatever_it_holds():
    odd = {"uuid": 'x"\nimport injected #', "trial_id": 1, "experiment_id": 1, "metadata": {}}
    code = checkpoint_snippet(odd)["code"]
    tree = ast.parse(code)
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    assert 'x"\nimport injected #' in strings
    assert not any(isinstance(n, ast.Import) and n.names[0].name == "injected" for n in tree.body)
