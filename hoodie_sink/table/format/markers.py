"""Direct write markers: `.hoodie/.temp/<instant>/<partition>/<file>.marker.<IOType>` (format doc §8).

A marker is created before its data file, so after any failure the files an instant may
have left are known without listing the table: the commit deletes files of failed task
attempts, and a rollback deletes every file of a failed instant.
"""

from __future__ import annotations

import posixpath

from hoodie_sink.table.format.file_group import join_partition
from hoodie_sink.table.storage import Storage

TEMP_DIR = ".hoodie/.temp"
CREATE = "CREATE"
MERGE = "MERGE"
APPEND = "APPEND"
_SUFFIX = ".marker."


def marker_dir(instant: str) -> str:
    return f"{TEMP_DIR}/{instant}"


def create_marker(storage: Storage, instant: str, partition_path: str, file_name: str, io_type: str) -> None:
    rel = posixpath.join(
        marker_dir(instant), join_partition(partition_path, f"{file_name}{_SUFFIX}{io_type}")
    )
    storage.create_if_absent(rel)


def list_marked_files(storage: Storage, instant: str) -> list[tuple[str, str]]:
    """(data file path relative to the base path, IO type) for every marker of `instant`."""
    root = marker_dir(instant)
    out = []
    for rel in storage.walk_files(root):
        inner = rel[len(root) + 1 :] if rel.startswith(root + "/") else rel
        if _SUFFIX not in inner:
            continue
        data, _, io_type = inner.rpartition(_SUFFIX)
        out.append((data, io_type))
    return out


def delete_markers(storage: Storage, instant: str) -> None:
    storage.delete_dir(marker_dir(instant))
