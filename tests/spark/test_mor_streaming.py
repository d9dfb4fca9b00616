"""Streaming upserts into merge-on-read tables (issue 12): async compaction inside the sink, and a
compaction Spark job running beside a streaming query; nothing lost, nothing twice."""

from __future__ import annotations

import os
import threading
import time

import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.services.compaction import pending_compactions
from hoodie_sink.table.storage import Storage
from tests.spark.test_streaming import OPTS, cdc_files, model_of, run_stream
from tests.support.tables import assert_table_matches, hudi_rs_timeline

MOR = {
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.parquet.small.file.limit": "0",  # updates go to logs from the second micro-batch on
}


def compactions(path) -> list[str]:
    return sorted(p.name.split(".")[0] for p in (path / ".hoodie").glob("*.compaction.requested"))


def wait_for_pending_compactions(path, timeout_s: float = 120.0) -> None:
    """Wait until the table has no pending compaction.  Spark runs a streaming query's commit in a
    driver-side Python worker, not in this process (hoodie_sink/datasource/report_log.py), so the
    async compaction that commit starts runs there: this process can only watch the timeline
    (`wait_for_background_services` here joins nothing, and the readers could see the last
    compaction land between them)."""
    deadline = time.monotonic() + timeout_s
    while pending := pending_compactions(Timeline.load(Storage(str(path)))):
        assert time.monotonic() < deadline, f"compactions still pending after {timeout_s}s: {pending}"
        time.sleep(0.2)


@pytest.mark.s3
def test_stream_with_async_compaction_equals_the_model(spark, tmp_path):
    batches = cdc_files(tmp_path / "src", 12, seed=3, rows=(40, 120))
    extra = {**MOR, "hoodie.datasource.compaction.async.enable": "true",
             "hoodie.compact.inline.max.delta.commits": "3"}  # fmt: skip
    run_stream(spark, tmp_path / "src", tmp_path / "t", tmp_path / "ckpt", extra)
    wait_for_pending_compactions(tmp_path / "t")
    assert len(compactions(tmp_path / "t")) >= 2
    assert len(hudi_rs_timeline(tmp_path / "t").get_completed_deltacommits()) == 12
    assert_table_matches(tmp_path / "t", model_of(batches))


def test_compaction_job_beside_a_streaming_query(spark, tmp_path):
    """hoodie_sink.compact(path, spark=spark) while micro-batches keep coming: writes during the
    pending compaction go to the new file slices; the end state is the model."""
    src, path = tmp_path / "src", tmp_path / "t"
    batches = cdc_files(tmp_path / "all", 16, seed=4, rows=(40, 120))
    src.mkdir()
    files = sorted((tmp_path / "all").glob("*.parquet"))

    def feed(k: int) -> None:
        """Move the next k files into the stream's source, in order (by modification time)."""
        for _ in range(k):
            f = files.pop(0)
            target = src / f.name
            pq.write_table(pq.read_table(f), target)
            mtime = 1_700_000_000 + 16 - len(files)
            os.utime(target, (mtime, mtime))

    feed(4)
    df = spark.readStream.schema("id LONG, city STRING, ts LONG, fare DOUBLE, _hoodie_is_deleted BOOLEAN")
    q = (
        df.option("maxFilesPerTrigger", 1).parquet(str(src)).writeStream.format("hoodie")
        .options(**OPTS, **MOR, **{"hoodie.compact.inline": "false"})
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="200 milliseconds")
        .start(str(path))
    )  # fmt: skip
    try:
        q.processAllAvailable()
        stop = threading.Event()

        def keep_feeding() -> None:
            while files and not stop.is_set():
                feed(1)
                time.sleep(0.3)

        feeder = threading.Thread(target=keep_feeding)
        feeder.start()
        done = []
        for _ in range(2):  # two compactions while the stream writes
            done += hoodie_sink.compact(str(path), {"hoodie.compact.inline": "false"}, spark=spark)
            time.sleep(0.5)
        feeder.join(120)
        stop.set()
        q.processAllAvailable()
    finally:
        q.stop()
    assert q.exception() is None
    assert done and all(r.file_groups > 0 for r in done)
    assert len(compactions(path)) == len(done)
    assert_table_matches(path, model_of(batches))
