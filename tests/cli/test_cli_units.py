"""CLI pieces that need no master: parsing, rendering, config checks, test-mode config, discovery."""

from __future__ import annotations

import datetime
import io
import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from determined.cli import _experiment, _follow, _render, build_parser, main
from determined.common import expconf

# ---- parsing --------------------------------------------------------------------------------


def parse(*argv: str):
    return build_parser().parse_args(list(argv))


def test_noun_abbreviations_reach_the_same_handlers():
    assert (
        parse("e", "list").handler
        is parse("experiment", "list").handler
        is _experiment.list_experiments
    )
    assert parse("t", "logs", "3").handler is parse("trial", "logs", "3").handler
    assert parse("c", "list", "1").handler is parse("checkpoint", "list", "1").handler


def test_experiment_without_verb_lists():
    args = parse("e")
    assert args.handler is _experiment.list_experiments and args.all is False and args.json is False


def test_create_flags():
    args = parse(
        "-m",
        "http://x:1",
        "e",
        "create",
        "cfg.yaml",
        "ctx",
        "-f",
        "--config",
        "a.b=1",
        "--config",
        "c=2",
        "-i",
        "extra.py",
        "-i",
        "data",
    )
    assert args.master == "http://x:1"
    assert (args.config_file, args.context, args.follow) == ("cfg.yaml", "ctx", True)
    assert args.config == ["a.b=1", "c=2"] and args.include == ["extra.py", "data"]
    assert parse("e", "create", "cfg.yaml", "--test").test is True
    assert parse("e", "create", "cfg.yaml", "--paused").paused is True
    assert parse("e", "create", "cfg.yaml").context is None


@pytest.mark.parametrize("flags", [["-f", "--paused"], ["-f", "--test"], ["--paused", "--test"]])
def test_follow_paused_and_test_are_mutually_exclusive(flags, capsys):
    with pytest.raises(SystemExit) as info:
        parse("e", "create", "cfg.yaml", *flags)
    assert info.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_trial_log_flags():
    args = parse(
        "t", "logs", "7", "-f", "--tail", "5", "--rank-id", "1", "--stdtype", "stderr", "--json"
    )
    assert (
        args.trial_id,
        args.follow,
        args.tail,
        args.head,
        args.rank_id,
        args.stdtype,
        args.json,
    ) == (7, True, 5, None, 1, "stderr", True)
    with pytest.raises(SystemExit):
        parse("t", "logs", "7", "--head", "1", "--tail", "1")


def test_list_aliases_and_wait_interval():
    assert parse("e", "lt", "4").handler is _experiment.list_trials
    assert parse("e", "lc", "4").handler is _experiment.list_checkpoints
    assert parse("e", "wait", "4", "--polling-interval", "0.5").polling_interval == 0.5
    with pytest.raises(SystemExit):
        parse("e", "wait", "4", "--polling-interval", "0")


# ---- rendering ------------------------------------------------------------------------------


def test_table_aligns_columns_and_renders_values():
    table = _render.format_table(
        ["ID", "Name", "HP"], [[1, "a", {"lr": 0.1}], [12, "longer", None]]
    )
    assert table.splitlines() == [
        "ID | Name   | HP",
        "---+--------+------------",
        '1  | a      | {"lr": 0.1}',
        "12 | longer |",
    ]


def test_format_time_is_local_and_handles_empty():
    shown = _render.format_time("2026-11-22T01:02:03.456Z")
    expected = datetime.datetime(
        2026, 11, 22, 1, 2, 3, 456000, tzinfo=datetime.timezone.utc
    ).astimezone()
    assert shown == expected.strftime("%Y-%m-%d %H:%M:%S%z")
    assert _render.format_time(None) == ""
    assert _render.format_time("not a time") == "not a time"


