"""Two real processes training one PyTorchTrial with torch.distributed (gloo) + DDP, off the master.

Each rank reports what it saw; the test checks sharding (disjoint samples per global batch),
synchronised weights, cross-rank metric reduction and a single checkpoint written by the chief.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import time

import pytest

from tests._support import free_ports

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[3]

WORKER = textwrap.dedent(
    """
    import json, os, sys
    import torch
    torch.set_num_threads(1)
    from determined import core, pytorch

    out_dir, storage = sys.argv[1], sys.argv[2]
    torch.distributed.init_process_group("gloo")
    distributed = core.DistributedContext.from_torch_distributed()
    seen = []
    saved = []

    class Recorder(core.DummyTrainContext):
        training, validation = [], []
        def report_training_metrics(self, steps_completed, metrics, batch_metrics=None):
            self.training.append([steps_completed, metrics])
        def report_validation_metrics(self, steps_completed, metrics):
            self.validation.append([steps_completed, metrics])

    class Saved(pytorch.PyTorchCallback):
        def on_checkpoint_upload_end(self, uuid):
            saved.append(uuid)
        def on_validation_end(self, metrics):
            saved.append(metrics)

    class Trial(pytorch.PyTorchTrial):
        def __init__(self, context):
            self.context = context
            self.model = context.wrap_model(torch.nn.Linear(1, 1))
            self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.01))
        def build_callbacks(self):
            return {"saved": Saved()}
        def build_training_data_loader(self):
            ids = torch.arange(24, dtype=torch.float32)
            return pytorch.DataLoader(
                torch.utils.data.TensorDataset(ids),
                batch_size=self.context.get_per_slot_batch_size(),
                shuffle=True,
            )
        def build_validation_data_loader(self):
            ids = torch.arange(10, dtype=torch.float32)
            return pytorch.DataLoader(torch.utils.data.TensorDataset(ids), batch_size=2)
        def train_batch(self, batch, epoch_idx, batch_idx):
            (x,) = batch
            seen.append([batch_idx, x.tolist()])
            loss = (self.model(x.unsqueeze(1)) - x.unsqueeze(1)).pow(2).mean()
            self.context.backward(loss)
            self.context.step_optimizer(self.opt)
            return {"rank": float(self.context.distributed.rank)}
        def evaluate_batch(self, batch, batch_idx):
            (x,) = batch
            return {"validation_loss": 1.0, "count": len(x)}
        def evaluation_reducer(self):
            return {"validation_loss": pytorch.Reducer.AVG, "count": pytorch.Reducer.SUM}

    torch.manual_seed(1)
    with pytorch.init(hparams={"global_batch_size": 4}, distributed=distributed,
                      exp_conf={"checkpoint_storage": {"type": "shared_fs", "host_path": storage}}) as context:
        context._core.train = recorder = Recorder()
        trial = Trial(context)
        pytorch.Trainer(trial, context).fit(max_length=pytorch.Batch(5), checkpoint_policy="none",
                                            reporting_period=pytorch.Batch(5))
        weights = [p.detach().tolist() for p in trial.model.parameters()]
    with open(os.path.join(out_dir, f"rank{distributed.rank}.json"), "w") as f:
        json.dump({"seen": seen, "weights": weights, "saved": saved, "training": recorder.training,
                   "validation": recorder.validation, "size": context.get_per_slot_batch_size()}, f)
    torch.distributed.destroy_process_group()
    """
)


def test_two_ranks_shard_data_and_stay_in_sync(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    storage = tmp_path / "storage"
    ports = free_ports(3)
    procs = []
    for rank in range(2):
        env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
        env.update(
            PYTHONPATH=os.pathsep.join([str(ROOT / "harness"), str(ROOT)]),
            RANK=str(rank),
            WORLD_SIZE="2",
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE="2",
            GROUP_RANK="0",
            GROUP_WORLD_SIZE="1",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(ports[0]),
            INTER_TRAIN_PROCESS_COMM_PORT_1=str(ports[1]),
            INTER_TRAIN_PROCESS_COMM_PORT_2=str(ports[2]),
            OMP_NUM_THREADS="1",
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), str(tmp_path), str(storage)],
                env=env,
                # A file, not a pipe: nothing reads while both ranks run.
                stdout=(tmp_path / f"rank{rank}.log").open("w"),
                stderr=subprocess.STDOUT,
            )
        )
    outputs = _wait_for_ranks(procs, [tmp_path / f"rank{r}.log" for r in range(2)], timeout=180)
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outputs)

    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    assert r0["size"] == r1["size"] == 2  # per-slot batch = 4 // 2
    # Same global batch index on both ranks, disjoint samples.
    assert [i for i, _ in r0["seen"]] == [i for i, _ in r1["seen"]] == [0, 1, 2, 3, 4]
    for (_, a), (_, b) in zip(r0["seen"], r1["seen"], strict=False):
        assert not set(a) & set(b)
    assert r0["weights"] == r1["weights"]  # DDP averaged the gradients
    # Training metrics averaged across ranks (rank 0 and 1 => 0.5), reported by the chief only.
    assert r0["training"] == [[5, {"rank": 0.5, "batches": 5, "epochs": 0}]]
    assert r1["training"] == []
    # Validation: 5 batches sharded 3 + 2; SUM of counts = the whole set; every rank gets the result.
    assert r0["validation"][0][1]["count"] == 10 and r1["validation"] == []
    assert r0["saved"][0] == r1["saved"][0] == r0["validation"][0][1]
    # One checkpoint (the final one), known to both ranks.
    assert r0["saved"][1] == r1["saved"][1]
    (ckpt,) = list(storage.iterdir())
    assert ckpt.name == r0["saved"][1]
    assert json.loads((ckpt / "metadata.json").read_text())["steps_completed"] == 5


def _wait_for_ranks(
    procs: list[subprocess.Popen], logs: list[pathlib.Path], timeout: float
) -> list[str]:
    """Both ranks' output once both ended. A rank that fails ends the other at once (its peer
    would wait for it in the rendezvous until the timeout, hiding the first rank's error)."""
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        if any(p.returncode not in (None, 0) for p in procs):
            break
        time.sleep(0.2)
    for p in procs:
        if p.poll() is None:
            p.kill()
    return [
        f"--- rank {rank} (exit {p.wait()}):\n{log.read_text()}"
        for rank, (p, log) in enumerate(zip(procs, logs, strict=True))
    ]
