"""What the master gives the harness in-process (`determined.common.hooks`): the searcher
preview of `det preview-search`, which runs the master's searchers without a master."""

from __future__ import annotations

from typing import Any

from determined.common import hooks


def search_preview(config: dict[str, Any]) -> str:
    # Imported on use: a kernel looking for the notebook hooks may import this module too.
    from master_lite.searcher import format_preview

    return format_preview(config)


hooks.register(hooks.SEARCH_PREVIEW, search_preview)
