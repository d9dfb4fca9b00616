"""Arrow rows <-> AVRO_DATA block content (hoodie_sink.table.format.avro_rows): the numpy encoder and
decoder against fastavro, round trips, schema evolution between writer and reader, corrupt blocks."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import struct
import time
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from hoodie_sink.table.format import avro_rows
from hoodie_sink.table.format.avro_rows import avro_block_content, decode_block_content, encode_records
from hoodie_sink.table.format.schema import arrow_to_avro, avro_to_arrow, storage_schema

UTC = datetime.timezone.utc


@pytest.fixture(autouse=True, params=["by_column", "by_record"])
def decoder_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test against both decoders: numpy column by column and (small blocks) fastavro
    record by record, whatever the block's size."""
    monkeypatch.setattr(avro_rows, "_NUMPY_MIN_RECORDS", 0 if request.param == "by_column" else 10**9)


def _schema_of(t: pa.Table) -> dict[str, Any]:
    return arrow_to_avro(storage_schema(t.schema), "tbl")


def _round_trip(t: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(decoded, expected): decode(encode(t)) and `t` cast to the reader schema of its Avro schema."""
    schema = _schema_of(t)
    target = avro_to_arrow(schema)
    decoded = decode_block_content(avro_block_content(t, schema), json.dumps(schema), target)
    return decoded, t.cast(target)


def _fastavro_content(schema: dict[str, Any], records: list[dict[str, Any]], version: int = 3) -> bytes:
    """Block content written record by record with fastavro (independent of our encoder)."""
    parsed = fastavro.parse_schema(schema)
    out = [struct.pack(">ii", version, len(records))]
    for r in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        out.append(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
    return b"".join(out)


def _decode_with_fastavro_loop(content: bytes, writer_schema: str, arrow_schema: pa.Schema) -> pa.Table:
    """The decoder this module had before: fastavro per record, then pa.array of Python lists
    (kept as the reference and for the benchmark below)."""
    schema = json.loads(writer_schema)
    _, count = struct.unpack_from(">ii", content, 0)
    parsed = fastavro.parse_schema(schema)
    pos, rows = 8, []
    view = memoryview(content)
    for _ in range(count):
        (size,) = struct.unpack_from(">i", content, pos)
        rows.append(fastavro.schemaless_reader(io.BytesIO(view[pos + 4 : pos + 4 + size]), parsed, None))
        pos += 4 + size
    names = {f["name"] for f in schema["fields"]}
    cols = [
        pa.array([r[f.name] for r in rows], type=f.type) if f.name in names else pa.nulls(count, f.type)
        for f in arrow_schema
    ]
    return pa.Table.from_arrays(cols, schema=arrow_schema)


# --------------------------------------------------------------------------------------------
# Round trips


def _all_types_table() -> pa.Table:
    ts = [
        datetime.datetime(2024, 5, 1, 12, 30, 45, 123456, tzinfo=UTC),
        datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),  # pre-1970: negative micros
        None,
        datetime.datetime(1900, 1, 1, tzinfo=UTC),
    ]
    return pa.table(
        {
            "i8": pa.array([1, -128, None, 127], pa.int8()),
            "i16": pa.array([None, -32768, 300, 32767], pa.int16()),
            "i32": pa.array([0, -(2**31), 2**31 - 1, None], pa.int32()),
            "i64": pa.array([2**63 - 1, -(2**63), None, 0], pa.int64()),
            "f32": pa.array([1.5, None, -0.0, float("inf")], pa.float32()),
            "f64": pa.array([None, 3.141592653589793, -1e300, float("-inf")], pa.float64()),
            "flag": pa.array([True, False, None, True], pa.bool_()),
            "s": pa.array(["héllo wörld ✓ 日本", "", None, "a" * 300], pa.string()),
            "b": pa.array([b"\x00\xff\x80", None, b"", bytes(range(256))], pa.binary()),
            "d": pa.array(
                [datetime.date(2024, 2, 29), datetime.date(1960, 1, 1), None, datetime.date(1970, 1, 1)]
            ),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "dec": pa.array(
                [
                    decimal.Decimal("12345678.90"),
                    decimal.Decimal("-0.01"),
                    None,
                    decimal.Decimal("-99999999.99"),
                ],
                pa.decimal128(10, 2),
            ),
            "tags": pa.array([["x", None], [], None, ["ü"]], pa.list_(pa.string())),
            "point": pa.array(
                [{"x": 1, "y": "a"}, None, {"x": None, "y": None}, {"x": -7, "y": "é"}],
                pa.struct([("x", pa.int64()), ("y", pa.string())]),
            ),
        }
    )


def test_round_trip_all_types():
    decoded, expected = _round_trip(_all_types_table())
    assert decoded.schema == expected.schema
    assert decoded.equals(expected), (decoded.to_pylist(), expected.to_pylist())


def test_decoder_matches_the_fastavro_loop():
    t = _all_types_table()
    schema = _schema_of(t)
    content = avro_block_content(t, schema)
    target = avro_to_arrow(schema)
    assert decode_block_content(content, schema, target).equals(
        _decode_with_fastavro_loop(content, json.dumps(schema), target)
    )


def test_encoder_matches_fastavro_per_record():
    t = _all_types_table()
    schema = _schema_of(t)
    parsed = fastavro.parse_schema(schema)
    records = encode_records(t, schema).to_pylist()
    for row, ours in zip(t.to_pylist(), records, strict=True):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, row)
        assert ours == buf.getvalue(), row


def _random_table(rng: np.random.Generator, n: int) -> pa.Table:
    def nulls() -> np.ndarray:
        return rng.random(n) < rng.choice([0.0, 0.3, 1.0])

    alphabet = list("abcxyzé日✓ \x00")
    strings = ["".join(rng.choice(alphabet, size=rng.integers(0, 40))) for _ in range(n)]
    big = rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64, endpoint=True)
    small = rng.integers(-300, 300, size=n)
    unscaled = rng.integers(-(10**17), 10**17, size=n)
    return pa.table(
        {
            "big": pa.array(np.where(rng.random(n) < 0.5, big, small), mask=nulls()),
            "i32": pa.array(rng.integers(-(2**31), 2**31, size=n).astype(np.int32), mask=nulls()),
            "dbl": pa.array(rng.standard_normal(n) * 1e6, mask=nulls()),
            "flt": pa.array(rng.standard_normal(n).astype(np.float32), mask=nulls()),
            "flag": pa.array(rng.random(n) < 0.5, mask=nulls()),
            "s": pa.array(strings, pa.string(), mask=nulls()),
            "b": pa.array([s.encode()[::-1] for s in strings], pa.binary(), mask=nulls()),
            "d": pa.array(rng.integers(-40000, 40000, size=n).astype(np.int32), mask=nulls()).cast(
                pa.date32()
            ),
            "ts": pa.array(small * 10**12 + big % 10**6, pa.timestamp("us", tz="UTC"), mask=nulls()),
            "dec": pa.array(
                [decimal.Decimal(int(u)).scaleb(-4) for u in unscaled], pa.decimal128(20, 4), mask=nulls()
            ),
        }
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [0, 1, 1000])
def test_random_round_trip(seed: int, n: int):
    decoded, expected = _round_trip(_random_table(np.random.default_rng(seed), n))
    assert decoded.equals(expected)


# --------------------------------------------------------------------------------------------
# Writer schema vs reader schema


def test_extra_writer_field_is_skipped_and_missing_field_is_null():
    writer = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "dropped_s", "type": ["null", "string"]},
            {"name": "dropped_nested", "type": ["null", {"type": "array", "items": "long"}]},
            {"name": "dropped_d", "type": "double"},
            {"name": "v", "type": ["null", "string"]},
        ],
    }
    records = [
        {"id": 1, "dropped_s": "zzz", "dropped_nested": [1, 2], "dropped_d": 1.0, "v": "a"},
        {"id": -2, "dropped_s": None, "dropped_nested": None, "dropped_d": 2.0, "v": None},
    ]
    target = pa.schema([("v", pa.string()), ("added", pa.int64()), ("id", pa.int64())])
    got = decode_block_content(_fastavro_content(writer, records), writer, target)
    assert got.schema == target
    assert got.to_pylist() == [{"v": "a", "added": None, "id": 1}, {"v": None, "added": None, "id": -2}]


def test_writer_types_other_than_ours():
    """Unions with null second, timestamp-millis, int read as long, a general union and a named type
    referenced by a later field (both through fastavro)."""
    fixed = {
        "type": "fixed",
        "name": "money",
        "size": 5,
        "logicalType": "decimal",
        "precision": 10,
        "scale": 2,
    }
    writer = {
        "type": "record",
        "name": "r",
        "namespace": "ns",
        "fields": [
            {"name": "n", "type": ["int", "null"]},
            {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "amount", "type": fixed},
            {"name": "amounts", "type": {"type": "array", "items": "money"}},
            {"name": "either", "type": ["null", "long", "string"]},
        ],
    }
    when = datetime.datetime(1965, 3, 4, 5, 6, 7, 8000, tzinfo=UTC)
    records = [
        {"n": 5, "ms": when, "amount": decimal.Decimal("-1.25"), "amounts": [], "either": "x"},
        {
            "n": None,
            "ms": when,
            "amount": decimal.Decimal("3.00"),
            "amounts": [decimal.Decimal("1.1")],
            "either": None,
        },
    ]
    target = pa.schema(
        [
            ("n", pa.int64()),
            ("ms", pa.timestamp("us", tz="UTC")),
            ("amount", pa.decimal128(10, 2)),
            ("amounts", pa.list_(pa.decimal128(10, 2))),
            ("either", pa.string()),
        ]
    )
    got = decode_block_content(_fastavro_content(writer, records), writer, target).to_pylist()
    assert [r["n"] for r in got] == [5, None]
    assert [r["ms"] for r in got] == [when, when]
    assert [r["amount"] for r in got] == [decimal.Decimal("-1.25"), decimal.Decimal("3.00")]
    assert [r["amounts"] for r in got] == [[], [decimal.Decimal("1.10")]]
    assert [r["either"] for r in got] == ["x", None]


# --------------------------------------------------------------------------------------------
# Corrupt blocks


def _small_block() -> tuple[bytes, dict[str, Any], pa.Schema]:
    t = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["a", "bb", "ccc"]})
    schema = _schema_of(t)
    return avro_block_content(t, schema), schema, avro_to_arrow(schema)


def test_wrong_version_is_refused():
    content, schema, target = _small_block()
    with pytest.raises(ValueError, match="version 2"):
        decode_block_content(struct.pack(">i", 2) + content[4:], schema, target)


@pytest.mark.parametrize("cut", [0, 5, 9, 14, -1])
def test_truncated_content_is_refused(cut: int):
    content, schema, target = _small_block()
    with pytest.raises(ValueError, match="corrupt|version"):
        decode_block_content(content[:cut], schema, target)


def test_record_length_disagreeing_with_its_fields_names_the_record():
    content, schema, target = _small_block()
    # record 1 (id 2, "bb"): lengthen its declared size by one byte and add the byte
    first = 8 + 4 + struct.unpack_from(">i", content, 8)[0]
    (size,) = struct.unpack_from(">i", content, first)
    body = first + 4 + size
    bad = content[:first] + struct.pack(">i", size + 1) + content[first + 4 : body] + b"\x00" + content[body:]
    with pytest.raises(ValueError, match="record 1"):
        decode_block_content(bad, schema, target)


def test_string_length_past_the_record_is_refused():
    content, schema, target = _small_block()
    # record 0 is: branch, id 1, branch, len 1 ("a"): claim 40 bytes instead
    start = 12
    assert content[start : start + 5] == b"\x02\x02\x02\x02a"
    bad = content[: start + 3] + b"\x50" + content[start + 4 :]
    with pytest.raises(ValueError, match="record 0"):
        decode_block_content(bad, schema, target)


# --------------------------------------------------------------------------------------------
# Micro-benchmark: python tests/unit/format/test_avro_rows.py


def _benchmark(n: int = 200_000) -> None:
    rng = np.random.default_rng(7)
    t = pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64) * 7919),
            "name": pa.array([f"user-{i}-{'x' * (i % 23)}" for i in range(n)]),
            "score": pa.array(rng.standard_normal(n)),
            "maybe": pa.array(rng.integers(-(10**12), 10**12, size=n), mask=rng.random(n) < 0.3),
        }
    )
    schema = _schema_of(t)
    schema_json = json.dumps(schema)
    target = avro_to_arrow(schema)
    content = avro_block_content(t, schema)
    for name, decode in (
        ("fastavro loop", _decode_with_fastavro_loop),
        ("numpy columns", decode_block_content),
    ):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            out = decode(content, schema_json, target)
            best = min(best, time.perf_counter() - start)
        assert out.equals(t.cast(target))
        print(f"{name:>14}: {n} rows in {best * 1e3:8.1f} ms = {n / best:12,.0f} rows/s")


if __name__ == "__main__":
    _benchmark()
