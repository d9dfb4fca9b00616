"""The change feed (issue 13, item 4) through Spark and `hoodie_sink.read`: the random COW and MOR
sequences of tests/unit/read/test_cdc.py (upserts with duplicates, deletes of present, absent and
deleted keys, re-inserts, compaction, clustering), read for random (begin, end] pairs with
`hoodie.datasource.query.incremental.format=cdc`, and as a stream, must equal the model's
inserts, updates and deletes with their before and after images."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.timeline.instant import WRITE_ACTIONS
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.read.cdc import CDC_SCHEMA
from hoodie_sink.table.storage import Storage
from tests.unit.read.test_cdc import assert_feed, expected_feed, feed, write_sequence

CDC = {"hoodie.datasource.query.incremental.format": "cdc"}


def as_feed(rows) -> list[tuple]:
    """Spark rows of a change feed as sorted (ts_ms, partition, key, op, before, after)."""
    table = pa.Table.from_pylist([r.asDict() for r in rows], CDC_SCHEMA)
    return sorted(feed(table), key=lambda c: c[:3])


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_the_change_feed_through_spark_and_the_package_equals_the_model(spark, tmp_path, table_type):
    path = str(tmp_path / "t")
    model, _, _ = write_sequence(path, table_type, seed=5 if table_type == "MERGE_ON_READ" else 6)
    every = [i.timestamp for i in Timeline.load(Storage(path)).completed(WRITE_ACTIONS)]
    bounds = ["000", *every]
    rng = random.Random(5)
    pairs = [("000", every[-1])] + [tuple(sorted(rng.sample(bounds, 2))) for _ in range(4)]
    for begin, end in pairs:
        opts = {**CDC, "hoodie.datasource.query.type": "incremental",
                "hoodie.datasource.read.begin.instanttime": begin,
                "hoodie.datasource.read.end.instanttime": end}  # fmt: skip
        want = expected_feed(model, begin, end)
        df = spark.read.format("hoodie").options(**opts).load(path)
        assert df.columns == ["op", "ts_ms", "before", "after"]
        assert_feed(as_feed(df.collect()), want, f"Spark ({begin}, {end}]")
        assert_feed(feed(hoodie_sink.read(path, opts)), want, f"hoodie_sink.read ({begin}, {end}]")
    assert any(c[3] == "d" for c in expected_feed(model, "000", every[-1]))  # deletes reach the feed


def test_the_change_feed_as_a_stream(spark, tmp_path):
    path, ckpt = str(tmp_path / "t"), str(tmp_path / "ckpt")
    model, _, _ = write_sequence(path, "MERGE_ON_READ", seed=7)
    seen: dict[int, list] = {}

    def collect(df, batch_id):
        seen[batch_id] = df.collect()

    q = (
        spark.readStream.format("hoodie").options(**CDC)
        .option("hoodie.datasource.streaming.max.instants.per.batch", "3").load(path)
        .writeStream.foreachBatch(collect).option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    )  # fmt: skip
    q.awaitTermination(600)
    assert q.exception() is None
    at = "000"
    for p in q.recentProgress:
        if p["batchId"] not in seen:
            continue
        src = p["sources"][0]
        start = (json.loads(src["startOffset"] or "null") or {}).get("instant", at)
        end = json.loads(src["endOffset"])["instant"]
        assert start == at
        assert_feed(as_feed(seen.pop(p["batchId"])), expected_feed(model, start, end), f"({start}, {end}]")
        at = end
    assert at == Timeline.load(Storage(path)).latest_completed(WRITE_ACTIONS).timestamp
