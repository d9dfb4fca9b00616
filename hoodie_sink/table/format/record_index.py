"""The metadata table's `record_index` partition as Arrow tables (pure, vectorised).

A record-index entry maps a data record key to its location (docs/hudi/metadata-table.md#record-index-values):
partition path, data file id (stored as the UUID's two signed longs and the `-<n>` index), and the
inserting instant as epoch milliseconds.  Here an entry set is an Arrow table of `ENTRY_SCHEMA`;
these functions turn one into HFile cells and back without a Python object per record: the Avro
value of an entry depends only on (partition, file id, instant), of which a write or a file group
has few, so each distinct value is encoded once and gathered (`pc.take`) for every key.

Keys go to file groups by Java's `String.hashCode` (metadata_keys.file_group_indexes,
HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex at release-0.15.0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.bloom import BloomFilter
from hoodie_sink.table.format.hfile import HFileReader, write_hfile
from hoodie_sink.table.format.log_format import HFILE_DATA_BLOCK, INSTANT_TIME, SCHEMA, LogBlock
from hoodie_sink.table.format.metadata_blocks import LOG_BLOCK_SIZE, SCHEMA_FILE_INFO, metadata_delete_block
from hoodie_sink.table.format.metadata_keys import TYPE_RECORD_INDEX, file_group_indexes
from hoodie_sink.table.format.metadata_records import (
    MetadataRecord,
    RecordIndexInfo,
    decode_record,
    encode_record,
    split_file_id,
)
from hoodie_sink.table.format.metadata_schema import METADATA_RECORD_SCHEMA_JSON

KEY, PARTITION, FILE_ID, INSTANT_MS = "key", "partition", "file_id", "instant_ms"
ENTRY_SCHEMA = pa.schema(
    [(KEY, pa.string()), (PARTITION, pa.string()), (FILE_ID, pa.string()), (INSTANT_MS, pa.int64())]
)
DELETED = "deleted"  # a layer's column: the key is removed (a DELETE block) rather than set


@dataclass
class RecordIndexChange:
    """What one instant does to the record index: entries to set, keys to remove."""

    upserts: pa.Table = field(default_factory=ENTRY_SCHEMA.empty_table)
    deletes: pa.Array = field(default_factory=lambda: pa.array([], pa.string()))

    @property
    def empty(self) -> bool:
        return self.upserts.num_rows == 0 and len(self.deletes) == 0


def entries(keys: pa.Array, partitions: pa.Array, file_ids: pa.Array, instant_ms: int | pa.Array) -> pa.Table:
    """An entry table; `instant_ms` one value for all, or one per key."""
    n = len(keys)
    ms = pa.array(np.full(n, instant_ms, np.int64)) if isinstance(instant_ms, int) else instant_ms
    return pa.Table.from_arrays(
        [
            keys.cast(pa.string()),
            partitions.cast(pa.string()),
            file_ids.cast(pa.string()),
            ms.cast(pa.int64()),
        ],
        schema=ENTRY_SCHEMA,
    )


def by_file_group(table: pa.Table, file_groups: int) -> dict[int, pa.Table]:
    """The rows of `table` (a `KEY` column) per record-index file group that holds their key."""
    if table.num_rows == 0:
        return {}
    groups = file_group_indexes(table.column(KEY), file_groups)
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    bounds = np.flatnonzero(np.diff(sorted_groups)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(order)]))
    taken = table.take(pa.array(order))
    return {int(sorted_groups[s]): taken.slice(s, e - s) for s, e in zip(starts, ends, strict=True)}


# ------------------------------------------------------------------------------------ encoding


def encode_values(table: pa.Table, file_name: str | None = None) -> pa.BinaryArray:
    """The cell value (HoodieMetadataRecord Avro datum, key "") of every entry, in row order;
    `file_name`: a base file's own name, written in `_hoodie_file_name`."""
    if table.num_rows == 0:
        return pa.array([], pa.binary())
    codes, distinct = _distinct_locations(table)
    values = [_value(p, f, ms, file_name) for p, f, ms in distinct]  # few: one per location
    return pc.take(pa.array(values, pa.binary()), pa.array(codes))


