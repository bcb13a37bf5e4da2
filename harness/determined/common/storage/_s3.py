"""`checkpoint_storage: {type: s3, ...}`: checkpoints as objects of an S3 (or S3-compatible) bucket.

A checkpoint `<uuid>` is every object under `<prefix>/<uuid>/` (Determined's layout: an empty
object whose key ends with "/" stands for an empty directory). Nothing is shared between nodes
but the bucket, so a trial resumes on any node. `store_path` hands out a scratch directory that
is uploaded when the block ends; `restore_path` downloads into one.

Credentials: `access_key`/`secret_key` of the config, else boto3's own chain (AWS_* variables,
~/.aws, an instance role). On the master the API answers carry them as `********`; a trial gets
them in `DET_CHECKPOINT_STORAGE_CREDENTIALS` (never in argv), which fills in redacted keys here.
They are never logged: messages name the bucket, prefix and endpoint only.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from determined.common.storage._bucket import (
    BucketStorageManager,
    Selector,
    StorageError,
    bucket_location,
    bucket_problems,
    normalize_prefix,
)

logger = logging.getLogger("determined.common.storage")


#: A trial's variable holding the storage's real `access_key`/`secret_key` (JSON) when the
#: config it gets has them redacted.
CREDENTIALS_ENV = "DET_CHECKPOINT_STORAGE_CREDENTIALS"
#: What the master's API answers show in place of a secret.
REDACTED = "********"
SECRET_KEYS = ("access_key", "secret_key")


def config_problems(storage_config: Mapping) -> list[str]:
    """What is wrong with an s3 `checkpoint_storage` (empty: nothing), naming the key."""
    problems = bucket_problems(storage_config, "type s3 (the name of the bucket checkpoints go to)")
    has_access = storage_config.get("access_key") is not None
    has_secret = storage_config.get("secret_key") is not None
    if has_access != has_secret:
        missing = "secret_key" if has_access else "access_key"
        problems.append(
            f"checkpoint_storage.{missing}: required when "
            f"{'access_key' if has_access else 'secret_key'} is given (give both or neither)"
        )
    return problems


def location(storage_config: Mapping, storage_id: str) -> str:
    """`s3://bucket/prefix/uuid`: where a checkpoint's objects are (no credentials)."""
    return bucket_location("s3", storage_config, storage_id)


def _credentials(storage_config: Mapping) -> tuple[str | None, str | None]:
    """The keys to sign with: the config's, with redacted ones filled in from
    `CREDENTIALS_ENV` (a trial's config is the redacted one)."""
    keys = {k: storage_config.get(k) for k in SECRET_KEYS}
    if any(v == REDACTED for v in keys.values()):
        try:
            given = json.loads(os.environ.get(CREDENTIALS_ENV) or "{}")
        except ValueError:
            given = {}
        for k in SECRET_KEYS:
            if keys[k] == REDACTED:
                keys[k] = given.get(k) if isinstance(given, dict) else None
        if any(v in (None, REDACTED) for v in keys.values()):
            raise ValueError(
                "checkpoint_storage: access_key/secret_key are redacted ('********') and "
                f"{CREDENTIALS_ENV} does not hold them: pass the real keys (a config fetched "
                "from the master's API never carries them)"
            )
    return keys["access_key"], keys["secret_key"]


