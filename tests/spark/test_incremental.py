"""Incremental queries through Spark against the model (issue 13): the random COW and MOR sequences
of tests/unit/read/test_incremental.py (upserts, deletes, compaction, clustering), read for random
(begin, end] pairs with spark.read.format("hoodie"), with and without a column projection."""

from __future__ import annotations

import random

import pytest

from tests.unit.read.test_incremental import expected, run_sequence


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_incremental_queries_through_spark_equal_the_model(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    instants, events = run_sequence(path, table_type, seed=7)
    bounds = ["000", *instants]
    pairs = [(b, e) for i, b in enumerate(bounds) for e in bounds[i + 1 :]]
    for begin, end in random.Random(7).sample(pairs, 8):
        df = (
            spark.read.format("hoodie")
            .option("hoodie.datasource.query.type", "incremental")
            .option("hoodie.datasource.read.begin.instanttime", begin)
            .option("hoodie.datasource.read.end.instanttime", end)
            .load(path)
        )
        rows = df.select("id", "_hoodie_commit_time", "ts", "v").collect()
        got = {r.id: (r._hoodie_commit_time, r.ts, r.v) for r in rows}
        assert len(rows) == len(got), f"({begin}, {end}]: a key twice"
        assert got == expected(events, begin, end), f"({begin}, {end}]"
        assert df.count() == len(got)
