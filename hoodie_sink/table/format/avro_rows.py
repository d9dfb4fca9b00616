"""Arrow rows <-> the records of an Avro data block (docs/hudi/services.md#avro-data-blocks).

An AVRO_DATA block's content is: int32 block version (3), int32 record count, then per record an
int32 byte length and the record in Avro binary encoding (no container), written with the block's
SCHEMA header.  This module turns an Arrow table into that content and back.

Columns whose Avro type is flat (boolean, int, long, float, double, string, bytes, date,
timestamp-micros, fixed decimal; each nullable as ``["null", T]``) are encoded and decoded a
column at a time with numpy: a record's bytes are the concatenation of its fields' bytes, so each
column becomes one binary array and `binary_join_element_wise` joins them row by row.  Decoding
keeps one cursor per record and reads the fields in schema order, each for all records at once.
Nested columns (records, arrays, maps) and other unions go through fastavro value by value: the
per-row loop left, and only for the columns that need it.
"""

from __future__ import annotations

import functools
import io
import json
import struct
from dataclasses import dataclass
from typing import Any, NoReturn

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.schema import conform_column

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


@functools.cache
def _no_separator() -> pa.Scalar:
    # made on first use, not at import: pa.scalar imports pandas (a third of a second), which
    # every Spark Python worker importing this module would pay for nothing
    return pa.scalar(b"", pa.large_binary())


def _join(*arrays: pa.Array) -> pa.Array:
    """Row-wise concatenation of binary arrays (no nulls)."""
    return pc.binary_join_element_wise(*(a.cast(pa.large_binary()) for a in arrays), _no_separator())


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
    if valid.all():
        full = values
    elif valid.any():  # all null: the branch bytes alone (and `values` is empty, nothing to take)
        idx = np.cumsum(valid) - 1
        spread = values.take(pa.array(np.where(valid, idx, 0)))
        full = pc.if_else(pa.array(valid), spread, full)
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
    return records_block_content(encode_records(table, avro_schema))


def records_block_content(records: pa.Array) -> bytes:
    """Content of an AVRO_DATA block holding already encoded records (one binary value each)."""
    n = len(records)
    lengths = np.asarray(pc.binary_length(records).to_numpy(), dtype=">i4")
    prefixed = _join(_binary_array(lengths.view(np.uint8), np.full(n, 4, np.int64)), records)
    return struct.pack(">ii", CONTENT_VERSION, n) + _buffer_of(prefixed).tobytes()


# ------------------------------------------------------------------------------------- decoding

# Decoding mirrors encoding: one int64 cursor per record, advanced field by field in schema order,
# so every flat field is read for all records at once with numpy gathers.
_VARINT_MAX = 10  # a zig-zag long takes at most 10 bytes
_LOGICAL_LONGS: dict[str, pa.DataType] = {
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "local-timestamp-micros": pa.timestamp("us"),
}
_NUMPY_TYPES = {"int": np.int32, "long": np.int64, "float": np.float32, "double": np.float64}
# Below this many records, fastavro record by record is faster: numpy costs ~50 us a column a block
# whatever the count, fastavro ~1 us a value (measured: the crossover is 50 to 100 records).
_NUMPY_MIN_RECORDS = 64
# what fastavro raises on bytes that do not fit the schema
_FASTAVRO_ERRORS = (EOFError, ValueError, IndexError, struct.error)


@dataclass
class _Records:
    """The block's bytes and the read cursor of every record."""

    content: bytes
    data: np.ndarray  # content as uint8, no copy
    pos: np.ndarray  # int64: where the next field of each record starts
    ends: np.ndarray  # int64: where each record ends (its length prefix says so)

    def advance(self, rows: np.ndarray, by: np.ndarray | int) -> None:
        """Move the cursors of `rows` past a value; a cursor past its record's end means the
        length prefix and the bytes disagree (checked here so later gathers stay in bounds)."""
        self.pos[rows] += by
        over = self.pos[rows] > self.ends[rows]
        if over.any():
            _corrupt(int(rows[np.argmax(over)]), "a value runs past the record's end")


def _corrupt(record: int, why: str) -> NoReturn:
    raise ValueError(f"corrupt Avro data block: record {record}: {why}")


@dataclass(frozen=True)
class _FieldPlan:
    """How to read one writer field: `kind` for a flat type (None: through fastavro)."""

    name: str
    kind: str | None
    inner: Any  # the non-null branch
    value_branch: int | None  # union index of the value for ["null", T] / [T, "null"], else None
    parsed: Any  # fastavro schema of a record holding just this field (fallback)


@dataclass(frozen=True)
class _Plan:
    fields: tuple[_FieldPlan, ...]
    parsed: Any  # fastavro schema of the whole record (small blocks)


