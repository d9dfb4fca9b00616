"""Apache Hudi's incremental query returns the rows ours returns (issue 13), on COW and MOR tables
the sink writes: upserts, inserts, a delete, MOR compaction and clustering between them, every
(begin, end] pair of their instants."""

from __future__ import annotations

import pytest

import hoodie_sink
from hoodie_sink.table.format.timeline.instant import WRITE_ACTIONS
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.read.incremental import read_incremental
from hoodie_sink.table.storage import Storage
from tests.interop.test_java_reads_ours import BASE, ours, rows

pytestmark = [pytest.mark.compat, pytest.mark.interop]

KEYS = ("_hoodie_commit_time", "_hoodie_record_key", "id", "city", "ts", "fare")


def answer(table) -> list[tuple]:
    return sorted(tuple(r[k] for k in KEYS) for r in table.select(list(KEYS)).to_pylist())


def write_instants(path) -> list[str]:
    return [i.timestamp for i in Timeline.load(Storage(str(path))).completed(WRITE_ACTIONS)]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_java_incremental_query_equals_ours(spark, java_hudi, tmp_path, table_type):
    path = tmp_path / "t"
    opts = {**BASE, "hoodie.datasource.write.table.type": table_type, "hoodie.parquet.small.file.limit": "0",
            "hoodie.compact.inline.max.delta.commits": "3"}  # fmt: skip
    ours(spark, path, rows(range(200), ts=1), {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    for ts in (2, 3, 4):
        ours(spark, path, rows(range(ts, 200, 5), ts) + rows(range(200 + 10 * ts, 205 + 10 * ts), ts), opts)
    ours(spark, path, rows(range(0, 30), ts=5), {**opts, "hoodie.datasource.write.operation": "delete"})
    hoodie_sink.cluster(
        str(path), {**opts, "hoodie.clustering.plan.strategy.sort.columns": "fare"}, spark=spark
    )
    ours(spark, path, rows(range(100, 130), ts=6), opts)
    instants = write_instants(path)
    assert len(instants) >= 7
    bounds = ["000", *instants]
    for i, begin in enumerate(bounds):
        for end in bounds[i + 1 :: 2]:  # every other end: Java's reads take a second each
            theirs = java_hudi.read(path, **{"hoodie.datasource.query.type": "incremental",
                                            "hoodie.datasource.read.begin.instanttime": begin,
                                            "hoodie.datasource.read.end.instanttime": end})  # fmt: skip
            mine = read_incremental(str(path), begin, end)
            assert answer(theirs) == answer(mine), f"({begin}, {end}]"
