"""Record keys and partition paths (hoodie_sink.table.format.keygen)."""

from __future__ import annotations

import datetime
import decimal
import pickle
import time
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie_sink.errors import HoodieConfigError, HoodieKeyError
from hoodie_sink.table.format.keygen import (
    DEFAULT_PARTITION_PATH,
    KEYGEN_CLASSES,
    KeyGenConfig,
    KeyGenerator,
    escape_partition_values,
    escape_path_name,
    keygen_type_from_class,
    parse_partition_path,
    unescape_path_name,
)
from tests.support.tables import fixture_zips

UTC = datetime.timezone.utc


def keys(config: KeyGenConfig, data: pa.Table | pa.RecordBatch) -> list[str]:
    return KeyGenerator(config).record_keys(data).to_pylist()


def paths(config: KeyGenConfig, data: pa.Table | pa.RecordBatch) -> list[str]:
    return KeyGenerator(config).partition_paths(data).to_pylist()


# --------------------------------------------------------------------------------------------
# Key generator classes and configuration


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("org.apache.hudi.keygen.SimpleKeyGenerator", "SIMPLE"),
        ("org.apache.hudi.keygen.SimpleAvroKeyGenerator", "SIMPLE"),
        ("org.apache.hudi.keygen.ComplexKeyGenerator", "COMPLEX"),
        ("org.apache.hudi.keygen.NonpartitionedKeyGenerator", "NON_PARTITION"),
        ("org.apache.hudi.keygen.TimestampBasedKeyGenerator", "TIMESTAMP"),
        ("org.apache.hudi.keygen.CustomKeyGenerator", "CUSTOM"),
        ("ComplexKeyGenerator", "COMPLEX"),
        ("non_partition", "NON_PARTITION"),
        (" SIMPLE ", "SIMPLE"),
    ],
)
def test_keygen_type_from_class(name: str, kind: str) -> None:
    assert keygen_type_from_class(name) == kind


def test_keygen_classes_round_trip() -> None:
    for kind, cls in KEYGEN_CLASSES.items():
        assert keygen_type_from_class(cls) == kind


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("org.apache.spark.sql.hudi.command.SqlKeyGenerator", "wraps|wrapper"),
        ("com.example.SimpleKeyGenerator", "Unknown key generator"),
        ("org.apache.hudi.keygen.GlobalDeleteKeyGenerator", "Unknown key generator"),
        ("", "Unknown key generator"),
    ],
)
def test_keygen_type_from_class_refuses(name: str, match: str) -> None:
    with pytest.raises(HoodieConfigError, match=match) as e:
        keygen_type_from_class(name)
    assert "Help:" in str(e.value)


