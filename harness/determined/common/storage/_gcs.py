"""`checkpoint_storage: {type: gcs, bucket, prefix?}`: checkpoints as objects of a Google Cloud
Storage bucket, through google-cloud-storage (Determined's own choice of library).

The layout is the s3 one (`_s3.py`): a checkpoint `<uuid>` is every object under
`<prefix>/<uuid>/`, an empty object whose name ends with "/" standing for an empty directory.

Credentials: Application Default Credentials, as Determined (GOOGLE_APPLICATION_CREDENTIALS on
the node and the master, or the metadata server of a GCE/GKE node); the config holds none, so
there is nothing to redact. With STORAGE_EMULATOR_HOST set (an emulator, in tests), the client
talks to it with anonymous credentials, as google-cloud-storage itself does.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
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
)

#: How many objects move at once (uploads, downloads, deletes).
_WORKERS = 8
_CREDENTIALS_HINT = (
    "set GOOGLE_APPLICATION_CREDENTIALS to a service account key file (or run "
    "`gcloud auth application-default login`) on the node and the master"
)


def config_problems(storage_config: Mapping) -> list[str]:
    """What is wrong with a gcs `checkpoint_storage` (empty: nothing), naming the key."""
    return bucket_problems(
        storage_config,
        "type gcs (the name of the Google Cloud Storage bucket checkpoints go to)",
    )


def location(storage_config: Mapping, storage_id: str) -> str:
    """`gs://bucket/prefix/uuid`: where a checkpoint's objects are."""
    return bucket_location("gs", storage_config, storage_id)


class GCSStorageManager(BucketStorageManager):
    """Checkpoints under `gs://<bucket>/<prefix>/<uuid>/` (module doc); the interface of
    `S3StorageManager`. The client is made on first use, so a bad credential setup fails the
    operation that needs it with a StorageError naming the bucket."""

    scheme = "gs"

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str | None = None,
        temp_dir: str | os.PathLike | None = None,
    ) -> None:
        try:
            import google.cloud.storage  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "checkpoint_storage type gcs needs google-cloud-storage: "
                "pip install google-cloud-storage (or 'jupyter-determined[gcs]')"
            ) from exc
        super().__init__(bucket, prefix, temp_dir, "determined-gcs")
        self._client: Any = None

    @classmethod
    def from_config(cls, storage_config: Mapping) -> GCSStorageManager:
        problems = config_problems(storage_config)
        if problems:
            raise ValueError("; ".join(problems))
        return cls(str(storage_config["bucket"]), prefix=storage_config.get("prefix"))

    # --- errors --------------------------------------------------------------------------------
    def _error(self, doing: str, exc: Exception) -> StorageError:
        code = getattr(exc, "code", None)
        name = type(exc).__name__
        if name == "DefaultCredentialsError":
            hint = f"no Google credentials found: {_CREDENTIALS_HINT}"
        elif code == 404:
            hint = "create the bucket or fix checkpoint_storage.bucket"
        elif code in (401, 403):
            hint = "these credentials may not use this bucket: check its IAM permissions"
        else:
            hint = "check checkpoint_storage.bucket and the Google credentials"
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        endpoint = f", emulator {emulator}" if emulator else ""
        message = str(exc).splitlines()[0] if str(exc) else name
        return StorageError(
            f"gcs checkpoint storage (bucket {self.bucket!r}{endpoint}): {doing} failed: "
            f"{name}: {message}; {hint}"
        )

    def _call(self, doing: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from google.api_core.exceptions import GoogleAPIError
        from google.auth.exceptions import GoogleAuthError

        try:
            return fn(*args, **kwargs)
        except (GoogleAPIError, GoogleAuthError) as exc:
            raise self._error(doing, exc) from None

    def _bucket(self) -> Any:
        if self._client is None:
            from google.cloud import storage as gcs

            def make() -> Any:
                # Client() reads STORAGE_EMULATOR_HOST itself (anonymous credentials then),
                # else Application Default Credentials.
                try:
                    return gcs.Client()
                except OSError:
                    # Credentials without a project (a user's `gcloud auth
                    # application-default login`): objects of a named bucket need none.
                    return gcs.Client(project=None)

            self._client = self._call("finding Google credentials", make)
        return self._client.bucket(self.bucket)

    def _each(self, doing: str, fn: Callable[[Any], Any], items: Sequence[Any]) -> None:
        """`fn(item)` for every item, several at once; the first failure is raised."""
        if not items:
            return
        with concurrent.futures.ThreadPoolExecutor(min(_WORKERS, len(items))) as pool:
            for future in [pool.submit(self._call, doing, fn, item) for item in items]:
                future.result()

    def _list(self, storage_id: str) -> dict[str, int]:
        prefix = self._key_prefix(storage_id)

        def walk() -> dict[str, int]:
            found = {}
            for blob in self._bucket().list_blobs(prefix=prefix):
                rel = blob.name[len(prefix) :]
                if rel:
                    found[rel] = int(blob.size or 0)
            return found

        return dict(self._call(f"listing {self.where(storage_id)}", walk))

    # --- moving files --------------------------------------------------------------------------
    def upload(
        self, src: str | os.PathLike, storage_id: str, paths: Sequence[str] | None = None
    ) -> None:
        """Upload `paths` (relative, dirs ending "/"; default everything) of src."""
        from determined.common.storage._shared import list_resources

        src = pathlib.Path(src)
        if paths is None:
            paths = list(list_resources(src))
        bucket, prefix = self._bucket(), self._key_prefix(storage_id)

        def put(rel: str) -> None:
            blob = bucket.blob(prefix + rel)
            if rel.endswith("/"):
                blob.upload_from_string(b"")
            else:
                blob.upload_from_filename(str(src / rel))

        self._each(f"uploading to {self.where(storage_id)}", put, sorted(paths))

    def download(
        self, storage_id: str, dst: str | os.PathLike, selector: Selector | None = None
    ) -> None:
        """Download the checkpoint's objects (those `selector` wants) into dst."""
        dst = pathlib.Path(dst)
        dst.mkdir(parents=True, exist_ok=True)
        root = dst.resolve()
        bucket, prefix = self._bucket(), self._key_prefix(storage_id)
        files = []
        for rel in sorted(self.resources(storage_id)):
            if selector is not None and not selector(rel):
                continue
            target = dst / rel
            if not target.resolve().is_relative_to(root):
                continue  # an object name with `..` parts: never written outside dst
            if rel.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            files.append((rel, target))
        self._each(
            f"downloading from {self.where(storage_id)}",
            lambda item: bucket.blob(prefix + item[0]).download_to_filename(str(item[1])),
            files,
        )

    def delete(self, storage_id: str) -> dict[str, int]:
        """Delete every object of the checkpoint; the resources that were deleted."""
        from google.api_core.exceptions import NotFound

        found = self._list(storage_id)
        bucket, prefix = self._bucket(), self._key_prefix(storage_id)

        def remove(rel: str) -> None:
            with contextlib.suppress(NotFound):  # gone already: what a delete wants
                bucket.blob(prefix + rel).delete()

        self._each(f"deleting {self.where(storage_id)}", remove, sorted(found))
        return found

    def check(self) -> None:
        """Raise StorageError unless the bucket is there and these credentials may use it."""
        self._call("checking the bucket", lambda: self._bucket().reload())


__all__ = ["GCSStorageManager", "config_problems", "location"]
