"""Combining the ranks' pieces of one checkpoint: their metadata, which rank uploads which
file, and the checks that shared files agree; and writing `metadata.json`.

Pure helpers of `CheckpointContext` (no storage or master I/O besides the files named).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
from typing import Any

METADATA_FILE = "metadata.json"


def merge_metadata(dicts: list[dict], ranks: list[int]) -> dict:
    """Deep-merge the metadata of several ranks; differing values for one key are an error."""
    merged: dict = {}

    def merge_into(target: dict, source: dict, rank: int, owners: dict, path: str) -> None:
        for key, value in source.items():
            where = f"{path}{key}"
            if key not in target:
                target[key] = value
                owners[where] = rank
            elif isinstance(target[key], dict) and isinstance(value, dict):
                target[key] = dict(target[key])
                merge_into(target[key], value, rank, owners, where + ".")
            elif target[key] != value:
                # The value came with the first rank that set this key or one of its parents.
                owner = next(owners[p] for p in _prefixes(where) if p in owners)
                raise RuntimeError(
                    f"checkpoint metadata conflict at {where!r}: rank {owner} has "
                    f"{target[key]!r}, rank {rank} has {value!r}"
                )

    owners: dict = {}
    for metadata, rank in zip(dicts, ranks, strict=False):
        merge_into(merged, metadata or {}, rank, owners, "")
    return merged


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


def md5(path: pathlib.Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_metadata(directory: pathlib.Path, metadata: dict) -> None:
    text = json.dumps(metadata, indent=2)  # one write: json.dump writes every token separately
    with open(directory / METADATA_FILE, "w") as f:
        f.write(text)


def assign_shards(
    everyone: list[tuple[Any, bool, list[str], Any]],
) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Which rank uploads which file of a sharded checkpoint.

    Args:
        everyone: per rank, ``(directory key, has a selector, sorted relative paths, metadata)``
            as allgathered by the upload; the key is None for a rank with no directory.

    Returns:
        ``(owner, contested)``: the uploading rank of each path, and for each file that several
        ranks have, those ranks (their copies must be identical).
    """
    # Which rank uploads which file: the lowest rank that has it; a directory shared by
    # several ranks (and unfiltered) is uploaded once, by its lowest rank.
    owner: dict[str, int] = {}
    contested: dict[str, list[int]] = {}
    seen_dirs: dict[Any, int] = {}
    for r, (key, has_selector, files, _) in enumerate(everyone):
        if key is None:
            continue
        if key in seen_dirs and not has_selector and not everyone[seen_dirs[key]][1]:
            continue
        seen_dirs.setdefault(key, r)
        for rel in files:
            if rel.endswith("/"):
                owner.setdefault(rel, r)
            elif rel in owner:
                contested.setdefault(rel, [owner[rel]]).append(r)
            else:
                owner[rel] = r
    return owner, contested
