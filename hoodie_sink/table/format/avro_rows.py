"""Arrow rows <-> the records of an Avro data block (services doc §1.6).

An AVRO_DATA block's content is: int32 block version (3), int32 record count, then per record an
int32 byte length and the record in Avro binary encoding (no container), written with the block's
SCHEMA header.  This module turns an Arrow table into that content and back.

Columns whose Avro type is flat (boolean, int, long, float, double, string, bytes, date,
timestamp-micros, fixed decimal; each nullable as ``["null", T]``) are encoded and decoded a
column at a time with numpy: a record's bytes are the concatenation of its fields' bytes, so each
column becomes one binary array and `binary_join_element_wise` joins them row by row.  Nested
columns (records, arrays, maps) go through fastavro value by value: the one per-row loop left,
and only for schemas that have such columns.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CONTENT_VERSION = 3


def _non_null(node: Any) -> tuple[Any, bool]:
    """(the non-null branch, nullable) of a field type; unions other than [null, T] stay as is."""
    if isinstance(node, list):
        rest = [b for b in node if b != "null"]
        if len(rest) == 1:
            return rest[0], len(rest) < len(node)
    return node, False


# ------------------------------------------------------------------------------------- varints


def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64)
    return ((v << 1) ^ (v >> 63)).astype(np.uint64)


def _varint_bytes(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Avro varints of unsigned values, vectorised: (bytes, lengths per value)."""
    n = len(u)
    if n == 0:
        return np.zeros(0, np.uint8), np.zeros(0, np.int64)
    groups = np.zeros((n, 10), dtype=np.uint8)
    lengths = np.ones(n, dtype=np.int64)
    rest = u.copy()
    for i in range(10):
        groups[:, i] = (rest & np.uint64(0x7F)).astype(np.uint8)
        rest = rest >> np.uint64(7)
        more = rest != 0
        groups[more, i] |= 0x80
        lengths += more
        if not more.any():
            break
    mask = np.arange(10)[None, :] < lengths[:, None]
    return groups[mask], lengths


def _binary_array(data: np.ndarray, lengths: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(),
        len(lengths),
        [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))],
    )


# ------------------------------------------------------------------------------------- encoding

_NO_SEPARATOR = pa.scalar(b"", pa.large_binary())


def _join(*arrays: pa.Array) -> pa.Array:
    """Row-wise concatenation of binary arrays (no nulls)."""
    return pc.binary_join_element_wise(*(a.cast(pa.large_binary()) for a in arrays), _NO_SEPARATOR)


_FLAT = {"boolean", "int", "long", "float", "double", "string", "bytes"}


def _flat_kind(t: Any) -> str | None:
    if isinstance(t, str):
        return t if t in _FLAT else None
    if isinstance(t, dict):
        logical = t.get("logicalType")
        if t.get("type") == "int" and logical == "date":
            return "int"
        if t.get("type") == "long" and logical in (
            "timestamp-micros",
            "timestamp-millis",
            "local-timestamp-micros",
        ):
            return "long"
        if t.get("type") == "fixed" and logical == "decimal":
            return "fixed_decimal"
        if isinstance(t.get("type"), str) and t["type"] in _FLAT and "logicalType" not in t:
            return str(t["type"])
    return None


def _values_bytes(col: pa.Array, kind: str, avro_type: Any) -> tuple[np.ndarray, np.ndarray]:
    """Encoded bytes of the non-null values of `col` (nulls already dropped), with lengths."""
    n = len(col)
    if kind == "boolean":
        return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.uint8), np.ones(n, np.int64)
    if kind in ("int", "long"):
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us", tz=col.type.tz)) if col.type.unit != "us" else col
            ints = col.cast(pa.int64()).to_numpy()
        elif pa.types.is_date(col.type):
            ints = col.cast(pa.int32()).to_numpy()
        else:
            ints = col.cast(pa.int64()).to_numpy()
        return _varint_bytes(_zigzag(np.asarray(ints)))
    if kind in ("float", "double"):
        dtype = "<f4" if kind == "float" else "<f8"
        arr = np.asarray(col.cast(pa.float32() if kind == "float" else pa.float64()).to_numpy(), dtype=dtype)
        return arr.view(np.uint8), np.full(n, arr.itemsize, np.int64)
    if kind in ("string", "bytes"):
        raw = col.cast(pa.large_binary())
        lens = np.asarray(pc.binary_length(raw).to_numpy(), dtype=np.int64)
        prefix, plen = _varint_bytes(_zigzag(lens))
        joined = _join(_binary_array(prefix, plen), raw)
        return _buffer_of(joined), plen + lens
    if kind == "fixed_decimal":
        size = int(avro_type["size"])
        unscaled = _decimal_unscaled_bytes(col, size)
        return unscaled.reshape(-1), np.full(n, size, np.int64)
    raise AssertionError(kind)


