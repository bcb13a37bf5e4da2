"""The s3 checkpoint storage's keys are secrets: redacted in every config the API returns,
given to trials in their own variable only, refused when sent back redacted (a fork keeps its
parent's), and named in the refusal."""

from __future__ import annotations

import json

import pytest

from master_lite import errors
from master_lite._core._secrets import REDACTED, redact_config, submitted_secrets
from master_lite.runs._environment import _storage_credentials

STORAGE = {"type": "s3", "bucket": "b", "access_key": "AKIAEXAMPLE", "secret_key": "s3cr3t"}


def test_the_keys_are_redacted_and_the_rest_kept():
    config = {"checkpoint_storage": dict(STORAGE)}
    shown = redact_config(config)
    assert shown["checkpoint_storage"] == {
        **STORAGE,
        "access_key": REDACTED,
        "secret_key": REDACTED,
    }
    assert config["checkpoint_storage"]["secret_key"] == "s3cr3t"  # the stored one is untouched


def test_a_redacted_config_sent_back_is_refused_unless_forked():
    sent_back = redact_config({"checkpoint_storage": dict(STORAGE)})
    with pytest.raises(errors.InvalidRequest, match="checkpoint_storage.secret_key"):
        submitted_secrets(sent_back)
    forked = submitted_secrets(sent_back, {"checkpoint_storage": dict(STORAGE)})
    assert forked["checkpoint_storage"]["secret_key"] == "s3cr3t"


def test_trials_get_the_keys_in_their_own_variable():
    variables = _storage_credentials({"checkpoint_storage": dict(STORAGE)})
    assert json.loads(variables["DET_CHECKPOINT_STORAGE_CREDENTIALS"]) == {
        "access_key": "AKIAEXAMPLE",
        "secret_key": "s3cr3t",
    }
    assert _storage_credentials({"checkpoint_storage": {"type": "s3", "bucket": "b"}}) == {}
