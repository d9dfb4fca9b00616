"""Arrow <-> Avro mapping, meta fields, storage schema and schema drift (hoodie_sink.table.format.schema)."""

from __future__ import annotations

import datetime
import decimal
import json
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie_sink.errors import HoodieSchemaError
from hoodie_sink.table.format.schema import (
    META_COLUMNS,
    arrow_to_avro,
    avro_record_name,
    avro_schema_json,
    avro_to_arrow,
    cast_to_storage,
    check_compatible,
    storage_schema,
    to_storage_table,
    with_meta_fields,
    without_meta_fields,
)
from tests.support.tables import fixture_zips

# --------------------------------------------------------------------------------------------
# Fixture tables


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Fixture name -> unzipped table base path."""
    root = tmp_path_factory.mktemp("hudi-tables")
    out: dict[str, Path] = {}
    for zf in fixture_zips():
        with zipfile.ZipFile(zf) as z:
            members = [m for m in z.namelist() if not m.startswith("__MACOSX")]
            z.extractall(root / zf.stem, members)
        (base,) = [p.parent.parent for p in (root / zf.stem).glob("*/.hoodie/hoodie.properties")]
        out[zf.stem] = base
    return out


def latest_commit_schema(base: Path) -> str:
    commits = sorted(base.glob(".hoodie/*.commit")) + sorted(base.glob(".hoodie/*.deltacommit"))
    return json.loads(commits[-1].read_text())["extraMetadata"]["schema"]


def properties(base: Path) -> dict[str, str]:
    lines = (base / ".hoodie" / "hoodie.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def base_files(base: Path) -> list[Path]:
    return sorted(base.rglob("*.parquet"))


DATA_TABLES = [
    "cow_v6_complexkeygen_hivestyle",
    "cow_v6_nonpartitioned",
    "cow_v6_simplekeygen_nonhivestyle",
    "mor_avro_v6_trips_8i1u",
]


def spark_arrow_schema_complexkeygen() -> pa.Schema:
    """The Arrow schema PySpark produces for the v6_complexkeygen_hivestyle .sql table."""
    arr_item = pa.struct([("arr_struct_f1", pa.string()), ("arr_struct_f2", pa.int32())])
    map_value = pa.struct(
        [("map_field_value_struct_f1", pa.float64()), ("map_field_value_struct_f2", pa.bool_())]
    )
    child = pa.struct([("child_field1", pa.float64()), ("child_field2", pa.bool_())])
    return pa.schema(
        [
            ("id", pa.int32()),
            ("name", pa.string()),
            ("isActive", pa.bool_()),
            ("intField", pa.int32()),
            ("longField", pa.int64()),
            ("floatField", pa.float32()),
            ("doubleField", pa.float64()),
            ("decimalField", pa.decimal128(10, 5)),
            ("dateField", pa.date32()),
            ("timestampField", pa.timestamp("us", tz="America/Chicago")),
            ("binaryField", pa.binary()),
            ("arrayField", pa.list_(arr_item)),
            ("mapField", pa.map_(pa.string(), map_value)),
            (
                "structField",
                pa.struct([("field1", pa.string()), ("field2", pa.int32()), ("child_struct", child)]),
            ),
            ("byteField", pa.int8()),
            ("shortField", pa.int16()),
        ]
    )


# --------------------------------------------------------------------------------------------
# arrow_to_avro against real Hudi tables


@pytest.mark.compat
def test_arrow_to_avro_equals_fixture_commit_schema(tables: dict[str, Path]) -> None:
    expected = latest_commit_schema(tables["cow_v6_complexkeygen_hivestyle"])
    avro = arrow_to_avro(spark_arrow_schema_complexkeygen(), "v6_complexkeygen_hivestyle")
    assert avro == json.loads(expected)
    # Java's Schema.toString is compact JSON in the same key order: byte-identical.
    assert avro_schema_json(avro) == expected


@pytest.mark.compat
@pytest.mark.parametrize("name", DATA_TABLES)
def test_arrow_to_avro_from_base_file_schema(tables: dict[str, Path], name: str) -> None:
    base = tables[name]
    expected = latest_commit_schema(base)
    table_name = properties(base)["hoodie.table.name"]
    for path in base_files(base):
        assert avro_schema_json(arrow_to_avro(pq.read_schema(path), table_name)) == expected


@pytest.mark.compat
@pytest.mark.parametrize("name", DATA_TABLES)
def test_with_meta_fields_equals_parquet_footer(tables: dict[str, Path], name: str) -> None:
    base = tables[name]
    commit_schema = json.loads(latest_commit_schema(base))
    for path in base_files(base):
        footer = json.loads(pq.read_schema(path).metadata[b"parquet.avro.schema"])
        assert with_meta_fields(commit_schema) == footer
        assert without_meta_fields(footer) == commit_schema


def test_with_meta_fields_is_idempotent_and_copies() -> None:
    avro = arrow_to_avro(pa.schema([("id", pa.int64())]), "t")
    once = with_meta_fields(avro)
    assert [f["name"] for f in once["fields"]] == [*META_COLUMNS, "id"]
    assert once["fields"][0] == {
        "name": "_hoodie_commit_time",
        "type": ["null", "string"],
        "doc": "",
        "default": None,
    }
    assert with_meta_fields(once) == once
    assert [f["name"] for f in avro["fields"]] == ["id"]  # input untouched


def test_meta_columns_in_input_are_skipped() -> None:
    schema = pa.schema([(m, pa.string()) for m in META_COLUMNS] + [("id", pa.int64())])
    assert [f["name"] for f in arrow_to_avro(schema, "t")["fields"]] == ["id"]
    with pytest.raises(HoodieSchemaError, match="no data columns"):
        arrow_to_avro(pa.schema([(m, pa.string()) for m in META_COLUMNS]), "t")


# --------------------------------------------------------------------------------------------
# arrow_to_avro type mapping


def avro_type_of(t: pa.DataType) -> object:
    return arrow_to_avro(pa.schema([("c", t)]), "t")["fields"][0]["type"][1]


@pytest.mark.parametrize(
    ("arrow", "avro"),
    [
        (pa.bool_(), "boolean"),
        (pa.int8(), "int"),
        (pa.int16(), "int"),
        (pa.int32(), "int"),
        (pa.uint8(), "int"),
        (pa.uint16(), "int"),
        (pa.int64(), "long"),
        (pa.uint32(), "long"),
        (pa.float32(), "float"),
        (pa.float64(), "double"),
        (pa.string(), "string"),
        (pa.large_string(), "string"),
        (pa.string_view(), "string"),
        (pa.binary(), "bytes"),
        (pa.large_binary(), "bytes"),
        (pa.binary(4), "bytes"),
        (pa.date32(), {"type": "int", "logicalType": "date"}),
        (pa.date64(), {"type": "int", "logicalType": "date"}),
        (pa.timestamp("s", tz="UTC"), {"type": "long", "logicalType": "timestamp-micros"}),
        (pa.timestamp("ns", tz="+02:00"), {"type": "long", "logicalType": "timestamp-micros"}),
        (pa.dictionary(pa.int32(), pa.string()), "string"),
    ],
)
def test_primitive_mapping(arrow: pa.DataType, avro: object) -> None:
    assert avro_type_of(arrow) == avro


@pytest.mark.parametrize(
    ("precision", "size"),
    [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (9, 4), (10, 5), (18, 8), (19, 9), (38, 16)],
)
def test_decimal_is_minimal_fixed(precision: int, size: int) -> None:
    assert avro_type_of(pa.decimal128(precision, 2)) == {
        "type": "fixed",
        "name": "fixed",
        "namespace": "hoodie.t.t_record.c",
        "size": size,
        "logicalType": "decimal",
        "precision": precision,
        "scale": 2,
    }


def test_nested_naming_follows_spark() -> None:
    inner = pa.struct([("d", pa.decimal128(5, 1)), ("s", pa.struct([("x", pa.int32())]))])
    avro = arrow_to_avro(pa.schema([("a", pa.list_(pa.list_(inner)))]), "T")
    outer_items = avro["fields"][0]["type"][1]["items"][1]
    record = outer_items["items"][1]
    # list items inherit the field's name and namespace, however deep
    assert (record["name"], record["namespace"]) == ("a", "hoodie.T.T_record")
    d_type = record["fields"][0]["type"][1]
    assert (d_type["name"], d_type["namespace"]) == ("fixed", "hoodie.T.T_record.a.d")
    s_type = record["fields"][1]["type"][1]
    assert (s_type["name"], s_type["namespace"]) == ("s", "hoodie.T.T_record.a")
    assert s_type["fields"] == [{"name": "x", "type": ["null", "int"], "default": None}]


def test_table_name_is_sanitized_like_hudi() -> None:
    assert avro_record_name("my-table.v2") == ("my__table__v2_record", "hoodie.my__table__v2")
    assert avro_record_name("1abc") == ("__abc_record", "hoodie.__abc")


@pytest.mark.parametrize(
    ("arrow", "words"),
    [
        (pa.timestamp("us"), ["'c'", "hudi-rs", "Help:", "TIMESTAMP"]),
        (pa.timestamp("ns"), ["'c'", "local-timestamp", "Help:"]),
        (pa.null(), ["'c'", "null type", "Help:"]),
        (pa.float16(), ["'c'", "float16", "Help:"]),
        (pa.uint64(), ["'c'", "unsigned 64-bit", "Help:"]),
        (pa.time64("us"), ["'c'", "time-of-day", "Help:"]),
        (pa.duration("s"), ["'c'", "duration", "Help:"]),
        (pa.map_(pa.int32(), pa.string()), ["'c'", "string keys", "Help:"]),
        (pa.decimal256(40, 2), ["'c'", "p <= 38", "Help:"]),
        (pa.struct([]), ["'c'", "without fields", "Help:"]),
    ],
)
def test_unsupported_types_are_refused(arrow: pa.DataType, words: list[str]) -> None:
    for fn in (lambda s: arrow_to_avro(s, "t"), storage_schema):
        with pytest.raises(HoodieSchemaError) as e:
            fn(pa.schema([("c", arrow)]))
        for w in words:
            assert w in str(e.value)


def test_nested_unsupported_type_names_the_path() -> None:
    schema = pa.schema([("s", pa.struct([("inner", pa.list_(pa.timestamp("us")))]))])
    with pytest.raises(HoodieSchemaError, match=r"'s\.inner\.element'"):
        arrow_to_avro(schema, "t")


def test_invalid_column_name_is_refused() -> None:
    with pytest.raises(HoodieSchemaError, match=r"'my col'.*Help: rename"):
        arrow_to_avro(pa.schema([("my col", pa.int32())]), "t")


# --------------------------------------------------------------------------------------------
# avro_to_arrow


@pytest.mark.compat
@pytest.mark.parametrize("name", DATA_TABLES + ["cow_v6_empty"])
def test_avro_to_arrow_equals_hudi_rs(tables: dict[str, Path], name: str) -> None:
    from hudi import HudiTableBuilder  # a test dependency (pyproject.toml): missing is an error, not a skip

    base = tables[name]
    table = HudiTableBuilder.from_base_uri(str(base)).build()
    source = (
        latest_commit_schema(base)
        if list(base.glob(".hoodie/*commit"))
        else properties(base)["hoodie.table.create.schema"]
    )
    assert avro_to_arrow(source).equals(table.get_schema())


@pytest.mark.compat
@pytest.mark.parametrize("name", DATA_TABLES)
def test_avro_to_arrow_of_escaped_create_schema(tables: dict[str, Path], name: str) -> None:
    """hoodie.table.create.schema: `\\:` escapes and [T, "null"] unions without defaults."""
    base = tables[name]
    create = properties(base)["hoodie.table.create.schema"]
    assert "\\:" in create
    assert avro_to_arrow(create).equals(avro_to_arrow(latest_commit_schema(base)))


def test_avro_to_arrow_types_and_nullability() -> None:
    avro = {
        "type": "record",
        "name": "r",
        "namespace": "hoodie.x",
        "fields": [
            {"name": "a", "type": "int"},
            {"name": "b", "type": ["long", "null"]},
            {"name": "tsm", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
            {"name": "e", "type": ["null", {"type": "enum", "name": "E", "symbols": ["A"]}]},
            {"name": "fx", "type": ["null", {"type": "fixed", "name": "F", "size": 4}]},
            {
                "name": "bd",
                "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}],
            },
            {"name": "aa", "type": ["null", {"type": "array", "items": {"type": "array", "items": "int"}}]},
            {"name": "m", "type": {"type": "map", "values": "string"}},
            {
                "name": "rec",
                "type": {"type": "record", "name": "R2", "fields": [{"name": "x", "type": "int"}]},
            },
            {"name": "ref", "type": ["null", "R2"]},
        ],
    }
    # What hudi-rs 0.5.0 returns for this schema (checked by hand; it panics on the 'ref' field).
    r2 = pa.struct([pa.field("x", pa.int32(), nullable=False)])
    inner = pa.list_(pa.field("element", pa.int32(), nullable=False))
    expected = pa.schema(
        [
            pa.field("a", pa.int32(), nullable=False),
            pa.field("b", pa.int64()),
            pa.field("tsm", pa.timestamp("ms", tz="UTC")),
            pa.field("e", pa.string()),
            pa.field("fx", pa.binary(4)),
            pa.field("bd", pa.decimal128(5, 2)),
            pa.field("aa", pa.list_(pa.field("element", inner, nullable=False))),
            pa.field("m", pa.map_(pa.string(), pa.field("value", pa.string())), nullable=False),
            pa.field("rec", r2, nullable=False),
            pa.field("ref", r2),
        ]
    )
    assert avro_to_arrow(avro).equals(expected)
    forced = avro_to_arrow(json.dumps(avro), force_nullable=True)
    assert all(f.nullable for f in forced)
    assert forced.field("aa").type.value_field.nullable
    assert forced.field("rec").type.field("x").nullable


@pytest.mark.parametrize(
    ("avro_type", "match"),
    [
        (["null", {"type": "long", "logicalType": "local-timestamp-micros"}], "local-timestamp-micros"),
        (["null", "int", "string"], "union"),
        ("Missing", "unknown Avro type"),
    ],
)
def test_avro_to_arrow_refusals(avro_type: object, match: str) -> None:
    avro = {"type": "record", "name": "r", "fields": [{"name": "c", "type": avro_type}]}
    with pytest.raises(HoodieSchemaError, match=match) as e:
        avro_to_arrow(avro)
    assert "'c'" in str(e.value)


def test_avro_to_arrow_bad_json() -> None:
    with pytest.raises(HoodieSchemaError, match="not valid JSON"):
        avro_to_arrow("{not json")
    with pytest.raises(HoodieSchemaError, match="not a record"):
        avro_to_arrow('"string"')


def test_round_trip_arrow_avro_arrow() -> None:
    schema = spark_arrow_schema_complexkeygen()
    back = avro_to_arrow(arrow_to_avro(schema, "t"))
    assert back.equals(storage_schema(schema))


# --------------------------------------------------------------------------------------------
# Storage schema and casting


def test_storage_schema_mapping() -> None:
    schema = pa.schema(
        [
            pa.field("i8", pa.int8(), nullable=False),
            ("u32", pa.uint32()),
            ("ls", pa.large_string()),
            ("lb", pa.large_binary()),
            ("ts", pa.timestamp("ns", tz="Europe/Paris")),
            ("d64", pa.date64()),
            ("dec", pa.decimal128(10, 5)),
            ("l", pa.large_list(pa.field("x", pa.int16(), nullable=False))),
            ("m", pa.map_(pa.large_string(), pa.int8())),
            ("s", pa.struct([pa.field("a", pa.int8(), nullable=False)])),
        ],
        metadata={b"pandas": b"{}"},
    )
    assert storage_schema(schema) == pa.schema(
        [
            ("i8", pa.int32()),
            ("u32", pa.int64()),
            ("ls", pa.string()),
            ("lb", pa.binary()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("d64", pa.date32()),
            ("dec", pa.decimal128(10, 5)),
            ("l", pa.list_(pa.field("element", pa.int32()))),
            ("m", pa.map_(pa.string(), pa.int32())),
            ("s", pa.struct([("a", pa.int32())])),
        ]
    )
    out = storage_schema(schema)
    assert out.metadata is None
    assert all(f.nullable for f in out)
    assert out.field("l").type.value_field.name == "element"
    assert out.field("s").type.field("a").nullable


def sample_table() -> pa.Table:
    ts = datetime.datetime(2023, 4, 1, 12, 1, 0, 123456, tzinfo=datetime.timezone.utc)
    return pa.table(
        {
            "b": pa.array([1, None], pa.int8()),
            "ts": pa.array([ts, None], pa.timestamp("us", tz="America/Chicago")).cast(
                pa.timestamp("ns", tz="America/Chicago")
            ),
            "s": pa.array(["x", None], pa.large_string()),
            "dec": pa.array([decimal.Decimal("1.50"), None], pa.decimal128(5, 2)),
            "l": pa.array([[1, 2], None], pa.list_(pa.int16())),
            "st": pa.array([{"a": 1}, None], pa.struct([("a", pa.int8())])),
        }
    )


def test_cast_to_storage_values_and_kinds() -> None:
    table = sample_table()
    target = storage_schema(table.schema)
    out = cast_to_storage(table, target)
    assert isinstance(out, pa.Table) and out.schema == target
    assert out.column("b").to_pylist() == [1, None]
    assert out.column("ts")[0].as_py() == datetime.datetime(
        2023, 4, 1, 12, 1, 0, 123456, tzinfo=datetime.timezone.utc
    )
    assert out.column("l").to_pylist() == [[1, 2], None]
    batch = table.to_batches()[0]
    out_batch = cast_to_storage(batch, target)
    assert isinstance(out_batch, pa.RecordBatch) and out_batch.schema == target
    assert to_storage_table(batch).equals(out)


def test_cast_to_storage_truncates_nanoseconds() -> None:
    table = pa.table({"ts": pa.array([1_000_001_999], pa.timestamp("ns", tz="UTC"))})
    out = cast_to_storage(table, storage_schema(table.schema))
    assert out.column("ts").cast(pa.int64()).to_pylist() == [1_000_001]


def test_cast_to_storage_orders_by_name_and_checks_columns() -> None:
    target = pa.schema([("a", pa.int64()), ("b", pa.string())])
    batch = pa.record_batch({"b": ["x"], "a": pa.array([1], pa.int32())})
    assert cast_to_storage(batch, target).schema == target
    with pytest.raises(HoodieSchemaError, match="missing from the input: b"):
        cast_to_storage(pa.record_batch({"a": [1]}), target)
    with pytest.raises(HoodieSchemaError, match="not in the target schema: c"):
        cast_to_storage(pa.record_batch({"a": [1], "b": ["x"], "c": [1]}), target)
    with pytest.raises(HoodieSchemaError, match=r"Column 'a' cannot be cast.*Help:"):
        cast_to_storage(pa.record_batch({"a": ["not a number"], "b": ["x"]}), target)


def test_storage_parquet_uses_plain_int32(tmp_path: Path) -> None:
    path = tmp_path / "f.parquet"
    pq.write_table(to_storage_table(sample_table()), path)
    column = pq.ParquetFile(path).schema.column(0)
    assert column.physical_type == "INT32"
    assert "bitWidth=8" not in str(column.logical_type)
    assert pq.read_schema(path).field("ts").type == pa.timestamp("us", tz="UTC")


# --------------------------------------------------------------------------------------------
# check_compatible


def avro_of(**columns: pa.DataType) -> dict:
    return arrow_to_avro(pa.schema(list(columns.items())), "t")


def test_compatible_evolutions_pass() -> None:
    table = avro_of(id=pa.int32(), f=pa.float32(), s=pa.struct([("x", pa.int32())]))
    check_compatible(table, table)
    check_compatible(table, avro_of(id=pa.int64(), f=pa.float64(), s=pa.struct([("x", pa.int64())])))
    check_compatible(
        table, avro_of(id=pa.int32(), f=pa.float32(), s=pa.struct([("x", pa.int32())]), new=pa.string())
    )
    check_compatible(table, avro_of(s=pa.struct([("x", pa.int32())]), f=pa.float32(), id=pa.int32()))  # order
    check_compatible(json.dumps(table), avro_schema_json(table))


@pytest.mark.parametrize(
    ("incoming", "words"),
    [
        # (int -> string is a promotion Hudi 0.15 accepts: tests/unit/write/test_schema_evolution.py)
        ({"id": pa.bool_(), "v": pa.int64()}, ["'id'", "int", "boolean", "Help:"]),
        ({"id": pa.int32(), "v": pa.int32()}, ["'v'", "long", "int"]),
        ({"id": pa.int32()}, ["'v'", "missing from the input"]),
        ({"ID": pa.int32(), "v": pa.int64()}, ["'id'", "missing", "'ID'", "case-sensitive"]),
    ],
)
def test_incompatible_changes_name_the_column(incoming: dict, words: list[str]) -> None:
    with pytest.raises(HoodieSchemaError) as e:
        check_compatible(avro_of(id=pa.int32(), v=pa.int64()), avro_of(**incoming))
    for w in words:
        assert w in str(e.value)


def test_nested_and_logical_changes() -> None:
    table = avro_of(s=pa.struct([("x", pa.decimal128(10, 2)), ("l", pa.list_(pa.date32()))]))
    incoming = avro_of(
        s=pa.struct([("x", pa.decimal128(12, 2)), ("l", pa.list_(pa.timestamp("us", tz="UTC")))])
    )
    with pytest.raises(HoodieSchemaError) as e:
        check_compatible(table, incoming)
    message = str(e.value)
    assert "'s.x' changed type from decimal(10,2) (table) to decimal(12,2) (input)" in message
    assert "'s.l.element' changed type from date (table) to timestamp-micros (input)" in message


def test_nullability_rules() -> None:
    table = avro_of(id=pa.int32())
    required = json.loads(avro_schema_json(table))
    required["fields"][0]["type"] = "int"
    with pytest.raises(HoodieSchemaError, match="'id' is nullable in the table but not in the input"):
        check_compatible(table, required)
    check_compatible(required, table)  # required -> nullable is fine
    new_required = avro_of(id=pa.int32())
    new_required["fields"].append({"name": "n", "type": "int"})
    with pytest.raises(HoodieSchemaError, match="new column 'n' must be nullable"):
        check_compatible(table, new_required)
