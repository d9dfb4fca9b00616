"""The streaming source (issue 13, item 3): `spark.readStream.format("hoodie")` over the random COW
and MOR sequences of tests/unit/read/test_incremental.py (upserts, deletes, compaction,
clustering).  Every micro-batch (start, end] must equal the model's incremental answer for its
offsets, the batches must cover the table's writes without a gap or an overlap, also across a
restart from the checkpoint, and the start offset and rate limit must do what they say."""

from __future__ import annotations

import json
from itertools import pairwise

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.timeline.instant import WRITE_ACTIONS
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.storage import Storage
from tests.unit.read.test_incremental import OPTS, expected, run_sequence

MAX = "hoodie.datasource.streaming.max.instants.per.batch"
START = "hoodie.datasource.streaming.startOffset"


def stream(spark, path: str, ckpt: str, options: dict | None = None) -> list[tuple[str, str, list]]:
    """Run the stream to the table's newest write (availableNow); (start, end, rows) per batch."""
    seen: dict[int, list] = {}

    def collect(df, batch_id):
        seen[batch_id] = [r.asDict() for r in df.select("id", "_hoodie_commit_time", "ts", "v").collect()]

    df = spark.readStream.format("hoodie").options(**(options or {})).load(path)
    q = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(600)
    if q.exception():
        raise q.exception()
    out = []
    for p in q.recentProgress:
        if p["batchId"] not in seen:
            continue  # a progress event with no batch run (nothing new)
        src = p["sources"][0]
        # Spark reports no start offset for a fresh query's first batch: its initial offset
        start = (json.loads(src["startOffset"] or "null") or {}).get("instant")
        out.append((start, json.loads(src["endOffset"])["instant"], seen.pop(p["batchId"])))
    return out


def assert_batches_match_the_model(batches, events, begin: str) -> str:
    """Each batch equals the model's (start, end]; the batches follow each other from `begin`."""
    at = begin
    for i, (start, end, rows) in enumerate(batches):
        start = at if start is None and i == 0 else start
        assert start == at, "a gap or an overlap between micro-batches"
        got = {r["id"]: (r["_hoodie_commit_time"], r["ts"], r["v"]) for r in rows}
        assert len(got) == len(rows), f"({start}, {end}]: a key twice"
        assert got == expected(events, start, end), f"({start}, {end}]"
        at = end
    return at


def latest_write(path: str) -> str:
    return Timeline.load(Storage(path)).latest_completed(WRITE_ACTIONS).timestamp


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_micro_batches_equal_the_model_and_resume_after_a_restart(spark, tmp_path, table_type):
    path, ckpt = str(tmp_path / "t"), str(tmp_path / "ckpt")
    instants, events = run_sequence(path, table_type, seed=11)
    first = stream(spark, path, ckpt, {MAX: "2"})
    assert len(first) >= len(instants) // 2  # at most two writes per batch
    at = assert_batches_match_the_model(first, events, "000")
    assert at == latest_write(path)
    # more writes, then the same query again from its checkpoint: it resumes where it stopped
    for k in range(2):
        rows = pa.table({"id": [f"k{k}", "new"], "part": ["p0", "p1"], "ts": [100 + k] * 2, "v": [k, k]})
        hoodie_sink.write(rows, path, {**OPTS, "hoodie.datasource.write.table.type": table_type})
        for r in rows.to_pylist():
            events.setdefault(r["id"], []).append((latest_write(path), r))
    second = stream(spark, path, ckpt, {MAX: "2"})
    assert second and assert_batches_match_the_model(second, events, at) == latest_write(path)
    assert stream(spark, path, ckpt) == []  # nothing new: no batch


def test_start_offsets(spark, tmp_path):
    path = str(tmp_path / "t")
    instants, events = run_sequence(path, "COPY_ON_WRITE", seed=12)
    latest = stream(spark, path, str(tmp_path / "c1"), {START: "latest"})
    assert all(rows == [] for _, _, rows in latest)  # only writes that complete after the start
    mid = instants[3]
    from_mid = stream(spark, path, str(tmp_path / "c2"), {START: mid})
    assert assert_batches_match_the_model(from_mid, events, mid) == latest_write(path)
    earliest = stream(spark, path, str(tmp_path / "c3"), {MAX: "100"})
    assert len(earliest) == 1 and assert_batches_match_the_model(earliest, events, "000") == latest_write(
        path
    )


def test_a_stream_refuses_batch_options_and_a_batch_read_refuses_stream_options(spark, tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(pa.table({"id": ["a"], "part": ["p0"], "ts": [1], "v": [1]}), path, OPTS)
    for opts, match in (
        ({"as.of.instant": "20200101000000"}, "does not apply to a streaming read"),
        ({START: "yesterday"}, "earliest, latest or an instant time"),
        ({MAX: "0"}, "positive number"),
    ):
        with pytest.raises(Exception, match=match):
            stream(spark, path, str(tmp_path / f"c{len(match)}"), opts)
    with pytest.raises(Exception, match="applies to streaming reads"):
        spark.read.format("hoodie").option(START, "latest").load(path).collect()


def test_a_column_added_after_the_stream_started_fails_the_batch_instead_of_dropping_it(spark, tmp_path):
    path, ckpt = str(tmp_path / "t"), str(tmp_path / "ckpt")
    hoodie_sink.write(pa.table({"id": ["a"], "part": ["p0"], "ts": [1], "v": [1]}), path, OPTS)
    df = spark.readStream.format("hoodie").load(path)  # Spark fixes the schema here
    hoodie_sink.write(
        pa.table({"id": ["b"], "part": ["p0"], "ts": [2], "v": [2], "extra": ["x"]}), path, OPTS
    )
    q = df.writeStream.format("noop").option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    with pytest.raises(Exception, match="gained column"):
        q.awaitTermination(600)


@pytest.mark.parametrize("fixture", ["cow_v6_simplekeygen_nonhivestyle", "mor_avro_v6_trips_8i1u",
                                     "mor_parquet_v6_simplekeygen_nonhivestyle"])  # fmt: skip
def test_a_table_written_by_apache_hudi_streams_commit_by_commit(spark, tmp_path, fixture):
    from hoodie_sink.table.read.incremental import read_incremental
    from tests.support.tables import unzip_fixture

    path = str(unzip_fixture(fixture, tmp_path))
    batches = []

    def collect(df, batch_id):
        batches.append(
            sorted(tuple(r) for r in df.select("_hoodie_record_key", "_hoodie_commit_time").collect())
        )

    q = (
        spark.readStream.format("hoodie").option(MAX, "1").load(path).writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start()
    )  # fmt: skip
    q.awaitTermination(600)
    assert q.exception() is None
    writes = ["000", *(i.timestamp for i in Timeline.load(Storage(path)).completed(WRITE_ACTIONS))]
    cols = ["_hoodie_record_key", "_hoodie_commit_time"]
    want = [
        sorted(tuple(r.values()) for r in read_incremental(path, b, e, cols).to_pylist())
        for b, e in pairwise(writes)
    ]
    assert any(want) and [b for b in batches if b] == [w for w in want if w]
