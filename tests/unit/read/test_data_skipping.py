"""Data skipping by Parquet column statistics: the decision (`may_match`), footer statistics, and
`read_snapshot(filters=...)` end to end (fewer files read, exactly the matching rows)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.read import data_skipping
from hoodie_sink.table.read import snapshot as table_reader
from hoodie_sink.table.read.data_skipping import (
    ABSENT,
    ColumnStats,
    Predicate,
    file_stats_from_metadata,
    may_match,
    prune,
)
from hoodie_sink.table.read.snapshot import Snapshot, iter_snapshot, read_snapshot
from tests.support.tables import assert_index_footers, hudi_rs_read, sort_by_key

UTC = dt.timezone.utc
NAN = math.nan
D = decimal.Decimal


@pytest.fixture(autouse=True)
def fresh_stats_cache():
    data_skipping.clear_stats_cache()
    yield
    data_skipping.clear_stats_cache()


def bounded(lo, hi, nulls=0, is_float=False) -> ColumnStats:
    return ColumnStats(lo, hi, nulls, True, is_float)


def check(col: ColumnStats, op: str, value=None, num_rows: int = 10) -> bool:
    return may_match({"c": col}, [Predicate("c", op, value)], num_rows)


# ------------------------------------------------------------------------------------ may_match

INTS = bounded(10, 20)


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("=", 5, False), ("=", 10, True), ("=", 20, True), ("=", 21, False), ("=", 15.5, True),
        ("<", 10, False), ("<", 11, True), ("<=", 9, False), ("<=", 10, True),
        (">", 20, False), (">", 19, True), (">=", 21, False), (">=", 20, True),
        ("in", (1, 2, 30), False), ("in", (1, 15), True), ("in", (None,), False), ("in", (), False),
        ("in", (None, 20), True),
        ("is_null", None, False), ("is_not_null", None, True),
        ("=", None, True),  # never pushed by Spark; kept (the row filter still matches nothing)
        ("=", "15", True), ("<", "a", True), ("starts_with", "1", True),  # type mismatch: unsure
        ("<", NAN, True), (">", NAN, True), ("=", NAN, True),  # NaN compares with nothing: kept
    ],
)  # fmt: skip
def test_integer_bounds(op, value, expected):
    assert check(INTS, op, value) is expected


NULLS_3 = bounded(10, 20, nulls=3)
ALL_NULL = ColumnStats(None, None, 10, False)
NULL_COUNT_UNKNOWN = ColumnStats(10, 20, None, True)
NO_STATS = ColumnStats()


@pytest.mark.parametrize(
    ("col", "op", "value", "expected"),
    [
        (NULLS_3, "is_null", None, True), (NULLS_3, "is_not_null", None, True), (NULLS_3, "=", 5, False),
        (ALL_NULL, "is_null", None, True), (ALL_NULL, "is_not_null", None, False),
        (ALL_NULL, "=", 1, False), (ALL_NULL, ">", 1, False), (ALL_NULL, "in", (1,), False),
        (ALL_NULL, "starts_with", "a", False),
        (NULL_COUNT_UNKNOWN, "is_null", None, True), (NULL_COUNT_UNKNOWN, "is_not_null", None, True),
        (NULL_COUNT_UNKNOWN, "=", 5, False),
        # a column the file does not have reads as all nulls
        (ABSENT, "is_null", None, True), (ABSENT, "is_not_null", None, False), (ABSENT, "=", 1, False),
        (ABSENT, "<", 1, False), (ABSENT, "in", (1,), False), (ABSENT, "starts_with", "", False),
        # no statistics at all: never skipped
        (NO_STATS, "=", 1, True), (NO_STATS, ">", 1, True), (NO_STATS, "is_null", None, True),
        (NO_STATS, "is_not_null", None, True), (NO_STATS, "starts_with", "a", True),
    ],
)  # fmt: skip
def test_nulls_and_missing_columns(col, op, value, expected):
    assert check(col, op, value) is expected


FLOATS = bounded(1.0, 2.0, is_float=True)


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        # NaN is not in the statistics and Spark orders it above every number
        (">", 5.0, True), (">=", 5.0, True), (">", math.inf, True),
        ("<", 0.5, False), ("<=", 0.5, False), ("<", 1.5, True), ("<", math.inf, True),
        ("=", 3.0, False), ("=", 1.5, True), ("=", NAN, True), ("in", (NAN,), True), ("in", (3.0, 4.0), False),
        ("<", NAN, True), ("<=", -math.inf, False),
        ("=", -0.0, False), ("=", 1, True),
    ],
)  # fmt: skip
def test_floating_bounds_and_nan(op, value, expected):
    assert check(FLOATS, op, value) is expected


def test_zero_bounds_compare_equal_to_negative_zero():
    assert check(bounded(-0.0, 0.0, is_float=True), "=", 0.0)
    assert check(bounded(0.0, 0.0, is_float=True), "=", -0.0)
    assert check(bounded(0.0, 1.0, is_float=True), "<=", -0.0)


STRINGS = bounded("apple", "banana")


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("=", "cherry", False), ("=", "apricot", True), ("=", "Apple", False), ("<", "apple", False),
        ("<=", "apple", True), (">", "banana", False), (">", "b", True), ("in", ("a", "c"), False),
        ("starts_with", "b", True), ("starts_with", "a", True), ("starts_with", "ap", True),
        ("starts_with", "appl", True), ("starts_with", "apple", True), ("starts_with", "", True),
        ("starts_with", "banana", True),
        ("starts_with", "aa", False), ("starts_with", "c", False), ("starts_with", "bananas", False),
        ("starts_with", "A", False), ("starts_with", "b\U0010ffff", False),
        ("=", b"apple", True), ("=", 1, True),  # bytes / int against strings: unsure, kept
    ],
)  # fmt: skip
def test_string_bounds(op, value, expected):
    assert check(STRINGS, op, value) is expected


def test_strings_compare_in_utf8_byte_order():
    # code point order == UTF-8 byte order: "é" (C3 A9) and "€" (E2 82 AC) sort after "z" (7A)
    accents = bounded("é", "€")
    assert not check(accents, "<", "z")
    assert check(accents, ">", "z")
    assert not check(accents, "starts_with", "z")
    assert check(accents, "starts_with", "€")
    assert not check(bounded("a", "z"), ">", "é")
    assert not check(bounded("\U0001f600", "\U0001f600"), "<", "\uffff")  # beyond the BMP sorts last


def test_prefix_min_below_but_starting_with_prefix_is_kept():
    assert check(bounded("abc", "abd"), "starts_with", "ab")
    assert check(bounded("ab", "ab"), "starts_with", "ab")
    assert check(bounded("a", "b"), "starts_with", "ab")


TS_LO = dt.datetime(2024, 1, 1, tzinfo=UTC)
TS_HI = dt.datetime(2024, 6, 1, tzinfo=UTC)
TIMESTAMPS = bounded(TS_LO, TS_HI)
NAIVE_TIMESTAMPS = bounded(TS_LO.replace(tzinfo=None), TS_HI.replace(tzinfo=None))
PLUS_2 = dt.timezone(dt.timedelta(hours=2))


@pytest.mark.parametrize(
    ("col", "op", "value", "expected"),
    [
        (TIMESTAMPS, ">", dt.datetime(2025, 1, 1), False),  # naive values are UTC
        (TIMESTAMPS, ">", dt.datetime(2024, 3, 1), True),
        (TIMESTAMPS, "<", dt.datetime(2024, 1, 1), False),
        (TIMESTAMPS, "<=", dt.datetime(2024, 1, 1), True),
        (TIMESTAMPS, "<", dt.datetime(2024, 1, 1, 1, tzinfo=PLUS_2), False),  # 2023-12-31 23:00 UTC
        (TIMESTAMPS, "=", dt.datetime(2024, 1, 1, 2, tzinfo=PLUS_2), True),  # exactly TS_LO
        (TIMESTAMPS, ">=", dt.datetime(2024, 6, 1, 0, 0, 1, tzinfo=UTC), False),
        (TIMESTAMPS, "in", (dt.datetime(2023, 1, 1), dt.datetime(2024, 2, 1, tzinfo=UTC)), True),
        (TIMESTAMPS, "in", (dt.datetime(2023, 1, 1), dt.datetime(2025, 2, 1, tzinfo=UTC)), False),
        (NAIVE_TIMESTAMPS, ">", dt.datetime(2025, 1, 1, tzinfo=UTC), False),
        (NAIVE_TIMESTAMPS, ">", dt.datetime(2024, 1, 1), True),
        (NAIVE_TIMESTAMPS, "<", dt.datetime(2024, 1, 1, 0, 0, tzinfo=PLUS_2), False),
        (TIMESTAMPS, ">", dt.date(2025, 1, 1), True),  # a date against timestamps: unsure, kept
    ],
)  # fmt: skip
def test_timestamp_bounds(col, op, value, expected):
    assert check(col, op, value) is expected


DECIMALS = bounded(D("1.25"), D("3.50"))
DATES = bounded(dt.date(2024, 1, 1), dt.date(2024, 12, 31))


@pytest.mark.parametrize(
    ("col", "op", "value", "expected"),
    [
        (DECIMALS, ">", D("3.50"), False), (DECIMALS, ">=", D("3.5"), True), (DECIMALS, "=", 2, True),
        (DECIMALS, "<", 1, False), (DECIMALS, "<", D("1.250001"), True), (DECIMALS, "=", 1.3, True),
        (DECIMALS, "in", (D("0.5"), D("4")), False), (DECIMALS, "=", D("NaN"), True),
        (DATES, "=", dt.date(2025, 1, 1), False), (DATES, ">", dt.date(2024, 12, 31), False),
        (DATES, ">=", dt.date(2024, 12, 31), True), (DATES, "in", (dt.date(2024, 7, 1),), True),
        (DATES, "<", dt.datetime(2020, 1, 1), True),  # a timestamp against dates: unsure, kept
        (bounded(False, False), "=", True, False), (bounded(False, True), "=", True, True),
        (bounded(b"\x00", b"\x7f"), ">", b"\x80", False), (bounded(b"\x00", b"\xff"), ">", b"\x80", True),
    ],
)  # fmt: skip
def test_decimal_date_bool_binary_bounds(col, op, value, expected):
    assert check(col, op, value) is expected


def test_predicates_are_anded_and_unknown_columns_kept():
    stats = {"a": bounded(1, 5), "b": bounded("x", "y")}
    assert may_match(stats, [Predicate("a", ">", 2), Predicate("b", "=", "x")], 10)
    assert not may_match(stats, [Predicate("a", ">", 2), Predicate("b", "=", "z")], 10)
    assert may_match(stats, [Predicate("zz", "=", 1)], 10)  # no entry: unknown, kept
    assert not may_match(stats, [Predicate("a", ">", 0)], 0)  # an empty file matches nothing
    assert may_match(stats, [], 10)


def test_predicate_model():
    assert Predicate.of(("a", "==", 1)) == Predicate("a", "=", 1)
    assert Predicate.of(("a", "in", [1, 2])).value == (1, 2)
    assert Predicate.of(("a", "is_null")) == Predicate("a", "is_null")
    with pytest.raises(ValueError, match="Unsupported filter operator"):
        Predicate("a", "!=", 1)
    with pytest.raises(ValueError, match="collection"):
        Predicate("a", "in", 1)
    with pytest.raises(ValueError, match="string"):
        Predicate("a", "starts_with", 1)


# ----------------------------------------------------------------------------- footer statistics


def footer(table: pa.Table, tmp_path: Path, **kwargs) -> data_skipping.FileStats:
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, **kwargs)
    return file_stats_from_metadata(pq.read_metadata(path))


def test_file_stats_fold_row_groups(tmp_path):
    t = pa.table(
        {
            "i": pa.array([5, None, 1, 9, None, None]),
            "f": pa.array([1.5, NAN, -2.0, 0.0, 3.0, NAN]),
            "all_nan": pa.array([NAN] * 6),
            "s": pa.array(["b", "é", None, "a", None, None]),
            "ts": pa.array(
                [dt.datetime(2024, 1, d) for d in (1, 2, 3, 4, 5, 6)], pa.timestamp("us", tz="UTC")
            ),
            "dec": pa.array([D("1.25"), D("-3.50"), None, None, D("9.99"), None], pa.decimal128(10, 2)),
            "nested": pa.array([{"x": 1}] * 6),
            "a.b": pa.array([7] * 6),  # a dotted top-level name, not field b of a struct a
        }
    )
    fs = footer(t, tmp_path, row_group_size=2)
    assert fs.num_rows == 6
    assert fs.column("i") == ColumnStats(1, 9, 3, True, False)
    f = fs.column("f")
    assert (f.min, f.max, f.null_count, f.has_min_max, f.is_float) == (-2.0, 3.0, 0, True, True)
    assert fs.column("all_nan").has_min_max is False and fs.column("all_nan").is_float
    # the last row group of "s" is all null: it needs no bound
    assert fs.column("s") == ColumnStats("a", "é", 3, True, False)
    ts = fs.column("ts")
    assert (ts.min, ts.max) == (dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2024, 1, 6, tzinfo=UTC))
    assert (fs.column("dec").min, fs.column("dec").max) == (D("-3.50"), D("9.99"))
    assert fs.column("nested").in_file and not fs.column("nested").has_min_max
    assert fs.column("a.b") == ColumnStats(7, 7, 0, True, False)
    assert fs.column("not_there") == ABSENT
    assert not may_match(fs, [Predicate("not_there", "=", 1)], fs.num_rows)  # read as all null
    assert may_match(fs, [Predicate("not_there", "is_null")], fs.num_rows)
    assert not may_match(fs, [Predicate("i", ">", 9)], fs.num_rows)
    assert may_match(fs, [Predicate("nested", "is_not_null")], fs.num_rows)


def test_file_without_statistics_is_never_skipped(tmp_path):
    fs = footer(pa.table({"i": [1, 2, 3]}), tmp_path, write_statistics=False)
    col = fs.column("i")
    assert not col.has_min_max and col.null_count is None
    for op, value in [
        ("=", 100),
        (">", 100),
        ("<", -1),
        ("in", (100,)),
        ("is_null", None),
        ("is_not_null", None),
    ]:
        assert may_match(fs, [Predicate("i", op, value)], fs.num_rows), (op, value)


def test_row_group_without_statistics_makes_the_column_unbounded(tmp_path):
    t = pa.table({"i": [1, 2, 3, 4]})
    path = tmp_path / "f.parquet"
    with pq.ParquetWriter(path, t.schema, write_statistics=False) as w:
        w.write_table(t)
    fs = file_stats_from_metadata(pq.read_metadata(path))
    assert may_match(fs, [Predicate("i", ">", 100)], fs.num_rows)


# ----------------------------------------------------------------------------- read_snapshot(filters)

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.operation": "bulk_insert",
}


def batch(start: int, n: int) -> pa.Table:
    """Rows `start`..`start+n-1`: every numeric and time column grows with id, so separate writes
    give files with disjoint ranges."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "city": pa.array(["sf" if i % 2 else "nyc" for i in ids]),
            "fare": pa.array([NAN if i % 7 == 3 else i * 1.5 for i in ids]),
            "name": pa.array([None if i % 5 == 0 else f"{chr(ord('a') + (i // 100) % 26)}-{i:05d}" for i in ids]),
            "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i) for i in ids],
                           pa.timestamp("us", tz="UTC")),
            "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i // 10) for i in ids]),
            "amount": pa.array([D(i) / 4 for i in ids], pa.decimal128(12, 2)),
            "note": pa.array([None] * n, pa.string()) if start >= 200 else pa.array([f"n{i}" for i in ids]),
        }
    )  # fmt: skip