def test_progress_metrics_and_values():
    assert _render.format_progress(0.5) == "50.0%"
    assert _render.format_progress(1.7) == "100.0%"
    assert _render.format_value(1 / 3) == "0.333333"
    assert _render.format_value(True) == "true"
    assert _render.format_metrics({"steps_completed": 10, "metrics": {"loss": 0.25, "acc": 1}}) == (
        "acc=1 loss=0.25 (step 10)"
    )
    assert _render.format_metrics(None) == ""


def test_log_line_format():
    assert _follow.format_log({"time": "T", "rank": 0, "line": "hello\n"}) == "[T] [rank=0] hello"
    assert (
        _follow.format_log({"time": "T", "rank": None, "line": "master says"}) == "[T] master says"
    )


def test_progress_bar_only_moves_forward():
    stream = io.StringIO()
    bar = _render.ProgressBar("Experiment 1", file=stream, enabled=True)
    bar.update(0.5)
    bar.update(0.25)
    bar.update(1.0)
    bar.close()
    assert "100%" in stream.getvalue()
    assert bar._shown == 100.0


# ---- test mode config ------------------------------------------------------------------------


CONFIG = {
    "name": "mnist",
    "entrypoint": "python3 train.py",
    "searcher": {
        "name": "random",
        "metric": "loss",
        "max_trials": 8,
        "max_length": {"batches": 100},
    },
    "hyperparameters": {
        "lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10},
        "layers": {"type": "int", "minval": 1, "maxval": 4},
        "opt": {"type": "categorical", "vals": ["sgd", "adam"]},
        "model": {"dropout": {"type": "double", "minval": 0.1, "maxval": 0.5}, "width": 64},
    },
}


def test_test_mode_config_is_one_batch_single_searcher_with_a_sample():
    test = expconf.test_mode_config(CONFIG, random.Random(0))
    assert test["description"] == "[test-mode] mnist"
    assert test["searcher"] == {
        "name": "single",
        "metric": "loss",
        "smaller_is_better": True,
        "max_length": {"batches": 1},
    }
    assert test["scheduling_unit"] == 1 and test["max_restarts"] == 0
    assert test["min_validation_period"] == {"batches": 1}
    assert {
        test["checkpoint_storage"][k]
        for k in ("save_experiment_best", "save_trial_best", "save_trial_latest")
    } == {0}
    hp = test["hyperparameters"]
    assert all(spec["type"] == "const" for _, spec in expconf.hparam_leaves(hp))
    assert 1e-4 <= hp["lr"]["val"] <= 1e-1
    assert 1 <= hp["layers"]["val"] <= 4 and isinstance(hp["layers"]["val"], int)
    assert hp["opt"]["val"] in ("sgd", "adam")
    assert 0.1 <= hp["model"]["dropout"]["val"] <= 0.5
    assert hp["model"]["width"] == {"type": "const", "val": 64}
    assert expconf.validate(test) == []
    assert CONFIG["searcher"]["name"] == "random"  # the original is not modified


# ---- main(): errors without a master ----------------------------------------------------------


