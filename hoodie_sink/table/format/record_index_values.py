"""Record-index values decoded in bulk (docs/hudi/metadata-table.md#record-index-values).

A record-index cell's value is an Avro `HoodieMetadataRecord` of type 5 whose
`HoodieRecordIndexInfo` says where a data record lives: its partition, its file id (UUID bits and
`-<n>` suffix, or the raw string with `fileIdEncoding` 1) and the epoch milliseconds of the instant
that inserted it.  Every record written to one data file group by one instant has the same value,
so a batch of looked-up values holds few distinct ones: each distinct value is decoded once
(fastavro) and the result is mapped back to the batch with one Arrow `index_in`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.metadata_keys import TYPE_RECORD_INDEX
from hoodie_sink.table.format.metadata_records import CorruptMetadataRecord, decode_record
from hoodie_sink.table.format.timeline.instant import UTC_ZONE


@dataclass(frozen=True)
class RecordLocations:
    """Per looked-up key: where the record index says its record lives (null: not indexed)."""

    partition_path: pa.Array  # string
    file_id: pa.Array  # string
    instant: pa.Array  # string: the instant that inserted the record, in the timeline's zone

    def __len__(self) -> int:
        return len(self.file_id)

    @staticmethod
    def nulls(n: int) -> RecordLocations:
        empty = pa.nulls(n, pa.string())
        return RecordLocations(empty, empty, empty)


def decode_locations(values: pa.Array, zone: str = UTC_ZONE, source: str = "record index") -> RecordLocations:
    """The locations of record-index values (binary; a null value gives a null location)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    distinct = pc.unique(values.drop_null())
    partitions, file_ids, instants = [], [], []
    for value in distinct.to_pylist():  # few: one per (data file group, inserting instant)
        record = decode_record(b"", value, source)
        info = record.record_index
        if record.type != TYPE_RECORD_INDEX or info is None:
            raise CorruptMetadataRecord(
                f"{source}: a value of record type {record.type}, not a record-index entry"
            )
        if info.partition is None:
            raise CorruptMetadataRecord(f"{source}: a record-index entry without its partition")
        partitions.append(info.partition)
        file_ids.append(info.location_file_id())
        instants.append(info.instant(zone))
    codes = pc.index_in(values, value_set=distinct)
    return RecordLocations(
        pa.array(partitions, pa.string()).take(codes),
        pa.array(file_ids, pa.string()).take(codes),
        pa.array(instants, pa.string()).take(codes),
    )