def test_config_normalises_fields() -> None:
    cfg = KeyGenConfig("complex", " id , name ", "a,b")
    assert (cfg.keygen_type, cfg.record_key_fields, cfg.partition_fields) == (
        "COMPLEX",
        ("id", "name"),
        ("a", "b"),
    )
    assert KeyGenConfig("NON_PARTITION", ["id"], "").partition_fields == ()
    assert not KeyGenConfig("NON_PARTITION", ("id",)).is_partitioned


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"keygen_type": "SIMPLE", "record_key_fields": "a,b", "partition_fields": "p"},
            "exactly one record key",
        ),
        (
            {"keygen_type": "SIMPLE", "record_key_fields": "a", "partition_fields": ""},
            "exactly one partition",
        ),
        ({"keygen_type": "NON_PARTITION", "record_key_fields": "a", "partition_fields": "p"}, "contradicts"),
        ({"keygen_type": "CUSTOM", "record_key_fields": "a", "partition_fields": "p"}, "not supported"),
        ({"keygen_type": "FANCY", "record_key_fields": "a"}, "Unknown key generator type"),
        ({"keygen_type": "COMPLEX", "record_key_fields": ""}, "No record key field"),
        ({"keygen_type": "COMPLEX", "record_key_fields": "a,,b"}, "empty field name"),
        (
            {
                "keygen_type": "TIMESTAMP",
                "record_key_fields": "a",
                "partition_fields": "t",
                "timestamp_type": "MIXED",
            },
            "timestamp.type='MIXED'",
        ),
        (
            {
                "keygen_type": "TIMESTAMP",
                "record_key_fields": "a",
                "partition_fields": "t",
                "timestamp_type": "DATE_STRING",
            },
            "input.dateformat is required",
        ),
        (
            {
                "keygen_type": "TIMESTAMP",
                "record_key_fields": "a",
                "partition_fields": "t",
                "timestamp_type": "UNIX_TIMESTAMP",
                "timezone": "Mars/Olympus",
            },
            "not a known time zone",
        ),
        (
            {
                "keygen_type": "TIMESTAMP",
                "record_key_fields": "a",
                "partition_fields": "t",
                "timestamp_type": "UNIX_TIMESTAMP",
                "output_date_format": "yyyy-ww",
            },
            "pattern letter 'ww'",
        ),
        (
            {
                "keygen_type": "TIMESTAMP",
                "record_key_fields": "a",
                "partition_fields": "t",
                "timestamp_type": "DATE_STRING",
                "input_date_format": "yyyy'T",
            },
            "unterminated quote",
        ),
        (
            {
                "keygen_type": "TIMESTAMP",
                "record_key_fields": "a",
                "partition_fields": "t",
                "timestamp_type": "SCALAR",
                "scalar_time_unit": "FORTNIGHTS",
            },
            "scalar.time.unit",
        ),
    ],
)
def test_config_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(HoodieConfigError, match=match) as e:
        KeyGenConfig(**kwargs)
    assert "Help:" in str(e.value)


def test_key_generator_pickles() -> None:
    cfg = KeyGenConfig("TIMESTAMP", "id", "t", timestamp_type="UNIX_TIMESTAMP", output_date_format="yyyy/MM")
    clone = pickle.loads(pickle.dumps(KeyGenerator(cfg)))
    assert clone.config == cfg
    assert clone.partition_paths(pa.table({"id": [1], "t": [0]})).to_pylist() == ["1970/01"]


# --------------------------------------------------------------------------------------------
# Record keys


SIMPLE = KeyGenConfig("NON_PARTITION", ("k",))