def _distinct_locations(table: pa.Table) -> tuple[np.ndarray, list[tuple[str, str, int]]]:
    """Per row the index of its (partition, file id, instant) among the distinct ones, and those."""
    columns = []
    for name in (PARTITION, FILE_ID, INSTANT_MS):
        encoded = table.column(name).combine_chunks().dictionary_encode()
        columns.append((encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary))
    (pi, pd), (fi, fd), (ii, idd) = columns
    combined = (pi * len(fd) + fi) * len(idd) + ii
    unique, inverse = np.unique(combined, return_inverse=True)
    distinct = []
    for code in unique.tolist():
        rest, i = divmod(code, len(idd))
        p, f = divmod(rest, len(fd))
        distinct.append((pd[p].as_py(), fd[f].as_py(), idd[i].as_py()))
    return inverse, distinct


def _value(partition: str, file_id: str, instant_ms: int, file_name: str | None) -> bytes:
    high, low, index = split_file_id(file_id)
    info = RecordIndexInfo(partition, high, low, index, "", instant_ms)
    return encode_record(MetadataRecord("", TYPE_RECORD_INDEX, record_index=info), file_name)[1]


def sorted_entries(table: pa.Table) -> pa.Table:
    """Rows by key bytes (Arrow compares strings bytewise, as the HFile comparator does), one per
    key: a key given twice keeps its newest instant's row (`newest_per_key`)."""
    ordered = table.take(pc.sort_indices(table.column(KEY)))
    keys = ordered.column(KEY).combine_chunks()
    if len(keys) > 1 and pc.any(pc.equal(keys.slice(1), keys.slice(0, len(keys) - 1))).as_py():
        return newest_per_key(table)  # rare: the slow sort on two columns only then
    return ordered


def entries_hfile(table: pa.Table, file_name: str | None = None, *, base: bool = False) -> bytes:
    """An HFile of entries (one cell each, keys unique), as a log block holds or, with `base`, as a
    base file holds them (`file_name` in the values; bloom filter and key range: `base_extras`)."""
    ordered = sorted_entries(table)
    keys = ordered.column(KEY).combine_chunks().cast(pa.binary())
    values = encode_values(ordered, file_name if base else None)
    info = {SCHEMA_FILE_INFO: METADATA_RECORD_SCHEMA_JSON.encode("utf-8")}
    meta = None
    if base:
        extra_info, meta = base_extras(ordered.column(KEY).combine_chunks())
        info.update(extra_info)
    return write_hfile(keys, values, file_info=info, meta_blocks=meta, block_size=LOG_BLOCK_SIZE, unique=True)


def base_extras(sorted_keys: pa.Array) -> tuple[dict[bytes, bytes], dict[str, bytes]]:
    """A base file's file-info entries and `bloomFilter` meta block (HoodieAvroHFileWriter;
    docs/hudi/metadata-table-protocol.md#hfile-base-files): a bloom filter of the keys, the key range."""
    bloom = BloomFilter.new_dynamic()
    n = len(sorted_keys)
    if n:
        bloom.add_keys(sorted_keys)
    first = sorted_keys[0].as_py().encode("utf-8") if n else b""
    last = sorted_keys[n - 1].as_py().encode("utf-8") if n else b""
    info = {
        b"bloomFilterTypeCode": bloom.type_code.encode("utf-8"),
        b"minRecordKey": first,
        b"maxRecordKey": last,
    }
    return info, {"bloomFilter": bloom.to_base64().encode("utf-8")}


def upsert_block(table: pa.Table, instant: str) -> LogBlock:
    """The HFILE_DATA block of one instant's entries for one file group."""
    header = {INSTANT_TIME: instant, SCHEMA: METADATA_RECORD_SCHEMA_JSON}
    return LogBlock(HFILE_DATA_BLOCK, header, entries_hfile(table))