@functools.lru_cache(maxsize=64)
def _plan(schema_json: str) -> _Plan:
    """How to read a writer schema; cached because every block of a log file repeats it."""
    schema = json.loads(schema_json)
    named: dict[str, Any] = {}  # named types, registered in field order as a full parse would
    plans = []
    for i, f in enumerate(schema["fields"]):
        inner, nullable = _non_null(f["type"])
        # a one-branch union [T] still has a branch index on the wire: fastavro's business
        kind = None if isinstance(f["type"], list) and not nullable else _decodable_kind(inner)
        branch = f["type"].index(inner) if nullable else None
        wrapper = {
            "type": "record",
            "name": f"_hoodie_sink_field_{i}",
            "namespace": schema.get("namespace", ""),
            "fields": [{"name": "v", "type": f["type"]}],
        }
        parsed = fastavro.parse_schema(wrapper, named)
        plans.append(_FieldPlan(f["name"], kind, inner, branch, None if kind else parsed))
    return _Plan(tuple(plans), fastavro.parse_schema(schema))


def _decodable_kind(inner: Any) -> str | None:
    """The flat kind numpy decodes, or None: decimals beyond 16 bytes (decimal256) go to fastavro."""
    kind = _flat_kind(inner)
    if kind == "fixed_decimal" and (int(inner["size"]) > 16 or int(inner["precision"]) > 38):
        return None
    return kind


def _natural_type(kind: str, inner: Any) -> pa.DataType:
    """The Arrow type a flat Avro type decodes to (cast to the reader's type afterwards)."""
    logical = inner.get("logicalType") if isinstance(inner, dict) else None
    if kind == "int" and logical == "date":
        return pa.date32()
    if kind == "long" and logical in _LOGICAL_LONGS:
        return _LOGICAL_LONGS[logical]
    if kind == "fixed_decimal":
        return pa.decimal128(int(inner["precision"]), int(inner.get("scale", 0)))
    simple = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32()}
    simple.update({"double": pa.float64(), "string": pa.string(), "bytes": pa.binary()})
    return simple[kind]


# ---------------------------------------------------------------------------- decoding: records


def _block_count(content: bytes) -> int:
    if len(content) < 8:
        raise ValueError(f"corrupt Avro data block: {len(content)} bytes, shorter than its header")
    version, count = struct.unpack_from(">ii", content, 0)
    if version != CONTENT_VERSION:
        raise ValueError(f"Avro data block version {version}; only version {CONTENT_VERSION} is read")
    if count < 0 or 8 + 4 * count > len(content):
        raise ValueError(f"corrupt Avro data block: {count} records cannot fit in {len(content)} bytes")
    return int(count)


