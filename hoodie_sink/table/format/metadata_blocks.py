"""The log blocks of the metadata table (docs/hudi/metadata-table.md#log-blocks): what one
deltacommit appends to one file group, and what a reader gets back from a log file.

* upserts: one HFILE_DATA block, headers INSTANT_TIME and SCHEMA (the full HoodieMetadataRecord
  schema), content an HFile of the records' cells sorted by key;
* record-index deletes: one DELETE block, same headers, each key with partition path
  `record_index` and ordering value int 0;
* the empty DELETE block each file group starts with (metadata_layout.placeholder_log_block);
* rollback COMMAND blocks, read and passed on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from hoodie_sink.table.format.log_format import (
    COMMAND_BLOCK,
    DELETE_BLOCK,
    INSTANT_TIME,
    TARGET_INSTANT_TIME,
    LogBlock,
    delete_block,
    deleted_keys,
    read_blocks,
)
from hoodie_sink.table.format.metadata_keys import RECORD_INDEX
from hoodie_sink.table.format.metadata_records import MetadataRecord
from hoodie_sink.table.format.metadata_schema import METADATA_RECORD_SCHEMA

# the ordering value Java gives a metadata delete (HoodieMetadataPayload has none: int 0)
DELETE_ORDERING_VALUE = ("IntWrapper", 0)


def metadata_delete_block(keys: Iterable[str], instant: str, partition: str = RECORD_INDEX) -> LogBlock:
    """A DELETE block of metadata keys (in 0.15 only the record index deletes keys)."""
    entries = [(key, partition, DELETE_ORDERING_VALUE) for key in keys]
    return delete_block(entries, instant, METADATA_RECORD_SCHEMA)


@dataclass(frozen=True)
class MetadataLogBlock:
    """One block of a metadata log file, decoded: its instant, and either its records (HFILE_DATA,
    in cell order), its deleted keys (DELETE; none for the placeholder), or the instant a rollback
    COMMAND block undoes."""

    instant: str
    block_type: int
    records: list[MetadataRecord] = field(default_factory=list)
    deleted_keys: list[str] = field(default_factory=list)
    rollback_target: str | None = None


def _delete_or_command(block: LogBlock, name: str) -> MetadataLogBlock:
    instant = block.header.get(INSTANT_TIME, "")
    if block.block_type == COMMAND_BLOCK:
        return MetadataLogBlock(instant, COMMAND_BLOCK, rollback_target=block.header.get(TARGET_INSTANT_TIME))
    if block.block_type == DELETE_BLOCK:
        keys = [d["recordKey"] for d in deleted_keys(block)]
        if any(k is None for k in keys):
            raise ValueError(f"{name}: a metadata delete block at {instant} holds a null key")
        return MetadataLogBlock(instant, DELETE_BLOCK, deleted_keys=keys)
    raise ValueError(f"{name}: block type {block.block_type} at {instant} has no place in a metadata log")


def read_metadata_log(data: bytes, name: str = "metadata log file") -> list[MetadataLogBlock]:
    """Every block of a metadata log file, decoded, in file order."""
    return [_delete_or_command(block, name) for block in read_blocks(data, name)]
