"""Append streams of log data, and clustering of the small files they leave, through Spark."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.table.read.snapshot import Snapshot
from tests.support.streams import stream_files
from tests.support.tables import (
    all_commit_extra_metadata,
    assert_table_matches,
    hudi_rs_timeline,
    read_both,
    streaming_batch_ids,
)

SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("fare", pa.float64())])
APPEND = {
    "hoodie.table.name": "logs",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.operation": "append",  # keyless: keys are generated
}
CLUSTER = {
    "hoodie.clustering.plan.strategy.small.file.limit": str(10 * 1024 * 1024),
    "hoodie.clustering.plan.strategy.target.file.max.bytes": str(64 * 1024 * 1024),
    "hoodie.clustering.plan.strategy.sort.columns": "fare",
}


def log_files(src: Path, batches: int, rows: int = 20, start: int = 0) -> list[dict]:
    """One small parquet file per micro-batch; strictly increasing mtimes (Spark's file source
    takes the oldest first)."""
    src.mkdir(parents=True, exist_ok=True)
    out = []
    for b in range(start, start + batches):
        rows_b = [{"id": b * rows + i, "city": "abc"[i % 3], "ts": b, "fare": float((b * 7919 + i * 104729) % 1000)}
                  for i in range(rows)]  # fmt: skip
        f = src / f"part-{b:05d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows_b, schema=SCHEMA), f)
        os.utime(f, (1_700_000_000 + b, 1_700_000_000 + b))
        out += rows_b
    return out


def stream(spark, src: Path, path: Path, ckpt: Path, extra: dict | None = None):
    stream_files(
        spark, "id LONG, city STRING, ts LONG, fare DOUBLE", src, path, ckpt, {**APPEND, **(extra or {})}, 900
    )


def _data(t: pa.Table) -> list[dict]:
    return t.drop_columns([c for c in t.column_names if c.startswith("_hoodie")]).to_pylist()


# A short archival window: the stream archives many times in 60 micro-batches (with Hudi's defaults,
# 20 to 30 commits, it took 200 batches and ~8 minutes of CI to archive as often)
SHORT_TIMELINE = {
    "hoodie.keep.min.commits": "6",
    "hoodie.keep.max.commits": "9",
    "hoodie.cleaner.commits.retained": "5",
}


def test_60_append_micro_batches_then_clustering(spark, tmp_path):
    path = tmp_path / "t"
    expected = log_files(tmp_path / "src", 60)
    stream(spark, tmp_path / "src", path, tmp_path / "ckpt", SHORT_TIMELINE)
    assert len(all_commit_extra_metadata(path)) == 60  # active and archived
    assert len(hudi_rs_timeline(path).get_completed_commits()) <= 10  # archival keeps the timeline short
    before, _ = read_both(path)
    assert_table_matches(path, expected)
    files_before = len(Snapshot.open(str(path)).base_files())
    assert files_before == 180  # a new file group per bucket flush: 3 partitions x 60 batches

    result = hoodie_sink.cluster(str(path), CLUSTER, spark=spark)  # one Spark task per group
    assert result.groups == 3 and result.input_files == files_before
    after, _ = read_both(path)
    cols = ["_hoodie_record_key", "_hoodie_commit_time", "_hoodie_commit_seqno", "id", "fare"]
    assert after.select(cols).to_pylist() == before.select(cols).to_pylist()
    # about data size / target size files: all of it fits one file per partition
    assert len(Snapshot.open(str(path)).base_files()) == 3
    assert len(hudi_rs_timeline(path).get_completed_replacecommits()) == 1
    # our Spark reader agrees, and a filter on the sort column skips files
    df = spark.read.format("hoodie").load(str(path))
    assert sorted(r["id"] for r in df.select("id").collect()) == sorted(r["id"] for r in expected)


def test_clustering_while_an_append_stream_writes(spark, tmp_path):
    path = tmp_path / "t"
    src = tmp_path / "src"
    first = log_files(src, 30)
    stream(spark, src, path, tmp_path / "ckpt")
    more = log_files(src, 40, start=30)
    results = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def cluster_repeatedly():  # a second writer of the table: clustering, in a thread pool
        try:
            while not stop.is_set():
                results.append(
                    hoodie_sink.cluster(
                        str(path), {**CLUSTER, "hoodie.clustering.plan.strategy.sort.columns": ""}
                    )
                )
                time.sleep(0.2)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=cluster_repeatedly)
    t.start()
    try:
        stream(spark, src, path, tmp_path / "ckpt")  # Spark streams start from the main thread
    finally:
        stop.set()
        t.join()
    assert not errors, [str(e) for e in errors]
    results.append(hoodie_sink.cluster(str(path), CLUSTER))
    assert sum(r is not None for r in results) >= 2
    assert streaming_batch_ids(path) == list(range(70))  # one commit per micro-batch, active and archived
    assert_table_matches(path, first + more)  # nothing lost, nothing twice


def test_upsert_into_file_group_under_pending_clustering_fails_and_leaves_table(spark, tmp_path):
    path = tmp_path / "t"
    keyed = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
    }
    rows = [{"id": i, "city": "abc"[i % 3], "ts": 1, "fare": float(i)} for i in range(60)]
    for chunk in (rows[:30], rows[30:]):
        spark.createDataFrame(chunk, "id LONG, city STRING, ts LONG, fare DOUBLE").write.format(
            "hoodie"
        ).options(**keyed).option("hoodie.datasource.write.operation", "append").mode("append").save(
            str(path)
        )
    from hoodie_sink.table.options.write_config import WriteConfig
    from hoodie_sink.table.services import clustering
    from hoodie_sink.table.storage import Storage

    storage = Storage(str(path))
    assert clustering.schedule(storage, WriteConfig.from_options({**keyed, **CLUSTER}, path=str(path)))
    tree = sorted(str(p) for p in path.rglob("*") if ".hoodie" not in p.parts)
    update = spark.createDataFrame(
        [{"id": 3, "city": "a", "ts": 2, "fare": -1.0}], "id LONG, city STRING, ts LONG, fare DOUBLE"
    )
    with pytest.raises(Exception, match="hoodie.clustering.updates.strategy"):
        update.write.format("hoodie").options(**keyed).mode("append").save(str(path))
    assert sorted(str(p) for p in path.rglob("*") if ".hoodie" not in p.parts) == tree
    assert_table_matches(path, rows)


def test_inline_clustering_in_a_stream(spark, tmp_path):
    path = tmp_path / "t"
    expected = log_files(tmp_path / "src", 8)
    inline = {**CLUSTER, "hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "3"}
    stream(spark, tmp_path / "src", path, tmp_path / "ckpt", inline)
    tl = hudi_rs_timeline(path)
    assert len(tl.get_completed_commits()) == 8
    assert len(tl.get_completed_replacecommits()) == 2  # after the 3rd and the 6th micro-batch
    assert_table_matches(path, expected)
    # batches 7 and 8 came after the last clustering: 3 clustered files + 2 x 3 appended
    assert len(Snapshot.open(str(path)).base_files()) == 9
