"""Trial start in a container vs as a host process: submit -> first metric stored.

Workload: one running master-lite with a free slot; an experiment whose trial reports one
training metric right after `det.core.init()`, submitted through `POST /experiments` with the
same context, once as a host process (the local runner, pre-started interpreters on) and once
with `environment.image` (Podman, the tiny test image of empty directories with the host's
/usr bind-mounted read-only, so only the runtime's own cost is measured, not an image's). The
clock runs from the submission until `GET /trials/{id}/metrics` (polled every 10 ms) shows the
metric. The two alternate, REPEATS times each, after one unmeasured run of each; medians.

Ideal: the container costs what `podman run` of an already-present image costs (~0.4 s here)
on top of the host process start. Target (issue 18): container - host < 0.6 s.
Run: PYTHONPATH=harness:. python bench/bench_container_start.py  (needs podman and runc)
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import (  # noqa: E402
    FIRST_METRIC_SCRIPT,
    interleaved,
    median,
    record,
    running_master,
    submit_to_first_metric,
    verdict,
)

from tests._support import MasterProcess, context_tarball  # noqa: E402
from tests._support.containers import (  # noqa: E402
    HOST_USR,
    TEST_PREFIX,
    build_tiny_image,
    remove_containers_of,
    remove_images,
)

REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
TARGET_EXTRA_S = 0.6

CONTEXT = context_tarball({"train.py": FIRST_METRIC_SCRIPT})


def config(image: str | None) -> dict:
    base: dict = {
        "name": "bench-container-start",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
    }
    if image:
        base["environment"] = {"image": image}
        base["bind_mounts"] = [HOST_USR]
    return base


def start_seconds(master: MasterProcess, image: str | None) -> float:
    return submit_to_first_metric(master, config(image), CONTEXT)


def main() -> None:
    image = build_tiny_image(f"{TEST_PREFIX}-bench")
    try:
        with running_master(cpu_slots=1) as master:
            try:
                for warm in (None, image):
                    start_seconds(master, warm)
                times = interleaved(
                    {
                        "host": lambda: start_seconds(master, None),
                        "container": lambda: start_seconds(master, image),
                    },
                    REPEATS,
                )
            finally:
                remove_containers_of(master.root_dir)
    finally:
        remove_images([image])
    host, container = median(times["host"]), median(times["container"])
    extra = container - host
    body = (
        "| trial runs as | submit -> first metric (median of "
        f"{REPEATS}) |\n|---|---|\n| host process | {host:.3f} s |\n"
        f"| container (podman, tiny image) | {container:.3f} s |\n\n"
        f"Container / host: **{container / host:.2f}x**; the container adds {extra:.3f} s "
        f"(target <= {TARGET_EXTRA_S} s: {verdict(extra, TARGET_EXTRA_S, at_most=True)})."
    )
    print(body)
    record("Container start (bench_container_start.py)", body)


if __name__ == "__main__":
    main()
