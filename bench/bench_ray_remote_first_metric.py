"""Submit -> first metric of a trial on a remote Ray node vs on the Ray head (the master's node).

Cluster: tests/_support/ray_cluster.py on this machine: a head and one worker, each in a network
namespace of its own (own address on a bridge, own directories, one Ray CPU each: one slot per
node); master-lite runs on the head's namespace with `--host 0.0.0.0 --advertised-url`, as
docs/distributed.md's recipe runs it, so a remote trial reaches it over the bridge. Needs root
(network namespaces).

Workload: `bench/_common.FIRST_METRIC_SCRIPT` (det.core.init, then one training metric), with
`s3` checkpoint storage (moto's server on the bridge) so the configuration is a cluster's.
Method: each round submits two single-trial experiments at once; the cluster has one slot on each
node, so one runs on the head and one on the worker, side by side under the same load. For each
the time from `POST /experiments` to its first stored metric (polled every 10 ms); which node ran
it is read from the trial's log ("container 0 on Ray node ... (ADDRESS)"). One warm-up round
discarded (it pays for the workers' first imports); then ROUNDS rounds. Ratio = median on the
head / median on the remote node (1.0 = a remote node starts trials as fast as the head).

Target: ratio ≥ 0.8 (the context travels through Ray's object store either way; only the
network hop to the master and to S3 differs).
Run: PYTHONPATH=harness:. python bench/bench_ray_remote_first_metric.py  (BENCH_REPEATS=rounds,
default 5)
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import (  # noqa: E402
    FIRST_METRIC_SCRIPT,
    has_first_metric,
    median,
    package_version,
    record,
    verdict,
)

ROUNDS = int(os.environ.get("BENCH_REPEATS", "5"))
TARGET = 0.8
PLACED = re.compile(r"container 0 on Ray node \S+ \(([\d.]+)\)")


def main() -> None:
    from tests._support import context_tarball, wait_for_experiment, wait_until
    from tests._support.ray_cluster import NetnsCluster, NodeMaster, netns_available
    from tests._support.s3_server import start_s3_server

    why_not = netns_available()
    if why_not:
        sys.exit(f"bench_ray_remote_first_metric: {why_not}")
    base = pathlib.Path(tempfile.mkdtemp(prefix="ntns-", dir="/tmp"))
    context = context_tarball({"first.py": FIRST_METRIC_SCRIPT})
    try:
        with (
            NetnsCluster(base, workers=1) as cluster,
            start_s3_server(host=cluster.gateway, log_dir=str(base)) as s3,
        ):
            s3.create_bucket("bench")
            with NodeMaster(cluster, base / "master") as master:

                def measure(name: str, out: dict) -> None:
                    config = {
                        "name": name,
                        "entrypoint": "python3 first.py",
                        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
                        "max_restarts": 0,
                        "checkpoint_storage": s3.storage_config("bench", prefix=name),
                    }
                    start = time.perf_counter()
                    answer = master.session.post(
                        "/experiments", {"config": config, "context": context}
                    )
                    exp_id = int(answer["experiment"]["id"])
                    while not has_first_metric(master, exp_id):
                        time.sleep(0.01)
                    out["seconds"] = time.perf_counter() - start
                    experiment = wait_for_experiment(master, exp_id)
                    assert experiment["state"] == "COMPLETED", experiment
                    (trial,) = master.trials(exp_id)
                    placed = wait_until(
                        lambda: next(
                            (
                                m.group(1)
                                for line in master.logs(trial["id"])
                                if (m := PLACED.search(line))
                            ),
                            None,
                        ),
                        what="the trial's placement line",
                    )
                    out["node"] = placed

                times: dict[str, list[float]] = {"head": [], "remote": []}
                for round_index in range(ROUNDS + 1):
                    outs: list[dict] = [{}, {}]
                    threads = [
                        threading.Thread(target=measure, args=(f"r{round_index}-{i}", outs[i]))
                        for i in range(2)
                    ]
                    for thread in threads:
                        thread.start()
                    for thread in threads:
                        thread.join()
                    if any("seconds" not in out for out in outs):
                        sys.exit(f"round {round_index} failed: {outs}")
                    print(f"round {round_index}: {outs}", flush=True)
                    if round_index == 0:
                        continue  # warm-up
                    for out in outs:
                        where = "head" if out["node"] == cluster.head.ip else "remote"
                        times[where].append(out["seconds"])
        left = cluster.leftovers()  # after the cluster's teardown: nothing may be left
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if left:
        sys.exit(f"processes left behind: {left}")
    if not times["head"] or not times["remote"]:
        sys.exit(f"every trial ran on one node: {times}")
    head, remote = median(times["head"]), median(times["remote"])
    ratio = head / remote
    print(f"head {head:.2f} s, remote {remote:.2f} s, ratio {ratio:.3f}")
    record(
        "Ray: submit to first metric, remote node vs head (bench_ray_remote_first_metric.py)",
        f"""
Cluster on one machine (tests/_support/ray_cluster.py): a Ray {package_version("ray")} head and
one worker node, each in a network namespace with its own address and directories, one CPU slot
each; master-lite on the head's namespace (`--host 0.0.0.0 --advertised-url`), `s3` checkpoint
storage on moto's server on the bridge. Each round submits two single-trial experiments at once
(one lands on each node); seconds from `POST /experiments` to the first stored metric; median of
{ROUNDS} rounds after a warm-up round. Ratio = head / remote (1.0 = as fast as on the head).

| trial on | submit → first metric (median) | runs |
|---|---|---|
| Ray head (the master's node) | {head:.2f} s | {len(times["head"])} |
| remote Ray node | {remote:.2f} s | {len(times["remote"])} |

| ratio | target |
|---|---|
| {ratio:.3f} | ≥ {TARGET}: {verdict(ratio, TARGET, at_most=False)} |
""",
    )


if __name__ == "__main__":
    main()
