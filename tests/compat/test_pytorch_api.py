"""`determined.pytorch` has every public name of Determined 0.38 (and the older ones 0.13-0.26
examples import), each behaving as Determined documents it."""

from __future__ import annotations

import inspect
import typing

import pytest
import torch

from determined import core, pytorch
from determined.pytorch import samplers

# Determined 0.38's public names (from its determined/pytorch/__init__.py), and older ones.
DETERMINED_0_38 = {
    "samplers", "DataLoader", "TorchData", "adapt_batch_sampler", "data_length", "to_device",
    "PyTorchCallback", "LRScheduler", "MetricReducer", "Reducer", "Batch", "Epoch", "TrainUnit",
    "PyTorchExperimentalContext", "PyTorchTrialContext", "PyTorchTrial", "CheckpointLoadContext",
    "load_trial_from_checkpoint_path", "init", "Trainer",
}  # fmt: skip
OLDER = {
    "DistributedBatchSampler", "RepeatBatchSampler", "SkipBatchSampler", "ClipGradsL2Norm",
    "ClipGradsL2Value", "reset_parameters",
}  # fmt: skip
SAMPLERS = {
    "RepeatSampler", "RepeatBatchSampler", "DistributedSampler", "DistributedBatchSampler",
    "SkipSampler", "SkipBatchSampler", "ReproducibleShuffleSampler",
    "ReproducibleShuffleBatchSampler",
}  # fmt: skip


def test_every_public_name_is_there_with_a_docstring():
    assert DETERMINED_0_38 | OLDER <= set(pytorch.__all__)
    assert set(samplers.__all__) == SAMPLERS
    for name in set(pytorch.__all__) - {"TorchData"}:
        assert inspect.getdoc(getattr(pytorch, name)), name
    for name in SAMPLERS:
        assert inspect.getdoc(getattr(samplers, name)), name
    # `from determined.pytorch import samplers` and `det.pytorch.samplers` are one module.
    assert pytorch.samplers is samplers


def test_torch_data_is_the_type_of_a_batch():
    members = set(typing.get_args(pytorch.TorchData))
    assert torch.Tensor in members
    assert dict[str, torch.Tensor] in members
    # Usable in annotations, as the tutorial's model.py does.

    def forward(*args: pytorch.TorchData) -> pytorch.TorchData:
        return args[0]

    assert typing.get_type_hints(forward)["return"] == pytorch.TorchData


def test_samplers_chain_like_determineds():
    base = torch.utils.data.BatchSampler(range(10), batch_size=2, drop_last=False)  # 5 batches
    sharded = [samplers.DistributedBatchSampler(base, 2, r) for r in range(2)]
    assert [len(s) for s in sharded] == [3, 2]
    assert list(sharded[1]) == [[2, 3], [6, 7]]
    repeated = samplers.RepeatBatchSampler(base)
    assert len(repeated) == 5
    it = iter(repeated)
    assert [next(it) for _ in range(6)][-1] == [0, 1]
    skipped = samplers.SkipBatchSampler(base, 2)
    assert len(skipped) == 5  # Determined: the wrapped length, the skip applies once
    assert list(skipped)[0] == [4, 5]
    assert list(samplers.SkipSampler(range(5), 3)) == [3, 4]
    assert list(samplers.DistributedSampler(range(5), 2, 0)) == [0, 2, 4]
    assert len(samplers.DistributedSampler(range(5), 2, 1)) == 2
    endless = iter(samplers.RepeatSampler(range(2)))
    assert [next(endless) for _ in range(5)] == [0, 1, 0, 1, 0]
    with pytest.raises(ValueError):
        samplers.DistributedBatchSampler(base, 2, 2)
    with pytest.raises(ValueError, match="empty"):
        next(iter(samplers.RepeatBatchSampler([])))


def test_reproducible_shuffles_repeat_for_a_seed_and_vary_by_pass():
    first = samplers.ReproducibleShuffleSampler(range(20), seed=3)
    second = samplers.ReproducibleShuffleSampler(range(20), seed=3)
    a1, a2 = list(first), list(first)
    assert a1 == list(second) and sorted(a1) == list(range(20))
    assert a1 != a2  # a new order on each pass
    batches = torch.utils.data.BatchSampler(range(8), batch_size=2, drop_last=False)
    shuffled = list(samplers.ReproducibleShuffleBatchSampler(batches, seed=1))
    assert sorted(shuffled) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert shuffled == list(samplers.ReproducibleShuffleBatchSampler(batches, seed=1))


