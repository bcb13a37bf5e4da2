"""Async halving, hand-worked: promotions (≤0.37 default), stop_once, and the 0.38 time-driven form."""

import pytest

from master_lite.searcher import (
    WORST_METRIC,
    Close,
    Create,
    ExitedReason,
    Shutdown,
    Stop,
    ValidateAfter,
    make_searcher,
    rung_lengths,
)


def asha_config(stop_once=False, smaller_is_better=True, concurrency=2, max_trials=4):
    return {
        "searcher": {
            "name": "async_halving",
            "metric": "loss",
            "num_rungs": 2,
            "divisor": 2,
            "max_trials": max_trials,
            "max_concurrent_trials": concurrency,
            "max_length": {"batches": 8},
            "stop_once": stop_once,
            "smaller_is_better": smaller_is_better,
        },
        "hyperparameters": {"a": {"type": "int", "minval": 1, "maxval": 8}},
        "reproducibility": {"experiment_seed": 1},
    }


def kinds(ops):
    return [
        (type(op).__name__, op.request_id, getattr(op, "length", None))
        for op in ops
        if not isinstance(op, Shutdown)
    ]


def test_rung_lengths():
    assert rung_lengths(100, 4, 3) == [6, 25, 100]
    assert rung_lengths(100, 4, 2) == [25, 100]
    assert rung_lengths(8, 2, 2) == [4, 8]
    assert rung_lengths(3, 4, 3) == [1, 1, 3]  # never below 1


@pytest.mark.parametrize("smaller_is_better", [True, False])
def test_promotion_sequence_including_reactivation(smaller_is_better):
    sign = 1 if smaller_is_better else -1  # bigger-is-better metrics mirror the smaller ones
    s = make_searcher(asha_config(smaller_is_better=smaller_is_better))
    assert kinds(s.initial_operations()) == [
        ("Create", 1, None),
        ("ValidateAfter", 1, 4),
        ("Create", 2, None),
        ("ValidateAfter", 2, 4),
    ]
    # k=1: ⌊1/2⌋ = 0 promotions -> a new trial instead.
    assert kinds(s.on_validation_completed(1, sign * 1.0, 4)) == [
        ("Create", 3, None),
        ("ValidateAfter", 3, 4),
    ]
    # k=2: ⌊2/2⌋ = 1; trial 2 (5.0) ranks 2nd, so the best waiting entry — trial 1, whose op finished
    # long ago — is promoted: it is re-activated with a new op.
    assert kinds(s.on_validation_completed(2, sign * 5.0, 4)) == [("ValidateAfter", 1, 8)]
    # k=3: still 1 promotion, trial 3 ranks 2nd -> nothing to promote, create the last trial.
    assert kinds(s.on_validation_completed(3, sign * 3.0, 4)) == [
        ("Create", 4, None),
        ("ValidateAfter", 4, 4),
    ]
    # k=4: ⌊4/2⌋ = 2 and trial 4 ranks 2nd -> promoted at once. Rung 0 is full and settled, so its
    # losers (3 then 2, best first) are closed.
    assert kinds(s.on_validation_completed(4, sign * 2.0, 4)) == [
        ("ValidateAfter", 4, 8),
        ("Close", 3, None),
        ("Close", 2, None),
    ]
    assert s.on_trial_closed(3) == [] and s.on_trial_closed(2) == []
    assert s.on_validation_completed(1, sign * 0.5, 8) == [Close(1)]  # top rung: done
    assert s.on_trial_closed(1) == []
    assert s.on_validation_completed(4, sign * 0.7, 8) == [Close(4)]
    assert s.on_trial_closed(4) == [Shutdown()]


def test_promotion_ties_go_to_the_earlier_result():
    s = make_searcher(asha_config())
    s.initial_operations()
    s.on_validation_completed(1, 2.0, 4)
    assert s.on_validation_completed(2, 2.0, 4) == [ValidateAfter(1, 8)]


