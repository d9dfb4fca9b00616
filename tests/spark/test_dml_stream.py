"""A MERGE per micro-batch, exactly once (hoodie_sink.spark.merge_micro_batches): a Structured
Streaming query over parquet files of CDC rows merges each batch into a COW and a MOR table, checked
against a model (each batch's rows applied in order) with hudi-rs and our reader.  A batch given
again writes nothing; a crash between our commit and Spark's (its commit entry removed) replays
the batch on restart, which is skipped, then the stream goes on.  One update accumulates
(`v = t.v + s.v`), so that applying a batch twice would show in the data, not only the timeline.
docs/design/table-dml.md#exactly-once-from-a-stream."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_sink
import hoodie_sink.spark
from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.client import micro_batches as streaming
from hoodie_sink.table.client.table import Table
from hoodie_sink.table.dml.table_merger import DmlTarget
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.storage import Storage
from tests.support.tables import OCC_OPTS, assert_table_matches, streaming_batch_ids

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("ts", pa.int64())])
CDC = SCHEMA.append(pa.field("op", pa.string()))  # I insert/overwrite, A add to v, D delete
IDENTIFIER = "orders-merge"


def options(table_type: str) -> dict[str, str]:
    return {
        "hoodie.table.name": "m",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.operation": "upsert",
    }


def build(table: Table, df):
    return (
        table.merge(df, "t.id = s.id", "s", "t")
        .when_matched_delete("s.op = 'D'")
        .when_matched_update({"v": "t.v + s.v", "ts": "s.ts"}, "s.op = 'A'")
        .when_matched_update_all()
        .when_not_matched_insert_all("s.op <> 'D'")
    )


def apply(model: dict[int, dict], batch: list[dict]) -> None:
    for row in batch:
        data = {k: row[k] for k in SCHEMA.names}
        if row["op"] == "D":
            model.pop(row["id"], None)
        elif row["op"] == "A" and row["id"] in model:
            model[row["id"]] = {**model[row["id"]], "v": model[row["id"]]["v"] + row["v"], "ts": row["ts"]}
        else:
            model[row["id"]] = data


def cdc_batch(rng: random.Random, n: int) -> list[dict]:
    """One batch's rows: distinct keys (a target row matched twice is refused), later than any stored."""
    return [
        {"id": i, "p": f"p{i % 3}", "v": rng.randrange(100), "ts": 10 + n, "op": rng.choice("IAAD")}
        for i in rng.sample(range(30), 12)
    ]


def put(src: Path, n: int, rows: list[dict]) -> None:
    """Batch n's file, older than batch n+1's: the file source takes the oldest first."""
    path = src / f"batch-{n:03d}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=CDC), path)
    os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))


def instants(path: str) -> list[str]:
    return [i.timestamp for i in ActiveTimeline.load(Storage(path)).completed()]


def run_stream(spark, src: Path, ckpt: Path, merge) -> None:
    q = (spark.readStream.schema("id LONG, p STRING, v LONG, ts LONG, op STRING")
         .option("maxFilesPerTrigger", 1).parquet(str(src))
         .writeStream.foreachBatch(merge).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())  # fmt: skip
    q.awaitTermination()
    q.stop()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_stream_merges_each_batch_exactly_once(spark, tmp_path, table_type):
    rng = random.Random(5 if table_type == "COPY_ON_WRITE" else 6)
    path, src, ckpt = str(tmp_path / "t"), tmp_path / "src", tmp_path / "ckpt"
    src.mkdir()
    first = [{"id": i, "p": f"p{i % 3}", "v": i, "ts": 1} for i in range(0, 30, 2)]
    hoodie_sink.write(pa.Table.from_pylist(first, schema=SCHEMA), path, options(table_type))
    model = {r["id"]: r for r in first}
    batches = [cdc_batch(rng, n) for n in range(4)]
    merge = hoodie_sink.spark.merge_micro_batches(
        path,
        build,
        {**options(table_type), "hoodie.datasource.write.streaming.checkpoint.identifier": IDENTIFIER},
    )
    for n in range(3):
        put(src, n, batches[n])
        apply(model, batches[n])
    run_stream(spark, src, ckpt, merge)
    assert_table_matches(path, list(model.values()))
    assert streaming.committed_checkpoints(Storage(path)) == {IDENTIFIER: "2"}
    twice = dict(model)
    apply(twice, batches[2])
    assert twice != model  # the test has teeth: batch 2 applied again would change the data
    written = instants(path)

    # batch 2 given again (as Spark would after a crash): nothing written
    again = merge(spark.read.parquet(str(src / "batch-002.parquet")), 2)
    assert again["batch_skipped"] == 1
    assert instants(path) == written

    # a crash between our commit of batch 2 and Spark's: its commit entry is gone, so the restarted
    # query runs batch 2 again (skipped by us), then batch 3
    (ckpt / "commits" / "2").unlink()
    (ckpt / "commits" / ".2.crc").unlink(missing_ok=True)
    put(src, 3, batches[3])
    apply(model, batches[3])
    run_stream(spark, src, ckpt, merge)
    assert sorted(int(f.name) for f in (ckpt / "commits").iterdir() if f.name.isdigit()) == [0, 1, 2, 3]
    assert_table_matches(path, list(model.values()))
    assert streaming.committed_checkpoints(Storage(path)) == {IDENTIFIER: "3"}
    # one commit per batch, each recording its own id: the replayed batch 2 wrote nothing (a MOR
    # table may compact inline after batch 3: a commit without a checkpoint)
    assert streaming_batch_ids(path) == [0, 1, 2, 3]


