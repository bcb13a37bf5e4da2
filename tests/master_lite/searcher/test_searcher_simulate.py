"""simulate(), format_preview(), progress and snapshot/restore equivalence."""

import json
import re
from collections import deque

import pytest

from master_lite.searcher import (
    Close,
    ExitedReason,
    Shutdown,
    Stop,
    ValidateAfter,
    format_preview,
    make_searcher,
    restore_searcher,
    simulate,
)


def halving(stop_once):
    return {
        "searcher": {
            "name": "async_halving",
            "metric": "loss",
            "num_rungs": 2,
            "divisor": 2,
            "max_trials": 4,
            "max_concurrent_trials": 2,
            "max_length": {"batches": 8},
            "stop_once": stop_once,
        },
        "hyperparameters": {"a": {"type": "int", "minval": 1, "maxval": 8}},
        "reproducibility": {"experiment_seed": 5},
    }


def by_request_id(request_id, hparams, length):
    return float(request_id)  # trial 1 is the best


def test_simulate_promotion_asha_hand_worked():
    sim = simulate(halving(False), metric=by_request_id)
    assert [(t.request_id, t.lengths, t.state) for t in sim.trials] == [
        (1, [4, 8], "closed"),
        (2, [4, 8], "closed"),
        (3, [4], "closed"),
        (4, [4], "closed"),
    ]
    assert sim.total_length == 24
    assert [(r.length, r.trials) for r in sim.brackets[0].rungs] == [(4, 4), (8, 2)]
    assert sim.shutdown == Shutdown()


def test_simulate_stop_once_hand_worked():
    sim = simulate(halving(True), metric=by_request_id)
    assert [(t.request_id, t.lengths) for t in sim.trials] == [
        (1, [4, 8]),
        (2, [4]),
        (3, [4]),
        (4, [4]),
    ]
    assert sim.total_length == 20
    assert [(r.length, r.trials) for r in sim.brackets[0].rungs] == [(4, 4), (8, 1)]


def stage3(**changes):
    searcher = {
        "name": "adaptive_asha",
        "metric": "x",
        "max_trials": 10,
        "time_metric": "batches",
        "max_time": 100,
    }
    searcher.update(changes)
    return {
        "searcher": searcher,
        "hyperparameters": {"increment_by": {"type": "int", "minval": 1, "maxval": 8}},
        "reproducibility": {"experiment_seed": 3},
    }


def test_simulate_time_driven_worked_example():
    sim = simulate(stage3(), metric=lambda rid, hp, length: hp["increment_by"] * length)
    assert len(sim.trials) == 10 and sim.shutdown == Shutdown()
    a, b = sim.brackets
    assert [(r.length, r.trials) for r in b.rungs] == [(100, 3)]
    assert a.rungs[0].trials == 7 and 1 <= a.rungs[1].trials <= 7
    assert sim.total_length == sum(t.trained for t in sim.trials)
    assert all(t.state == "stopped" for t in sim.trials)  # losers and top-rung finishers alike
    # The first trial to reach 25 is always kept; the rest only if they rank in the top ⌊n/4⌋.
    assert sim.trials[0].trained == 100


def test_simulation_is_deterministic_and_seeded():
    assert simulate(stage3()) == simulate(stage3())
    other = stage3()
    other["reproducibility"]["experiment_seed"] = 4
    assert [t.hparams for t in simulate(other).trials] != [
        t.hparams for t in simulate(stage3()).trials
    ]


def test_preview_for_adaptive_asha():
    text = format_preview(stage3())
    assert text == format_preview(stage3())
    assert "Bracket 1" in text and "Bracket 2" in text
    assert "25 batches" in text and "100 batches" in text
    assert "Total trials: 10" in text
    total = simulate(stage3()).total_length
    assert f"Total training length: {total} batches" in text
    assert "increment_by" in text


def test_preview_for_random():
    cfg = {
        "searcher": {"name": "random", "metric": "x", "max_trials": 4, "max_length": {"epochs": 2}},
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 0.2}},
    }
    text = format_preview(cfg)
    assert "Trials | Training length" in text
    assert re.search(r"^ +4 \| +2 epochs$", text, re.M)
    assert "Total trials: 4" in text and "Total training length: 8 epochs" in text


def test_asha_progress():
    cfg = stage3()
    cfg["searcher"] = {"name": "adaptive_asha", "metric": "x", "max_trials": 10, "max_length": 100}
    s = make_searcher(cfg)
    s.initial_operations()
    assert s.progress({}) == 0.0
    for rid in range(1, 8):  # bracket A: all 7 report at rung 0
        s.on_validation_completed(rid, float(rid), 25)
    # Bracket A: 7 / (1.2 * 7) with the 6 losers closed -> max(0.833, 6/7); bracket B: 0.
    assert s.progress({}) == pytest.approx((6 / 7 + 0.0) / 2)


# -- snapshot / restore -----------------------------------------------------------------------------