def test_promotion_with_errored_trial_is_treated_as_worst():
    s = make_searcher(asha_config())
    s.initial_operations()
    # Trial 1 finishes rung 0 first, then fails while waiting; trial 2 fails while training.
    assert kinds(s.on_validation_completed(1, 1.0, 4)) == [
        ("Create", 3, None),
        ("ValidateAfter", 3, 4),
    ]
    assert s.on_trial_exited_early(1, ExitedReason.ERRORED) == []
    # Trial 2 is recorded with the worst value: k=2 promotes the best entry, trial 1, which is gone,
    # so it "reports" the worst value at the top rung at once; no work was added -> a new trial.
    ops = s.on_trial_exited_early(2, ExitedReason.ERRORED)
    assert kinds(ops) == [("Create", 4, None), ("ValidateAfter", 4, 4)]
    assert s.on_validation_completed(3, 3.0, 4) == []
    assert kinds(s.on_validation_completed(4, 2.0, 4)) == [
        ("ValidateAfter", 4, 8),
        ("Close", 3, None),
    ]
    s.on_trial_closed(3)
    assert s.on_validation_completed(4, 1.0, 8) == [Close(4)]
    assert s.on_trial_closed(4) == [Shutdown()]


def test_promotion_invalid_hp_is_replaced_and_forgotten():
    s = make_searcher(asha_config(max_trials=2))
    s.initial_operations()
    s.on_validation_completed(1, 1.0, 4)  # k=1: no promotion, budget full (2 created)
    ops = s.on_trial_exited_early(1, ExitedReason.INVALID_HP)
    assert kinds(ops) == [("Create", 3, None), ("ValidateAfter", 3, 4)]
    assert s.on_validation_completed(2, 5.0, 4) == []  # rung 0 holds only trial 2 now
    assert kinds(s.on_validation_completed(3, 4.0, 4)) == [
        ("ValidateAfter", 3, 8),
        ("Close", 2, None),
    ]


@pytest.mark.parametrize("smaller_is_better", [True, False])
def test_stop_once_sequence(smaller_is_better):
    sign = 1 if smaller_is_better else -1
    s = make_searcher(asha_config(stop_once=True, smaller_is_better=smaller_is_better))
    s.initial_operations()
    # k=1: keep max(1, 0) = 1, position 0 -> continue.
    assert s.on_validation_completed(1, sign * 3.0, 4) == [ValidateAfter(1, 8)]
    # k=2: keep 1, position 1 -> closed, and a new trial takes its slot.
    assert kinds(s.on_validation_completed(2, sign * 5.0, 4)) == [
        ("Close", 2, None),
        ("Create", 3, None),
        ("ValidateAfter", 3, 4),
    ]
    # k=3: a tie with trial 1's 3.0 goes to the newcomer (inserted before equals) -> continue.
    assert s.on_validation_completed(3, sign * 3.0, 4) == [ValidateAfter(3, 8)]
    # Top rung: done, and the freed slot gets the 4th trial.
    assert kinds(s.on_validation_completed(1, sign * 2.0, 8)) == [
        ("Close", 1, None),
        ("Create", 4, None),
        ("ValidateAfter", 4, 4),
    ]
    s.on_trial_closed(2)
    s.on_trial_closed(1)
    # k=4: keep ⌊4/2⌋ = 2, position 3 -> closed; the budget is spent.
    assert s.on_validation_completed(4, sign * 10.0, 4) == [Close(4)]
    assert s.on_trial_closed(4) == []
    assert s.on_validation_completed(3, sign * 1.0, 8) == [Close(3)]
    assert s.on_trial_closed(3) == [Shutdown()]


def test_stop_once_early_exits():
    s = make_searcher(asha_config(stop_once=True, max_trials=3))
    s.initial_operations()
    ops = s.on_trial_exited_early(1, ExitedReason.INVALID_HP)
    assert kinds(ops) == [("Create", 3, None), ("ValidateAfter", 3, 4)]  # replaced, not counted
    # An error records the worst value at rung 0 and frees a slot for the third valid trial.
    assert kinds(s.on_trial_exited_early(2, ExitedReason.ERRORED)) == [
        ("Create", 4, None),
        ("ValidateAfter", 4, 4),
    ]
    # Trial 3 beats the recorded worst value of trial 2: k=2, keep 1, position 0 -> continue.
    assert s.on_validation_completed(3, 1.0, 4) == [ValidateAfter(3, 8)]


