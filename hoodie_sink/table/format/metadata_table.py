"""Hudi's metadata table (`.hoodie/metadata`) as the data table's hoodie.properties records it.

Java 0.14+ writers build the metadata table by default and list its partitions in
`hoodie.table.metadata.partitions` (and those being built in `...partitions.inflight`); a reader
lists files from it only while `files` is among them (`HoodieTableConfig.isMetadataTableAvailable`).
A writer that does not keep it removes it as Java's writers do when it is turned off
(`HoodieTableMetadataUtil.deleteMetadataTable`): these properties cleared, then the folder deleted.
"""

from __future__ import annotations

import posixpath

from hoodie_sink.table.format.properties import line_key, parse_properties, read_properties_text
from hoodie_sink.table.format.timeline.timeline import META_DIR
from hoodie_sink.table.storage import Storage

METADATA_TABLE_DIR = f"{META_DIR}/metadata"
K_METADATA_PARTITIONS = "hoodie.table.metadata.partitions"
K_METADATA_PARTITIONS_INFLIGHT = "hoodie.table.metadata.partitions.inflight"
METADATA_PARTITION_KEYS = (K_METADATA_PARTITIONS, K_METADATA_PARTITIONS_INFLIGHT)
FILES_PARTITION = "files"


def metadata_storage(storage: Storage) -> Storage:
    """The metadata table's own storage, rooted at `<base>/.hoodie/metadata`: it is a Hudi table of
    its own, so the data table's Storage, Timeline and TimelineStore serve it there."""
    return Storage(posixpath.join(storage.base_uri.rstrip("/"), METADATA_TABLE_DIR), storage.options)


def is_metadata_storage(storage: Storage) -> bool:
    """Whether `storage` is rooted at a metadata table (what `metadata_storage` returns)."""
    return storage.base_uri.rstrip("/").endswith(f"/{METADATA_TABLE_DIR}")


def lists_through_metadata_table(storage: Storage) -> bool:
    """Whether the data table's hoodie.properties (read now) lists the `files` partition, so that
    readers list its files through the metadata table."""
    return has_files_partition(parse_properties(read_properties_text(storage)[0]))


def listed_partitions(props: dict[str, str]) -> list[str]:
    """The metadata-table partitions the data table's properties list as built."""
    return [p for p in (s.strip() for s in props.get(K_METADATA_PARTITIONS, "").split(",")) if p]


def has_files_partition(props: dict[str, str]) -> bool:
    """Whether readers list files through the metadata table (Java's isMetadataTableAvailable)."""
    return FILES_PARTITION in listed_partitions(props)


def lists_metadata_partitions(props: dict[str, str]) -> bool:
    """Whether the properties name any metadata-table partition (built or being built)."""
    return any(props.get(k, "").strip() for k in METADATA_PARTITION_KEYS)


def without_metadata_partitions(text: str) -> str:
    """hoodie.properties text with no metadata-table partition, as Java leaves it after deleting
    the table (the keys stay, empty).  Every other line is kept as it is: re-rendering the whole
    file would re-escape (or fail to escape) values that Java wrote."""
    lines = [
        f"{line_key(line)}=" if line_key(line) in METADATA_PARTITION_KEYS else line
        for line in text.splitlines()
    ]
    return "\n".join(lines) + "\n"
