"""Filters through the Spark reader: the rows Spark returns are exactly those of an unfiltered read
filtered in Python (Spark SQL semantics: nulls never match, NaN is above every number).  The reader
takes no pushed filters (Spark 4.3 would serve them to other queries, hoodie_sink/datasource/reader.py),
so every query plans every base file; data skipping is the Python API's (tests/unit/read/)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.read.snapshot import read_snapshot
from tests.support.tables import assert_index_footers, data_rows, hudi_rs_read, sort_rows

UTC = dt.timezone.utc
D = decimal.Decimal
T0 = dt.datetime(2024, 1, 1, tzinfo=UTC)
OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.operation": "bulk_insert",
}
ALL_FILES = 6


def batch(start: int, n: int = 100) -> pa.Table:
    """Every column but city grows with id, so each write makes files of disjoint value ranges."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": pa.array(["sf" if i % 2 else "nyc" for i in ids]),
            "fare": pa.array([math.nan if i % 7 == 3 else i * 1.5 for i in ids]),
            "amount": pa.array([D(i) / 4 for i in ids], pa.decimal128(12, 2)),
            "name": pa.array([None if i % 5 == 0 else f"{chr(ord('a') + i // 100)}-{i:05d}" for i in ids]),
            "ts": pa.array([T0 + dt.timedelta(hours=i) for i in ids], pa.timestamp("us", tz="UTC")),
            "note": pa.array([None if start >= 200 else f"n{i}" for i in ids], pa.string()),
        }
    )  # fmt: skip


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> tuple[str, list[dict]]:
    """Three bulk inserts (ids 0-99, 100-199, 200-299) into partitions sf / nyc: six base files.
    Returns the path and every row, read back by hudi-rs and by our reader."""
    path = str(tmp_path_factory.mktemp("skipping") / "t")
    rows: list[dict] = []
    for start in (0, 100, 200):
        data = batch(start)
        hoodie_sink.write(data, path, OPTS)
        rows += data.to_pylist()
    # tests.support.tables.assert_table_matches, NaN-aware (its comparison takes NaN != NaN)
    assert_index_footers(path)
    assert (
        comparable(data_rows(hudi_rs_read(path)))
        == comparable(data_rows(read_snapshot(path)))
        == comparable(rows)
    )
    return path, rows


def load(spark, path: str):
    return spark.read.format("hoodie").load(path)


def spark_dicts(df) -> list[dict]:
    """Data columns of the rows Spark returns, timestamps made UTC-aware (the session zone is UTC)."""
    out = []
    for r in df.drop(*[c for c in df.columns if c.startswith("_hoodie")]).collect():
        d = r.asDict()
        out.append({k: v.replace(tzinfo=UTC) if isinstance(v, dt.datetime) and v.tzinfo is None else v
                    for k, v in d.items()})  # fmt: skip
    return out


def comparable(rows: list[dict]) -> list[dict]:
    """Sorted, NaN made equal to itself."""
    return sort_rows(
        [{k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in rows]
    )


def is_nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def gt(x, v) -> bool:  # Spark SQL: null matches nothing, NaN is greater than every number
    return x is not None and (is_nan(x) or x > v)


def lt(x, v) -> bool:
    return x is not None and not is_nan(x) and x < v


QUERIES: list[tuple[str, Callable[[dict], bool]]] = [
    # (where clause, the same in Python)
    ("amount > 60", lambda r: gt(r["amount"], 60)),
    ("id >= 250", lambda r: gt(r["id"], 249)),
    ("fare < 100", lambda r: lt(r["fare"], 100)),
    # NaN is above every number in Spark SQL
    ("fare > 400", lambda r: gt(r["fare"], 400)),
    ("city = 'sf' AND id < 100", lambda r: r["city"] == "sf" and lt(r["id"], 100)),
    ("id IN (5, 299)", lambda r: r["id"] in (5, 299)),
    ("name LIKE 'c%'", lambda r: r["name"] is not None and r["name"].startswith("c")),
    ("note IS NULL", lambda r: r["note"] is None),
    ("note = 'n5'", lambda r: r["note"] == "n5"),
    ("ts < timestamp'2024-01-05 00:00:00'", lambda r: r["ts"] < dt.datetime(2024, 1, 5, tzinfo=UTC)),
    ("ts >= timestamp'2024-01-07 06:00:00' AND amount < 50",
     lambda r: r["ts"] >= T0 + dt.timedelta(hours=150) and r["amount"] < 50),
    ("NOT (name LIKE 'a%')", lambda r: r["name"] is not None and not r["name"].startswith("a")),
]  # fmt: skip


@pytest.mark.parametrize(("where", "keep"), QUERIES, ids=[q[0] for q in QUERIES])
def test_filtered_rows_are_exact_and_every_file_is_planned(spark, table, where, keep):
    path, written = table
    unfiltered = spark_dicts(load(spark, path))
    assert comparable(unfiltered) == comparable(written)
    want = comparable([r for r in unfiltered if keep(r)])
    assert want, "every query matches some rows"
    assert comparable([r for r in written if keep(r)]) == want
    assert comparable(spark_dicts(load(spark, path).where(where))) == want
    assert load(spark, path).where(where).rdd.getNumPartitions() == ALL_FILES
    assert load(spark, path).rdd.getNumPartitions() == ALL_FILES


def test_no_file_can_match(spark, table):
    path, _ = table
    assert load(spark, path).where("id > 10000").count() == 0
    assert load(spark, path).where("ts > timestamp'2030-01-01 00:00:00'").collect() == []
