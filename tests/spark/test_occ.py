"""Optimistic concurrency control through Spark (issue 14, part 1): a Spark batch upsert commits
while another writer (the engine API) is between its begin and its commit.  Overlapping file
groups: the later commit fails with a conflict and leaves nothing; disjoint ones: both land."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieWriteConflictError
from hoodie_sink.table import client
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.write.context import TaskIdentity
from tests.support.tables import OCC_OPTS, hudi_rs_read

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.parquet.small.file.limit": "0",
    **OCC_OPTS,
}


def rows(ids, ts, p="a") -> pa.Table:
    return pa.table({"id": ids, "p": [p] * len(ids), "ts": [ts] * len(ids), "v": [f"{i}@{ts}" for i in ids]})


@pytest.mark.parametrize("other_keys,other_partition,conflict", [(["k1"], "a", True), (["k7"], "b", False)])
def test_a_spark_write_and_a_concurrent_writer(spark, tmp_path, other_keys, other_partition, conflict):
    path = str(tmp_path / "t")
    hoodie_sink.write(rows(["k1", "k2"], 1), path, OPTS)
    other = rows(other_keys, 3, other_partition)
    ctx = client.begin(WriteConfig.from_options(OPTS, path=path), other.schema)  # the other writer begins
    result = client.write_task(ctx, TaskIdentity(only_task=True), other.to_batches())
    spark.createDataFrame(
        rows(["k1", "k2"], 2).to_pylist(), "id STRING, p STRING, ts LONG, v STRING"
    ).write.format("hoodie").options(**OPTS).mode("append").save(
        path
    )  # Spark's upsert of both keys commits first
    if conflict:
        with pytest.raises(HoodieWriteConflictError, match="Nothing of this write was committed"):
            client.complete(ctx, [result])
        client.abort(ctx, settle_seconds=0)
    else:
        client.complete(ctx, [result])
    got = {r["id"]: r["v"] for r in hudi_rs_read(path).select(["id", "v"]).to_pylist()}
    want = {"k1": "k1@2", "k2": "k2@2", **({} if conflict else {k: f"{k}@3" for k in other_keys})}
    assert got == want
    assert {r["id"]: r["v"] for r in hoodie_sink.read(path).select(["id", "v"]).to_pylist()} == want


def test_spark_writes_refuse_retries_they_cannot_run(spark, tmp_path):
    df = spark.createDataFrame(rows(["k1"], 1).to_pylist(), "id STRING, p STRING, ts LONG, v STRING")
    opts = {**OPTS, "hoodie.write.num.retries.on.conflict.failures": "2"}
    with pytest.raises(Exception, match="num.retries.on.conflict.failures' is not supported on Spark writes"):
        df.write.format("hoodie").options(**opts).mode("append").save(str(tmp_path / "t"))


@pytest.mark.s3
def test_a_stream_survives_a_concurrent_writer_by_retrying_the_micro_batches_that_lose(spark, tmp_path):
    """A streaming upsert and an engine writer update the same keys at once, under OCC.  Every
    micro-batch of the stream that loses a conflict is written again from its kept input; the
    other writer retries too.  At the end every micro-batch is committed once and each key holds
    its highest-ordered record of all the writes that committed."""
    import threading

    import pyarrow.parquet as pq

    from tests.support.streams import stream_files
    from tests.support.tables import streaming_batch_ids

    src, path = tmp_path / "src", str(tmp_path / "t")
    src.mkdir()
    keys = [f"k{i}" for i in range(2000)]
    stream_rows: list[dict] = []

    def more_micro_batches(n: int) -> None:
        for _ in range(n):
            b = len(stream_rows) // len(keys)
            batch = [{"id": k, "p": "a", "ts": 10 * b + 2, "v": f"stream{b}"} for k in keys]
            stream_rows.extend(batch)
            pq.write_table(pa.Table.from_pylist(batch), src / f"part-{b:05d}.parquet")

    hoodie_sink.write(rows(keys, 0), path, OPTS)
    committed: list[dict] = []
    stop = threading.Event()

    def other_writer():  # odd ordering values: never equal to the stream's
        n = 0
        while not stop.is_set():
            n += 1
            t = rows(keys[::3], 10 * n + 1)
            hoodie_sink.write(t, path, {**OPTS, "hoodie.write.num.retries.on.conflict.failures": "50"})
            committed.extend(t.to_pylist())
            stop.wait(0.1)

    def rollbacks() -> list:
        return list((tmp_path / "t" / ".hoodie").glob("*.rollback"))

    thread = threading.Thread(target=other_writer)
    thread.start()
    try:
        # rounds of 6 micro-batches (the query restarts from its checkpoint) until one of the two
        # writers lost a conflict: the overlap is a matter of timing, so it is given several chances
        for _ in range(4):
            more_micro_batches(6)
            stream_files(spark, "id STRING, p STRING, ts LONG, v STRING", src, tmp_path / "t", tmp_path / "ckpt",
                         {**OPTS, "hoodie.datasource.write.streaming.retry.count": "10",
                          "hoodie.datasource.write.streaming.retry.interval.ms": "50"})  # fmt: skip
            if rollbacks():
                break
    finally:
        stop.set()
        thread.join()
    batches = len(stream_rows) // len(keys)
    assert streaming_batch_ids(path) == list(range(batches))  # each micro-batch committed once
    best: dict[str, dict] = {}
    for r in [*rows(keys, 0).to_pylist(), *stream_rows, *committed]:
        if r["id"] not in best or r["ts"] > best[r["id"]]["ts"]:
            best[r["id"]] = r
    got = {r["id"]: r["v"] for r in hudi_rs_read(path).select(["id", "v"]).to_pylist()}
    assert got == {k: r["v"] for k, r in best.items()}
    assert rollbacks(), "no write lost a conflict in 24 micro-batches: the test did not exercise the retries"
