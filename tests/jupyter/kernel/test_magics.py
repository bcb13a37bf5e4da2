"""`%%det_submit`, `%det_submit`, `%det` in an IPython shell against a hosted master."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from traitlets.config import Config

from jupyter_determined.kernel._current_notebook import frontend_notebook
from jupyter_determined.kernel._magics import NotebookSubmitted

pytestmark = pytest.mark.slow

TRAINING = """\
import determined as det
with det.core.init() as core_context:
    steps = 0
    for op in core_context.searcher.operations():
        while steps < op.length:
            steps += 1
            core_context.train.report_training_metrics(steps_completed=steps, metrics={"y": scale * steps})
        core_context.train.report_validation_metrics(steps_completed=steps, metrics={"y": scale * steps})
        op.report_completed(scale * steps)
print("TRAINING-MARKER", flush=True)
"""


@pytest.fixture(scope="module")
def server(start_jupyter):
    return start_jupyter(app="jupyter_server")


@pytest.fixture
def shell(server, monkeypatch, tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("DET_MASTER", server.det_master)
    monkeypatch.setenv("DET_MASTER_TOKEN", server.token)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setattr(frontend_notebook, "snapshot", None)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    instance = InteractiveShell.instance(config=config)
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "helper.txt").write_text("context file\n")
    instance.user_ns["CTX"] = str(tmp_path / "ctx")
    run(instance, "%load_ext jupyter_determined")
    yield instance
    InteractiveShell.clear_instance()


def run(shell, source: str):
    result = shell.run_cell(source, store_history=True)
    if not result.success:
        raise result.error_in_exec or result.error_before_exec
    return result.result


CONFIG_CELL = (
    'config = {"name": "magic", "max_restarts": 0,\n'
    '          "searcher": {"name": "single", "metric": "y", "max_length": 3}}'
)


def test_running_the_submitting_cell_twice_makes_two_clean_experiments(
    shell, server, capsys
) -> None:
    run(shell, "scale = 2")
    run(shell, CONFIG_CELL)
    submit = "%%det_submit config --context $CTX --no-widget --wait\n" + TRAINING
    run(shell, submit)
    run(shell, submit)
    out = capsys.readouterr().out
    created = [
        int(line.split()[-1]) for line in out.splitlines() if line.startswith("Created experiment")
    ]
    assert len(created) == 2 and created[0] != created[1]
    scripts = []
    for experiment_id in created:
        answer = server.api("GET", f"experiments/{experiment_id}")
        assert answer["experiment"]["state"] == "COMPLETED"
        assert answer["experiment"]["best_validation"] == 6.0  # scale from the cell above
        trial_logs = server.trial_logs(answer["trials"][0]["id"])
        assert trial_logs.count("TRAINING-MARKER") == 1
        script = answer["experiment"]["notebook"]["script"]
        assert script.count("TRAINING-MARKER") == 1  # the first submission is not re-run
        assert "get_ipython" not in script
        # The cell labels and the prelude's cell table (execution counts) differ.
        scripts.append(
            [
                line
                for line in script.splitlines()
                if not line.startswith("# ---") and "notebook_errors" not in line
            ]
        )
    assert scripts[0] == scripts[1]  # the same code; only the cell labels differ
    assert f"Experiment {created[1]} COMPLETED, best validation 6" in out


def test_config_errors_are_listed_without_a_traceback(shell) -> None:
    run(shell, 'bad = {"searcher": {"name": "random", "metric": "y", "max_length": 3}}')
    with pytest.raises(UsageError) as refused:
        run(shell, "%%det_submit bad --context $CTX --no-widget\nprint('never')")
    assert "searcher.max_trials" in str(refused.value)
    with pytest.raises(UsageError, match="neither a variable nor a file"):
        run(shell, "%%det_submit missing.yaml --context $CTX\nprint('never')")


def test_line_magic_submits_the_cells_above_and_det_commands(shell, server, capsys) -> None:
    run(shell, "scale = 5")
    run(shell, CONFIG_CELL.replace('"magic"', '"line-magic"'))
    run(shell, TRAINING)  # runs here too, off-cluster (dummy Core API context)
    run(shell, "%det_submit config --context $CTX --no-widget --wait")
    out = capsys.readouterr().out
    experiment_id = int(
        [line for line in out.splitlines() if line.startswith("Created experiment")][0].split()[-1]
    )
    answer = server.api("GET", f"experiments/{experiment_id}")
    assert answer["experiment"]["state"] == "COMPLETED"
    assert answer["experiment"]["best_validation"] == 15.0

    run(shell, "%det list")
    listing = capsys.readouterr().out
    assert any(
        line.split()[:2] == [str(experiment_id), "COMPLETED"] and "line-magic" in line
        for line in listing.splitlines()
    )
    run(shell, "%det describe last")
    described = capsys.readouterr().out
    assert f"Experiment {experiment_id} line-magic: COMPLETED (100%)" in described
    run(shell, f"%det logs {answer['trials'][0]['id']}")
    assert "TRAINING-MARKER" in capsys.readouterr().out
    with pytest.raises(UsageError, match="409|not allowed|cannot"):
        run(shell, f"%det activate {experiment_id}")  # a finished experiment stays finished
    with pytest.raises(UsageError, match="unknown command"):
        run(shell, "%det frobnicate 1")


def test_pause_activate_kill(shell, server, capsys) -> None:
    run(shell, "scale = 1")
    run(
        shell,
        'config = {"name": "long", "max_restarts": 0,\n'
        '          "searcher": {"name": "single", "metric": "y", "max_length": 100000}}',
    )
    run(shell, "%%det_submit config --context $CTX --no-widget\nimport time\ntime.sleep(600)")
    experiment_id = int(capsys.readouterr().out.split()[-1])
    run(shell, f"%det pause {experiment_id}")
    assert capsys.readouterr().out.strip() == f"Experiment {experiment_id}: PAUSED"
    run(shell, f"%det activate {experiment_id}")
    assert capsys.readouterr().out.strip() == f"Experiment {experiment_id}: ACTIVE"
    run(shell, f"%det kill {experiment_id}")
    assert server.wait_experiment(experiment_id, timeout=90)["experiment"]["state"] == "CANCELED"


LOCAL_CELL = """%%det_submit cfg --local --no-widget
import determined as det
from determined.experimental import core_v2
assert det.get_cluster_info() is None  # as off the master: only core.init() is the run's
hparams = core_v2.info.trial.hparams
with det.core.init() as core_context:
    for step in (1, 2):
        core_context.train.report_training_metrics(step, {"loss": hparams["lr"] * step})
    print("trained locally")