class S3StorageManager(BucketStorageManager):
    """Checkpoints under `s3://<bucket>/<prefix>/<uuid>/` (module doc).

    `base_path` is a local scratch directory (store/restore copies, TensorBoard files): nothing
    in it outlives the process that uses it as far as checkpoints go.
    """

    scheme = "s3"

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str | None = None,
        endpoint_url: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        temp_dir: str | os.PathLike | None = None,
    ) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as exc:
            raise ImportError(
                "checkpoint_storage type s3 needs boto3: pip install boto3 (or "
                "'jupyter-determined[s3]')"
            ) from exc
        super().__init__(bucket, prefix, temp_dir, "determined-s3")
        self.endpoint_url = endpoint_url
        session = boto3.session.Session(
            aws_access_key_id=access_key, aws_secret_access_key=secret_key
        )
        # A region is only needed to sign; S3-compatible stores accept us-east-1.
        region = session.region_name or ("us-east-1" if endpoint_url else None)
        self._client = session.client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region,
            config=Config(retries={"max_attempts": 5, "mode": "standard"}),
        )

    @classmethod
    def from_config(cls, storage_config: Mapping) -> S3StorageManager:
        problems = config_problems(storage_config)
        if problems:
            raise ValueError("; ".join(problems))
        access_key, secret_key = _credentials(storage_config)
        return cls(
            str(storage_config["bucket"]),
            prefix=storage_config.get("prefix"),
            endpoint_url=storage_config.get("endpoint_url"),
            access_key=access_key,
            secret_key=secret_key,
        )

    def _error(self, doing: str, exc: Exception) -> StorageError:
        """A message naming the store and the cause, never the credentials."""
        code, message = type(exc).__name__, str(exc)
        response = getattr(exc, "response", None)
        if isinstance(response, dict):
            error = response.get("Error") or {}
            code = str(error.get("Code") or code)
            message = str(error.get("Message") or message)
        hint = {
            "NoSuchBucket": "create the bucket or fix checkpoint_storage.bucket",
            "InvalidAccessKeyId": "check checkpoint_storage.access_key",
            "SignatureDoesNotMatch": "check checkpoint_storage.secret_key",
            "AccessDenied": "the keys may not use this bucket: check the bucket's policy",
            "NoCredentialsError": "give checkpoint_storage.access_key and secret_key",
            "EndpointConnectionError": "check checkpoint_storage.endpoint_url",
        }.get(code, "check checkpoint_storage (bucket, endpoint_url, access_key, secret_key)")
        endpoint = self.endpoint_url or "AWS"
        return StorageError(
            f"s3 checkpoint storage (bucket {self.bucket!r}, endpoint {endpoint}): {doing} "
            f"failed: {code}: {message}; {hint}"
        )

    def _call(self, doing: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(*args, **kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(doing, exc) from None
        except Boto3Error as exc:
            # The transfer manager's (S3UploadFailedError...) wraps the client's error.
            cause = exc.__context__ if isinstance(exc.__context__, ClientError) else exc
            raise self._error(doing, cause) from None

    def _list(self, storage_id: str) -> dict[str, int]:
        prefix = self._key_prefix(storage_id)
        found: dict[str, int] = {}

        def walk() -> None:
            for page in self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix
            ):
                for item in page.get("Contents") or ():
                    rel = item["Key"][len(prefix) :]
                    if rel:
                        found[rel] = int(item["Size"])

        self._call(f"listing {self.where(storage_id)}", walk)
        return found

    # --- moving files --------------------------------------------------------------------------
    def upload(
        self, src: str | os.PathLike, storage_id: str, paths: Sequence[str] | None = None
    ) -> None:
        """Upload `paths` (relative, dirs ending "/"; default everything) of src."""
        from determined.common.storage._shared import list_resources

        src = pathlib.Path(src)
        if paths is None:
            paths = list(list_resources(src))
        prefix = self._key_prefix(storage_id)
        files = []
        for rel in sorted(paths):
            if rel.endswith("/"):
                self._call(
                    f"uploading {rel}",
                    self._client.put_object,
                    Bucket=self.bucket,
                    Key=prefix + rel,
                    Body=b"",
                )
            else:
                files.append((str(src / rel), prefix + rel))
        self._transfer(
            f"uploading to {self.where(storage_id)}",
            lambda manager, local, key: manager.upload(local, self.bucket, key),
            files,
        )

    def _transfer(self, doing: str, start: Callable[..., Any], pairs: list) -> None:
        """Run `start(manager, local_path, key)` for every pair through one transfer manager:
        every file is in flight at once (up to its concurrency), not one after another."""
        if not pairs:
            return
        from boto3.s3.transfer import TransferConfig, create_transfer_manager

        def run() -> None:
            with create_transfer_manager(self._client, TransferConfig()) as manager:
                futures = [start(manager, local, key) for local, key in pairs]
                for future in futures:
                    future.result()

        self._call(doing, run)

    def download(
        self, storage_id: str, dst: str | os.PathLike, selector: Selector | None = None
    ) -> None:
        """Download the checkpoint's objects (those `selector` wants) into dst."""
        dst = pathlib.Path(dst)
        dst.mkdir(parents=True, exist_ok=True)
        prefix = self._key_prefix(storage_id)
        root = dst.resolve()
        files = []
        for rel in sorted(self.resources(storage_id)):
            if selector is not None and not selector(rel):
                continue
            target = dst / rel
            if not target.resolve().is_relative_to(root):
                continue  # an object key with `..` parts: never written outside dst
            if rel.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            files.append((str(target), prefix + rel))
        self._transfer(
            f"downloading from {self.where(storage_id)}",
            lambda manager, local, key: manager.download(self.bucket, key, local),
            files,
        )

    def delete(self, storage_id: str) -> dict[str, int]:
        """Delete every object of the checkpoint; the resources that were deleted."""
        found = self._list(storage_id)
        prefix = self._key_prefix(storage_id)
        keys = [prefix + rel for rel in found]
        for start in range(0, len(keys), 1000):  # delete_objects takes at most 1000 keys
            chunk = [{"Key": key} for key in keys[start : start + 1000]]
            answer = self._call(
                f"deleting {self.where(storage_id)}",
                self._client.delete_objects,
                Bucket=self.bucket,
                Delete={"Objects": chunk, "Quiet": True},
            )
            failed = answer.get("Errors") or []
            if failed:
                first = failed[0]
                raise StorageError(
                    f"s3 checkpoint storage (bucket {self.bucket!r}): deleting "
                    f"{self.where(storage_id)} failed for {len(failed)} object(s), e.g. "
                    f"{first.get('Key')}: {first.get('Code')}: {first.get('Message')}"
                )
        return found

    def check(self) -> None:
        """Raise StorageError unless the bucket is there and these keys may use it."""
        self._call("checking the bucket", self._client.head_bucket, Bucket=self.bucket)


__all__ = [
    "CREDENTIALS_ENV",
    "REDACTED",
    "SECRET_KEYS",
    "S3StorageManager",
    "StorageError",
    "config_problems",
    "location",
    "normalize_prefix",
]
