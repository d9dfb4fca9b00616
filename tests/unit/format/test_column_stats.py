"""Column statistics of data files as the metadata table's column_stats partition holds them
(format/column_stats.py; docs/hudi/column-stats.md), checked against a model computed from the rows
themselves, and through the record encoding Java reads."""

from __future__ import annotations

import decimal
import math
import random

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from hoodie_sink.table.format.column_stats import column_stats_of_footer, column_stats_of_rows
from hoodie_sink.table.format.metadata_records import column_stats_record, decode_record, encode_record


def random_table(rng: random.Random, n: int) -> pa.Table:
    def maybe(v):
        return None if rng.random() < 0.2 else v

    return pa.table({
        "s": pa.array([maybe(rng.choice(["sf", "nyc", "é", "z", ""])) for _ in range(n)], pa.string()),
        "i": pa.array([maybe(rng.randint(-5, 5)) for _ in range(n)], pa.int32()),
        "l": pa.array([maybe(rng.randint(-(2**40), 2**40)) for _ in range(n)], pa.int64()),
        "d": pa.array([maybe(rng.random() * 100 - 50) for _ in range(n)], pa.float64()),
        "b": pa.array([maybe(rng.random() < 0.5) for _ in range(n)], pa.bool_()),
        "dec": pa.array([maybe(decimal.Decimal(rng.randint(-9999, 9999)).scaleb(-2)) for _ in range(n)],
                        pa.decimal128(10, 2)),
        "ts": pa.array([maybe(rng.randint(0, 10**15)) for _ in range(n)], pa.timestamp("us", tz="UTC")),
        "day": pa.array([maybe(rng.randint(0, 20000)) for _ in range(n)], pa.date32()),
        "nested": pa.array([maybe({"a": rng.randint(0, 3)}) for _ in range(n)]),
        "none": pa.array([None] * n, pa.string()),
    })  # fmt: skip


def model(table: pa.Table, name: str) -> tuple:
    """(min, max, nulls, values) of a column from its rows, in stored units."""
    column = table.column(name)
    t = column.type
    if pa.types.is_timestamp(t):
        column = column.cast(pa.int64())
    elif pa.types.is_date32(t):
        column = column.cast(pa.int32())
    mm = pc.min_max(column)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if isinstance(lo, decimal.Decimal):
        lo, hi = lo.quantize(decimal.Decimal("1e-15")), hi.quantize(decimal.Decimal("1e-15"))
    return lo, hi, column.null_count, len(column)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_footer_and_row_statistics_agree_with_the_rows(seed, tmp_path):
    rng = random.Random(seed)
    table = random_table(rng, rng.randint(1, 400))
    path = tmp_path / "f.parquet"
    with pq.ParquetWriter(path, table.schema) as w:
        w.write_table(table, row_group_size=rng.randint(1, 60))  # several row groups to fold
    from_footer = {s.column_name: s for s in column_stats_of_footer(pq.read_metadata(path), "f.parquet")}
    from_rows = {s.column_name: s for s in column_stats_of_rows(table, "f.log")}
    expected = [c for c in table.column_names if c != "nested"]  # nested columns have no stats
    assert list(from_footer) == expected and list(from_rows) == expected
    for name in expected:
        lo, hi, nulls, values = model(table, name)
        for stats in (from_footer[name], from_rows[name]):
            got_lo = stats.min_value[1] if stats.min_value else None
            got_hi = stats.max_value[1] if stats.max_value else None
            assert (got_lo, got_hi, stats.null_count, stats.value_count) == (lo, hi, nulls, values), name
    assert from_footer["s"].min_value[0] == "StringWrapper"
    assert (
        from_footer["ts"].min_value is None or from_footer["ts"].min_value[0] == "LongWrapper"
    )  # as Hudi: no
    assert (
        from_footer["day"].min_value is None or from_footer["day"].min_value[0] == "DateWrapper"
    )  # conversion
    assert (
        from_footer["s"].total_size > 0 and from_rows["s"].total_size == 0
    )  # Hudi's log stats carry no sizes


def test_every_wrapper_round_trips_through_the_record_java_reads():
    table = random_table(random.Random(7), 200)
    for stats in column_stats_of_rows(table, "f.log"):
        record = column_stats_record("city=sf", stats)
        key, value = encode_record(record)
        back = decode_record(key, value).column_stats
        assert back is not None
        assert (back.min_value, back.max_value, back.null_count) == (
            stats.min_value,
            stats.max_value,
            stats.null_count,
        )


def test_a_nan_is_the_max_of_a_log_file_as_java_orders_it():
    stats = column_stats_of_rows(pa.table({"x": [1.0, float("nan"), -2.0]}), "f.log")[0]
    assert stats.min_value == ("DoubleWrapper", -2.0) and math.isnan(stats.max_value[1])


def test_a_decimal_beyond_hudis_decimal_30_15_gets_no_statistics():
    big = pa.table({"x": pa.array([decimal.Decimal("1e20")], pa.decimal128(38, 0))})
    assert column_stats_of_rows(big, "f.log") == []
