"""Issue 8 item 11: a long streaming upsert query does not kill itself.

The query that died after 7..309 micro-batches ("Instant ... is no longer in flight") raced two
tasks of one micro-batch into beginning two instants.  Here every micro-batch has two tasks with
rows (rate-micro-batch source, two partitions, local[2]), so each batch runs that race; the query
must run the whole distance and the table must equal the model: every key's latest row, from
exactly the committed micro-batches (each commits exactly its rows, none twice, none lost).
"""

from __future__ import annotations

import json
import time

import pytest

from tests.support.tables import (
    all_commit_extra_metadata,
    assert_table_matches,
    read_both,
    streaming_batch_ids,
)

ROWS_PER_BATCH = 40
KEYS = 300


def run_rate_stream(spark, path, ckpt, batches: int) -> float:
    df = (
        spark.readStream.format("rate-micro-batch").option("rowsPerBatch", ROWS_PER_BATCH)
        .option("numPartitions", 2).load()
        .selectExpr(f"value % {KEYS} as id", f"substr('abc', cast(value % {KEYS} % 3 as int) + 1, 1) as city",
                    "value as ts", "cast(value as double) as fare")
    )  # fmt: skip
    q = (
        df.writeStream.format("hoodie").option("hoodie.datasource.write.recordkey.field", "id")
        .option("hoodie.datasource.write.partitionpath.field", "city")
        .option("hoodie.datasource.write.precombine.field", "ts")
        .option("checkpointLocation", str(ckpt)).start(str(path))
    )  # fmt: skip
    started = time.monotonic()
    try:
        while q.isActive and (q.lastProgress is None or q.lastProgress["batchId"] < batches - 1):
            time.sleep(0.5)
    finally:
        q.stop()
    assert q.exception() is None, q.exception()
    return time.monotonic() - started


@pytest.mark.parametrize(
    "batches", [pytest.param(100, marks=pytest.mark.slow), pytest.param(1000, marks=pytest.mark.soak)]
)
def test_streaming_upsert_runs_its_micro_batches_and_equals_the_model(spark, tmp_path, batches):
    path = tmp_path / "t"
    took = run_rate_stream(spark, path, tmp_path / "ckpt", batches)
    # every commit, archived ones included (archival runs past 30 commits)
    metas = [{"extraMetadata": extra} for _, extra in all_commit_extra_metadata(path)]
    checkpoints = streaming_batch_ids(path)
    # one commit per micro-batch, in order, none lost or doubled, each with exactly its rows
    assert checkpoints == list(range(len(metas))) and len(metas) >= batches
    assert {json.loads(m["extraMetadata"]["hoodie.sink.write.report"])["rowsIn"] for m in metas} == {
        ROWS_PER_BATCH
    }
    last_value = len(metas) * ROWS_PER_BATCH - 1
    theirs, _ = read_both(path)
    assert max(theirs.column("ts").to_pylist()) == last_value
    model = []
    for key in range(KEYS):
        v = last_value - (last_value - key) % KEYS  # the key's latest value
        model.append({"id": key, "city": "abc"[key % 3], "ts": v, "fare": float(v)})
    assert_table_matches(path, model)
    print(f"\n{len(metas)} micro-batches in {took:.0f}s ({took / len(metas):.2f}s each)")