def worked_example(**changes):
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
        "reproducibility": {"experiment_seed": 42},
    }


def test_time_driven_rungs_stops_and_replacement():
    s = make_searcher(worked_example())
    ops = s.initial_operations()
    creates = [op for op in ops if isinstance(op, Create)]
    assert [c.request_id for c in creates] == list(range(1, 11))  # concurrency [8, 8] >= [7, 3]
    assert s.bracket_of(7) == 0 and s.bracket_of(8) == 1
    # Without max_length, the (unused) op is the whole max_time.
    assert ValidateAfter(1, 100) in ops
    assert s.on_validation_reported(1, {"x": 5.0, "batches": 10}) == []  # below the 25 rung
    assert (
        s.on_validation_reported(1, {"x": 5.0, "batches": 30}) == []
    )  # first in rung 0: kept (n=1)
    assert s.on_validation_reported(2, {"x": 9.0, "batches": 30}) == [
        Stop(2)
    ]  # n=2, keep 1, ranks 2nd
    assert (
        s.on_validation_reported(2, {"x": 1.0, "batches": 40}) == []
    )  # stopped trials are ignored
    assert s.on_validation_reported(3, {"x": 1.0, "batches": 30}) == []  # best so far
    assert s.on_validation_reported(1, {"x": 4.0, "batches": 100}) == [Stop(1)]  # top rung: done
    # Bracket B (one rung at 100): one report passes it.
    assert s.on_validation_reported(8, {"x": 1.0, "batches": 100}) == [Stop(8)]


def test_time_driven_passes_rungs_in_one_report_and_replaces_stopped_trials():
    s = make_searcher(
        worked_example(mode="aggressive", max_trials=16, divisor=2, max_concurrent_trials=1)
    )
    s.initial_operations()
    # min(max_rungs 5, ⌊log2 100⌋+1 = 7, ⌊log2 16⌋+1 = 5) = 5 rungs: 100/2^4 ... 100
    assert s.engines[0].rung_targets == [6, 12, 25, 50, 100]
    ops = s.on_validation_reported(1, {"x": 1.0, "batches": 60})
    assert ops == []  # passed 6, 12, 25 and 50 alone (n=1 each); waits for 100
    ops = s.on_validation_reported(1, {"x": 1.0, "batches": 100})
    assert kinds(ops) == [("Stop", 1, None), ("Create", 2, None), ("ValidateAfter", 2, 100)]


def test_time_driven_bigger_is_better():
    s = make_searcher(worked_example(smaller_is_better=False))
    s.initial_operations()
    assert s.on_validation_reported(1, {"x": 5.0, "batches": 25}) == []
    assert s.on_validation_reported(2, {"x": 9.0, "batches": 25}) == []  # bigger wins: ranks first
    assert s.on_validation_reported(3, {"x": 1.0, "batches": 25}) == [Stop(3)]


def test_time_driven_missing_keys_fail_the_search():
    s = make_searcher(worked_example())
    s.initial_operations()
    ops = s.on_validation_reported(1, {"x": 1.0})
    assert len(ops) == 1 and isinstance(ops[0], Shutdown) and ops[0].failure
    assert "batches" in ops[0].reason
    assert s.on_validation_reported(2, {"x": 1.0, "batches": 30}) == []  # nothing after a Shutdown


def test_time_driven_errors_record_worst_value():
    s = make_searcher(worked_example())
    s.initial_operations()
    assert s.on_trial_exited_early(1, ExitedReason.ERRORED) == []  # bracket A's 7 trials all exist
    assert s.engines[0].state()["rung_results"][0] == [[1, WORST_METRIC]]
    assert s.on_validation_reported(2, {"x": 50.0, "batches": 25}) == []  # beats the worst value
    ops = s.on_trial_exited_early(3, ExitedReason.INVALID_HP)
    assert kinds(ops) == [("Create", 11, None), ("ValidateAfter", 11, 100)]
    assert s.bracket_of(11) == 0


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="searcher.max_trials"):
        make_searcher({"searcher": {"name": "adaptive_asha", "metric": "x", "max_length": 10}})
    with pytest.raises(ValueError, match="time_metric"):
        make_searcher({"searcher": {"name": "adaptive_asha", "metric": "x", "max_trials": 3}})
    with pytest.raises(ValueError, match="searcher.divisor"):
        make_searcher(worked_example(divisor=1))
    with pytest.raises(ValueError, match="searcher.mode"):
        make_searcher(worked_example(mode="wild"))
    with pytest.raises(ValueError, match="legacy"):
        make_searcher({"searcher": {"name": "sync_halving"}})


