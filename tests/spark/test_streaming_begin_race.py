"""Issue 8 item 11 through Spark: the two tasks of a micro-batch are forced into the race that
killed long streaming queries, and still write one instant.

Each task of the `hoodie_racy` source (the hoodie source whose tasks look for the batch's write
context slowly) waits a second after finding no context, so the task that loses the lock finds
none, waits, and asks for the lock again only after the winner has published the context and
released the lock.  Each task attempt records the instant it wrote (or its error) next to the
table, so the test sees a second instant or a killed attempt even when a task retry hides it.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from pyspark import TaskContext

from hoodie_sink.datasource.source import HoodieDataSource
from hoodie_sink.datasource.stream_writer import HoodieStreamWriter
from hoodie_sink.table import streaming
from tests.spark.test_streaming_long import ROWS_PER_BATCH
from tests.support.tables import assert_table_matches


class SlowLookupStreamWriter(HoodieStreamWriter):
    def write(self, iterator):
        real = streaming.load_context

        def slow_load(storage, ref):
            ctx = real(storage, ref)
            if ctx is None:
                time.sleep(1.0)  # the other task begins and publishes meanwhile
            return ctx

        batch = TaskContext.get().getLocalProperty("streaming.sql.batchId")
        record = Path(self.cfg.path).parent / "attempts" / f"{os.getpid()}-{uuid.uuid4().hex}"
        record.parent.mkdir(exist_ok=True)
        streaming.load_context = slow_load
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
        return SlowLookupStreamWriter(self.options, schema, overwrite)


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