def drive(config, restore_at=None, exits=None):
    """Run a searcher with a fixed FIFO policy and optional early exits; return the op trace.

    At step ``restore_at`` the searcher is replaced by one restored from a JSON round trip of its
    snapshot. ``exits`` maps request id -> ExitedReason, applied instead of its first result."""
    exits = dict(exits or {})
    time_driven = "time_metric" in config["searcher"]
    s = make_searcher(config)
    trace, work, closing = [], deque(), deque()
    done = False

    def absorb(ops):
        nonlocal done
        for op in ops:
            trace.append(repr(op))
            if isinstance(op, ValidateAfter):
                points = [op.length // 3, op.length] if time_driven else [op.length]
                work.extend((op.request_id, p, p == op.length) for p in points)
            elif isinstance(op, (Close, Stop)):
                closing.append(op.request_id)
            elif isinstance(op, Shutdown):
                done = True

    absorb(s.initial_operations())
    step = 0
    while not done:
        if step == restore_at:
            snapshot = json.loads(json.dumps(s.snapshot(), allow_nan=False))
            s = restore_searcher(config, snapshot)
        step += 1
        if closing:
            rid = closing.popleft()
            for item in [w for w in work if w[0] == rid]:
                work.remove(item)
            absorb(s.on_trial_closed(rid))
        elif work:
            rid, length, final = work.popleft()
            if rid in exits:
                for item in [w for w in work if w[0] == rid]:
                    work.remove(item)
                absorb(s.on_trial_exited_early(rid, exits.pop(rid)))
                continue
            metric = ((rid * 7919 + length) % 13) / 13
            ops = s.on_validation_reported(rid, {"loss": metric, "batches": length})
            if final:
                ops += s.on_validation_completed(rid, metric, length)
            absorb(ops)
        else:
            raise AssertionError(f"stalled after {trace[-5:]}")
    return trace, step


SNAPSHOT_CONFIGS = {
    "random": {"name": "random", "max_trials": 6, "max_concurrent_trials": 2, "max_length": 10},
    "grid": {"name": "grid", "max_concurrent_trials": 2, "max_length": 10},
    "promotion": {
        "name": "adaptive_asha",
        "max_trials": 12,
        "max_length": 64,
        "divisor": 2,
        "max_concurrent_trials": 3,
    },
    "stop_once": {
        "name": "adaptive_asha",
        "max_trials": 12,
        "max_length": 64,
        "divisor": 2,
        "stop_once": True,
        "max_concurrent_trials": 3,
    },
    "time_driven": {
        "name": "adaptive_asha",
        "max_trials": 12,
        "time_metric": "batches",
        "max_time": 64,
        "divisor": 2,
        "max_concurrent_trials": 3,
    },
}


@pytest.mark.parametrize("kind", sorted(SNAPSHOT_CONFIGS))
def test_snapshot_restore_at_every_step_gives_the_same_future(kind):
    config = {
        "searcher": {"metric": "loss", **SNAPSHOT_CONFIGS[kind]},
        "hyperparameters": {
            "a": {"type": "int", "minval": 1, "maxval": 3, "count": 3},
            "b": {"type": "log", "minval": -2, "maxval": 0, "count": 2},
        },
        "reproducibility": {"experiment_seed": 9},
    }
    exits = {3: ExitedReason.INVALID_HP, 5: ExitedReason.ERRORED}
    reference, steps = drive(config, exits=exits)
    assert reference[-1] == repr(Shutdown())
    assert steps > 5
    for restore_at in range(steps):
        assert drive(config, restore_at=restore_at, exits=exits)[0] == reference, restore_at


def test_restore_rejects_a_snapshot_of_another_searcher():
    random_cfg = {"searcher": {"name": "random", "max_trials": 2, "max_length": 1}}
    grid_cfg = {"searcher": {"name": "grid", "max_length": 1}}
    with pytest.raises(ValueError, match="snapshot"):
        restore_searcher(grid_cfg, make_searcher(random_cfg).snapshot())


def test_operations_round_trip_through_json():
    from master_lite.searcher import Create, operation_from_json, operation_to_json

    ops = [
        Create(1, {"a": {"b": 2}}, 7, "uuid"),
        ValidateAfter(1, 100),
        Close(1),
        Stop(2),
        Shutdown(failure=True, reason="why"),
    ]
    assert [operation_from_json(json.loads(json.dumps(operation_to_json(op)))) for op in ops] == ops
    with pytest.raises(ValueError, match="Train"):
        operation_from_json({"type": "Train", "request_id": 1})


def test_simulate_random_with_default_metric():
    cfg = {
        "searcher": {
            "name": "random",
            "metric": "x",
            "max_trials": 5,
            "max_concurrent_trials": 2,
            "max_length": {"batches": 30},
        },
        "hyperparameters": {"lr": {"type": "double", "minval": 0.1, "maxval": 0.2}},
        "reproducibility": {"experiment_seed": 8},
    }
    sim = simulate(cfg)
    assert [t.request_id for t in sim.trials] == [1, 2, 3, 4, 5]
    assert all(t.lengths == [30] and t.state == "closed" for t in sim.trials)
    assert sim.total_length == 150 and sim.unit == "batches"
