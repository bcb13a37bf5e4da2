"""The PyTorch Trainer with `checkpoint_storage: {type: s3}`: checkpoints go to the bucket and a
fresh Trainer resumes from it exactly (nothing local: the store is the only copy)."""

from __future__ import annotations

import uuid

import pytest

torch = pytest.importorskip("torch")

from determined import pytorch  # noqa: E402
from tests.harness.pytorch.test_trainer import _exp_conf, _run  # noqa: E402

pytestmark = pytest.mark.slow


def test_trainer_checkpoints_to_the_bucket_and_resumes_from_it(s3_server, tmp_path):
    bucket = f"t-{uuid.uuid4().hex[:10]}"
    s3_server.create_bucket(bucket)
    conf = _exp_conf(tmp_path)
    conf["checkpoint_storage"] = s3_server.storage_config(bucket, prefix="torch")
    fit = dict(reporting_period=pytorch.Batch(1), checkpoint_policy="none")
    full, full_rec = _run(tmp_path, exp_conf=conf, max_length=pytorch.Batch(20), **fit)
    first, first_rec = _run(
        tmp_path,
        exp_conf=conf,
        max_length=pytorch.Batch(10),
        checkpoint_period=pytorch.Batch(10),
        **fit,
    )
    saved = first.events.checkpoints[-1]
    assert saved in s3_server.checkpoint_uuids(bucket, "torch")
    assert not list(tmp_path.rglob(saved))  # the bucket holds the only copy
    second, second_rec = _run(
        tmp_path, exp_conf=conf, max_length=pytorch.Batch(20), latest_checkpoint=saved, **fit
    )
    losses = [m["loss"] for _, m in full_rec.training]
    assert [m["loss"] for _, m in first_rec.training + second_rec.training] == losses
    for a, b in zip(full.model.parameters(), second.model.parameters(), strict=True):
        assert torch.equal(a, b)