def test_promotion_reactivates_a_trial_whose_process_exited():
    s = make_searcher(asha_config())
    s.initial_operations()
    s.on_validation_completed(1, 1.0, 4)  # best so far, waiting for a promotion
    assert s.on_trial_closed(1) == []  # its process exited normally while it waited
    # k=2 promotes trial 1: it gets a new op (the master resumes it from its checkpoint).
    assert s.on_validation_completed(2, 5.0, 4) == [ValidateAfter(1, 8)]
    assert kinds(s.on_validation_completed(1, 0.5, 8)) == [
        ("Close", 1, None),
        ("Create", 4, None),
        ("ValidateAfter", 4, 4),
    ]


def test_promotion_never_reactivates_a_killed_trial():
    s = make_searcher(asha_config())
    s.initial_operations()
    s.on_validation_completed(1, 1.0, 4)
    assert s.on_trial_exited_early(1, ExitedReason.USER_CANCELED) == []
    # k=2 would promote trial 1; being gone, it reports the worst value at the top rung instead.
    ops = s.on_validation_completed(2, 5.0, 4)
    assert ValidateAfter(1, 8) not in ops
    assert kinds(ops) == [("Create", 4, None), ("ValidateAfter", 4, 4)]


def test_trial_that_exits_without_finishing_its_op_counts_as_failed():
    s = make_searcher(asha_config())
    s.initial_operations()
    assert kinds(s.on_trial_closed(1)) == [("Create", 3, None), ("ValidateAfter", 3, 4)]
    assert s.engines[0].state()["rung_results"][0] == [[1, WORST_METRIC, False]]


def test_source_checkpoint_warm_starts_every_trial():
    config = asha_config()
    config["searcher"]["source_checkpoint_uuid"] = "abc-123"
    creates = [op for op in make_searcher(config).initial_operations() if isinstance(op, Create)]
    assert [c.checkpoint for c in creates] == ["abc-123", "abc-123"]


def test_nan_or_missing_metric_ranks_worst():
    s = make_searcher(asha_config(stop_once=True))
    s.initial_operations()
    assert s.on_validation_completed(1, 3.0, 4) == [ValidateAfter(1, 8)]
    assert kinds(s.on_validation_completed(2, float("nan"), 4))[0] == ("Close", 2, None)


@pytest.mark.parametrize("diverged", [float("-inf"), float("inf"), float("nan")])
def test_infinite_metric_ranks_worst_even_when_it_would_be_smallest(diverged: float):
    # smaller_is_better: -Infinity of a diverged loss must not promote (issue 26, row 3).
    s = make_searcher(asha_config(stop_once=True))
    s.initial_operations()
    assert s.on_validation_completed(1, 3.0, 4) == [ValidateAfter(1, 8)]
    assert kinds(s.on_validation_completed(2, diverged, 4))[0] == ("Close", 2, None)


def test_time_driven_with_max_length_gives_that_op_and_closes_finishers():
    s = make_searcher(worked_example(max_length={"batches": 120}))
    ops = s.initial_operations()
    assert ops[1] == ValidateAfter(1, 120)
    assert s.engines[0].rung_targets == [25, 100]  # rungs still come from max_time
    # A trial that trains its whole op without a decision (it never reported `batches`) is done.
    assert s.on_validation_reported(1, {"x": 1.0, "batches": 10}) == []
    assert s.on_validation_completed(1, 1.0, 120) == [Close(1)]
    # Reports come before the op's completion: reaching the top rung stops it, then nothing more.
    assert s.on_validation_reported(9, {"x": 1.0, "batches": 120}) == [
        Stop(9)
    ]  # bracket 2's only rung
    assert s.on_validation_completed(9, 1.0, 120) == []
