"""Multi-slot trials on one machine: `python3 -m determined.launch.torch_distributed` in the
entrypoint, gloo DDP on CPU slots, distinct rendezvous ports per allocation, and a crashed rank
bringing the whole trial down (then the restart from max_restarts)."""

from __future__ import annotations

import pytest

from tests._support import (
    REPO,
    MasterProcess,
    all_logs,
    marked_values,
    submit,
    trials,
    wait_for_experiment,
)

pytestmark = [pytest.mark.slow, pytest.mark.rendezvous_ports]

# A torch MLP on sklearn's digits with raw DDP. The global batch is the same for any world size
# (each rank takes its stride of it) and DDP averages gradients, so 1 and 2 slots compute the
# same updates up to float rounding.
DDP_DIGITS = """
    import json, os, sys
    import torch
    torch.set_num_threads(1)
    import torch.distributed as dist
    from sklearn.datasets import load_digits
    import determined as det
    from determined.core import DistributedContext

    distributed = DistributedContext.from_torch_distributed()
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    assert (rank, size) == (distributed.rank, distributed.size)
    hp = det.get_cluster_info().trial.hparams
    print("RANKINFO " + json.dumps({"rank": rank, "size": size, "backend": dist.get_backend(),
                                    "c10d": os.environ["C10D_PORT"],
                                    "master_port": os.environ["MASTER_PORT"]}), flush=True)

    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    x_train, y_train, x_val, y_val = x[:1500], y[:1500], x[1500:], y[1500:]

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.2)
    batch = 64
    generator = torch.Generator().manual_seed(1)
    with det.core.init(distributed=distributed) as core_context:
        for step in range(1, hp["steps"] + 1):
            indices = torch.randint(0, len(x_train), (batch,), generator=generator)
            mine = indices[rank::size]
            loss = torch.nn.functional.cross_entropy(ddp(x_train[mine]), y_train[mine])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if hp.get("crash_rank") == rank and step == 5 and \
                    core_context.distributed is not None and \
                    det.get_cluster_info().trial._trial_run_id == 1:
                print("rank crashing on purpose", flush=True)
                os._exit(7)
        with torch.no_grad():
            accuracy = (model(x_val).argmax(1) == y_val).float().mean().item()
        if rank == 0:
            core_context.train.report_validation_metrics(hp["steps"], {"accuracy": accuracy})
            print("ACCURACY " + json.dumps({"accuracy": accuracy}), flush=True)
    dist.destroy_process_group()
"""


def ddp_config(
    name: str, slots: int, *, steps: int = 150, crash_rank=None, max_restarts: int = 0
) -> dict:
    hparams = {"steps": steps}
    if crash_rank is not None:
        hparams["crash_rank"] = crash_rank
    return {
        "name": name,
        "entrypoint": "python3 -m determined.launch.torch_distributed python3 train.py",
        "resources": {"slots_per_trial": slots},
        "searcher": {
            "name": "single",
            "metric": "accuracy",
            "smaller_is_better": False,
            "max_length": 1,
        },
        "hyperparameters": hparams,
        "max_restarts": max_restarts,
    }


@pytest.fixture(scope="module")
def cpu_master(tmp_path_factory):
    root = tmp_path_factory.mktemp("multislot-master")
    with MasterProcess(root, cpu_slots=None, env={"MASTER_LITE_CPU_SLOTS": "2"}) as process:
        session = process.session
        yield session


def accuracy_of(session, exp_id: int) -> float:
    (trial,) = trials(session, exp_id)
    reports = session.get(f"/trials/{trial['id']}/metrics", {"group": "validation"})["metrics"]
    assert len(reports) == 1
    return reports[0]["metrics"]["accuracy"]


def test_two_slot_gloo_ddp_trains_to_the_same_accuracy_as_one_slot(cpu_master):
    one = submit(cpu_master, ddp_config("ddp-1", 1), {"train.py": DDP_DIGITS})
    assert wait_for_experiment(cpu_master, one, timeout=240)["state"] == "COMPLETED", all_logs(
        cpu_master, one
    )
    two = submit(cpu_master, ddp_config("ddp-2", 2), {"train.py": DDP_DIGITS})
    assert wait_for_experiment(cpu_master, two, timeout=240)["state"] == "COMPLETED", all_logs(
        cpu_master, two
    )

    ranks = marked_values(all_logs(cpu_master, two), "RANKINFO")
    assert sorted(r["rank"] for r in ranks) == [0, 1]
    assert {r["size"] for r in ranks} == {2} and {r["backend"] for r in ranks} == {"gloo"}
    # torchrun rendezvoused on the port the master gave this allocation
    assert {r["master_port"] for r in ranks} == {ranks[0]["c10d"]}
    (trial,) = trials(cpu_master, two)
    rank1_lines = cpu_master.get(f"/trials/{trial['id']}/logs", {"rank": 1})["logs"]
    assert any("RANKINFO" in entry["line"] for entry in rank1_lines)

    accuracy_1, accuracy_2 = accuracy_of(cpu_master, one), accuracy_of(cpu_master, two)
    assert accuracy_1 > 0.85
    assert abs(accuracy_1 - accuracy_2) <= 0.02, (accuracy_1, accuracy_2)


