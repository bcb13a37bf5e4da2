"""Checkpoint storage: where a checkpoint lives and how files get there.

`_shared`: the storage types that are directories on this machine (`shared_fs`, `directory`) and
the path helpers the master and the harness share; `_s3`: `s3` buckets (any S3-compatible store);
`_gcs`: `gcs` buckets (Google Cloud Storage); `_bucket`: what the two bucket types share (layout,
listing, scratch directories).
`StorageManager.from_config` returns the manager of a config's type; both have one interface
(`store_path`, `restore_path`, `upload`, `download`, `resources`, `delete`, `is_local`).
"""

from determined.common.storage._bucket import StorageError, normalize_prefix
from determined.common.storage._gcs import GCSStorageManager
from determined.common.storage._gcs import config_problems as gcs_config_problems
from determined.common.storage._gcs import location as gcs_location
from determined.common.storage._s3 import (
    CREDENTIALS_ENV,
    REDACTED,
    S3StorageManager,
)
from determined.common.storage._s3 import config_problems as s3_config_problems
from determined.common.storage._s3 import location as s3_location
from determined.common.storage._shared import (
    LOCAL_TYPES,
    SUPPORTED_TYPES,
    Selector,
    StorageManager,
    _copy_selected,
    checkpoint_base,
    checkpoint_dir,
    default_user_data_dir,
    from_override,
    list_resources,
)

__all__ = [
    "CREDENTIALS_ENV",
    "GCSStorageManager",
    "LOCAL_TYPES",
    "REDACTED",
    "SUPPORTED_TYPES",
    "S3StorageManager",
    "Selector",
    "StorageError",
    "StorageManager",
    "_copy_selected",
    "checkpoint_base",
    "checkpoint_dir",
    "default_user_data_dir",
    "from_override",
    "gcs_config_problems",
    "gcs_location",
    "list_resources",
    "normalize_prefix",
    "s3_config_problems",
    "s3_location",
]