def _decimal_unscaled_bytes(col: pa.Array, size: int) -> np.ndarray:
    """Big-endian two's complement unscaled values, `size` bytes each (Avro fixed decimal)."""
    col = col.cast(pa.decimal128(38, col.type.scale)) if not pa.types.is_decimal128(col.type) else col
    raw = np.frombuffer(col.buffers()[1], dtype=np.uint8)[col.offset * 16 : (col.offset + len(col)) * 16]
    little = raw.reshape(-1, 16)  # 128-bit little-endian
    big = little[:, ::-1]
    return np.ascontiguousarray(big[:, 16 - size :])


def _buffer_of(arr: pa.Array) -> np.ndarray:
    """The value bytes of a (large) binary array without nulls, in order."""
    arr = arr.cast(pa.large_binary())
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = (
        np.frombuffer(arr.buffers()[2], dtype=np.uint8)
        if arr.buffers()[2] is not None
        else np.zeros(0, np.uint8)
    )
    return data[offsets[0] : offsets[-1]]


def _encode_column(col: pa.Array, field_type: Any) -> pa.Array:
    """One binary value per row: the field's Avro binary encoding."""
    inner, nullable = _non_null(field_type)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    kind = _flat_kind(inner)
    n = len(col)
    if kind is None:
        return _encode_with_fastavro(col, field_type)
    valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if not nullable and not valid.all():
        raise ValueError("null value in a non-nullable Avro field")
    present = col.filter(pa.array(valid)) if not valid.all() else col
    data, lengths = _values_bytes(present, kind, inner)
    if not nullable:
        return _binary_array(data, lengths)
    # union branch: 0 (zig-zag 0x00) for null, 1 (zig-zag 0x02) for the value
    values = _binary_array(data, lengths)
    branch = _binary_array(np.where(valid, 2, 0).astype(np.uint8), np.ones(n, np.int64))
    full = pa.array(np.full(n, b""), pa.large_binary()) if n else pa.array([], pa.large_binary())
    if not valid.all():
        idx = np.cumsum(valid) - 1
        spread = values.take(pa.array(np.where(valid, idx, 0)))
        full = pc.if_else(pa.array(valid), spread, full)
    else:
        full = values
    return _join(branch, full)


def _encode_with_fastavro(col: pa.Array, field_type: Any) -> pa.Array:
    parsed = fastavro.parse_schema(
        {"type": "record", "name": "one", "fields": [{"name": "v", "type": field_type}]}
    )
    out = []
    for value in col.to_pylist():
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, {"v": value})
        out.append(buf.getvalue())
    return pa.array(out, pa.large_binary())


def encode_records(table: pa.Table, avro_schema: dict[str, Any]) -> pa.Array:
    """The Avro binary encoding of each row of `table` (columns named as the schema's fields; a
    field the table lacks is written null)."""
    n = table.num_rows
    parts = []
    for f in avro_schema["fields"]:
        if f["name"] in table.column_names:
            col = table.column(f["name"]).combine_chunks()
        else:
            col = pa.nulls(n)
            if not _non_null(f["type"])[1]:
                raise ValueError(f"column '{f['name']}' is missing and its Avro field is not nullable")
        parts.append(_encode_column(col, f["type"]))
    if not parts:
        return pa.array([b""] * n, pa.large_binary())
    if len(parts) == 1:
        return parts[0]
    return _join(*parts)


def avro_block_content(table: pa.Table, avro_schema: dict[str, Any]) -> bytes:
    """Content of an AVRO_DATA block holding the rows of `table`."""
    records = encode_records(table, avro_schema)
    n = len(records)
    lengths = np.asarray(pc.binary_length(records).to_numpy(), dtype=">i4")
    prefixed = _join(_binary_array(lengths.view(np.uint8), np.full(n, 4, np.int64)), records)
    return struct.pack(">ii", CONTENT_VERSION, n) + _buffer_of(prefixed).tobytes()


# ------------------------------------------------------------------------------------- decoding


