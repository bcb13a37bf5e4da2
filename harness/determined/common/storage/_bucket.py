"""What the bucket storage types (`_s3`, `_gcs`) share: a checkpoint `<uuid>` is every object
under `<prefix>/<uuid>/` of one bucket; `store_path` hands out a scratch directory uploaded
when the block ends, `restore_path` downloads into one. Each type brings its client: `_list`,
`upload`, `download`, `delete` and its errors. The config rules both follow (`bucket`,
`prefix`: `bucket_problems`, `normalize_prefix`) and `StorageError` are here too."""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence

Selector = Callable[[str], bool]


class StorageError(RuntimeError):
    """The store refused or could not be reached; the message says which bucket and why."""


_BAD_PREFIX = re.compile(r"(^|/)\.\.(/|$)")


def normalize_prefix(prefix: str | None) -> str:
    """The key prefix without leading/trailing slashes; ValueError for one with `..` parts
    (Determined's rule: a prefix may not climb out of itself)."""
    if not prefix:
        return ""
    if _BAD_PREFIX.search(prefix):
        raise ValueError(f"checkpoint_storage.prefix: {prefix!r} must not contain '..' path parts")
    normalized = os.path.normpath(prefix).strip("/")
    return "" if normalized == "." else normalized


def bucket_problems(storage_config: Mapping, what_bucket: str) -> list[str]:
    """What is wrong with a bucket type's `bucket` and `prefix` (empty: nothing), naming the key;
    `what_bucket` says what the bucket is ("type s3 (the name of the bucket ...)")."""
    problems = []
    bucket = storage_config.get("bucket")
    if not isinstance(bucket, str) or not bucket:
        problems.append(f"checkpoint_storage.bucket: required for {what_bucket}")
    try:
        normalize_prefix(storage_config.get("prefix"))
    except ValueError as exc:
        problems.append(str(exc))
    return problems


def bucket_location(scheme: str, storage_config: Mapping, storage_id: str) -> str:
    """`<scheme>://bucket/prefix/uuid`: where a checkpoint's objects are (no credentials)."""
    prefix = normalize_prefix(storage_config.get("prefix"))
    key = f"{prefix}/{storage_id}" if prefix else storage_id
    return f"{scheme}://{storage_config.get('bucket')}/{key}"


class BucketStorageManager:
    """The naming, listing and scratch directories of a bucket type; `scheme` ("s3", "gs")
    names its URLs. `base_path` is a local scratch directory (store/restore copies): nothing in
    it outlives the block that uses it."""

    is_local = False
    scheme = ""
    bucket: str
    prefix: str

    def __init__(
        self,
        bucket: str,
        prefix: str | None,
        temp_dir: str | os.PathLike | None,
        scratch_name: str,
    ) -> None:
        self.bucket = bucket
        self.prefix = normalize_prefix(prefix)  # ValueError for one that climbs out of itself
        self.base_path = pathlib.Path(temp_dir or tempfile.gettempdir()) / scratch_name

    # --- naming --------------------------------------------------------------------------------
    def _key_prefix(self, storage_id: str) -> str:
        return f"{self.prefix}/{storage_id}/" if self.prefix else f"{storage_id}/"

    def where(self, storage_id: str) -> str:
        return f"{self.scheme}://{self.bucket}/{self._key_prefix(storage_id)}"

    # --- what each type implements ------------------------------------------------------------
    def _list(self, storage_id: str) -> dict[str, int]:
        raise NotImplementedError

    def upload(
        self, src: str | os.PathLike, storage_id: str, paths: Sequence[str] | None = None
    ) -> None:
        raise NotImplementedError

    def download(
        self, storage_id: str, dst: str | os.PathLike, selector: Selector | None = None
    ) -> None:
        raise NotImplementedError

    # --- listing -------------------------------------------------------------------------------
    def resources(self, storage_id: str) -> dict[str, int]:
        """Relative path -> size of every object of the checkpoint ("dir/" entries size 0);
        CheckpointNotFound when it has none."""
        from determined.errors import CheckpointNotFound

        found = self._list(storage_id)
        if not found:
            raise CheckpointNotFound(
                f"checkpoint {storage_id} not found: no objects under {self.where(storage_id)}"
            )
        return found

    # --- scratch directories -------------------------------------------------------------------
    def _scratch(self, storage_id: str) -> pathlib.Path:
        self.base_path.mkdir(parents=True, exist_ok=True)
        return pathlib.Path(tempfile.mkdtemp(prefix=f"{storage_id}-", dir=self.base_path))

    @contextlib.contextmanager
    def store_path(self, storage_id: str) -> Iterator[pathlib.Path]:
        """A scratch directory, uploaded when the block ends normally, then removed."""
        path = self._scratch(storage_id)
        try:
            yield path
            self.upload(path, storage_id)
        finally:
            shutil.rmtree(path, ignore_errors=True)

    @contextlib.contextmanager
    def restore_path(
        self, storage_id: str, selector: Selector | None = None
    ) -> Iterator[pathlib.Path]:
        """The checkpoint (the files `selector` wants) downloaded into a scratch directory,
        removed when the block ends."""
        path = self._scratch(storage_id)
        try:
            self.download(storage_id, path, selector)
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)


__all__ = ["BucketStorageManager", "Selector"]
