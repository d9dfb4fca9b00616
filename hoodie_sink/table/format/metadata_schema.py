"""The Avro schema of the metadata table's records, `HoodieMetadataRecord`, as Hudi writes it
(docs/hudi/metadata-table.md#the-record-schema).

Java writes this schema, the five meta fields prepended (`HoodieAvroUtils.addMetadataFields`), into
the SCHEMA header of every metadata log block and into the `schema` file-info entry of every HFile.
Readers parse it back, so we reproduce its text byte for byte: field order, docs, defaults and the
`avro.java.string` properties all count.  `METADATA_RECORD_SCHEMA_JSON` is that text; a test compares
it with the header of a log block Hudi 0.15.0 wrote.
"""

from __future__ import annotations

import json
from typing import Any

import fastavro

NAMESPACE = "org.apache.hudi.avro.model"
_JSTRING: dict[str, Any] = {"type": "string", "avro.java.string": "String"}
_META_FIELDS = (
    "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
    "_hoodie_file_name",
)  # fmt: skip
# The wrappers of a column statistic: a record each, so that one union can hold any type.  The
# union's branch index is on the wire: this order is Java's and must not change.
STAT_WRAPPERS: tuple[tuple[str, Any, str], ...] = (
    ("BooleanWrapper", "boolean", "boolean"),
    ("IntWrapper", "int", "int"),
    ("LongWrapper", "long", "long"),
    ("FloatWrapper", "float", "float"),
    ("DoubleWrapper", "double", "double"),
    ("BytesWrapper", "bytes", "bytes"),
    ("StringWrapper", _JSTRING, "string"),
    ("DateWrapper", "int", "Date logical"),
    ("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}, "Decimal logical"),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}, "Time-micros logical"),
    ("TimestampMicrosWrapper", "long", "Timestamp-micros logical"),
)  # fmt: skip


def _field(name: str, type_: Any, doc: str | None = None, **default: Any) -> dict[str, Any]:
    """A field with Java's key order: name, type, doc, default."""
    out: dict[str, Any] = {"name": name, "type": type_}
    if doc is not None:
        out["doc"] = doc
    out.update(default)
    return out


def _optional(name: str, type_: Any, doc: str) -> dict[str, Any]:
    return _field(name, ["null", type_], doc, default=None)


def _wrapper(name: str, type_: Any, what: str) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "doc": f"A record wrapping {what} type to be able to be used it w/in Avro's Union",
        "fields": [{"name": "value", "type": type_}],
    }


