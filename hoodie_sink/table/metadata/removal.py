"""Removing Hudi's metadata table, when a write of ours runs with hoodie.metadata.enable=false
(format/metadata_table.py says why), or before a restore rebuilds it.

Order, as Java's `deleteMetadataTable`: hoodie.properties first, then the folder.  Java's readers
use the metadata table only while the properties list its `files` partition, so every crash
window leaves a table Java reads right:
- before the properties are rewritten: nothing changed; our write has not begun (no instant, no
  data file), so the metadata table still matches the timeline.
- between the properties and the folder: readers list the storage; the stale folder is deleted
  by our next write (or rebuilt from scratch by a Java writer that has it enabled).
- after both: the write goes on; its commit is visible to Java readers, which list files.
Runs on the driver at begin, before the instant is created and before any data file is written:
a commit of ours never lands while the properties still promise a metadata table that lacks it.
"""

from __future__ import annotations

import logging

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.metadata_table import (
    METADATA_TABLE_DIR,
    lists_metadata_partitions,
    without_metadata_partitions,
)
from hoodie_sink.table.format.properties import PROPERTIES_FILE, read_properties_text
from hoodie_sink.table.metadata.data_properties import PROPERTIES_CRC, read_data_properties
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)


def remove_metadata_table(storage: Storage, props: dict[str, str] | None = None) -> bool:
    """Clear the metadata-table partitions in hoodie.properties, then delete `.hoodie/metadata`.
    `props`: the properties the caller has just read (saves a read when there is nothing to do).
    Whether there was anything to remove."""
    listed = lists_metadata_partitions(props if props is not None else read_data_properties(storage))
    if listed:
        _clear_partitions(storage)
    present = storage.is_dir(METADATA_TABLE_DIR)
    if present:
        storage.delete_dir(METADATA_TABLE_DIR)
    if listed or present:
        log.info(
            "hoodie: removed Hudi's metadata table of %s (hoodie.metadata.enable=false)", storage.base_uri
        )
    return listed or present


def _clear_partitions(storage: Storage) -> None:
    text, encoding = read_properties_text(storage)
    try:
        # Hadoop's local file system (file://, where Java wrote this table) checks a file against
        # its `.<name>.crc` sibling: a stale one makes Java fail to load the new properties.
        # Deleted first, so no reader ever sees new content with the old checksum.
        storage.delete(PROPERTIES_CRC)
        storage.write_atomic(PROPERTIES_FILE, without_metadata_partitions(text).encode(encoding))
    except OSError as e:
        raise HoodieTableError(
            f"Could not clear hoodie.table.metadata.partitions in {PROPERTIES_FILE} of {storage.base_uri}: {e}. "
            "Nothing was written: a commit that Hudi's metadata table does not list would be invisible to "
            "Java readers."
        ) from e
