"""Issue 8 item 11 through Spark: the two tasks of a micro-batch are forced into the race that
killed long streaming queries, and still write one instant.

The `hoodie_racy` source is the hoodie source with its tasks' context look-up synchronised
(through files next to the table): both tasks find no write context; task 0 then takes the lock,
begins the instant, publishes the context and releases the lock; only then does task 1, which
found nothing, ask for the lock.  Each task attempt records the instant it wrote (or its error)
next to the table, so the test sees a second instant or a killed attempt even when a task
retry hides it.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from pyspark import TaskContext

from hoodie_sink.datasource.source import HoodieDataSource
from hoodie_sink.datasource.stream_writer import HoodieStreamWriter
from hoodie_sink.table.write import streaming
from tests.spark.test_streaming_long import ROWS_PER_BATCH
from tests.support.tables import assert_table_matches


class RacingStreamWriter(HoodieStreamWriter):
    def write(self, iterator):
        tc = TaskContext.get()
        batch, part = tc.getLocalProperty("streaming.sql.batchId"), tc.partitionId()
        base = Path(self.cfg.path).parent
        real, looked = streaming.load_context, []

        def racing_load(storage, ref):
            ctx = real(storage, ref)
            if ctx is None and not looked:
                looked.append(True)
                sync = base / "sync" / batch
                sync.mkdir(parents=True, exist_ok=True)
                (sync / f"looked-{part}").touch()
                deadline = time.monotonic() + 10
                if part == 0:  # task 0 goes on once task 1 has looked too (and found nothing)
                    while not (sync / "looked-1").exists() and time.monotonic() < deadline:
                        time.sleep(0.02)
                else:  # task 1 asks for the lock only once task 0 has published and released it
                    while time.monotonic() < deadline and not (
                        storage.exists(ref.ctx_path) and not storage.exists(ref.lock_path)
                    ):
                        time.sleep(0.02)
            return ctx

        record = base / "attempts" / f"{os.getpid()}-{uuid.uuid4().hex}"
        record.parent.mkdir(exist_ok=True)
        streaming.load_context = racing_load
        try:
            msg = super().write(iterator)
            record.write_text(f"{batch} ok {msg.result.instant if msg.result else '-'}")
            return msg
        except Exception as e:
            record.write_text(f"{batch} error {e}")
            raise
        finally:
            streaming.load_context = real


class RacyHoodie(HoodieDataSource):
    @classmethod
    def name(cls) -> str:
        return "hoodie_racy"

    def streamWriter(self, schema, overwrite):
        return RacingStreamWriter(self.options, schema, overwrite)


def test_tasks_racing_to_begin_a_micro_batch_write_one_instant(spark, tmp_path):
    spark.dataSource.register(RacyHoodie)
    path = tmp_path / "t"
    df = (
        spark.readStream.format("rate-micro-batch").option("rowsPerBatch", ROWS_PER_BATCH)
        .option("numPartitions", 2).load().selectExpr("value as id", "value as ts")
    )  # fmt: skip
    q = (
        df.writeStream.format("hoodie_racy").option("hoodie.datasource.write.recordkey.field", "id")
        .option("hoodie.datasource.write.precombine.field", "ts")
        .option("checkpointLocation", str(tmp_path / "ckpt")).start(str(path))
    )  # fmt: skip
    try:
        while q.isActive and (q.lastProgress is None or q.lastProgress["batchId"] < 2):
            time.sleep(0.5)
    finally:
        q.stop()
    assert q.exception() is None, q.exception()
    commits = sorted(p.name.split(".")[0] for p in (path / ".hoodie").glob("*.commit"))
    assert len(commits) >= 3
    # the attempts of every committed micro-batch (a batch cut by stop() is not looked at): no
    # attempt failed, and all wrote under the batch's one committed instant
    records = [f.read_text().split(" ", 2) for f in (tmp_path / "attempts").iterdir()]
    records = [r for r in records if int(r[0]) < len(commits)]
    assert not [r for r in records if r[1] == "error"], records
    instants = {b: {r[2] for r in records if int(r[0]) == b} for b in range(len(commits))}
    assert all(len(i) == 1 and i <= set(commits) for i in instants.values()), instants
    n = len(commits) * ROWS_PER_BATCH
    assert_table_matches(path, [{"id": i, "ts": i} for i in range(n)])
