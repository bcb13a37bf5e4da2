"""Two ranks whose shards of the training data differ in length (7 batches: 4 + 3), off the master.

Each rank used to count its own epoch length, so at an epoch boundary one rank entered the
metrics allgather while the other was still in DDP's backward: the run hung. The chief's epoch
length is broadcast now (as in Determined): both ranks train the same batch indices, see the same
epoch ends, and finish.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from tests._support import free_ports

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent(
    """
    import json, logging, os, sys
    import torch
    torch.set_num_threads(1)
    from determined import core, pytorch

    out_dir, storage = sys.argv[1], sys.argv[2]
    logging.basicConfig(level=logging.INFO)
    torch.distributed.init_process_group("gloo")
    distributed = core.DistributedContext.from_torch_distributed()
    batches, epoch_ends = [], []

    class Ends(pytorch.PyTorchCallback):
        def on_training_epoch_end(self, epoch_idx):
            epoch_ends.append(epoch_idx)

    class Trial(pytorch.PyTorchTrial):
        def __init__(self, context):
            self.context = context
            self.model = context.wrap_model(torch.nn.Linear(1, 1))
            self.opt = context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.01))
        def build_callbacks(self):
            return {"ends": Ends()}
        def build_training_data_loader(self):
            x = torch.arange(14, dtype=torch.float32)  # 7 batches of 2: rank 0 gets 4, rank 1 gets 3
            return pytorch.DataLoader(torch.utils.data.TensorDataset(x), batch_size=2)
        def build_validation_data_loader(self):
            x = torch.arange(5, dtype=torch.float32)
            return pytorch.DataLoader(torch.utils.data.TensorDataset(x), batch_size=2)
        def train_batch(self, batch, epoch_idx, batch_idx):
            (x,) = batch
            batches.append([epoch_idx, batch_idx])
            loss = (self.model(x.unsqueeze(1)) - x.unsqueeze(1)).pow(2).mean()
            self.context.backward(loss)
            self.context.step_optimizer(self.opt)
            return {"loss": loss}
        def evaluate_batch(self, batch, batch_idx):
            (x,) = batch
            return {"validation_loss": float(self.model(x.unsqueeze(1)).mean())}

    exp_conf = {"checkpoint_storage": {"type": "shared_fs", "host_path": storage}}
    with pytorch.init(hparams={"global_batch_size": 4}, distributed=distributed, exp_conf=exp_conf) as context:
        trial = Trial(context)
        pytorch.Trainer(trial, context).fit(
            max_length=pytorch.Epoch(3), checkpoint_policy="none",
            validation_period=pytorch.Epoch(1), reporting_period=pytorch.Epoch(1),
        )
    with open(os.path.join(out_dir, f"rank{distributed.rank}.json"), "w") as f:
        json.dump({"batches": batches, "epoch_ends": epoch_ends}, f)
    torch.distributed.destroy_process_group()
    """
)


def test_uneven_shards_follow_the_chiefs_epoch_length(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port, comm1, comm2 = free_ports(3)
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
            MASTER_PORT=str(port),
            INTER_TRAIN_PROCESS_COMM_PORT_1=str(comm1),
            INTER_TRAIN_PROCESS_COMM_PORT_2=str(comm2),
            OMP_NUM_THREADS="1",
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), str(tmp_path), str(tmp_path / "storage")],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=120)[0])
        except subprocess.TimeoutExpired:  # a hang (the bug): the ranks wait on each other
            for q in procs:
                q.kill()
            outputs.append(p.communicate()[0] + "\n(killed: hung)")
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outputs)

    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    # Epoch(3) of the chief's 4 batches = 12 batches on both ranks, epochs counted alike.
    expected = [[i // 4, i] for i in range(12)]
    assert r0["batches"] == r1["batches"] == expected
    assert r0["epoch_ends"] == r1["epoch_ends"] == [0, 1, 2]
    assert "chief's 4" in outputs[1]
