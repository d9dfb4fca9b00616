"""Records of the metadata table: typed payloads and their Avro cells
(docs/hudi/metadata-table.md#records).

A record is stored as an HFile cell: the key in the cell's row, the value an Avro datum of
`HoodieMetadataRecord` (metadata_schema.py) whose own `key` field is "" (Java truncates it to
save space, the cell carries it).  Base files set `_hoodie_file_name` to the HFile's own name;
log blocks leave every meta field null.  Each record type has its payload class below;
`encode_record` and `decode_record` turn them into cells and back.
"""

from __future__ import annotations

import calendar
import io
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import fastavro

from hoodie_sink.table.format.metadata_keys import (
    ALL_PARTITIONS_KEY,
    TYPE_BLOOM_FILTER,
    TYPE_COLUMN_STATS,
    TYPE_FILE_LIST,
    TYPE_PARTITION_LIST,
    TYPE_RECORD_INDEX,
    bloom_filter_key,
    column_stats_key,
    file_list_key,
    partition_identifier,
)
from hoodie_sink.table.format.metadata_schema import NAMESPACE, PARSED_METADATA_RECORD_SCHEMA
from hoodie_sink.table.format.timeline.instant import UTC_ZONE, format_instant

BLOOM_FILTER_TYPE = "DYNAMIC_V0"  # what Hudi's writers create (BloomFilterTypeCode)
MISSING_FILE_INDEX = -1  # a file id that is a bare UUID, without "-<n>"
FILE_ID_ENCODING_UUID = 0
FILE_ID_ENCODING_RAW = 1


class CorruptMetadataRecord(ValueError):
    """A cell whose value is not a HoodieMetadataRecord of a known type."""


@dataclass(frozen=True)
class FileInfo:
    size: int
    is_deleted: bool = False


TOMBSTONE = FileInfo(0, True)


@dataclass(frozen=True)
class BloomFilterInfo:
    bloom_type: str  # "DYNAMIC_V0"; "" in a tombstone
    timestamp: str  # instant time of the write (of the clean, for a tombstone)
    bloom_filter: bytes  # serialized as in the Parquet footer; empty in a tombstone
    is_deleted: bool = False


# A column statistic: the wrapper's short name (metadata_schema.STAT_WRAPPERS) and its value,
# e.g. ("StringWrapper", "sf"); the wrapper decides the union branch on the wire.
StatValue = tuple[str, Any]


@dataclass(frozen=True)
class ColumnStatsInfo:
    file_name: str | None
    column_name: str | None
    min_value: StatValue | None
    max_value: StatValue | None
    value_count: int | None
    null_count: int | None
    total_size: int | None
    total_uncompressed_size: int | None
    is_deleted: bool = False


@dataclass(frozen=True)
class RecordIndexInfo:
    partition: str | None
    file_id_high_bits: int | None
    file_id_low_bits: int | None
    file_index: int | None
    file_id: str | None  # "" with encoding 0; the file id itself with encoding 1
    instant_time_ms: int | None  # epoch milliseconds of the inserting instant
    file_id_encoding: int = FILE_ID_ENCODING_UUID

    def location_file_id(self) -> str:
        """The data file id this record lives in (HoodieMetadataPayload.getRecordGlobalLocation)."""
        if self.file_id_encoding == FILE_ID_ENCODING_RAW:
            return self.file_id or ""
        if self.file_id_high_bits is None or self.file_id_low_bits is None:
            raise CorruptMetadataRecord("a record-index entry of encoding 0 without its UUID bits")
        raw = ((self.file_id_high_bits & (2**64 - 1)) << 64) | (self.file_id_low_bits & (2**64 - 1))
        text = str(uuid.UUID(int=raw))
        return text if self.file_index in (None, MISSING_FILE_INDEX) else f"{text}-{self.file_index}"

    def instant(self, zone: str = UTC_ZONE) -> str:
        """The inserting instant's time, back from epoch milliseconds, in the timeline's zone."""
        if self.instant_time_ms is None:
            raise CorruptMetadataRecord("a record-index entry without its instant time")
        moment = datetime.fromtimestamp(self.instant_time_ms / 1000, timezone.utc)
        return format_instant(moment.replace(microsecond=self.instant_time_ms % 1000 * 1000), zone)


@dataclass(frozen=True)
class MetadataRecord:
    """One record: its key, type and the payload of that type (the other payloads are None).
    Types 1 and 2 carry `files` (partition identifier or file name -> FileInfo)."""

    key: str
    type: int
    files: Mapping[str, FileInfo] | None = None
    bloom_filter: BloomFilterInfo | None = None
    column_stats: ColumnStatsInfo | None = None
    record_index: RecordIndexInfo | None = None
    meta: Mapping[str, str | None] = field(default_factory=dict, compare=False)  # meta fields as read


# ------------------------------------------------------------------------------------ builders


