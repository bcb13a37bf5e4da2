"""det.pytorch building blocks without a training loop: units, samplers, DataLoader, reducers."""

from __future__ import annotations

import pytest
import torch

from determined import pytorch
from determined.pytorch import _reducer

torch.set_num_threads(1)


def _dataset(n: int) -> torch.utils.data.Dataset:
    return torch.utils.data.TensorDataset(torch.arange(n))


def _batches(loader: torch.utils.data.DataLoader, count: int | None = None) -> list[list[int]]:
    out = []
    for (x,) in loader:
        out.append(x.tolist())
        if count is not None and len(out) == count:
            break
    return out


# --- units ---------------------------------------------------------------------------------------
def test_train_unit_int_period_divides_and_nonpositive_means_every_step():
    assert [n for n in range(1, 13) if pytorch.Batch(4).should_stop(n)] == [4, 8, 12]
    assert all(pytorch.Batch(0).should_stop(n) for n in range(1, 5))
    assert not pytorch.Batch(3).should_stop(0)


def test_train_unit_container_means_exact_steps():
    unit = pytorch.Epoch([2, 5])
    assert [n for n in range(1, 8) if unit.should_stop(n)] == [2, 5]


def test_train_unit_from_config_values():
    assert pytorch.TrainUnit._from_values(batches=7) == pytorch.Batch(7)
    assert pytorch.TrainUnit._from_values(epochs=2) == pytorch.Epoch(2)
    assert pytorch.TrainUnit._from_values(records=100, global_batch_size=32) == pytorch.Batch(3)
    never = pytorch.TrainUnit._from_values(batches=0)  # min_*_period {batches: 0} = never
    assert not any(never.should_stop(n) for n in range(1, 1000))
    with pytest.raises(ValueError, match="global_batch_size"):
        pytorch.TrainUnit._from_values(records=10)


def test_train_unit_rejects_non_numbers():
    with pytest.raises(TypeError):
        pytorch.Batch("10")  # type: ignore[arg-type]


# --- samplers and DataLoader ----------------------------------------------------------------------
def test_data_loader_plain_pass_is_sequential_batches():
    loader = pytorch.DataLoader(_dataset(10), batch_size=4)
    assert len(loader) == 3
    assert _batches(loader.get_data_loader()) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_repeat_continues_past_the_end_of_the_dataset():
    loader = pytorch.DataLoader(_dataset(6), batch_size=4, drop_last=True)
    assert _batches(loader.get_data_loader(repeat=True), 3) == [
        [0, 1, 2, 3],
        [0, 1, 2, 3],
        [0, 1, 2, 3],
    ]


def test_sharding_gives_each_rank_every_nth_batch():
    loader = pytorch.DataLoader(_dataset(10), batch_size=2)  # 5 batches
    rank0 = loader.get_data_loader(num_replicas=2, rank=0)
    rank1 = loader.get_data_loader(num_replicas=2, rank=1)
    assert _batches(rank0) == [[0, 1], [4, 5], [8, 9]]
    assert _batches(rank1) == [[2, 3], [6, 7]]
    assert (len(rank0.batch_sampler), len(rank1.batch_sampler)) == (3, 2)


def test_skip_applies_after_sharding_and_repeat():
    loader = pytorch.DataLoader(_dataset(8), batch_size=2)  # 4 batches per pass
    # rank 1 of 2 sees global batches 1, 3, 1, 3, ...; skipping 3 of its own batches lands on batch 3.
    stream = loader.get_data_loader(repeat=True, skip=3, num_replicas=2, rank=1)
    assert _batches(stream, 3) == [[6, 7], [2, 3], [6, 7]]


def test_skip_lands_on_the_same_batch_as_an_uninterrupted_shuffled_stream():
    torch.manual_seed(0)
    loader = pytorch.DataLoader(_dataset(20), batch_size=3, shuffle=True)
    full = _batches(loader.get_data_loader(repeat=True), 17)
    resumed = _batches(loader.get_data_loader(repeat=True, skip=11), 6)
    assert resumed == full[11:]
    # Each pass is a new permutation (the first two passes of 6 full batches differ).
    assert full[:6] != full[7:13]


def test_shuffle_seed_comes_from_the_torch_rng_at_construction():
    torch.manual_seed(5)
    a = _batches(pytorch.DataLoader(_dataset(30), batch_size=5, shuffle=True).get_data_loader())
    torch.manual_seed(5)
    b = _batches(pytorch.DataLoader(_dataset(30), batch_size=5, shuffle=True).get_data_loader())
    assert a == b
    assert sorted(sum(a, [])) == list(range(30))


def test_iterable_dataset_is_rejected():
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(ValueError, match="IterableDataset"):
        pytorch.DataLoader(Stream(), batch_size=2)


def test_conflicting_sampler_arguments_are_rejected():
    with pytest.raises(ValueError, match="sampler"):
        pytorch.DataLoader(
            _dataset(4), sampler=torch.utils.data.SequentialSampler(range(4)), shuffle=True
        )


def test_data_length_and_to_device():
    batch = {"x": torch.zeros(5, 3), "y": [torch.ones(5)]}
    assert pytorch.data_length(batch) == 5
    assert pytorch.data_length((torch.zeros(2), torch.zeros(2))) == 2
    moved = pytorch.to_device(batch, torch.device("cpu"))
    assert moved["x"].device.type == "cpu" and isinstance(moved["y"], list)


# --- reducers -----------------------------------------------------------------------------------
def test_builtin_reducers_values():
    assert pytorch.Reducer.AVG.value == 1 and pytorch.Reducer.SUM.value == 2
    assert pytorch.Reducer.MAX.value == 3 and pytorch.Reducer.MIN.value == 4
    batches = [{"a": 1.0, "b": torch.tensor(4.0)}, {"a": 3.0, "b": torch.tensor(-2.0)}]
    reducers = {"a": pytorch.Reducer.SUM, "b": pytorch.Reducer.MIN}
    assert _reducer.per_slot_reduce(batches, reducers) == {"a": 4.0, "b": -2.0}
    assert _reducer.per_slot_reduce(batches, pytorch.Reducer.MAX) == {"a": 3.0, "b": 4.0}


def test_cross_slot_average_is_weighted_by_batches():
    per_slot = [{"loss": 1.0}, {"loss": 4.0}]
    assert _reducer.cross_slot_reduce(per_slot, [3, 1], pytorch.Reducer.AVG) == {
        "loss": pytest.approx(1.75)
    }


def test_reducer_dict_missing_a_metric_names_it():
    with pytest.raises(ValueError, match="'b'"):
        _reducer.per_slot_reduce([{"a": 1, "b": 2}], {"a": pytorch.Reducer.SUM})
