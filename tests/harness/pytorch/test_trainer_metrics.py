"""Training metrics returned as tensors are read once per report, with the same values as before.

`train_batch` may return tensors (floats, ints, non-scalars) and plain numbers; the Trainer keeps
the tensors until a report boundary and reads each metric with one stacked transfer. Callbacks
and reports must still see plain Python numbers (lists for non-scalars), and the reported
averages must be the averages of the per-batch values.
"""

from __future__ import annotations

import pytest
import torch

from determined import core, pytorch
from determined.pytorch._trial_metrics import metric_values as _metric_values

torch.set_num_threads(1)


def test_metric_values_reads_tensors_as_python_numbers_and_keeps_the_rest():
    batches = [
        {
            "loss": torch.tensor(0.5),
            "count": torch.tensor(3),
            "vec": torch.tensor([1.0, 2.0]),
            "lr": 0.1,
        },
        {
            "loss": torch.tensor(1.5),
            "count": torch.tensor(5),
            "vec": torch.tensor([3.0, 4.0]),
            "lr": 0.2,
        },
        {"loss": torch.tensor(2.0)},  # a metric missing from a batch stays missing
    ]
    read = _metric_values(batches)
    assert read == [
        {"loss": 0.5, "count": 3, "vec": [1.0, 2.0], "lr": 0.1},
        {"loss": 1.5, "count": 5, "vec": [3.0, 4.0], "lr": 0.2},
        {"loss": 2.0},
    ]
    assert type(read[0]["count"]) is int and type(read[0]["loss"]) is float
    plain = [{"loss": 1.0}]
    assert _metric_values(plain) is plain


def test_metric_values_reads_mixed_shapes_dtypes_and_gaps_correctly():
    # One-element tensors of either rank are read together; mixed ranks, dtypes, numbers and
    # batches without the metric are read one by one, each value where it was.
    assert _metric_values([{"a": torch.tensor([1.5])}, {"a": torch.tensor([2.5])}]) == [
        {"a": 1.5},
        {"a": 2.5},
    ]
    mixed_rank = [
        {"a": torch.tensor(1.0)},
        {"a": torch.tensor([2.0])},
        {"a": torch.tensor([[3.0]])},
    ]
    assert _metric_values(mixed_rank) == [{"a": 1.0}, {"a": 2.0}, {"a": 3.0}]
    mixed_dtype = _metric_values([{"a": torch.tensor(1)}, {"a": torch.tensor(2.5)}, {"a": 4}])
    assert mixed_dtype == [{"a": 1}, {"a": 2.5}, {"a": 4}] and type(mixed_dtype[0]["a"]) is int
    gaps = _metric_values([{"a": torch.tensor(1.0)}, {}, {"a": torch.tensor(3.0)}])
    assert gaps == [{"a": 1.0}, {}, {"a": 3.0}]
    two_elements = _metric_values([{"a": torch.tensor([1.0, 2.0])}, {"a": torch.tensor([3.0])}])
    assert two_elements == [{"a": [1.0, 2.0]}, {"a": 3.0}]


class _Recording(core.DummyTrainContext):
    def __init__(self) -> None:
        self.training: list[tuple[int, dict]] = []

    def report_training_metrics(self, steps_completed, metrics, batch_metrics=None):
        self.training.append((steps_completed, dict(metrics)))


class _Workloads(pytorch.PyTorchCallback):
    def __init__(self) -> None:
        self.batch_metrics: list[list[dict]] = []

    def on_training_workload_end(self, avg_metrics, batch_metrics):
        self.batch_metrics.append(batch_metrics)


class _CountingTrial(pytorch.PyTorchTrial):
    """Its metrics are functions of the batch index, so the expected averages are known."""

    def __init__(self, context):
        self.context = context
        self.model = context.wrap_model(torch.nn.Linear(2, 1))
        self.optimizer = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.01))
        self.workloads = _Workloads()

    def build_callbacks(self):
        return {"workloads": self.workloads}

    def build_training_data_loader(self):
        return pytorch.DataLoader(
            torch.utils.data.TensorDataset(torch.ones(8, 2), torch.ones(8, 1)), batch_size=2
        )

    def build_validation_data_loader(self):
        return pytorch.DataLoader(
            torch.utils.data.TensorDataset(torch.ones(4, 2), torch.ones(4, 1)), batch_size=2
        )

    def train_batch(self, batch, epoch_idx, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        self.context.backward(loss)
        self.context.step_optimizer(self.optimizer)
        return {
            "loss": loss,
            "index": torch.tensor(float(batch_idx)),
            "index_int": torch.tensor(batch_idx),
            "plain": batch_idx * 2,
        }

    def evaluate_batch(self, batch, batch_idx):
        x, y = batch
        return {"validation_loss": torch.nn.functional.mse_loss(self.model(x), y)}


def test_trainer_reports_averages_of_tensor_metrics_and_callbacks_get_numbers(tmp_path):
    exp_conf = {
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp_path)},
        "searcher": {"name": "single", "metric": "validation_loss"},
    }
    with pytorch.init(hparams={"global_batch_size": 2}, exp_conf=exp_conf) as context:
        recording = _Recording()
        context._core.train = recording
        trial = _CountingTrial(context)
        pytorch.Trainer(trial, context).fit(
            max_length=pytorch.Batch(8), reporting_period=pytorch.Batch(4), checkpoint_policy="none"
        )
    assert [steps for steps, _ in recording.training] == [4, 8]
    assert [m["index"] for _, m in recording.training] == [pytest.approx(1.5), pytest.approx(5.5)]
    assert [m["index_int"] for _, m in recording.training] == [
        pytest.approx(1.5),
        pytest.approx(5.5),
    ]
    assert [m["plain"] for _, m in recording.training] == [pytest.approx(3.0), pytest.approx(11.0)]
    first = trial.workloads.batch_metrics[0]
    assert [m["index_int"] for m in first] == [0, 1, 2, 3]
    assert all(type(m["loss"]) is float for m in first)