def partition_list_record(added: Iterable[str], deleted: Iterable[str] = ()) -> MetadataRecord:
    """The `__all_partitions__` record of a commit: the partitions it touched (and removed)."""
    files = {partition_identifier(p): FileInfo(0) for p in added}
    files.update({partition_identifier(p): FileInfo(0, True) for p in deleted})
    return MetadataRecord(ALL_PARTITIONS_KEY, TYPE_PARTITION_LIST, files)


def file_list_record(
    partition_path: str, added: Mapping[str, int], deleted: Iterable[str] = ()
) -> MetadataRecord:
    """A partition's file-list record: added files (name without folder -> size in bytes; log
    files with their leading dot) and deleted files (tombstones)."""
    files: dict[str, FileInfo] = {}
    for name, size in added.items():
        if size <= 0:  # Java's checkState: Hudi never writes an empty file
            raise ValueError(f"file {name} in partition '{partition_path}' listed with size {size}")
        files[name] = FileInfo(size)
    files.update({name: TOMBSTONE for name in deleted})
    return MetadataRecord(file_list_key(partition_path), TYPE_FILE_LIST, files)


def bloom_filter_record(
    partition_path: str,
    file_name: str,
    instant: str,
    bloom_filter: bytes,
    bloom_type: str = BLOOM_FILTER_TYPE,
) -> MetadataRecord:
    info = BloomFilterInfo(bloom_type, instant, bloom_filter)
    return MetadataRecord(bloom_filter_key(partition_path, file_name), TYPE_BLOOM_FILTER, bloom_filter=info)


def bloom_filter_tombstone(partition_path: str, file_name: str, instant: str) -> MetadataRecord:
    """What a clean writes for a deleted base file: type "", the clean's instant, no filter."""
    info = BloomFilterInfo("", instant, b"", True)
    return MetadataRecord(bloom_filter_key(partition_path, file_name), TYPE_BLOOM_FILTER, bloom_filter=info)


def column_stats_record(partition_path: str, stats: ColumnStatsInfo) -> MetadataRecord:
    if stats.file_name is None or stats.column_name is None:
        raise ValueError("column statistics name their file and column")
    key = column_stats_key(partition_path, stats.file_name, stats.column_name)
    return MetadataRecord(key, TYPE_COLUMN_STATS, column_stats=stats)


def column_stats_tombstone(partition_path: str, file_name: str, column: str) -> MetadataRecord:
    """A clean's column-stats record: no min/max, counts -1 (as Java writes them).  Java 0.15 cuts
    the file name (docs/hudi/metadata-table.md#column-statistics); we write it whole."""
    stats = ColumnStatsInfo(file_name, column, None, None, -1, -1, -1, -1, True)
    return column_stats_record(partition_path, stats)


def record_index_record(
    record_key: str, partition_path: str, file_id: str, instant: str, zone: str = UTC_ZONE
) -> MetadataRecord:
    """Where an inserted record lives (HoodieMetadataPayload.createRecordIndexUpdate): the file
    id's UUID as two signed longs and its `-<n>` suffix, the instant as epoch milliseconds."""
    high, low, index = split_file_id(file_id)
    info = RecordIndexInfo(partition_path, high, low, index, "", instant_epoch_ms(instant, zone))
    return MetadataRecord(record_key, TYPE_RECORD_INDEX, record_index=info)


def split_file_id(file_id: str) -> tuple[int, int, int]:
    """(most, least significant 64 bits as signed longs, file index) of `<uuid>-<n>` or `<uuid>`."""
    try:
        if len(file_id) == 36:
            raw, index = uuid.UUID(file_id).int, MISSING_FILE_INDEX
        else:
            head, _, tail = file_id.rpartition("-")
            raw, index = uuid.UUID(head).int, int(tail)
    except ValueError as e:
        raise ValueError(
            f"file id '{file_id}' is not <uuid>-<index>: the record index stores no other"
        ) from e
    return _signed64(raw >> 64), _signed64(raw & (2**64 - 1)), index


def _signed64(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


def instant_epoch_ms(instant: str, zone: str = UTC_ZONE) -> int:
    """An instant time (yyyyMMddHHmmss[SSS]) as epoch milliseconds, its wall time read in the
    timeline's zone (HoodieActiveTimeline.parseDateFromInstantTime)."""
    fields = time.strptime(instant[:14], "%Y%m%d%H%M%S")
    millis = int(instant[14:17]) if len(instant) >= 17 else 0
    seconds = calendar.timegm(fields) if zone == UTC_ZONE else int(time.mktime(fields))
    return seconds * 1000 + millis


# ------------------------------------------------------------------------------------ cells

_WRAPPER_PREFIX = f"{NAMESPACE}."
_RECORD_FIELDS = ("filesystemMetadata", "BloomFilterMetadata", "ColumnStatsMetadata", "recordIndexMetadata")


def encode_record(record: MetadataRecord, file_name: str | None = None) -> tuple[bytes, bytes]:
    """The HFile cell of a record: (key as UTF-8, Avro datum with key ""); `file_name` (an HFile
    base file's own name) goes into `_hoodie_file_name`, as Java's base files have it."""
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, PARSED_METADATA_RECORD_SCHEMA, _datum(record, file_name))
    return record.key.encode("utf-8"), buf.getvalue()