@pytest.fixture
def three_writes(tmp_path) -> str:
    """Three bulk inserts of 100 rows each (ids 0-99, 100-199, 200-299) into two partitions: six
    base files, two per id range."""
    path = str(tmp_path / "t")
    for start in (0, 100, 200):
        hoodie_sink.write(batch(start, 100), path, OPTS)
    assert len(Snapshot.open(path).base_files()) == 6
    assert read_both(path).num_rows == 300
    return path


@pytest.fixture
def files_read(monkeypatch) -> list[str]:
    paths: list[str] = []
    real = table_reader.read_base_file

    def counting(storage, rel_path, schema, columns=None):
        paths.append(rel_path)
        return real(storage, rel_path, schema, columns)

    monkeypatch.setattr(table_reader, "read_base_file", counting)
    return paths


def expected_rows(full: pa.Table, expr: pc.Expression, columns: list[str] | None = None) -> pa.Table:
    out = full.filter(expr)
    return sort_by_key(
        out.select(columns) if columns else out, columns[0] if columns else "_hoodie_record_key"
    )


T0 = dt.datetime(2024, 1, 1, tzinfo=UTC)
F = pc.field

CASES = [
    # (filters, the same as a pyarrow expression, files read out of 6)
    ([("fare", "<", 100.0)], F("fare") < 100.0, 2),
    ([("fare", ">", 400.0)], F("fare") > 400.0, 6),  # floats: never pruned by > (NaN)
    ([("id", ">=", 250)], F("id") >= 250, 2),
    ([("id", "==", 150), ("city", "=", "nyc")], (F("id") == 150) & (F("city") == "nyc"), 1),
    ([("id", "in", [5, 299, None])], F("id").isin([5, 299]), 3),  # 299 is odd: not in nyc's 200-298
    ([("name", "starts_with", "c")], pc.starts_with(F("name"), "c"), 2),
    ([("name", "is_null")], F("name").is_null(), 6),
    ([("note", "is_null")], F("note").is_null(), 2),
    ([("note", "is_not_null")], F("note").is_valid(), 4),
    ([("note", "=", "n5")], F("note") == "n5", 2),
    ([("ts", "<", dt.datetime(2024, 1, 5))], F("ts") < pc.scalar(dt.datetime(2024, 1, 5, tzinfo=UTC)), 2),
    ([("ts", ">", T0 + dt.timedelta(hours=299))], F("ts") > pc.scalar(T0 + dt.timedelta(hours=299)), 0),
    ([("day", "<=", dt.date(2024, 1, 10))], F("day") <= pc.scalar(dt.date(2024, 1, 10)), 2),
    ([("amount", ">", 60)], F("amount") > pc.scalar(D(60)), 2),
    ([("amount", "<", D("0.25")), ("id", "<", 1000)], (F("amount") < pc.scalar(D("0.25"))) & (F("id") < 1000), 1),
    ([("fare", "=", NAN)], F("fare") == NAN, 6),
]  # fmt: skip


