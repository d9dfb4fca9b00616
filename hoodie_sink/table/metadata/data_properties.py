"""The data-table properties that point at the metadata table, read and rewritten (I/O).

Java trusts the metadata table only while the data table's `hoodie.table.metadata.partitions`
lists `files` (HoodieTableConfig.isMetadataTableAvailable;
docs/hudi/metadata-table-protocol.md#data-table-properties).
"""

from __future__ import annotations

import posixpath

from hoodie_sink.table.format.metadata_table import K_METADATA_PARTITIONS
from hoodie_sink.table.format.properties import (
    PROPERTIES_FILE,
    parse_properties,
    read_properties_text,
    with_properties_set,
)
from hoodie_sink.table.storage import Storage

PROPERTIES_CRC = posixpath.join(
    posixpath.dirname(PROPERTIES_FILE), f".{posixpath.basename(PROPERTIES_FILE)}.crc"
)


def read_data_properties(storage: Storage) -> dict[str, str]:
    return parse_properties(read_properties_text(storage)[0])


def set_listed_partitions(storage: Storage, partitions: list[str]) -> None:
    """Rewrite `hoodie.table.metadata.partitions` (sorted, comma-joined, as Java writes it), every
    other line kept.  Hadoop's `.crc` sibling goes first: a stale one makes Java fail to load the
    new properties (metadata/removal.py)."""
    text, encoding = read_properties_text(storage)
    storage.delete(PROPERTIES_CRC)
    value = ",".join(sorted(set(partitions)))
    storage.write_atomic(
        PROPERTIES_FILE, with_properties_set(text, {K_METADATA_PARTITIONS: value}).encode(encoding)
    )