@pytest.fixture
def no_master(monkeypatch, tmp_path):
    for name in (
        "DET_MASTER",
        "DET_MASTER_ADDR",
        "DET_MASTER_TOKEN",
        "DET_SESSION_TOKEN",
        "DET_DEBUG",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MASTER_LITE_ROOT_DIR", str(tmp_path / "empty-root"))
    # No login stored by `det user login` of whoever runs the tests either.
    monkeypatch.setenv("DET_DEBUG_CONFIG_PATH", str(tmp_path / "det-config"))
    return tmp_path


def test_no_master_says_what_was_tried_and_exits_1(no_master, capsys):
    assert main(["e", "list"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert lines[0] == "no master found; looked at:"
    assert "  DET_MASTER: not set" in lines
    assert f"  {no_master / 'empty-root' / 'master.json'}: not found" in lines
    assert lines[-1].startswith("to fix:") and "master-lite" in lines[-1]
    assert "Traceback" not in captured.err


def test_invalid_config_prints_every_error_before_contacting_a_master(no_master, capsys):
    bad = no_master / "bad.yaml"
    bad.write_text(
        "entrypoint: python3 train.py\nsearcher:\n  name: random\n  metric: loss\n"
        "hyperparameters:\n  lr: {type: double, minval: 1, maxval: 0}\n"
    )
    assert main(["e", "create", str(bad), str(no_master)]) == 1
    err = capsys.readouterr().err
    expected = expconf.validate(expconf.load_file(bad))
    assert len(expected) >= 2
    for error in expected:
        assert error in err
    assert "no master found" not in err and "Traceback" not in err


def test_malformed_yaml_names_the_file_and_line(no_master, capsys):
    bad = no_master / "broken.yaml"
    bad.write_text("name: x\nsearcher: [unclosed\n")
    assert main(["e", "create", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "broken.yaml" in err and "line" in err and "Traceback" not in err


def test_local_without_test_is_a_clear_error(no_master, capsys):
    config = no_master / "ok.yaml"
    config.write_text(json.dumps(CONFIG))
    assert main(["e", "create", str(config), "--local"]) == 1
    assert "--local requires --test" in capsys.readouterr().err


def test_unsafe_context_is_reported_before_contacting_a_master(no_master, capsys):
    config = no_master / "ok.yaml"
    config.write_text(json.dumps(CONFIG))
    ctx_dir = no_master / "ctx"
    ctx_dir.mkdir()
    (ctx_dir / "link").symlink_to(config)  # followed, as Determined packs it: not an error
    assert main(["e", "create", str(config), str(ctx_dir), "-i", str(ctx_dir / "nope")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: included path") and "nope does not exist" in err
    assert "no master found" not in err


# ---- main(): API errors from a master ----------------------------------------------------------


class _Answers(BaseHTTPRequestHandler):
    """A stand-in master that answers every request with one canned error."""

    status = 404
    body = {"message": "experiment 7 not found"}

    def do_GET(self):  # noqa: N802
        payload = json.dumps(self.body).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_POST = do_GET  # noqa: N815

    def log_message(self, *args):
        pass


@pytest.fixture
def error_server(no_master):
    def start(status, body):
        handler = type("H", (_Answers,), {"status": status, "body": body})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    servers: list = []
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_api_error_is_one_readable_line(error_server, capsys):
    url = error_server(404, {"message": "experiment 7 not found"})
    assert main(["-m", url, "e", "describe", "7"]) == 1
    assert capsys.readouterr().err.strip() == "Error: experiment 7 not found"


def test_api_error_lists_its_errors(error_server, capsys):
    url = error_server(
        409, {"message": "cannot activate", "errors": ["state: COMPLETED", "hint: create anew"]}
    )
    assert main(["-m", url, "e", "activate", "3"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "Error: cannot activate",
        "  state: COMPLETED",
        "  hint: create anew",
    ]


def test_det_debug_re_raises(error_server, monkeypatch):
    from determined.common import api

    url = error_server(404, {"message": "trial 9 not found"})
    monkeypatch.setenv("DET_DEBUG", "1")
    with pytest.raises(api.NotFound):
        main(["-m", url, "t", "describe", "9"])


def test_preview_search_runs_locally_without_a_master(no_master, capsys):
    config = no_master / "random.yaml"
    config.write_text(json.dumps({**CONFIG, "reproducibility": {"experiment_seed": 3}}))
    assert main(["preview-search", str(config), "--config", "searcher.max_trials=3"]) == 0
    out = capsys.readouterr().out
    assert "random" in out and "Total trials: 3" in out
    # The same seed previews the same hyperparameters.
    assert main(["preview-search", str(config), "--config", "searcher.max_trials=3"]) == 0
    assert capsys.readouterr().out == out


def test_unauthorized_says_where_the_token_comes_from(error_server, capsys):
    url = error_server(401, {"message": "missing or invalid token"})
    assert main(["-m", url, "e", "list"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "Error: missing or invalid token"
    assert "DET_MASTER_TOKEN" in err[1] and len(err) == 2