@pytest.mark.parametrize(("filters", "expr", "n_files"), CASES)
def test_read_snapshot_filters_match_pyarrow_and_skip_files(three_writes, files_read, filters, expr, n_files):
    full = read_snapshot(three_writes)
    files_read.clear()
    got = read_snapshot(three_writes, filters=filters)
    assert len(files_read) == n_files, files_read
    want = expected_rows(full, expr)
    assert got.schema == full.schema
    assert rows(sort_by_key(got)) == rows(want)


def rows(t: pa.Table) -> list[dict]:
    """Rows with NaN made comparable (NaN != NaN)."""
    return [
        {k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
        for r in t.to_pylist()
    ]


def read_both(path: str) -> pa.Table:
    """tests.support.tables.read_both, NaN-aware (its row comparison takes NaN != NaN): hudi-rs and
    our reader agree, and the index footers are right."""
    assert_index_footers(path)
    theirs, ours = sort_by_key(hudi_rs_read(path)), sort_by_key(read_snapshot(path))
    assert theirs.column_names == ours.column_names
    assert rows(theirs) == rows(ours)
    return ours


def test_filters_outside_the_projection_and_with_a_partition_filter(three_writes, files_read):
    full = read_snapshot(three_writes)
    files_read.clear()
    got = read_snapshot(three_writes, columns=["id", "name"], filters=[("id", "<", 50), ("fare", "<", 30.0)],
                        partition_filter=lambda p: p == "sf")  # fmt: skip
    assert got.column_names == ["id", "name"]
    assert len(files_read) == 1
    want = expected_rows(full, (F("id") < 50) & (F("fare") < 30.0) & (F("city") == "sf"), ["id", "name"])
    assert sort_by_key(got, "id").to_pylist() == want.to_pylist()


def test_iter_snapshot_with_filters(three_writes, files_read):
    files_read.clear()
    parts = list(iter_snapshot(three_writes, columns=["id"], filters=[Predicate("id", ">", 180)]))
    assert len(parts) == len(files_read) == 4
    assert sorted(pa.concat_tables(parts).column("id").to_pylist()) == list(range(181, 300))


def test_no_file_matches_gives_an_empty_table(three_writes, files_read):
    files_read.clear()
    got = read_snapshot(three_writes, columns=["id", "fare"], filters=[("id", ">", 10_000)])
    assert got.num_rows == 0 and got.column_names == ["id", "fare"] and files_read == []


def test_filters_are_validated(three_writes):
    with pytest.raises(HoodieTableError, match="unknown column 'nope'"):
        read_snapshot(three_writes, filters=[("nope", "=", 1)])
    with pytest.raises(HoodieTableError, match="Cannot apply filters"):
        read_snapshot(three_writes, filters=[("id", "starts_with", "1")])
    with pytest.raises(ValueError, match="Unsupported filter operator"):
        read_snapshot(three_writes, filters=[("id", "<>", 1)])


def test_prune_counts_and_caches_footers(three_writes):
    snap = Snapshot.open(three_writes)
    files = snap.base_files()
    first = prune(snap.storage, files, [("id", "<", 100)])
    assert (first.considered, first.skipped, first.footers_read) == (6, 4, 6)
    assert [bf.path for bf in first.files] == [bf.path for bf in files if bf not in first.skipped_files]
    again = prune(snap.storage, files, [("id", ">=", 200)])
    assert (again.skipped, again.footers_read) == (4, 0)  # every footer cached
    assert prune(snap.storage, files, []).files == files


def test_file_whose_footer_lacks_statistics_is_never_skipped(three_writes, files_read):
    """Rewrite one base file in place without statistics (same rows, same footer metadata): a filter
    that would skip it by its id range must read it."""
    snap = Snapshot.open(three_writes)
    victim = next(bf for bf in snap.base_files() if bf.instant == max(b.instant for b in snap.base_files()))
    full_path = os.path.join(snap.storage.base_uri, victim.path)
    original = pq.read_table(full_path)
    pq.write_table(original, full_path, write_statistics=False)
    read_both(three_writes)  # the table is still a valid Hudi table
    files_read.clear()
    got = read_snapshot(three_writes, filters=[("id", "<", 100)])
    assert victim.path in files_read and len(files_read) == 3
    assert sorted(got.column("id").to_pylist()) == list(range(100))


def test_column_added_later_reads_as_null_in_older_files(tmp_path, files_read):
    path = str(tmp_path / "t")
    hoodie_sink.write(batch(0, 50).drop_columns(["note"]), path, OPTS)
    hoodie_sink.write(batch(100, 50), path, OPTS)
    full = read_snapshot(path)
    files_read.clear()
    got = read_snapshot(path, filters=[("note", "starts_with", "n1")])
    assert len(files_read) == 2  # the older files have no note column: all null, skipped
    assert rows(sort_by_key(got)) == rows(expected_rows(full, pc.starts_with(F("note"), "n1")))
    files_read.clear()
    assert read_snapshot(path, filters=[("note", "is_null")]).num_rows == 50
    assert len(files_read) == 2  # the newer files' note has no nulls
    read_both(path)