"""


def test_local_trains_in_the_kernel_tracked_as_an_unmanaged_run(shell, server, capsys) -> None:
    shell.user_ns["cfg"] = {
        "name": "local-magic",
        "hyperparameters": {"lr": {"type": "const", "val": 0.5}},
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
    }
    run(shell, LOCAL_CELL)
    out = capsys.readouterr().out
    assert "trained locally" in out
    experiment_id = int(out.split("Tracking local run: experiment ")[1].split(",")[0])
    found = server.api("GET", f"experiments/{experiment_id}")
    assert found["experiment"]["unmanaged"] is True
    assert found["experiment"]["state"] == "COMPLETED"
    [trial] = server.api("GET", f"experiments/{experiment_id}/trials")["trials"]
    assert trial["state"] == "COMPLETED" and trial["hparams"] == {"lr": 0.5}
    metrics = server.api("GET", f"trials/{trial['id']}/metrics")["metrics"]
    assert [(m["steps_completed"], m["metrics"]) for m in metrics] == [
        (1, {"loss": 0.5}),
        (2, {"loss": 1.0}),
    ]
    assert "trained locally" in server.trial_logs(trial["id"])

    # A cell that fails ends its run as ERROR; a searched range cannot run locally.
    result = shell.run_cell("%%det_submit --local --no-widget\nraise RuntimeError('diverged')")
    assert isinstance(result.error_in_exec, RuntimeError)
    failed_id = int(capsys.readouterr().out.split("experiment ")[1].split(",")[0])
    assert server.api("GET", f"experiments/{failed_id}")["experiment"]["state"] == "ERROR"
    shell.user_ns["cfg"]["hyperparameters"]["lr"] = {"type": "double", "minval": 0, "maxval": 1}
    with pytest.raises(UsageError, match="hyperparameters.lr is a 'double' range"):
        shell.run_cell(LOCAL_CELL).raise_error()


def test_notebook_submitted_stops_the_cell_with_one_line(shell, capsys) -> None:
    shell.user_ns["NotebookSubmitted"] = NotebookSubmitted
    result = shell.run_cell("raise NotebookSubmitted(42)\nprint('later code')")
    assert isinstance(result.error_in_exec, NotebookSubmitted)
    out = capsys.readouterr()
    shown = out.out + out.err
    assert "Submitted experiment 42" in shown
    assert "Traceback" not in shown and "later code" not in shown


def test_test_mode_submits_an_archived_one_batch_experiment_and_waits(
    shell, server, capsys
) -> None:
    run(shell, "scale = 4")
    run(shell, CONFIG_CELL.replace('"magic"', '"test-mode"'))
    run(shell, "%%det_submit config --test --context $CTX --no-widget\n" + TRAINING)
    out = capsys.readouterr().out
    experiment_id = int(
        [line for line in out.splitlines() if line.startswith("Created test experiment")][
            0
        ].split()[-1]
    )
    assert f"Experiment {experiment_id} COMPLETED" in out  # --test waits
    answer = server.api("GET", f"experiments/{experiment_id}")
    assert answer["experiment"]["archived"] is True
    assert answer["trials"][0]["steps_completed"] == 1


CHECKPOINTING = """\
import pathlib
import determined as det
with det.core.init() as core_context:
    for op in core_context.searcher.operations():
        for step, loss in ((1, 0.5), (2, 0.1), (3, 0.3)):
            core_context.train.report_validation_metrics(steps_completed=step, metrics={"y": loss})
            with core_context.checkpoint.store_path({"steps_completed": step}) as (path, _):
                (pathlib.Path(path) / "step.txt").write_text(str(step))
        op.report_completed(0.3)
