"""HoodieLogFormat version 1: the blocks of log files and archive files
(docs/hudi/services.md#log-block-framing and the sections after it).

A block on storage (all integers big-endian):
    "#HUDI#" | int64 length | int32 format version (1) | int32 block type | header map |
    int64 content length | content | footer map | int64 length of everything before this int64
where `length` counts every byte after itself, the trailing int64 included, and a map is
int32 count then (int32 key code, int32 byte length, UTF-8 value) per entry.  Java writes the
footer as an empty map.  Pure bytes: archival and merge-on-read writes share it.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import fastavro

MAGIC = b"#HUDI#"
FORMAT_VERSION = 1
CONTENT_VERSION = 3  # Avro data and delete blocks (HoodieLogBlock version 3)

# HoodieLogBlockType ordinals
COMMAND_BLOCK, DELETE_BLOCK, CORRUPT_BLOCK, AVRO_DATA_BLOCK = 0, 1, 2, 3
HFILE_DATA_BLOCK, PARQUET_DATA_BLOCK, CDC_DATA_BLOCK = 4, 5, 6
# HoodieLogBlock.HeaderMetadataType ordinals
INSTANT_TIME, TARGET_INSTANT_TIME, SCHEMA, COMMAND_BLOCK_TYPE, COMPACTED_BLOCK_TIMES = 0, 1, 2, 3, 4
ROLLBACK_COMMAND = "0"  # HoodieCommandBlockTypeEnum.ROLLBACK_BLOCK


class CorruptLogBlock(ValueError):
    """A block whose framing does not hold (length past the end, no magic after it)."""


@dataclass(frozen=True)
class LogBlock:
    block_type: int
    header: dict[int, str] = field(default_factory=dict)  # in the order written
    content: bytes = b""
    footer: dict[int, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------------ encoding


def _map_bytes(entries: dict[int, str]) -> bytes:
    out = [struct.pack(">i", len(entries))]
    for code, value in entries.items():
        raw = value.encode("utf-8")
        out.append(struct.pack(">ii", code, len(raw)) + raw)
    return b"".join(out)


def encode_block(block: LogBlock) -> bytes:
    body = b"".join((
        struct.pack(">ii", FORMAT_VERSION, block.block_type),
        _map_bytes(block.header),
        struct.pack(">q", len(block.content)),
        block.content,
        _map_bytes(block.footer),
    ))  # fmt: skip
    length = len(body) + 8  # the trailing int64 counts too
    return MAGIC + struct.pack(">q", length) + body + struct.pack(">q", length + len(MAGIC))


def avro_data_content(schema: dict[str, Any], records: Iterable[dict[str, Any]]) -> bytes:
    """Content of an AVRO_DATA block: version, record count, then each record's Avro binary
    (written with `schema`, the block's SCHEMA header) prefixed by its length."""
    parsed = fastavro.parse_schema(schema)
    encoded = []
    for record in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        encoded.append(buf.getvalue())
    parts = [struct.pack(">ii", CONTENT_VERSION, len(encoded))]
    parts += [struct.pack(">i", len(e)) + e for e in encoded]
    return b"".join(parts)


def avro_data_block(
    schema: dict[str, Any], records: Iterable[dict[str, Any]], instant: str | None
) -> LogBlock:
    """Header as Java's writers: INSTANT_TIME (absent in archive blocks) and SCHEMA."""
    header = {INSTANT_TIME: instant} if instant is not None else {}
    header[SCHEMA] = json.dumps(schema, separators=(",", ":"))
    return LogBlock(AVRO_DATA_BLOCK, header, avro_data_content(schema, records))


# HoodieDeleteRecordList (docs/hudi/services.md#delete-blocks): the ordering value is a union of
# wrapper records whose branch index is on the wire, so the order below is Java's and must not change.
_WRAPPERS = (
    ("BooleanWrapper", "boolean"), ("IntWrapper", "int"), ("LongWrapper", "long"), ("FloatWrapper", "float"),
    ("DoubleWrapper", "double"), ("BytesWrapper", "bytes"), ("StringWrapper", "string"), ("DateWrapper", "int"),
    ("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}), ("TimestampMicrosWrapper", "long"),
)  # fmt: skip
_NS = "org.apache.hudi.avro.model"
DELETE_RECORD_LIST_SCHEMA = {
    "type": "record", "name": "HoodieDeleteRecordList", "namespace": _NS,
    "fields": [{"name": "deleteRecordList", "type": {"type": "array", "items": {
        "type": "record", "name": "HoodieDeleteRecord", "namespace": _NS,
        "fields": [
            {"name": "recordKey", "type": ["null", "string"], "default": None},
            {"name": "partitionPath", "type": ["null", "string"], "default": None},
            {"name": "orderingVal", "default": None, "type": ["null"] + [
                {"type": "record", "name": n, "namespace": _NS, "fields": [{"name": "value", "type": t}]}
                for n, t in _WRAPPERS]},
        ]}}}],
}  # fmt: skip
_DELETES = fastavro.parse_schema(DELETE_RECORD_LIST_SCHEMA)


def delete_block(
    keys: Iterable[tuple[str, str, tuple[str, Any] | None]], instant: str, schema: dict[str, Any]
) -> LogBlock:
    """A DELETE block (version 3): (record key, partition path, ordering value) per deleted record,
    the ordering value as (wrapper name, value), e.g. ("IntWrapper", 0), or None; header
    INSTANT_TIME and SCHEMA (the table's writer schema) as Java writes it next to a data block."""
    records = [
        {"recordKey": k, "partitionPath": p,
         "orderingVal": None if o is None else (f"{_NS}.{o[0]}", {"value": o[1]})}
        for k, p, o in keys
    ]  # fmt: skip
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _DELETES, {"deleteRecordList": records})
    header = {INSTANT_TIME: instant, SCHEMA: json.dumps(schema, separators=(",", ":"))}
    return LogBlock(DELETE_BLOCK, header, delete_block_content(buf.getvalue()))


def delete_block_content(datum: bytes) -> bytes:
    """A DELETE block's content around one Avro-binary HoodieDeleteRecordList."""
    return struct.pack(">ii", CONTENT_VERSION, len(datum)) + datum


def deleted_keys(block: LogBlock, record_names: bool = False) -> list[dict[str, Any]]:
    """The records of a DELETE block (version 3): recordKey, partitionPath, orderingVal (with
    `record_names`, orderingVal is (wrapper full name, {"value": v}) or None)."""
    if block.block_type != DELETE_BLOCK:
        raise ValueError(f"not a delete block (type {block.block_type})")
    version, size = struct.unpack_from(">ii", block.content, 0)
    if version != CONTENT_VERSION:
        raise ValueError(f"delete block version {version}; only version {CONTENT_VERSION} is read")
    datum = fastavro.schemaless_reader(
        io.BytesIO(block.content[8 : 8 + size]), _DELETES, None, return_record_name=record_names
    )
    if not isinstance(datum, dict):
        raise ValueError("a delete block holds no HoodieDeleteRecordList")
    return list(datum["deleteRecordList"])


def rollback_command_block(instant: str, target_instant: str) -> LogBlock:
    header = {
        INSTANT_TIME: instant,
        TARGET_INSTANT_TIME: target_instant,
        COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND,
    }
    return LogBlock(COMMAND_BLOCK, header)


# ------------------------------------------------------------------------------------ decoding


def _read_map(buf: memoryview, pos: int) -> tuple[dict[int, str], int]:
    (count,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    out = {}
    for _ in range(count):
        code, size = struct.unpack_from(">ii", buf, pos)
        pos += 8
        out[code] = bytes(buf[pos : pos + size]).decode("utf-8")
        pos += size
    return out, pos


def read_blocks(data: bytes, name: str = "log file") -> Iterator[LogBlock]:
    """Every block of a log file, in order; a block whose framing fails raises CorruptLogBlock
    naming the file and offset (Java would skip to the next magic: we never read past damage
    silently)."""
    buf = memoryview(data)
    pos = 0
    while pos < len(buf):
        if bytes(buf[pos : pos + 6]) != MAGIC:
            raise CorruptLogBlock(f"{name}: no block magic at offset {pos}")
        (length,) = struct.unpack_from(">q", buf, pos + 6)
        end = pos + 14 + length
        if length < 24 or end > len(buf) or (end < len(buf) and bytes(buf[end : end + 6]) != MAGIC):
            raise CorruptLogBlock(
                f"{name}: block at offset {pos} declares {length} bytes, which do not frame"
            )
        version, block_type = struct.unpack_from(">ii", buf, pos + 14)
        if version != FORMAT_VERSION:
            raise CorruptLogBlock(f"{name}: block at offset {pos} has log format version {version}, not 1")
        header, p = _read_map(buf, pos + 22)
        (content_len,) = struct.unpack_from(">q", buf, p)
        content = bytes(buf[p + 8 : p + 8 + content_len])
        footer, p = _read_map(buf, p + 8 + content_len)
        (trailer,) = struct.unpack_from(">q", buf, end - 8)
        if p != end - 8 or trailer != length + 6:
            raise CorruptLogBlock(f"{name}: block at offset {pos} has inconsistent lengths")
        yield LogBlock(block_type, header, content, footer)
        pos = end


def block_instants(data: bytes, name: str = "log file") -> tuple[list[str], bool]:
    """The INSTANT_TIME header of every readable block of a log file, in order, and whether a
    damaged block ends it (a write that died midway): what a rollback needs to tell which instant
    wrote the file, whose name carries only its slice's base instant."""
    instants: list[str] = []
    try:
        for block in read_blocks(data, name):
            instants.append(block.header.get(INSTANT_TIME, ""))
    except (CorruptLogBlock, struct.error):  # struct.error: cut inside a block's first bytes
        return instants, True
    return instants, False


def avro_records(block: LogBlock, reader_schema: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The records of an AVRO_DATA block, decoded with its SCHEMA header as writer schema."""
    if block.block_type != AVRO_DATA_BLOCK:
        raise ValueError(f"not an Avro data block (type {block.block_type})")
    writer = fastavro.parse_schema(json.loads(block.header[SCHEMA]))
    reader = fastavro.parse_schema(reader_schema) if reader_schema is not None else None
    version, count = struct.unpack_from(">ii", block.content, 0)
    if version != CONTENT_VERSION:
        raise ValueError(f"Avro data block version {version}; only version {CONTENT_VERSION} is read")
    pos, out = 8, []
    for _ in range(count):
        (size,) = struct.unpack_from(">i", block.content, pos)
        record = fastavro.schemaless_reader(
            io.BytesIO(block.content[pos + 4 : pos + 4 + size]), writer, reader
        )
        if not isinstance(record, dict):
            raise ValueError("an Avro data block record is not a record")
        out.append(record)
        pos += 4 + size
    return out