def test_a_crashed_rank_brings_the_trial_down_and_it_restarts(cpu_master):
    exp_id = submit(
        cpu_master,
        ddp_config("crash", 2, steps=40, crash_rank=1, max_restarts=1),
        {"train.py": DDP_DIGITS},
    )
    experiment = wait_for_experiment(cpu_master, exp_id, timeout=240)
    logs = all_logs(cpu_master, exp_id)
    assert experiment["state"] == "COMPLETED", logs
    (trial,) = trials(cpu_master, exp_id)
    assert trial["restarts"] == 1, logs
    assert "rank crashing on purpose" in logs
    assert "restart 1 of 1" in logs
    assert len(marked_values(logs, "ACCURACY")) == 1  # only the second run got to the end


def test_two_multislot_trials_on_one_host_do_not_collide(tmp_path_factory, tmp_path):
    # Four fake GPUs: two 2-slot trials at once, both rendezvousing on this host. Without
    # distinct per-allocation ports the second torchrun store (or ZMQ server) could not bind.
    root = tmp_path_factory.mktemp("multislot-gpu-master")
    with MasterProcess(root, cpu_slots=None, env={"MASTER_LITE_FAKE_GPUS": "4"}) as process:
        session = process.session
        together = """
            import json, os, pathlib, time
            import torch
            torch.set_num_threads(1)
            import torch.distributed as dist
            import determined as det
            from determined.core import DistributedContext

            distributed = DistributedContext.from_torch_distributed()
            dist.init_process_group("gloo")
            gate = pathlib.Path(det.get_cluster_info().user_data["gate"])
            if distributed.rank == 0:
                (gate / os.environ["DET_ALLOCATION_ID"]).touch()
            deadline = time.monotonic() + 120
            while len(list(gate.iterdir())) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)  # both trials are now up at the same time
            together = len(list(gate.iterdir())) == 2
            tensor = torch.tensor([distributed.rank + 1.0])
            dist.all_reduce(tensor)
            print("TOGETHER " + json.dumps({
                "rank": distributed.rank, "together": together, "sum": tensor.item(),
                "ports": [os.environ[n] for n in ("C10D_PORT", "INTER_TRAIN_PROCESS_COMM_PORT_1",
                                                  "INTER_TRAIN_PROCESS_COMM_PORT_2")],
                "gathered": distributed.allgather(distributed.rank)}), flush=True)
            dist.destroy_process_group()
        """
        ids = []
        for name in ("pair-a", "pair-b"):
            config = ddp_config(name, 2)
            config["data"] = {"gate": str(tmp_path)}
            ids.append(submit(session, config, {"train.py": together}))
        shown = []
        for exp_id in ids:
            assert wait_for_experiment(session, exp_id, timeout=240)["state"] == "COMPLETED", (
                all_logs(session, exp_id)
            )
            values = marked_values(all_logs(session, exp_id), "TOGETHER")
            assert sorted(v["rank"] for v in values) == [0, 1]
            assert all(
                v["together"] and v["sum"] == 3.0 and v["gathered"] == [0, 1] for v in values
            )
            shown.append(set(values[0]["ports"]))
        assert len(shown[0] | shown[1]) == 6  # no port shared between the two allocations


def pytorch_trial_config(slots: int) -> dict:
    return {
        "name": f"digits-pytorchtrial-{slots}",
        "entrypoint": "model_def:DigitsTrial",  # legacy form: torchrun when slots > 1
        "resources": {"slots_per_trial": slots},
        "hyperparameters": {
            "global_batch_size": 32,
            "learning_rate": 0.05,
            "hidden_size": 64,
            "dropout": 0.0,
        },
        "searcher": {
            "name": "single",
            "metric": "validation_loss",
            "smaller_is_better": True,
            "max_length": {"batches": 200},
        },
        "min_validation_period": {"batches": 200},
        "scheduling_unit": 100,
        "max_restarts": 0,
    }


def test_pytorch_trial_on_two_slots_matches_one_slot(cpu_master):
    # det.pytorch wraps the model in DDP and splits the global batch over the slots.
    example = REPO / "examples" / "pytorch_digits"
    files = {
        path.name: path.read_text()
        for path in example.iterdir()
        if path.suffix == ".py" and path.is_file()
    }
    accuracies = {}
    for slots in (1, 2):
        exp_id = submit(cpu_master, pytorch_trial_config(slots), files)
        assert wait_for_experiment(cpu_master, exp_id, timeout=300)["state"] == "COMPLETED", (
            all_logs(cpu_master, exp_id)
        )
        (trial,) = trials(cpu_master, exp_id)
        reports = cpu_master.get(f"/trials/{trial['id']}/metrics", {"group": "validation"})[
            "metrics"
        ]
        accuracies[slots] = reports[-1]["metrics"]["validation_accuracy"]
        if slots == 2:
            ranks = {
                entry["rank"] for entry in cpu_master.get(f"/trials/{trial['id']}/logs")["logs"]
            }
            assert {0, 1} <= ranks, "both workers' output is in the trial log"
    assert accuracies[1] > 0.8
    assert abs(accuracies[1] - accuracies[2]) <= 0.05, accuracies