def test_a_merge_that_loses_a_conflict_is_built_again(tmp_path):
    """Under OCC another writer commits to the merge's file group between its read and its commit:
    the merge is built on the new table and run again (an Arrow source: no Spark job needed)."""
    path = str(tmp_path / "t")
    opts = {
        **options("COPY_ON_WRITE"),
        **OCC_OPTS,
        "hoodie.datasource.write.streaming.retry.interval.ms": "10",
    }
    hoodie_sink.write(pa.Table.from_pylist([{"id": 1, "p": "a", "v": 1, "ts": 1}], schema=SCHEMA), path, opts)
    builds = []

    def build_racing(table: Table, rows):
        merger = build(table, rows)
        builds.append(merger)
        if len(builds) == 1:  # the other writer lands after this attempt's read
            inner = merger.writer

            def other_writer_first(cfg, data, read_on, extra=None):
                hoodie_sink.write(pa.Table.from_pylist([{"id": 1, "p": "a", "v": 10, "ts": 2}], schema=SCHEMA),
                                  path, opts)  # fmt: skip
                return inner(cfg, data, read_on, extra)

            merger.writer = other_writer_first
        return merger

    merge = hoodie_sink.spark.merge_micro_batches(path, build_racing, {**opts, "queryName": "q"})
    got = merge(pa.Table.from_pylist([{"id": 1, "p": "a", "v": 5, "ts": 3, "op": "A"}], schema=CDC), 0)
    assert len(builds) == 2 and got["batch_skipped"] == 0
    assert_table_matches(path, [{"id": 1, "p": "a", "v": 15, "ts": 3}])  # 10 + 5: computed on the new table
    identifier = streaming.default_identifier({"queryname": "q"})
    assert streaming.committed_checkpoints(Storage(path)) == {identifier: "0"}
    assert merge(pa.Table.from_pylist([], schema=CDC), 0)["batch_skipped"] == 1


def test_build_must_return_the_merge_unexecuted(tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(pa.Table.from_pylist([{"id": 1, "p": "a", "v": 1, "ts": 1}], schema=SCHEMA), path,
                      options("COPY_ON_WRITE"))  # fmt: skip
    rows = pa.Table.from_pylist([], schema=CDC)
    with pytest.raises(HoodieConfigError, match="must return the merge"):
        hoodie_sink.spark.merge_micro_batches(path, lambda t, df: build(t, df).execute())(rows, 0)
    with pytest.raises(HoodieConfigError, match="must not call with_checkpoint"):
        hoodie_sink.spark.merge_micro_batches(path, lambda t, df: build(t, df).with_checkpoint("x", 1))(
            rows, 0
        )


def test_a_dataframe_merge_whose_batch_lands_meanwhile_is_rolled_back(spark, tmp_path, monkeypatch):
    """Two runs of one batch at once: the DataFrame merge's tasks have written when the driver finds
    the batch committed by the other run; its instant is rolled back and it reports the skip."""
    path = str(tmp_path / "t")
    first = [{"id": i, "p": "a", "v": i, "ts": 1} for i in range(5)]
    hoodie_sink.write(pa.Table.from_pylist(first, schema=SCHEMA), path, options("COPY_ON_WRITE"))
    table = hoodie_sink.Table(path, options("COPY_ON_WRITE"))
    other = [{"id": 1, "p": "a", "v": 100, "ts": 2, "op": "A"}]
    original = DmlTarget.commit_extra

    def other_run_first(self):
        build(table, pa.Table.from_pylist(other, schema=CDC)).with_checkpoint("q", 1).execute()
        return original(self)

    monkeypatch.setattr(DmlTarget, "commit_extra", other_run_first)
    df = spark.createDataFrame(pa.Table.from_pylist([{**other[0], "v": 7}], schema=CDC).to_pandas())
    assert build(table, df).with_checkpoint("q", 1).execute()["batch_skipped"] == 1
    assert_table_matches(path, [first[0], {"id": 1, "p": "a", "v": 101, "ts": 2}, *first[2:]])
    assert not ActiveTimeline.load(Storage(path)).pending()
    assert streaming_batch_ids(path) == [1]
