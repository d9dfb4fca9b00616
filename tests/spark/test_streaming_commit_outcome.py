"""Issue 8 item 9 through Spark: a commit whose outcome is unknown is never undone.

The commit runs in a Python worker process of its own, so the failing storage is loaded there
through a test-only `sitecustomize.py` on the PYTHONPATH of a separate driver (its own session):
it makes publishing a completed commit file raise after writing it, and in "unknown" mode also
makes reading it back fail.  Each injected failure is logged with the worker's pid, so the test
knows the patch was active in a worker and not only in the driver.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.test_streaming import cdc_files, commits, model_of
from tests.support.tables import assert_table_matches
from tests.support.worker_site import driver_env

pytestmark = pytest.mark.slow

SITECUSTOMIZE = r"""
import os
CTL = os.environ.get("HOODIE_TEST_FAULT_CTL")
if CTL:
    from hoodie_sink.table.storage import Storage
    from hoodie_sink.table.format.metadata_table import is_metadata_storage
    from hoodie_sink.table.format.timeline.instant import Instant

    _write, _create, _read, _failed = Storage.write_atomic, Storage.create_if_absent, Storage.read_bytes, set()

    def _mode():
        try:
            with open(CTL) as f:
                return f.read().strip()
        except OSError:
            return "off"

    def _completed(storage, rel):  # of the data table (its metadata table is a table of its own)
        inst = Instant.parse(rel.rsplit("/", 1)[-1])
        data_table = not is_metadata_storage(storage)
        return data_table and rel.startswith(".hoodie/") and inst is not None and inst.is_completed

    def _publisher(real):  # local disk publishes by rename, S3 by a conditional PUT
        def publish(self, rel, data=b""):
            mode = _mode()
            if mode == "off" or not _completed(self, rel):
                return real(self, rel, data)
            real(self, rel, data)
            if mode.endswith("-once"):
                with open(CTL, "w") as f:
                    f.write("off")
            if mode.startswith("unknown"):
                _failed.add(rel)
            with open(CTL + ".hits", "a") as f:
                f.write(f"{os.getpid()} {mode} {rel}\n")
            raise OSError(f"injected: connection reset after publishing {rel}")

        return publish

    def read_bytes(self, rel):
        if rel in _failed:
            raise OSError(f"injected: storage unavailable reading {rel}")
        return _read(self, rel)

    Storage.write_atomic, Storage.create_if_absent = _publisher(_write), _publisher(_create)
    Storage.read_bytes = read_bytes
"""

DRIVER = r"""
import os, sys
from pyspark.sql import SparkSession
ctl, batch_path, src, stream_path, ckpt = sys.argv[1:6]
print("DRIVER_PID", os.getpid(), flush=True)
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2").getOrCreate())
opts = {"hoodie.table.name": "b", "hoodie.datasource.write.recordkey.field": "id"}

def mode(m):
    with open(ctl, "w") as f:
        f.write(m)

def batch(lo, hi):
    spark.range(lo, hi).selectExpr("id", "cast(id as double) as v").write.format("hoodie").options(**opts) \
        .mode("append").save(batch_path)

mode("unknown")
try:
    batch(0, 20)
    print("BATCH_UNKNOWN no error", flush=True)
except Exception as e:
    print("BATCH_UNKNOWN", "HoodieCommitStateUnknown" in str(e), flush=True)
mode("landed")
batch(20, 30)
print("BATCH_LANDED ok", flush=True)

def stream():
    df = (spark.readStream.schema("id LONG, city STRING, ts LONG, fare DOUBLE, _hoodie_is_deleted BOOLEAN")
          .option("maxFilesPerTrigger", 1).parquet(src))
    q = (df.writeStream.format("hoodie").option("hoodie.datasource.write.recordkey.field", "id")
         .option("hoodie.datasource.write.partitionpath.field", "city")
         .option("hoodie.datasource.write.precombine.field", "ts")
         .option("checkpointLocation", ckpt).trigger(availableNow=True).start(stream_path))
    try:
        q.awaitTermination()
    finally:
        q.stop()

mode("unknown-once")  # the first micro-batch's commit lands, but nobody can tell: the query fails
try:
    stream()
    print("STREAM_UNKNOWN no error", flush=True)
except Exception as e:
    print("STREAM_UNKNOWN", "HoodieCommitStateUnknown" in str(e), flush=True)
mode("landed-once")  # restart: the replayed batch is skipped; the next commit raises after landing
stream()
print("STREAM_LANDED ok", flush=True)
"""


def test_commit_that_raised_after_landing_is_kept_by_batch_and_stream_writers(tmp_path):
    (tmp_path / "driver.py").write_text(DRIVER)
    ctl, bpath, src, spath, ckpt = (tmp_path / n for n in ("ctl", "b", "src", "s", "ckpt"))
    batches = cdc_files(src, 3, seed=3, rows=(30, 60))
    env = driver_env(tmp_path / "site", SITECUSTOMIZE, HOODIE_TEST_FAULT_CTL=str(ctl))
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py"), *map(str, (ctl, bpath, src, spath, ckpt))],
                          env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out[-2000:] + proc.stderr[-4000:]
    driver_pid = next(line.split()[1] for line in out.splitlines() if line.startswith("DRIVER_PID"))
    assert "BATCH_UNKNOWN True" in out and "BATCH_LANDED ok" in out, out
    assert "STREAM_UNKNOWN True" in out and "STREAM_LANDED ok" in out, out
    hits = [line.split() for line in Path(f"{ctl}.hits").read_text().splitlines()]
    assert [h[1] for h in hits] == ["unknown", "landed", "unknown-once", "landed-once"]
    assert all(h[0] != driver_pid for h in hits)  # injected in Spark's Python workers
    # batch: both commits stand with all their files (the unknown one was not aborted)
    assert_table_matches(bpath, [{"id": i, "v": float(i)} for i in range(30)])
    # item 12: the batch writer's commits record their report
    reports = [json.loads(json.loads(f.read_text())["extraMetadata"]["hoodie.sink.write.report"])
               for f in sorted((bpath / ".hoodie").glob("*.commit"))]  # fmt: skip
    assert [r["rowsIn"] for r in reports] == [20, 10] and all(r["durationMs"] > 0 for r in reports)
    # stream: the batch whose outcome was unknown had landed; its replay was skipped, no duplicate
    assert_table_matches(spath, model_of(batches))
    assert len(commits(spath)) == 3
    assert not [p for p in (spath / ".hoodie").iterdir() if p.name.endswith((".inflight", ".requested"))
                and p.name.split(".")[0] not in {c.timestamp for c in commits(spath)}]  # fmt: skip
