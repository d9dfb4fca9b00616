"""A DataFrame or temporary view of a hoodie table answers every query over it in full, whatever
filtered queries ran over it before, with Spark's filter pushdown on and off.

Spark 4.3 keeps ONE read plan (the partitions and the pickled reader) per loaded relation, and the
last filter pushdown replaces it for every later scan of that relation (docs/hudi/reused-read-plans.md):
a filter pushed for one query must never change what another query reads.  Each action below is
checked against the table's rows (the model), after each filtered query."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import hoodie_sink

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
ROWS = [
    {"id": 1, "city": "sf", "fare": 10.0},
    {"id": 2, "city": "sf", "fare": 20.0},
    {"id": 3, "city": "la", "fare": 30.0},
    {"id": 4, "city": "la", "fare": 40.0},
    {"id": 5, "city": "nyc", "fare": 50.0},
    {"id": 6, "city": "nyc", "fare": 60.0},
]
ALL_IDS = [1, 2, 3, 4, 5, 6]
# (filter, the ids it keeps): on the partition column (partition pruning), on a data column (each
# partition's file holds a disjoint fare range, so data skipping could drop files), and both.
FILTERS: list[tuple[str, list[int]]] = [
    ("city = 'sf'", [1, 2]),
    ("fare >= 50", [5, 6]),
    ("city IN ('sf', 'la') AND fare > 15", [2, 3, 4]),
]


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    """One base file per city (three partitions); written through the engine API."""
    path = str(tmp_path_factory.mktemp("reused") / "t")
    opts = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.operation": "bulk_insert",
    }
    hoodie_sink.write(pa.Table.from_pylist(ROWS), path, opts)
    return path


@pytest.fixture(params=["true", "false"], ids=["pushdown", "no-pushdown"])
def spark_pushdown(request, spark):
    before = spark.conf.get(PUSHDOWN)
    spark.conf.set(PUSHDOWN, request.param)
    try:
        yield spark
    finally:
        spark.conf.set(PUSHDOWN, before)


def ids(rows) -> list[int]:
    return sorted(r["id"] for r in rows)


def shown_ids(df: DataFrame) -> list[int]:
    """The ids `df.show()` prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.show(100, truncate=False)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    col = header.index("id")
    return sorted(int(line.strip("|").split("|")[col]) for line in lines[1:])


def cached_ids(df: DataFrame) -> tuple[list[int], int]:
    df.cache()
    try:
        return ids(df.collect()), df.count()
    finally:
        df.unpersist(blocking=True)


# Every action, on the reused DataFrame or view `d`, with its answer over the whole table.
ACTIONS: dict[str, tuple[Callable[[DataFrame], object], object]] = {
    "collect": (lambda d: ids(d.collect()), ALL_IDS),
    "count": (lambda d: d.count(), 6),
    "show": (shown_ids, ALL_IDS),
    "toPandas": (lambda d: sorted(d.toPandas()["id"].tolist()), ALL_IDS),
    "take": (lambda d: ids(d.take(100)), ALL_IDS),
    "head": (lambda d: ids(d.head(100)), ALL_IDS),
    "first": (lambda d: d.orderBy(F.desc("fare")).first()["id"], 6),
    "limit.collect": (lambda d: ids(d.limit(100).collect()), ALL_IDS),
    "select.collect": (lambda d: ids(d.select("id").collect()), ALL_IDS),
    "rdd": (lambda d: sorted(d.rdd.map(lambda r: r["id"]).collect()), ALL_IDS),
    "groupBy.count": (
        lambda d: sorted((r["city"], r["count"]) for r in d.groupBy("city").count().collect()),
        [("la", 2), ("nyc", 2), ("sf", 2)],
    ),
    "agg.sum": (lambda d: d.agg(F.sum("fare")).first()[0], 210.0),
    "self-join": (lambda d: d.alias("a").join(d.alias("b"), "id").count(), 6),
    # two scans of one relation in ONE query, each with its own filter
    "union of filtered scans": (
        lambda d: ids(d.where("city = 'sf'").unionByName(d.where("fare >= 50")).collect()),
        [1, 2, 5, 6],
    ),
    "join of filtered scans": (
        lambda d: d.where("city = 'la'").alias("a").join(d.where("fare < 35").alias("b"), "id").count(),
        1,
    ),
    "cross join of filtered scans": (
        lambda d: d.where("city = 'sf'").crossJoin(d.where("fare >= 50")).count(),
        4,
    ),
    "cache.collect": (cached_ids, (ALL_IDS, 6)),
}