def delete_block(keys: pa.Array, instant: str) -> LogBlock:
    """The DELETE block of one instant's removed keys for one file group (partitionPath
    `record_index`, ordering value int 0, as Java writes them)."""
    return metadata_delete_block(keys.to_pylist(), instant)


# ------------------------------------------------------------------------------------ decoding


def decode_hfile(data: bytes, name: str) -> pa.Table:
    """The entries of a record-index HFile (base file or block content), in cell order."""
    keys, values = HFileReader(data, name=name).keys_and_values()
    return decode_values(keys, values, name)


def decode_values(keys: pa.Array, values: pa.Array, name: str) -> pa.Table:
    if len(keys) == 0:
        return ENTRY_SCHEMA.empty_table()
    encoded = values.dictionary_encode()
    partitions, file_ids, millis = [], [], []
    for raw in encoded.dictionary.to_pylist():  # few distinct values
        record = decode_record(b"", raw, name)
        info = record.record_index
        if record.type != TYPE_RECORD_INDEX or info is None:
            raise ValueError(f"{name}: a record of type {record.type} in the record index")
        partitions.append(info.partition)
        file_ids.append(info.location_file_id())
        millis.append(info.instant_time_ms)
    idx = encoded.indices
    return pa.Table.from_arrays(
        [keys.cast(pa.string()), pc.take(pa.array(partitions, pa.string()), idx),
         pc.take(pa.array(file_ids, pa.string()), idx), pc.take(pa.array(millis, pa.int64()), idx)],
        schema=ENTRY_SCHEMA,
    )  # fmt: skip


# ------------------------------------------------------------------------------------ merging


def as_layer(table: pa.Table, deleted: bool) -> pa.Table:
    """Entries (or, with `deleted`, keys whose other columns are null) as one layer to merge."""
    if deleted:
        n = table.num_rows
        table = pa.Table.from_arrays(
            [table.column(KEY).cast(pa.string()), pa.nulls(n, pa.string()), pa.nulls(n, pa.string()),
             pa.nulls(n, pa.int64())],
            schema=ENTRY_SCHEMA,
        )  # fmt: skip
    return table.append_column(DELETED, pa.array(np.full(table.num_rows, deleted)))


def merge_layers(layers: list[pa.Table]) -> pa.Table:
    """Layers oldest first (base file, then each applied block): per key the newest layer's row
    wins (HoodieMetadataPayload: newer replaces older; a delete removes); deleted keys dropped."""
    if not layers:
        return ENTRY_SCHEMA.empty_table()
    stacked = pa.concat_tables(
        [
            lay.append_column("_layer", pa.array(np.full(lay.num_rows, i, np.int32)))
            for i, lay in enumerate(layers)
        ]
    )
    if stacked.num_rows == 0:
        return ENTRY_SCHEMA.empty_table()
    ordered = stacked.sort_by([(KEY, "ascending"), ("_layer", "descending")])
    keys = ordered.column(KEY).combine_chunks()
    first = np.ones(len(keys), bool)
    if len(keys) > 1:
        first[1:] = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1)).to_numpy(zero_copy_only=False)
    newest = ordered.filter(pa.array(first))
    live = newest.filter(pc.invert(newest.column(DELETED)))
    return live.select(ENTRY_SCHEMA.names).cast(ENTRY_SCHEMA)


def newest_per_key(table: pa.Table) -> pa.Table:
    """One row per key: the one of the newest instant (a key stored twice: the insert operation
    allows duplicates, and a partition-scoped index lets a key live in several partitions, which a
    0.15 record index, global, cannot map: its newest copy is kept)."""
    if table.num_rows < 2:
        return table
    ordered = table.sort_by([(KEY, "ascending"), (INSTANT_MS, "descending")])
    keys = ordered.column(KEY).combine_chunks()
    first = np.ones(len(keys), bool)
    first[1:] = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1)).to_numpy(zero_copy_only=False)
    return ordered.filter(pa.array(first))