def _datum(record: MetadataRecord, file_name: str | None) -> dict[str, Any]:
    datum: dict[str, Any] = {
        "_hoodie_commit_time": None,
        "_hoodie_commit_seqno": None,
        "_hoodie_record_key": None,
        "_hoodie_partition_path": None,
        "_hoodie_file_name": file_name,
        "key": "",
        "type": record.type,
        "filesystemMetadata": None,
        "BloomFilterMetadata": None,
        "ColumnStatsMetadata": None,
        "recordIndexMetadata": None,
    }
    if record.files is not None:
        datum["filesystemMetadata"] = {
            name: {"size": info.size, "isDeleted": info.is_deleted} for name, info in record.files.items()
        }
    if (b := record.bloom_filter) is not None:
        datum["BloomFilterMetadata"] = {
            "type": b.bloom_type, "timestamp": b.timestamp, "bloomFilter": b.bloom_filter, "isDeleted": b.is_deleted,
        }  # fmt: skip
    if (c := record.column_stats) is not None:
        datum["ColumnStatsMetadata"] = {
            "fileName": c.file_name, "columnName": c.column_name,
            "minValue": _wrap(c.min_value), "maxValue": _wrap(c.max_value),
            "valueCount": c.value_count, "nullCount": c.null_count, "totalSize": c.total_size,
            "totalUncompressedSize": c.total_uncompressed_size, "isDeleted": c.is_deleted,
        }  # fmt: skip
    if (r := record.record_index) is not None:
        datum["recordIndexMetadata"] = {
            "partitionName": r.partition, "fileIdHighBits": r.file_id_high_bits, "fileIdLowBits": r.file_id_low_bits,
            "fileIndex": r.file_index, "fileId": r.file_id, "instantTime": r.instant_time_ms,
            "fileIdEncoding": r.file_id_encoding,
        }  # fmt: skip
    return datum


def _wrap(value: StatValue | None) -> tuple[str, dict[str, Any]] | None:
    # fastavro's (name, record) form picks the union branch by name: guessing from the value
    # would write a long as IntWrapper
    return None if value is None else (_WRAPPER_PREFIX + value[0], {"value": value[1]})


def decode_record(key: bytes, value: bytes, source: str = "cell") -> MetadataRecord:
    """A record from its HFile cell; `source` (file and block) names it in errors."""
    text = key.decode("utf-8")
    try:
        datum = fastavro.schemaless_reader(
            io.BytesIO(value), PARSED_METADATA_RECORD_SCHEMA, None,
            return_record_name=True, return_record_name_override=True,
        )  # fmt: skip
    except (EOFError, ValueError, IndexError) as e:
        raise CorruptMetadataRecord(
            f"{source}: the value of key '{text}' is no HoodieMetadataRecord: {e}"
        ) from e
    if not isinstance(datum, dict):
        raise CorruptMetadataRecord(f"{source}: the value of key '{text}' is no record")
    return _from_datum(text, datum, source)


def _from_datum(key: str, d: dict[str, Any], source: str) -> MetadataRecord:
    kind = d["type"]
    if kind not in (
        TYPE_PARTITION_LIST,
        TYPE_FILE_LIST,
        TYPE_COLUMN_STATS,
        TYPE_BLOOM_FILTER,
        TYPE_RECORD_INDEX,
    ):
        raise CorruptMetadataRecord(
            f"{source}: key '{key}' has record type {kind}; table version 6 has 1 to 5"
        )
    meta = {name: d[name] for name in d if name.startswith("_hoodie_")}
    files = d["filesystemMetadata"]
    bloom, stats, rli = d["BloomFilterMetadata"], d["ColumnStatsMetadata"], d["recordIndexMetadata"]
    return MetadataRecord(
        key,
        kind,
        files=None if files is None else {n: FileInfo(i["size"], i["isDeleted"]) for n, i in files.items()},
        bloom_filter=None
        if bloom is None
        else BloomFilterInfo(bloom["type"], bloom["timestamp"], bloom["bloomFilter"], bloom["isDeleted"]),
        column_stats=None if stats is None else _stats(stats),
        record_index=None if rli is None else _record_index(rli),
        meta=meta,
    )


def _stats(s: dict[str, Any]) -> ColumnStatsInfo:
    return ColumnStatsInfo(
        s["fileName"], s["columnName"], _unwrap(s["minValue"]), _unwrap(s["maxValue"]),
        s["valueCount"], s["nullCount"], s["totalSize"], s["totalUncompressedSize"], s["isDeleted"],
    )  # fmt: skip


def _unwrap(value: Any) -> StatValue | None:
    if value is None:
        return None
    name, record = value
    return name.removeprefix(_WRAPPER_PREFIX), record["value"]


def _record_index(r: dict[str, Any]) -> RecordIndexInfo:
    return RecordIndexInfo(
        r["partitionName"], r["fileIdHighBits"], r["fileIdLowBits"], r["fileIndex"], r["fileId"],
        r["instantTime"], r["fileIdEncoding"],
    )  # fmt: skip
