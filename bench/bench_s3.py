"""s3 checkpoint storage: upload and restore through the Core API vs boto3 alone, same server.

Workload: a checkpoint of FILES_LARGE files of LARGE_MIB MiB (random bytes) and FILES_SMALL files
of 1 KiB, in one directory. Server: moto's S3 server (tests/_support/s3_server.py) on loopback,
one process, in memory; both sides use it with the same keys.

* upload — ours: `core.checkpoint.upload(dir, metadata)` of `det.core.init(checkpoint_storage=
  {type: s3, ...})` (the storage manager, `metadata.json`, the resource listing; the files go
  through one boto3 transfer manager, all in flight at once); boto3 alone: the plain code, a
  `client.upload_file` of each file in turn (each one multipart and concurrent above 8 MiB).
* restore — ours: `with core.checkpoint.restore_path(uuid)` (list the objects, download them
  into a scratch directory, remove it after); boto3 alone: `list_objects_v2` then
  `download_file` of each object into a temporary directory, removed after.

Method: one warm-up of each discarded; then PAIRS pairs, alternating which side runs first; the
ratio is the median of the pairs' ratios (boto3's time / ours: 1.0 = as fast as boto3 alone).
Both sides build their client once, outside the timing (as a trial does once per process).

Target: ratio ≥ 0.9 for upload and for restore.
Run: PYTHONPATH=harness:. python bench/bench_s3.py   (BENCH_REPEATS=pairs, default 7)
"""

from __future__ import annotations

import os
import pathlib
import shutil
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _common import median, package_version, record, verdict  # noqa: E402

PAIRS = int(os.environ.get("BENCH_REPEATS", "7"))
FILES_LARGE, LARGE_MIB, FILES_SMALL = 4, 8, 16
TARGET = 0.9


def make_checkpoint(root: pathlib.Path) -> int:
    root.mkdir(parents=True)
    total = 0
    for i in range(FILES_LARGE):
        data = os.urandom(LARGE_MIB << 20)
        (root / f"shard-{i}.bin").write_bytes(data)
        total += len(data)
    for i in range(FILES_SMALL):
        (root / f"small-{i}.json").write_bytes(os.urandom(1024))
        total += 1024
    return total


def main() -> None:
    import boto3

    import determined as det
    from tests._support.s3_server import start_s3_server

    work = pathlib.Path(tempfile.mkdtemp(prefix="bench-s3-"))
    try:
        source = work / "ckpt"
        size = make_checkpoint(source)
        names = sorted(p.name for p in source.iterdir())
        with start_s3_server(log_dir=str(work)) as server:
            server.create_bucket("bench")
            client = boto3.client(
                "s3",
                endpoint_url=server.endpoint_url,
                region_name="us-east-1",
                aws_access_key_id=server.access_key,
                aws_secret_access_key=server.secret_key,
            )
            config = server.storage_config("bench", prefix="ours")
            with det.core.init(checkpoint_storage=config) as core:
                saved: list[str] = []

                def ours_upload() -> None:
                    saved.append(core.checkpoint.upload(source, {"steps_completed": 1}))

                def boto_upload() -> None:
                    prefix = f"boto/{uuid.uuid4()}/"
                    for name in names:
                        client.upload_file(str(source / name), "bench", prefix + name)
                    saved_boto.append(prefix)

                saved_boto: list[str] = []

                def ours_restore() -> None:
                    with core.checkpoint.restore_path(saved[0]) as path:
                        assert (path / names[0]).stat().st_size == LARGE_MIB << 20

                def boto_restore() -> None:
                    target = pathlib.Path(tempfile.mkdtemp(dir=work))
                    try:
                        prefix = saved_boto[0]
                        listing = client.list_objects_v2(Bucket="bench", Prefix=prefix)
                        for item in listing.get("Contents", []):
                            rel = item["Key"][len(prefix) :]
                            client.download_file("bench", item["Key"], str(target / rel))
                        assert (target / names[0]).stat().st_size == LARGE_MIB << 20
                    finally:
                        shutil.rmtree(target)

                results = {}
                for what, ours, boto in (
                    ("upload", ours_upload, boto_upload),
                    ("restore", ours_restore, boto_restore),
                ):
                    ours()  # warm-up (and, for upload, the checkpoint restore reads)
                    boto()
                    ratios, ours_times, boto_times = [], [], []
                    for i in range(PAIRS):
                        order = [("ours", ours), ("boto", boto)]
                        if i % 2:
                            order.reverse()
                        times = {}
                        for name, fn in order:
                            start = time.perf_counter()
                            fn()
                            times[name] = time.perf_counter() - start
                        ours_times.append(times["ours"])
                        boto_times.append(times["boto"])
                        ratios.append(times["boto"] / times["ours"])
                    results[what] = (median(ours_times), median(boto_times), median(ratios))
                    print(
                        f"{what}: ours {median(ours_times):.3f}s boto3 {median(boto_times):.3f}s "
                        f"ratio {median(ratios):.3f} (pairs {[round(r, 3) for r in ratios]})"
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mib = size / (1 << 20)
    rows = "\n".join(
        f"| {what} | {ours:.3f} s ({mib / ours:.0f} MiB/s) | {boto:.3f} s ({mib / boto:.0f} MiB/s) "
        f"| {ratio:.3f} | ≥ {TARGET}: {verdict(ratio, TARGET, at_most=False)} |"
        for what, (ours, boto, ratio) in results.items()
    )
    record(
        "s3 checkpoint storage (bench_s3.py)",
        f"Workload: one checkpoint of {FILES_LARGE} x {LARGE_MIB} MiB + {FILES_SMALL} x 1 KiB "
        f"files ({mib:.1f} MiB) to/from moto's S3 server (moto {package_version('moto')}, "
        f"boto3 {package_version('boto3')}) on loopback. Ours: `core.checkpoint.upload` / "
        f"`restore_path` with `checkpoint_storage: {{type: s3}}` (files transferred concurrently "
        f"through one boto3 transfer manager); baseline: boto3's `upload_file` / "
        f"`list_objects_v2` + `download_file` of the same files in turn. One warm-up "
        f"each, then {PAIRS} pairs alternating which side runs first; ratio = median of the "
        f"pairs' (boto3 time / our time).\n\n"
        f"| operation | ours | boto3 alone | ratio | target |\n|---|---|---|---|---|\n{rows}",
    )


if __name__ == "__main__":
    main()
