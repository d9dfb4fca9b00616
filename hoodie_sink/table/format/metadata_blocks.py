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

from hoodie_sink.table.format.hfile import HFileReader, write_hfile
from hoodie_sink.table.format.log_format import (
    COMMAND_BLOCK,
    DELETE_BLOCK,
    HFILE_DATA_BLOCK,
    INSTANT_TIME,
    SCHEMA,
    TARGET_INSTANT_TIME,
    LogBlock,
    delete_block,
    deleted_keys,
    read_blocks,
)
from hoodie_sink.table.format.metadata_keys import RECORD_INDEX
from hoodie_sink.table.format.metadata_records import MetadataRecord, decode_record, encode_record
from hoodie_sink.table.format.metadata_schema import METADATA_RECORD_SCHEMA, METADATA_RECORD_SCHEMA_JSON

SCHEMA_FILE_INFO = b"schema"  # the HFile file-info entry holding the record schema
LOG_BLOCK_SIZE = 1 << 20  # HFileUtils.DEFAULT_BLOCK_SIZE_FOR_LOG_FILE

# the ordering value Java gives a metadata delete (HoodieMetadataPayload has none: int 0)
DELETE_ORDERING_VALUE = ("IntWrapper", 0)


def metadata_hfile(
    records: Iterable[MetadataRecord],
    file_name: str | None = None,
    *,
    file_info: dict[bytes, bytes] | None = None,
    meta_blocks: dict[str, bytes] | None = None,
) -> bytes:
    """An HFile of records, one cell each, sorted by key bytes; records of one key keep their
    order (Java's TreeMap of lists, docs/hudi/metadata-table.md#log-blocks).  With `file_name` (a
    base file's own name) the cells carry it in `_hoodie_file_name`, and keys must be unique; a
    base file as Java writes it also has the `bloomFilter` meta block and the file-info entries
    `bloomFilterTypeCode`, `minRecordKey`, `maxRecordKey`, which the caller passes."""
    cells = sorted((encode_record(r, file_name) for r in records), key=lambda cell: cell[0])  # stable
    return write_hfile(
        [k for k, _ in cells],
        [v for _, v in cells],
        file_info={SCHEMA_FILE_INFO: METADATA_RECORD_SCHEMA_JSON.encode("utf-8"), **(file_info or {})},
        meta_blocks=meta_blocks,
        block_size=LOG_BLOCK_SIZE,
        unique=file_name is not None,
    )


def metadata_data_block(records: Iterable[MetadataRecord], instant: str) -> LogBlock:
    """The HFILE_DATA block of one deltacommit's records for one file group.  Java writes no
    block for a file group without records: neither should a caller."""
    header = {INSTANT_TIME: instant, SCHEMA: METADATA_RECORD_SCHEMA_JSON}
    return LogBlock(HFILE_DATA_BLOCK, header, metadata_hfile(records))


def read_metadata_hfile(data: bytes, name: str = "metadata HFile") -> list[MetadataRecord]:
    """Every record of an HFile (a base file, or a data block's content), in cell order."""
    keys, values = HFileReader(data, name=name).keys_and_values()
    return [decode_record(k, v, name) for k, v in zip(keys.to_pylist(), values.to_pylist(), strict=True)]


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
    out = []
    for block in read_blocks(data, name):
        if block.block_type == HFILE_DATA_BLOCK:
            instant = block.header.get(INSTANT_TIME, "")
            records = read_metadata_hfile(block.content, f"{name} (block of {instant})")
            out.append(MetadataLogBlock(instant, HFILE_DATA_BLOCK, records=records))
        else:
            out.append(_delete_or_command(block, name))
    return out