def decode_block_content(
    content: bytes, writer_schema: dict[str, Any] | str, arrow_schema: pa.Schema
) -> pa.Table:
    """The records of an AVRO_DATA block's content as an Arrow table of `arrow_schema` (fields the
    writer schema lacks are null)."""
    schema = json.loads(writer_schema) if isinstance(writer_schema, str) else writer_schema
    version, count = struct.unpack_from(">ii", content, 0)
    if version != CONTENT_VERSION:
        raise ValueError(f"Avro data block version {version}; only version {CONTENT_VERSION} is read")
    parsed = fastavro.parse_schema(schema)
    pos, rows = 8, []
    view = memoryview(content)
    for _ in range(count):
        (size,) = struct.unpack_from(">i", content, pos)
        rows.append(fastavro.schemaless_reader(io.BytesIO(view[pos + 4 : pos + 4 + size]), parsed, None))
        pos += 4 + size
    names = [f["name"] for f in schema["fields"]]
    cols = []
    for field in arrow_schema:
        if field.name in names:
            cols.append(pa.array([r[field.name] for r in rows], type=field.type))
        else:
            cols.append(pa.nulls(count, field.type))
    return pa.Table.from_arrays(cols, schema=arrow_schema)


# ------------------------------------------------------------------------------ delete records

# HoodieDeleteRecordList.orderingVal is a union of wrapper records (services doc §1.7); a wrapper
# of one field encodes like its value, so a value is its branch index then its plain encoding.
# Branch indexes on the wire (0 is null): Java's order, never to change.
ORDERING_BRANCHES = {
    "boolean": 1, "int": 2, "long": 3, "float": 4, "double": 5, "bytes": 6, "string": 7, "date": 8,
    "decimal": 9, "time_micros": 10, "timestamp_micros": 11,
}  # fmt: skip
NATURAL_ORDER = 2  # IntWrapper(0): Java's DEFAULT_ORDERING_VALUE, "the delete wins whatever the order"
_DECIMAL_WRAPPER_SCALE = 15


def _ordering_encoding(values: pa.Array) -> tuple[int, str, Any]:
    """(branch, column kind, Avro type) of ordering values of an Arrow type (Java's
    HoodieAvroUtils.wrapValueIntoAvro: dates as DateWrapper, timestamps as TimestampMicros...)."""
    t = values.type
    if pa.types.is_boolean(t):
        return ORDERING_BRANCHES["boolean"], "boolean", "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return ORDERING_BRANCHES["int"], "int", "int"
    if pa.types.is_integer(t):
        return ORDERING_BRANCHES["long"], "long", "long"
    if pa.types.is_float32(t):
        return ORDERING_BRANCHES["float"], "float", "float"
    if pa.types.is_floating(t):
        return ORDERING_BRANCHES["double"], "double", "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return ORDERING_BRANCHES["string"], "string", "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return ORDERING_BRANCHES["bytes"], "bytes", "bytes"
    if pa.types.is_date(t):
        return ORDERING_BRANCHES["date"], "int", {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        return (
            ORDERING_BRANCHES["timestamp_micros"],
            "long",
            {"type": "long", "logicalType": "timestamp-micros"},
        )
    raise ValueError(f"ordering values of type {t} cannot go into a delete block")


def delete_records_datum(keys: pa.Array, partitions: pa.Array, ordering: pa.Array | None) -> bytes:
    """One HoodieDeleteRecordList in Avro binary: the deleted records' keys, partition paths and
    ordering values (null ordering value = natural order: written as IntWrapper(0), as Java)."""
    n = len(keys)
    if n == 0:
        return b"\x00"
    parts = [_encode_column(keys, ["null", "string"]), _encode_column(partitions, ["null", "string"])]
    natural = (
        np.ones(n, dtype=bool)
        if ordering is None
        else ~np.asarray(ordering.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    )
    # branch 2 (IntWrapper), value 0
    ords = _binary_array(np.tile(np.array([NATURAL_ORDER * 2, 0], np.uint8), n), np.full(n, 2, np.int64))
    if ordering is not None and not natural.all():
        if pa.types.is_decimal(ordering.type):
            ordering = ordering.cast(pa.decimal128(38, _DECIMAL_WRAPPER_SCALE))
            avro: Any = {
                "type": "bytes",
                "logicalType": "decimal",
                "precision": 30,
                "scale": _DECIMAL_WRAPPER_SCALE,
            }
            present = _encode_with_fastavro(ordering.filter(pa.array(~natural)), avro)
            branch = ORDERING_BRANCHES["decimal"]
        else:
            branch, kind, avro = _ordering_encoding(ordering)
            data, lengths = _values_bytes(ordering.filter(pa.array(~natural)), kind, avro)
            present = _binary_array(data, lengths)
        ones = np.ones(len(present), np.int64)
        tagged = _join(_binary_array(np.full(len(present), branch * 2, np.uint8), ones), present)
        idx = np.cumsum(~natural) - 1
        ords = pc.if_else(pa.array(~natural), tagged.take(pa.array(np.where(natural, 0, idx))), ords)
    rows = _join(*parts, ords)
    count, _ = _varint_bytes(_zigzag(np.array([n])))
    return count.tobytes() + _buffer_of(rows).tobytes() + b"\x00"