def sql(v: DataFrame, query: str) -> list:
    return v.sparkSession.sql(query).collect()


# Queries over the view `reused_v` (SQL) and over DataFrames of it.
VIEW_QUERIES: dict[str, tuple[Callable[[DataFrame], object], object]] = {
    "SELECT *": (lambda v: ids(sql(v, "SELECT * FROM reused_v")), ALL_IDS),
    "SELECT count(*)": (lambda v: sql(v, "SELECT count(*) AS n FROM reused_v")[0]["n"], 6),
    "SELECT ... GROUP BY": (
        lambda v: sorted(tuple(r) for r in sql(v, "SELECT city, count(*) FROM reused_v GROUP BY city")),
        [("la", 2), ("nyc", 2), ("sf", 2)],
    ),
    "table().rdd": (lambda v: ACTIONS["rdd"][0](v.sparkSession.table("reused_v")), ALL_IDS),
    **{
        f"{name} (a DataFrame of the view made before)": ACTIONS[name]
        for name in ("collect", "count", "toPandas", "rdd", "self-join", "cross join of filtered scans")
    },
}


def fresh_then_filtered(make: Callable[[], DataFrame], where: str, keep: list[int]) -> DataFrame:
    d = make()
    assert ids(d.where(where).collect()) == keep, where
    return d


def test_every_action_on_a_reused_dataframe_reads_the_whole_table(spark_pushdown, table):
    """Each action on a DataFrame whose first query was a filtered one (its plan is made then)."""
    wrong = []
    for i, (name, (action, want)) in enumerate(ACTIONS.items()):
        where, keep = FILTERS[i % len(FILTERS)]
        df = fresh_then_filtered(lambda: spark_pushdown.read.format("hoodie").load(table), where, keep)
        got = action(df)
        if got != want:
            wrong.append(f"{name} after {where}: got {got}, want {want}")
        if i == 0:  # and later queries of that DataFrame, with other filters in between
            for where2, keep2 in FILTERS[1:]:
                assert ids(df.where(where2).collect()) == keep2, where2
                got = [a(df) for a, _ in (ACTIONS["collect"], ACTIONS["groupBy.count"])]
                if got != [ALL_IDS, ACTIONS["groupBy.count"][1]]:
                    wrong.append(f"collect, groupBy.count after {where}, {where2}: got {got}")
    assert not wrong, "\n".join(wrong)


def test_every_query_of_a_reused_view_reads_the_whole_table(spark_pushdown, table):
    """Each query of a temporary view after a filtered SELECT of it."""
    spark = spark_pushdown
    wrong = []
    try:
        for i, (name, (query, want)) in enumerate(VIEW_QUERIES.items()):
            where, keep = FILTERS[i % len(FILTERS)]
            spark.read.format("hoodie").load(table).createOrReplaceTempView("reused_v")
            v = spark.table("reused_v")
            fresh_then_filtered(lambda: spark.sql("SELECT * FROM reused_v"), where, keep)
            got = query(v)
            if got != want:
                wrong.append(f"{name} after SELECT ... WHERE {where}: got {got}, want {want}")
    finally:
        spark.catalog.dropTempView("reused_v")
    assert not wrong, "\n".join(wrong)