@pytest.mark.parametrize(
    ("array", "expected"),
    [
        (pa.array([1, -20], pa.int64()), ["1", "-20"]),
        (pa.array([7], pa.int8()), ["7"]),
        (pa.array(["a b", "ü"], pa.large_string()), ["a b", "ü"]),
        (pa.array([True, False]), ["true", "false"]),
        (pa.array([datetime.date(2023, 4, 1)]), ["2023-04-01"]),
        (
            pa.array([decimal.Decimal("12345.67890"), decimal.Decimal("-0.5")], pa.decimal128(10, 5)),
            ["12345.67890", "-0.50000"],
        ),
        (pa.array([decimal.Decimal("0.00000001")], pa.decimal128(10, 8)), ["1E-8"]),  # BigDecimal.toString
        # timestamp-micros is an Avro long: Java writes the epoch micros
        (
            pa.array([datetime.datetime(2023, 4, 1, 17, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
            ["1680368460000000"],
        ),
        (pa.array([1_680_368_460_000_000_123], pa.timestamp("ns", tz="UTC")), ["1680368460000000"]),
        (
            pa.array([1.0, 0.1, 1e20, 1e-5, 12345678.0, 1234567.0, float("nan"), float("-inf"), -0.0]),
            ["1.0", "0.1", "1.0E20", "1.0E-5", "1.2345678E7", "1234567.0", "NaN", "-Infinity", "-0.0"],
        ),
        (pa.array([1.1, 3.0e38], pa.float32()), ["1.1", "3.0E38"]),
        (pa.array(["x", "y"]).dictionary_encode(), ["x", "y"]),
    ],
)
def test_value_rendering(array: pa.Array, expected: list[str]) -> None:
    assert keys(SIMPLE, pa.table({"k": array})) == expected


def test_unrenderable_key_type_is_refused() -> None:
    with pytest.raises(HoodieKeyError, match=r"'k' has type binary.*Help:"):
        keys(SIMPLE, pa.table({"k": pa.array([b"x"])}))


@pytest.mark.parametrize("kind", ["SIMPLE", "NON_PARTITION", "COMPLEX", "TIMESTAMP"])
def test_single_key_field_is_the_bare_value(kind: str) -> None:
    extra = {"timestamp_type": "UNIX_TIMESTAMP"} if kind == "TIMESTAMP" else {}
    parts = () if kind == "NON_PARTITION" else ("p",)
    cfg = KeyGenConfig(kind, ("id",), parts, **extra)
    assert keys(cfg, pa.table({"id": [5, 6], "p": [1, 2]})) == ["5", "6"]


@pytest.mark.parametrize("bad", [None, ""])
def test_single_key_null_or_empty_is_an_error(bad: str | None) -> None:
    data = pa.table({"uuid": ["a", bad, "c", bad]})
    with pytest.raises(HoodieKeyError) as e:
        keys(KeyGenConfig("SIMPLE", "uuid", "uuid"), data)
    message = str(e.value)
    assert (
        "'uuid'" in message
        and "2 of 4 rows" in message
        and "first at row 1" in message
        and "Help:" in message
    )


def test_complex_key_order_and_placeholders() -> None:
    data = pa.record_batch({"id": [1, 2, 3, None], "name": ["Alice", "", None, "Dan"]})
    cfg = KeyGenConfig("COMPLEX", ("name", "id"), ())
    assert keys(cfg, data) == [
        "name:Alice,id:1",
        "name:__empty__,id:2",
        "name:__null__,id:3",
        "name:Dan,id:__null__",
    ]


def test_complex_key_all_null_or_empty_is_an_error() -> None:
    data = pa.table({"id": [1, None, None], "name": ["a", "", None]})
    with pytest.raises(HoodieKeyError) as e:
        keys(KeyGenConfig("COMPLEX", "id,name", ""), data)
    assert "(id, name)" in str(e.value) and "2 of 3 rows" in str(e.value) and "Help:" in str(e.value)


def test_nested_key_field() -> None:
    data = pa.table(
        {
            "s": pa.array(
                [{"a": {"b": 1}}, {"a": None}, None], pa.struct([("a", pa.struct([("b", pa.int32())]))])
            )
        }
    )
    cfg = KeyGenConfig("COMPLEX", ("s.a.b", "s.a.b"), ())
    assert keys(cfg, data.slice(0, 1)) == ["s.a.b:1,s.a.b:1"]
    with pytest.raises(HoodieKeyError, match="all record key fields|All record key fields"):
        keys(cfg, data)


def test_missing_column_lists_available_columns() -> None:
    with pytest.raises(HoodieKeyError) as e:
        keys(KeyGenConfig("COMPLEX", ("Id",), ()), pa.table({"id": [1], "v": [2]}))
    message = str(e.value)
    assert "'Id'" in message and "Available columns: id, v" in message and "case-sensitive" in message
    with pytest.raises(HoodieKeyError, match="'nope'"):
        paths(KeyGenConfig("COMPLEX", ("id",), ("nope",)), pa.table({"id": [1]}))
    with pytest.raises(HoodieKeyError, match=r"'id\.x'"):
        keys(KeyGenConfig("COMPLEX", ("id.x",), ()), pa.table({"id": [1]}))


def test_chunked_table_equals_batch() -> None:
    batch = pa.record_batch({"id": list(range(10)), "p": ["a", "b"] * 5})
    table = pa.Table.from_batches([batch.slice(0, 3), batch.slice(3)])
    gen = KeyGenerator(KeyGenConfig("SIMPLE", "id", "p", hive_style=True))
    assert gen.record_keys(table).equals(gen.record_keys(batch))
    assert gen.partition_paths(table).equals(gen.partition_paths(batch))
    assert isinstance(gen.partition_paths(table), pa.Array)


# --------------------------------------------------------------------------------------------
# Partition paths


def test_non_partitioned_paths_are_empty() -> None:
    assert paths(KeyGenConfig("NON_PARTITION", "id"), pa.table({"id": [1, 2]})) == ["", ""]
    assert paths(KeyGenConfig("COMPLEX", "id", ""), pa.table({"id": [1]})) == [""]


def test_plain_and_hive_style_paths() -> None:
    data = pa.table(
        {"id": [1, 2, 3], "b": pa.array([10, 20, None], pa.int8()), "s": pa.array([300, 100, 5], pa.int16())}
    )
    assert paths(KeyGenConfig("SIMPLE", "id", "b"), data) == ["10", "20", DEFAULT_PARTITION_PATH]
    assert paths(KeyGenConfig("COMPLEX", "id", "b,s", hive_style=True), data) == [
        "b=10/s=300",
        "b=20/s=100",
        f"b={DEFAULT_PARTITION_PATH}/s=5",
    ]


def test_empty_partition_value_is_default() -> None:
    data = pa.table({"id": [1, 2], "city": ["", "sf"]})
    assert paths(KeyGenConfig("SIMPLE", "id", "city", hive_style=True, url_encode=True), data) == [
        f"city={DEFAULT_PARTITION_PATH}",
        "city=sf",
    ]


def test_partition_values_with_slash_without_encoding() -> None:
    data = pa.table({"id": [1], "p": ["a/b"]})
    assert paths(KeyGenConfig("SIMPLE", "id", "p"), data) == ["a/b"]


def test_url_encoding_is_hive_escaping() -> None:
    special = "".join(chr(c) for c in range(0x20)) + "\"#%'*/:=?\\\x7f{[]^ é-_.~"
    data = pa.table({"id": [1, 2, 3], "p": [special, "100%/x", "plain"]})
    out = paths(KeyGenConfig("SIMPLE", "id", "p", hive_style=True, url_encode=True), data)
    expected_special = (
        "".join(f"%{c:02X}" for c in range(0x20)) + "%22%23%25%27%2A%2F%3A%3D%3F%5C%7F%7B%5B%5D%5E é-_.~"
    )
    assert out == [f"p={expected_special}", "p=100%25%2Fx", "p=plain"]
    assert escape_path_name(special) == expected_special
    assert unescape_path_name(expected_special) == special
    assert escape_partition_values(pa.array(["a:b", None])).to_pylist() == ["a%3Ab", None]


def test_partition_paths_of_dates_timestamps_floats() -> None:
    data = pa.table(
        {
            "id": [1],
            "d": [datetime.date(2023, 4, 1)],
            "t": pa.array([datetime.datetime(2023, 4, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
            "f": [2.5],
        }
    )
    assert paths(KeyGenConfig("COMPLEX", "id", "d,t,f"), data) == ["2023-04-01/1680307200000000/2.5"]


def test_many_rows_few_partitions() -> None:
    rng = np.random.default_rng(0)
    cities = np.array(["sf", "nyc", None], dtype=object)[rng.integers(0, 3, 1000)]
    data = pa.table({"id": np.arange(1000), "city": pa.array(cities, pa.string())})
    out = paths(KeyGenConfig("SIMPLE", "id", "city", hive_style=True), data)
    assert out == [f"city={c if c else DEFAULT_PARTITION_PATH}" for c in cities]


# --------------------------------------------------------------------------------------------
# parse_partition_path


@pytest.mark.parametrize(
    ("path", "fields", "hive", "encoded", "expected"),
    [
        (
            "byteField=10/shortField=300",
            ("byteField", "shortField"),
            True,
            False,
            {"byteField": "10", "shortField": "300"},
        ),
        ("10", ("byteField",), False, False, {"byteField": "10"}),
        ("2023/04/01/12", ("ts",), False, False, {"ts": "2023/04/01/12"}),
        ("ts=2023/04/01", ("ts",), True, False, {"ts": "2023/04/01"}),
        ("p=a%2Fb/q=%25", ("p", "q"), True, True, {"p": "a/b", "q": "%"}),
        (f"a={DEFAULT_PARTITION_PATH}/b=x", ("a", "b"), True, False, {"a": DEFAULT_PARTITION_PATH, "b": "x"}),
        ("", (), False, False, {}),
    ],
)
def test_parse_partition_path(path: str, fields: tuple, hive: bool, encoded: bool, expected: dict) -> None:
    assert parse_partition_path(path, fields, hive, url_encode=encoded) == expected


def test_parse_partition_path_round_trip() -> None:
    data = pa.table({"id": [1, 2], "a": ["x:y", None], "b": [1, 2]})
    for hive in (True, False):
        cfg = KeyGenConfig("COMPLEX", "id", "a,b", hive_style=hive, url_encode=True)
        parsed = [parse_partition_path(p, ("a", "b"), hive, url_encode=True) for p in paths(cfg, data)]
        assert parsed == [{"a": "x:y", "b": "1"}, {"a": DEFAULT_PARTITION_PATH, "b": "2"}]


@pytest.mark.parametrize(
    ("path", "fields", "hive", "match"),
    [
        ("a=1", ("a", "b"), True, "1 segments but the table has 2"),
        ("a=1/c=2", ("a", "b"), True, "does not start with 'b='"),
        ("x", (), False, "non-partitioned"),
    ],
)
def test_parse_partition_path_errors(path: str, fields: tuple, hive: bool, match: str) -> None:
    with pytest.raises(HoodieKeyError, match=match):
        parse_partition_path(path, fields, hive)


# --------------------------------------------------------------------------------------------
# TIMESTAMP key generator


def ts_config(**kwargs: object) -> KeyGenConfig:
    return KeyGenConfig("TIMESTAMP", ("id",), ("t",), **kwargs)  # type: ignore[arg-type]


def ts_paths(values: pa.Array | list, **kwargs: object) -> list[str]:
    return paths(ts_config(**kwargs), pa.table({"id": list(range(len(values))), "t": values}))


def test_timestamp_fixture_case() -> None:
    """The sample of docs/hudi/format.md#record-keys-and-partition-paths: DATE_STRING input with 'T'
    literal and Z offset, output yyyy/MM/dd/HH."""
    out = ts_paths(
        ["2023-04-01T12:01:00.123Z"],
        timestamp_type="DATE_STRING",
        input_date_format="yyyy-MM-dd'T'HH:mm:ss.SSSZ",
        output_date_format="yyyy/MM/dd/HH",
    )
    assert out == ["2023/04/01/12"]


def test_date_string_offsets_zones_and_nulls() -> None:
    values = ["2023-04-01T23:30:00.000+02:00", "2023-04-01T23:30:00.5-0130", None]
    common = {"timestamp_type": "DATE_STRING", "input_date_format": "yyyy-MM-dd'T'HH:mm:ss.SSSZ"}
    assert ts_paths(values, output_date_format="yyyy-MM-dd HH:mm:ss.SSS", **common) == [
        "2023-04-01 21:30:00.000",
        "2023-04-02 01:00:00.500",
        "1970-01-01 00:00:00.001",  # Java's default value for null: epoch + 1 ms, formatted and reparsed
    ]
    assert ts_paths(
        values[:1], output_date_format="yyyy-MM-dd HH:mmZ", timezone="Asia/Kolkata", **common
    ) == ["2023-04-02 03:00+0530"]


def test_date_string_without_offset_uses_input_zone() -> None:
    out = ts_paths(
        ["2023-07-01 00:30", "2023-01-01 00:30"],
        timestamp_type="DATE_STRING",
        input_date_format="yyyy-MM-dd HH:mm",
        output_date_format="yyyy-MM-dd HH:mm",
        input_timezone="Europe/Paris",
        output_timezone="UTC",
    )
    assert out == ["2023-06-30 22:30", "2022-12-31 23:30"]


def test_date_string_several_formats_and_text_fields() -> None:
    out = ts_paths(
        ["01 Apr 2023 01:05 PM", "2023040112", "Fri, 05 january 2024 12:00 am"],
        timestamp_type="DATE_STRING",
        input_date_format="dd MMM yyyy hh:mm a| yyyyMMddHH |EEE, dd MMMM yyyy hh:mm a",
        input_date_format_delimiter=r"\|",
        output_date_format="yyyy-MM-dd'T'HH:mm EEE MMM",
    )
    assert out == ["2023-04-01T13:05 Sat Apr", "2023-04-01T12:00 Sat Apr", "2024-01-05T00:00 Fri Jan"]


def test_date_string_that_does_not_parse_is_an_error() -> None:
    with pytest.raises(HoodieKeyError) as e:
        ts_paths(
            ["2023-04-01", "2023-02-30", "garbage", ""],
            timestamp_type="DATE_STRING",
            input_date_format="yyyy-MM-dd",
            output_date_format="yyyy",
        )
    message = str(e.value)
    assert (
        "3 distinct values of partition field 't'" in message
        and "yyyy-MM-dd" in message
        and "Help:" in message
    )


@pytest.mark.parametrize(
    ("ttype", "value", "expected"),
    [
        ("UNIX_TIMESTAMP", 1680350460, "2023/04/01/12"),
        ("EPOCHMILLISECONDS", 1680350460123, "2023/04/01/12"),
        ("EPOCHMICROSECONDS", 1680350460123456, "2023/04/01/12"),
        ("UNIX_TIMESTAMP", 1680350460.9, "2023/04/01/12"),
        ("UNIX_TIMESTAMP", None, "1970/01/01/00"),  # null -> default value 1 (second)
    ],
)
def test_numeric_timestamp_types(ttype: str, value: float | None, expected: str) -> None:
    assert ts_paths([value], timestamp_type=ttype, output_date_format="yyyy/MM/dd/HH") == [expected]


def test_scalar_units_and_truncation() -> None:
    assert ts_paths(
        [19448], timestamp_type="SCALAR", scalar_time_unit="DAYS", output_date_format="yyyy-MM-dd"
    ) == ["2023-04-01"]
    out = ts_paths([-1999], timestamp_type="EPOCHMICROSECONDS", output_date_format="yyyy-MM-dd HH:mm:ss.SSS")
    assert out == ["1969-12-31 23:59:59.999"]  # -1999 us -> -1 ms (TimeUnit truncates toward zero)


def test_native_timestamp_and_date_columns() -> None:
    ts = pa.array([datetime.datetime(2023, 4, 1, 12, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))
    assert ts_paths(ts, output_date_format="yyyy/MM/dd/HH", timezone="America/New_York") == ["2023/04/01/08"]
    dates = pa.array([datetime.date(2023, 4, 1)])
    assert ts_paths(dates, output_date_format="yyyy-MM-dd", timezone="Asia/Tokyo") == ["2023-04-01"]


def test_timestamp_hive_style_and_url_encoding() -> None:
    out = ts_paths(
        [0],
        timestamp_type="UNIX_TIMESTAMP",
        output_date_format="yyyy/MM/dd",
        hive_style=True,
        url_encode=True,
    )
    assert out == ["t=1970%2F01%2F01"]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("yy-M-d H:m:s", "23-4-1 9:5:7"),
        ("hh a K k", "09 AM 9 9"),
        ("'day' D, 'at' HH''mm", "day 91, at 09'05"),
        ("S SS SSSS", "0 04 0450"),
        ("X XX XXX ZZ", "Z Z Z +00:00"),
    ],
)
def test_output_patterns(pattern: str, expected: str) -> None:
    millis = int(datetime.datetime(2023, 4, 1, 9, 5, 7, 45000, tzinfo=UTC).timestamp() * 1000)
    assert ts_paths([millis], timestamp_type="EPOCHMILLISECONDS", output_date_format=pattern) == [expected]


def test_wrong_column_type_for_timestamp_type() -> None:
    with pytest.raises(HoodieKeyError, match=r"'t' is a string column.*DATE_STRING"):
        ts_paths(["2023"], timestamp_type="UNIX_TIMESTAMP", output_date_format="yyyy")
    with pytest.raises(HoodieKeyError, match=r"'t' is numeric"):
        ts_paths([1], timestamp_type="DATE_STRING", input_date_format="yyyy", output_date_format="yyyy")
    with pytest.raises(HoodieKeyError, match=r"'t' has type binary"):
        ts_paths(pa.array([b"x"]), timestamp_type="UNIX_TIMESTAMP", output_date_format="yyyy")


# --------------------------------------------------------------------------------------------
# Real Apache Hudi tables


def fixture_tables(root: Path) -> list[Path]:
    return sorted(p.parent.parent for p in root.glob("*/*/.hoodie/hoodie.properties"))


@pytest.fixture(scope="module")
def unzipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hudi-tables")
    for zf in fixture_zips():
        with zipfile.ZipFile(zf) as z:
            z.extractall(root / zf.stem, [m for m in z.namelist() if not m.startswith("__MACOSX")])
    return root


def config_from_properties(base: Path) -> KeyGenConfig:
    lines = (base / ".hoodie" / "hoodie.properties").read_text().splitlines()
    props = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    return KeyGenConfig(
        keygen_type_from_class(props["hoodie.table.keygenerator.class"]),
        props["hoodie.table.recordkey.fields"],
        props.get("hoodie.table.partition.fields", ""),
        hive_style=props.get("hoodie.datasource.write.hive_style_partitioning") == "true",
        url_encode=props.get("hoodie.datasource.write.partitionpath.urlencode") == "true",
    )


@pytest.mark.compat
def test_fixture_meta_columns_are_reproduced(unzipped: Path) -> None:
    checked = 0
    for base in fixture_tables(unzipped):
        generator = KeyGenerator(config_from_properties(base))
        for path in sorted(base.rglob("*.parquet")):
            table = pq.read_table(path)
            data = table.drop_columns([c for c in table.column_names if c.startswith("_hoodie_")])
            assert generator.record_keys(data).equals(table["_hoodie_record_key"].combine_chunks()), path
            assert generator.partition_paths(data).equals(table["_hoodie_partition_path"].combine_chunks()), (
                path
            )
            relative = path.parent.relative_to(base).as_posix()
            assert set(table["_hoodie_partition_path"].to_pylist()) == {"" if relative == "." else relative}
            checked += 1
    assert checked >= 10  # 4 + 2 + 4 COW base files, 3 MOR base files


# --------------------------------------------------------------------------------------------
# Performance


def test_one_million_rows_is_fast() -> None:
    n = 1_000_000
    rng = np.random.default_rng(1)
    cities = np.array([f"city_{i}" for i in range(10)])[rng.integers(0, 10, n)]
    data = pa.table({"id": np.arange(n, dtype=np.int64), "city": cities})
    gen = KeyGenerator(KeyGenConfig("SIMPLE", "id", "city", hive_style=True))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        record_keys, partition_paths = gen.record_keys(data), gen.partition_paths(data)
        best = min(best, time.perf_counter() - start)
    assert len(record_keys) == len(partition_paths) == n
    assert record_keys[n - 1].as_py() == str(n - 1) and partition_paths[0].as_py() == f"city={cities[0]}"
    assert best < 1.0, f"record_keys + partition_paths took {best:.3f}s for 1M rows"


def test_empty_input() -> None:
    empty = pa.table({"id": pa.array([], pa.int64()), "p": pa.array([], pa.string())})
    for cfg in (
        KeyGenConfig("SIMPLE", "id", "p", hive_style=True, url_encode=True),
        KeyGenConfig("COMPLEX", "id,p", "p,id"),
        KeyGenConfig("TIMESTAMP", "id", "p", timestamp_type="DATE_STRING", input_date_format="yyyy"),
    ):
        gen = KeyGenerator(cfg)
        assert gen.record_keys(empty).type == pa.string() and len(gen.record_keys(empty)) == 0
        assert gen.partition_paths(empty).type == pa.string() and len(gen.partition_paths(empty)) == 0


def test_offset_patterns_in_a_zone() -> None:
    millis = [int(datetime.datetime(2023, 4, 1, 9, 5, tzinfo=UTC).timestamp() * 1000)]
    out = ts_paths(
        millis,
        timestamp_type="EPOCHMILLISECONDS",
        output_date_format="HH:mm Z|ZZ|X|XX|XXX",
        timezone="GMT+05:30",
    )
    assert out == ["14:35 +0530|+05:30|+0530|+0530|+05:30"]
    out = ts_paths(
        millis, timestamp_type="EPOCHMILLISECONDS", output_date_format="HH Z X", timezone="America/New_York"
    )
    assert out == ["05 -0400 -04"]