def _record_starts(content: bytes, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(first byte, end) of every record's body. The length prefixes form a chain (each record's
    start is the previous one's end) that numpy cannot scan, so this is the flat path's one loop
    per record: ~0.15 us each, measured (half the decoding of a 4-column block, 1/30 of fastavro's)."""
    unpack = struct.Struct(">i").unpack_from
    prefixes: list[int] = []
    append = prefixes.append
    p = 8
    try:
        for _ in range(count):
            append(p)
            (size,) = unpack(content, p)
            p += 4 + size
    except struct.error:
        _corrupt(len(prefixes) - 1, "its length prefix lies beyond the block")
    starts = np.array(prefixes, dtype=np.int64) + 4
    ends = np.empty(count, dtype=np.int64)
    ends[:-1] = starts[1:] - 4
    ends[-1:] = p
    short = np.flatnonzero(ends < starts)  # a negative length prefix
    if short.size:
        _corrupt(int(short[0]), "negative length")
    if p > len(content):
        _corrupt(count - 1, f"ends at byte {p}, beyond the block's {len(content)} bytes")
    return starts, ends


# ---------------------------------------------------------------------------- decoding: values


def _varints_at(data: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(zig-zag decoded int64 values, byte lengths) of the varints starting at positions `p`.
    Byte k is read only for the values still going on after byte k-1, so short varints (nearly
    all) cost one pass. Reads past the data are clipped: the cursor check then reports them."""
    b = np.take(data, p, mode="clip")
    raw = (b & 0x7F).astype(np.uint64)
    lengths = np.ones(len(p), dtype=np.int64)
    active = np.flatnonzero(b & 0x80)
    for k in range(1, _VARINT_MAX):
        if not active.size:
            break
        b = np.take(data, p[active] + k, mode="clip")
        raw[active] |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        lengths[active] += 1
        active = active[(b & 0x80) != 0]
    if active.size:
        raise ValueError("corrupt Avro data block: a varint longer than 10 bytes")
    signed = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return signed, lengths


def _bytes_at(data: np.ndarray, p: np.ndarray, size: int) -> np.ndarray:
    """(len(p), size) matrix of the `size` bytes at each position (a strided view, one gather)."""
    if len(data) < size:
        raise ValueError(f"corrupt Avro data block: {len(data)} bytes cannot hold a {size}-byte value")
    windows = np.lib.stride_tricks.sliding_window_view(data, size)
    out: np.ndarray = windows[np.minimum(p, len(data) - size)]
    return out


def _from_numpy(values: np.ndarray, arrow_type: pa.DataType, valid: np.ndarray | None) -> pa.Array:
    """An Arrow array over `values` (one per record, any value where null), nulls where not valid."""
    n = len(values)
    if pa.types.is_boolean(arrow_type):
        data = pa.py_buffer(np.packbits(values.astype(bool), bitorder="little"))
    else:
        data = pa.py_buffer(np.ascontiguousarray(values))
    return pa.Array.from_buffers(arrow_type, n, [_validity(valid), data])


def _validity(valid: np.ndarray | None) -> pa.Buffer | None:
    if valid is None or valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _read_fixed_width(
    rec: _Records, rows: np.ndarray, kind: str, inner: Any, valid: np.ndarray | None
) -> pa.Array:
    """boolean, int, long (and their logical types), float, double, fixed decimal."""
    p = rec.pos[rows]
    n = len(rec.pos)
    if kind in ("int", "long"):
        values, width = _varints_at(rec.data, p)
    elif kind == "boolean":
        values, width = np.take(rec.data, p, mode="clip") != 0, np.int64(1)
    elif kind in ("float", "double"):
        dtype = np.dtype("<f4" if kind == "float" else "<f8")
        width = np.int64(dtype.itemsize)
        values = _bytes_at(rec.data, p, dtype.itemsize).view(dtype)[:, 0]
    else:  # fixed_decimal
        return _read_decimals(rec, rows, inner, valid)
    rec.advance(rows, width)
    full = np.zeros(n, dtype=np.bool_ if kind == "boolean" else _NUMPY_TYPES[kind])
    full[rows] = values
    return _from_numpy(full, _natural_type(kind, inner), valid)


def _read_decimals(rec: _Records, rows: np.ndarray, inner: Any, valid: np.ndarray | None) -> pa.Array:
    """Fixed decimals: big-endian two's complement, sign-extended into Arrow's little-endian 128."""
    size = int(inner["size"])
    raw = _bytes_at(rec.data, rec.pos[rows], size)
    rec.advance(rows, size)
    full = np.zeros((len(rec.pos), 16), dtype=np.uint8)
    full[rows] = np.where(raw[:, :1] >= 0x80, 0xFF, 0).astype(np.uint8)
    full[rows, :size] = raw[:, ::-1]
    return _from_numpy(full, _natural_type("fixed_decimal", inner), valid)


def _read_binaries(
    rec: _Records, rows: np.ndarray, kind: str, valid: np.ndarray | None, wanted: bool
) -> pa.Array | None:
    """string / bytes: a varint length, then the bytes. The values are cut out of the content
    without a Python loop: an Arrow binary array over the whole content whose offsets alternate
    value, gap, value... (monotonic, as records follow each other), then `take` of every other
    element copies just the values."""
    p = rec.pos[rows]
    lengths, prefix = _varints_at(rec.data, p)
    bad = np.flatnonzero(lengths < 0)
    if bad.size:
        _corrupt(int(rows[bad[0]]), "negative string length")
    starts = rec.pos.copy()  # null rows: an empty value at the cursor keeps the offsets monotonic
    starts[rows] = p + prefix
    rec.advance(rows, prefix + lengths)
    if not wanted:
        return None
    n = len(rec.pos)
    large = len(rec.content) >= 2**31 - 1
    offsets = np.zeros(2 * n + 1, dtype=np.int64 if large else np.int32)
    offsets[1::2] = starts
    offsets[2::2] = rec.pos
    binary = pa.large_binary() if large else pa.binary()
    spans = pa.Array.from_buffers(binary, 2 * n, [None, pa.py_buffer(offsets), pa.py_buffer(rec.content)])
    mask = None if valid is None else ~valid
    values = spans.take(pa.array(np.arange(1, 2 * n, 2), mask=mask))
    # the cast validates UTF-8, as fastavro's decoding did
    return values.cast(pa.large_string() if large else pa.string()) if kind == "string" else values


def _read_with_fastavro(rec: _Records, plan: _FieldPlan, target: pa.DataType | None) -> pa.Array | None:
    """Nested types and general unions: fastavro reads the value at each cursor (the per-record loop
    the numpy path avoids, left to the columns that need it)."""
    assert plan.parsed is not None
    buf = io.BytesIO(rec.content)
    positions = rec.pos.tolist()
    values = []
    for i, p in enumerate(positions):
        buf.seek(p)
        try:
            record: Any = fastavro.schemaless_reader(buf, plan.parsed, None)
        except _FASTAVRO_ERRORS as e:
            _corrupt(i, f"field '{plan.name}': {type(e).__name__} {e}")
        values.append(record["v"])
        positions[i] = buf.tell()
    rows = np.arange(len(positions))
    rec.advance(rows, np.array(positions, dtype=np.int64) - rec.pos)
    return None if target is None else _typed(values, target)


def _read_field(rec: _Records, plan: _FieldPlan, target: pa.DataType | None) -> pa.Array | None:
    """One writer field of every record, as an Arrow array of type `target` (None: skip it, but
    still move the cursors past it)."""
    if plan.kind is None:
        return _read_with_fastavro(rec, plan, target)
    rows = np.arange(len(rec.pos))
    valid = None
    if plan.value_branch is not None:
        # branch 0 or 1 of a two-branch union: one varint byte, 0x00 or 0x02
        branch = np.take(rec.data, rec.pos, mode="clip")
        rec.advance(rows, 1)
        bad = np.flatnonzero((branch != 0) & (branch != 2))
        if bad.size:
            _corrupt(int(bad[0]), f"field '{plan.name}': union branch byte {int(branch[bad[0]])}")
        valid = branch == 2 * plan.value_branch
        rows = np.flatnonzero(valid)
    if plan.kind in ("string", "bytes"):
        arr = _read_binaries(rec, rows, plan.kind, valid, target is not None)
    else:
        arr = _read_fixed_width(rec, rows, plan.kind, plan.inner, valid)
    if arr is None or target is None:
        return None
    return conform_column(arr, target)


def decode_block_content(
    content: bytes, writer_schema: dict[str, Any] | str, arrow_schema: pa.Schema
) -> pa.Table:
    """The records of an AVRO_DATA block's content as an Arrow table of `arrow_schema` (fields the
    writer schema lacks are null; writer fields it lacks are read past and dropped)."""
    count = _block_count(content)
    if count == 0:
        return arrow_schema.empty_table()
    plan = _plan(writer_schema if isinstance(writer_schema, str) else json.dumps(writer_schema))
    starts, ends = _record_starts(content, count)
    targets = {f.name: f.type for f in arrow_schema}
    if count < _NUMPY_MIN_RECORDS:
        columns = _read_by_record(content, starts, ends, plan, targets)
    else:
        columns = _read_by_column(
            _Records(content, np.frombuffer(content, np.uint8), starts, ends), plan, targets
        )
    cols = [columns.get(f.name, pa.nulls(count, f.type)) for f in arrow_schema]
    return pa.Table.from_arrays(cols, schema=arrow_schema)


def _read_by_column(rec: _Records, plan: _Plan, targets: dict[str, pa.DataType]) -> dict[str, pa.Array]:
    columns: dict[str, pa.Array] = {}
    for field in plan.fields:
        arr = _read_field(rec, field, targets.get(field.name))
        if arr is not None:
            columns[field.name] = arr
    left = np.flatnonzero(rec.pos != rec.ends)
    if left.size:
        i = int(left[0])
        _corrupt(i, f"{int(rec.ends[i] - rec.pos[i])} bytes left after its last field")
    return columns


def _read_by_record(
    content: bytes, starts: np.ndarray, ends: np.ndarray, plan: _Plan, targets: dict[str, pa.DataType]
) -> dict[str, pa.Array]:
    """Small blocks: fastavro record by record, then a column per field."""
    buf = io.BytesIO(content)
    rows: list[Any] = []
    for i, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        buf.seek(start)
        try:
            rows.append(fastavro.schemaless_reader(buf, plan.parsed, None))
        except _FASTAVRO_ERRORS as e:
            _corrupt(i, f"{type(e).__name__} {e}")
        if buf.tell() != end:
            _corrupt(i, f"its fields take {buf.tell() - start} bytes, its length prefix says {end - start}")
    names = [f.name for f in plan.fields if f.name in targets]
    return {name: _typed([r[name] for r in rows], targets[name]) for name in names}


def _typed(values: list[Any], target: pa.DataType) -> pa.Array:
    """Decoded values of one field as `target`.  A block written with an older table schema holds
    values of a type the table has since been promoted from (int 7 for a long or string column; a
    struct without a later field): those are read as they are and cast like a base file's columns
    (docs/hudi/schema-evolution.md#reading-older-files-in-the-latest-schema)."""
    try:
        return pa.array(values, type=target)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return conform_column(pa.array(values), target)


# ------------------------------------------------------------------------------ delete records

# HoodieDeleteRecordList.orderingVal is a union of wrapper records
# (docs/hudi/services.md#delete-blocks); a wrapper of one field encodes like its value, so a value
# is its branch index then its plain encoding. Branch indexes on the wire (0 is null): Java's order,
# never to change.
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