def test_adapt_batch_sampler_repeats_shards_then_skips():
    base = torch.utils.data.BatchSampler(range(10), batch_size=2, drop_last=False)
    adapted = pytorch.adapt_batch_sampler(base, repeat=True, skip=1, num_replicas=2, rank=1)
    it = iter(adapted)
    assert [next(it) for _ in range(3)] == [[6, 7], [0, 1], [4, 5]]


def _context() -> pytorch.PyTorchTrialContext:
    return pytorch.CheckpointLoadContext(hparams={"lr": 0.1}, exp_conf={"name": "x"})


def test_checkpoint_load_context_builds_a_trial_outside_training():
    context = _context()
    assert isinstance(context, pytorch.PyTorchTrialContext)
    assert context.get_hparam("lr") == 0.1
    assert context.get_experiment_config() == {"name": "x"}
    assert context.distributed.size == 1
    assert isinstance(context.experimental, pytorch.PyTorchExperimentalContext)


def test_experimental_switches():
    context = _context()
    context.experimental.disable_dataset_reproducibility_checks()
    assert context.experimental._data_repro_checks_disabled
    context.experimental.disable_auto_to_device()
    assert not context.experimental._auto_to_device
    context.experimental.use_amp()  # CPU: logged and ignored
    assert not context.experimental._auto_amp and context._scaler is None


def test_legacy_clip_grads_callbacks_clip_at_step_optimizer():
    context = _context()
    model = context.wrap_model(torch.nn.Linear(2, 1, bias=False))
    optimizer = context.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=1.0))
    with pytest.warns(FutureWarning):
        clip = pytorch.ClipGradsL2Value(0.5)
    with pytest.warns(FutureWarning):
        pytorch.ClipGradsL2Norm(1.0)
    context._callbacks = {"clip": clip}
    before = model.weight.detach().clone()
    (model(torch.tensor([[100.0, -100.0]])).sum()).backward()
    context.step_optimizer(optimizer)
    assert torch.allclose(before - model.weight.detach(), torch.tensor([[0.5, -0.5]]))


def test_reset_parameters_resets_every_submodule():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 1))
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(7.0)
    with pytest.warns(FutureWarning):
        pytorch.reset_parameters(model)
    assert all((p != 7.0).any() for p in model.parameters())


def test_auto_to_device_off_passes_batches_as_loaded(tmp_path):
    seen: list = []

    class Trial(pytorch.PyTorchTrial):
        def __init__(self, context):
            self.context = context
            context.experimental.disable_auto_to_device()
            self.model = context.wrap_model(torch.nn.Linear(1, 1))
            self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))

        def build_training_data_loader(self):
            data = torch.utils.data.TensorDataset(torch.ones(4, 1))
            return pytorch.DataLoader(data, batch_size=2)

        def build_validation_data_loader(self):
            return self.build_training_data_loader()

        def train_batch(self, batch, epoch_idx, batch_idx):
            seen.append(batch)
            loss = self.model(batch[0]).sum()
            self.context.backward(loss)
            self.context.step_optimizer(self.opt)
            return {"loss": loss}

        def evaluate_batch(self, batch, batch_idx):
            return {"validation_loss": 0.0}

    storage = {"checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp_path)}}
    with pytorch.init(hparams={"global_batch_size": 2}, exp_conf=storage) as context:
        pytorch.Trainer(Trial(context), context).fit(
            max_length=pytorch.Batch(2), checkpoint_policy="none"
        )
    assert len(seen) == 2


def test_trainer_and_init_are_determineds():
    assert "max_length" in inspect.signature(pytorch.Trainer.fit).parameters
    with pytorch.init(hparams={"global_batch_size": 2}) as context:
        assert isinstance(context, pytorch.PyTorchTrialContext)
        assert isinstance(context.distributed, core.DistributedContext)