_FILE_INFO = {
    "type": "record",
    "name": "HoodieMetadataFileInfo",
    "fields": [
        _field("size", "long", "Size of the file"),
        _field("isDeleted", "boolean", "True if this file has been deleted"),
    ],
}
_BLOOM_FILTER = {
    "type": "record",
    "name": "HoodieMetadataBloomFilter",
    "doc": "Data file bloom filter details",
    "fields": [
        _field("type", _JSTRING, "Bloom filter type code"),
        _field("timestamp", _JSTRING, "Instant timestamp when this metadata was created/updated"),
        _field("bloomFilter", "bytes", "Bloom filter binary byte array"),
        _field("isDeleted", "boolean", "Bloom filter entry valid/deleted flag"),
    ],
}
_COLUMN_STATS = {
    "type": "record",
    "name": "HoodieMetadataColumnStats",
    "doc": "Data file column statistics",
    "fields": [
        _optional("fileName", _JSTRING, "File name for which this column statistics applies"),
        _optional("columnName", _JSTRING, "Column name for which this column statistics applies"),
        _field(
            "minValue",
            ["null", *(_wrapper(*w) for w in STAT_WRAPPERS)],
            "Minimum value in the range. Based on user data table schema, we can convert this to appropriate type",
            default=None,
        ),
        # the second union names the wrappers the first one defined
        _field(
            "maxValue",
            ["null", *(w[0] for w in STAT_WRAPPERS)],
            "Maximum value in the range. Based on user data table schema, we can convert it to appropriate type",
            default=None,
        ),
        _optional("valueCount", "long", "Total count of values"),
        _optional("nullCount", "long", "Total count of null values"),
        _optional("totalSize", "long", "Total storage size on disk"),
        _optional("totalUncompressedSize", "long", "Total uncompressed storage size on disk"),
        _field("isDeleted", "boolean", "Column range entry valid/deleted flag"),
    ],
}
_UUID_PIECES = (
    "A UUID based fileId is stored as 3 pieces in RLI (fileIdHighBits, fileIdLowBits and fileIndex). \n"
    "FileID format is {UUID}-{fileIndex}."
)
_RECORD_INDEX = {
    "type": "record",
    "name": "HoodieRecordIndexInfo",
    "fields": [
        _optional("partitionName", _JSTRING, "Refers to the partition name the record belongs to"),
        _optional(
            "fileIdHighBits",
            "long",
            f"Refers to high 64 bits if the fileId is based on UUID format. \n{_UUID_PIECES}",
        ),
        _optional(
            "fileIdLowBits",
            "long",
            f"Refers to low 64 bits if the fileId is based on UUID format. \n{_UUID_PIECES}",
        ),
        _optional(
            "fileIndex",
            "int",
            "Index representing file index which is used to re-construct UUID based fileID. Applicable when "
            f"the fileId is based on UUID format. \n{_UUID_PIECES}",
        ),
        _optional(
            "fileId",
            _JSTRING,
            "Represents fileId of the location where record belongs to. When the encoding is 1, fileID is "
            "stored in raw string format.",
        ),
        _optional(
            "instantTime",
            "long",
            "Epoch time in millisecond representing the commit time at which record was added",
        ),
        _field(
            "fileIdEncoding",
            "int",
            "Represents fileId encoding. Possible values are 0 and 1. O represents UUID based fileID, and 1 "
            "represents raw string format of the fileId. \nWhen the encoding is 0, reader can deduce fileID "
            "from fileIdLowBits, fileIdLowBits and fileIndex.",
            default=0,
        ),
    ],
}

METADATA_RECORD_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieMetadataRecord",
    "namespace": NAMESPACE,
    "doc": "A record saved within the Metadata Table",
    "fields": [
        *(_field(name, ["null", "string"], "", default=None) for name in _META_FIELDS),
        _field("key", _JSTRING),
        _field("type", "int", "Type of the metadata record"),
        _field(
            "filesystemMetadata",
            ["null", {"type": "map", "values": _FILE_INFO, "avro.java.string": "String"}],
            "Contains information about partitions and files within the dataset",
        ),
        _field(
            "BloomFilterMetadata",
            ["null", _BLOOM_FILTER],
            "Metadata Index of bloom filters for all data files in the user table",
            default=None,
        ),
        _field(
            "ColumnStatsMetadata",
            ["null", _COLUMN_STATS],
            "Metadata Index of column statistics for all data files in the user table",
            default=None,
        ),
        _field(
            "recordIndexMetadata",
            ["null", _RECORD_INDEX],
            "Metadata Index that contains information about record keys and their location in the dataset",
            default=None,
        ),
    ],
}
METADATA_RECORD_SCHEMA_JSON = json.dumps(METADATA_RECORD_SCHEMA, separators=(",", ":"))
# parsed once: every record of every partition is encoded and decoded with it
PARSED_METADATA_RECORD_SCHEMA = fastavro.parse_schema(json.loads(METADATA_RECORD_SCHEMA_JSON))
# The schema without the meta fields, as Java records it in a metadata commit's extraMetadata
# `schema` (the table's own schema; the meta fields are added for the files only).
COMMIT_SCHEMA_JSON = json.dumps(
    {**METADATA_RECORD_SCHEMA, "fields": METADATA_RECORD_SCHEMA["fields"][len(_META_FIELDS) :]},
    separators=(",", ":"),
)
