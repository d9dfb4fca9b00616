"""`.hoodie_partition_metadata`: the file by which Java discovers partitions
(docs/hudi/format.md#partition-metadata)."""

from __future__ import annotations

from datetime import datetime, timezone

from hoodie_sink.table.format.file_group import PARTITION_METAFILE, join_partition
from hoodie_sink.table.storage import Storage


def partition_depth(partition_path: str) -> int:
    return len(partition_path.split("/")) if partition_path else 0


def partition_metadata_text(partition_path: str, instant: str) -> str:
    return (
        "#partition metadata\n"
        f"#{datetime.now(timezone.utc).ctime()}\n"
        f"commitTime={instant}\n"
        f"partitionDepth={partition_depth(partition_path)}\n"
    )


def ensure_partition_metadata(storage: Storage, partition_path: str, instant: str) -> bool:
    """Write the partition's metadata file unless present.  Returns whether this call wrote it."""
    rel = join_partition(partition_path, PARTITION_METAFILE)
    if storage.exists(rel):
        return False
    return storage.create_if_absent(rel, partition_metadata_text(partition_path, instant).encode("utf-8"))