"""


def test_det_use_and_the_widget_put_the_checkpoint_cell_next(shell, server, capsys) -> None:
    from jupyter_determined.kernel._widget import ExperimentWidget

    run(
        shell,
        'config = {"name": "use", "max_restarts": 0,\n'
        '          "searcher": {"name": "single", "metric": "y", "max_length": 3},\n'
        '          "checkpoint_storage": {"save_trial_best": 3, "save_trial_latest": 3}}',
    )
    run(shell, "%%det_submit config --context $CTX --no-widget --wait\n" + CHECKPOINTING)
    experiment_id = int(capsys.readouterr().out.split("Created experiment ")[1].split()[0])
    checkpoints = server.api("GET", f"experiments/{experiment_id}/checkpoints")["checkpoints"]
    best = next(c["uuid"] for c in checkpoints if c["steps_completed"] == 2)  # y = 0.1
    first = next(c["uuid"] for c in checkpoints if c["steps_completed"] == 1)

    run(shell, "%det use best last")
    assert capsys.readouterr().out.strip() == (
        f"The next cell downloads checkpoint {best} and loads it (core)."
    )
    assert shell.rl_next_input == server.api("GET", f"checkpoints/{best}/snippet")["code"]
    run(shell, f"%det use {first}")
    assert f'client.get_checkpoint("{first}")' in shell.rl_next_input

    shell.rl_next_input = None
    assert ExperimentWidget(experiment_id).use_in_notebook() == best
    assert f'client.get_checkpoint("{best}")' in shell.rl_next_input

    for line, why in (
        ("%det use", "%det use CHECKPOINT_UUID"),
        ("%det use best", "%det use CHECKPOINT_UUID"),
        ("%det use no-such-uuid", "checkpoint no-such-uuid not found"),
    ):
        with pytest.raises(UsageError, match=why):
            run(shell, line)
