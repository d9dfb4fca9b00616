"""Kill -9 of the driver at three points of a micro-batch, then a restart from the checkpoint.

(a) while tasks write, (b) after the tasks finished and before the commit file exists,
(c) right after the commit file exists but before Spark recorded the batch.  After the restart
the table holds every input record exactly once and no uncommitted file is visible.
With Hudi's metadata table kept (issue 28), two more points inside the commit, between the two
tables (tests/support/metadata_kill.py): the metadata deltacommit complete and the data instant
not, and the metadata log file written and its deltacommit not complete.

The crash points are patched into the stream writer in every Python process of the driver
(its commit runs in a Python worker) by a test-only `sitecustomize.py`: at its point, the patch
writes a marker file with its pid and sleeps until the test kills the driver's process group.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hoodie_sink.table.format.metadata_table import metadata_storage
from hoodie_sink.table.format.timeline.instant import COMMIT, DELTA_COMMIT
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.services.validation import validate_table
from hoodie_sink.table.storage import Storage
from tests.spark.stream_drivers import DRIVERS, wait_out_the_killed_heartbeat
from tests.spark.test_metadata_table_sink import assert_metadata_lists_storage
from tests.spark.test_streaming import cdc_files, model_of
from tests.support import metadata_kill
from tests.support.tables import all_write_stats, assert_table_matches, hudi_rs_read, streaming_batch_ids
from tests.support.worker_site import REPO, driver_env

pytestmark = pytest.mark.slow

WRITE_PENDING = re.compile(r"\d+\.(inflight|commit\.requested|deltacommit\.(requested|inflight))")
KILL_AT = "HOODIE_TEST_KILL_AT"  # "<point>:<marker dir>", read by the test's sitecustomize only

SITECUSTOMIZE = r'''
import os
SPEC = os.environ.get("HOODIE_TEST_KILL_AT")
if SPEC:
    import time
    from hoodie_sink.datasource import stream_writer
    from hoodie_sink.table.write import write_path

    POINT, MARKS, *SKIP = SPEC.split(":")
    SKIP = int(SKIP[0]) if SKIP else 0  # pass the point this many times first (a later micro-batch)

    def pause(point):
        """Announce the crash point and wait to be killed."""
        if point != POINT:
            return
        os.makedirs(MARKS, exist_ok=True)
        with open(os.path.join(MARKS, "passes"), "a") as f:  # one byte per pass, any process
            f.write(".")
        if os.path.getsize(os.path.join(MARKS, "passes")) <= SKIP:
            return
        with open(os.path.join(MARKS, point), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(600)

    Writer = stream_writer.HoodieStreamWriter
    _write, _commit, _complete = Writer.write, Writer.commit, write_path.complete

    def write(self, iterator):  # (a) a task wrote its files, its message is not sent yet
        message = _write(self, iterator)
        if message.result is not None:
            pause("during-write")
        return message

    def complete(*args, **kwargs):  # (b) the commit checked its checkpoint, publishes next
        pause("before-commit")
        return _complete(*args, **kwargs)

    def commit(self, messages, batchId):  # (c) the commit file exists, Spark has not recorded it
        _commit(self, messages, batchId)
        pause("after-commit")

    Writer.write, Writer.commit, write_path.complete = write, commit, complete

    # the batch writer, as hoodie_sink.spark.micro_batches writes each routed micro-batch
    from hoodie_sink.datasource import batch_writer

    Batch = batch_writer.HoodieBatchWriter
    _bwrite, _bcommit = Batch.write, Batch.commit

    def bwrite(self, iterator):
        message = _bwrite(self, iterator)
        if message.result.write_stats:
            pause("during-write")
        return message

    def bcommit(self, messages):
        _bcommit(self, messages)
        pause("after-commit")

    Batch.write, Batch.commit = bwrite, bcommit

    if POINT.endswith("metadata-deltacommit"):  # inside the metadata table's sync (issue 28)
        from tests.support import metadata_kill

        metadata_kill.install(pause)
'''


def run_driver(driver: str, args: list[str], env: dict, kill_marker: Path | None) -> str:
    """Run `driver` of tests/spark/stream_drivers.py in a driver subprocess; with `kill_marker`,
    kill it (SIGKILL, its whole process group) once its crash point wrote that marker."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.spark.stream_drivers", driver, *args], env=env,
                            cwd=REPO, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    if kill_marker is None:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-3000:]
        return out
    deadline = time.time() + 300
    while not kill_marker.exists():
        if proc.poll() is not None:
            raise AssertionError(
                "driver ended before reaching the kill point:\n" + proc.stdout.read()[-3000:]
            )
        if time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError("kill point not reached")
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
    proc.wait(timeout=60)
    return ""


KILLS = [("COPY_ON_WRITE", p, 0) for p in ("during-write", "before-commit", "after-commit")]
# merge-on-read: killed in the third micro-batch, which appends logs to the first two's file groups
KILLS += [("MERGE_ON_READ", "during-write", 2), ("MERGE_ON_READ", "before-commit", 2)]


@pytest.mark.parametrize("table_type,point,skip", KILLS, ids=[f"{t[:3].lower()}-{p}" for t, p, _ in KILLS])
def test_kill_and_restart_is_exactly_once(spark, tmp_path, table_type, point, skip):
    _kill_and_restart(spark, tmp_path, table_type, point, skip)


S3_KILLS = [KILLS[1], KILLS[4]]  # COW and MOR, each killed between its write and its commit


@pytest.mark.parametrize("table_storage", ["s3"], indirect=True)  # the table on the S3 server
@pytest.mark.parametrize(
    "table_type,point,skip", S3_KILLS, ids=[f"{t[:3].lower()}-{p}" for t, p, _ in S3_KILLS]
)
def test_kill_and_restart_on_s3_is_exactly_once(spark, tmp_path, table_storage, table_type, point, skip):
    _kill_and_restart(spark, tmp_path, table_type, point, skip)


ROUTED_KILLS = [("COPY_ON_WRITE", "after-commit", 1, 11), ("MERGE_ON_READ", "during-write", 2, 12)]


@pytest.mark.parametrize(
    "table_type,point,skip,seed", ROUTED_KILLS, ids=[f"{t[:3].lower()}-{p}" for t, p, _, _ in ROUTED_KILLS]
)
def test_a_routed_stream_killed_and_restarted_is_exactly_once(spark, tmp_path, table_type, point, skip, seed):
    """Issue 27: the CDC stream routed per micro-batch (foreachBatch + hoodie_sink.spark.micro_batches),
    killed in a later micro-batch, after its commit (a replay must be skipped) or while its tasks
    write (the restart rolls it back and writes it again), against the model."""
    _kill_and_restart(spark, tmp_path, table_type, point, skip, seed=seed, driver="cdc_routed_into_hoodie")
    # each micro-batch committed once: a replay of the one killed after its commit wrote nothing
    assert streaming_batch_ids(tmp_path / "t") == [0, 1, 2, 3]


# killed in the second (COW) or third (MOR: its logs) micro-batch, after the metadata table's first
# compaction was due (every 3 of its deltacommits: its initialisation's and the first batches')
METADATA_KILLS = [
    ("COPY_ON_WRITE", metadata_kill.AFTER, 1),
    ("MERGE_ON_READ", metadata_kill.AFTER, 2),
    ("MERGE_ON_READ", metadata_kill.DURING, 2),
]


@pytest.mark.parametrize(
    "table_type,point,skip", METADATA_KILLS, ids=[f"{t[:3].lower()}-{p}" for t, p, _ in METADATA_KILLS]
)
def test_kill_between_the_metadata_table_and_the_data_table(spark, tmp_path, table_type, point, skip):
    """Issue 28: a micro-batch killed between its metadata deltacommit and its data commit.  Before
    the restart the metadata table lists only committed files (the deltacommit ahead of its data
    instant is not trusted); after it, the table equals the model (ours and hudi-rs), the metadata
    table lists what storage holds and was compacted, and no deltacommit of the rolled-back data
    instant is left in it."""
    path = tmp_path / "t"
    crashed = _kill_and_restart(
        spark, tmp_path, table_type, point, skip, driver="cdc_into_hoodie_with_metadata", committed=skip
    )
    assert_metadata_lists_storage(path)
    storage = Storage(str(path))
    data, mdt = Timeline.load(storage), Timeline.load(metadata_storage(storage))
    completed_data = {i.timestamp for i in data.instants if i.is_completed}  # rollbacks too
    for inst in mdt.instants:  # nothing of the crashed instant, in any state
        assert inst.timestamp not in crashed, f"metadata {inst} of the rolled-back data instant is left"
    for inst in mdt.completed((DELTA_COMMIT,)):  # each a data instant's, or an initialisation's
        t = inst.timestamp  # (`<latest data instant>010`, or the empty table's `<14 zeros>010`)
        assert t in completed_data or len(t) == 20 or t == "0" * 14 + "010", inst
    assert mdt.completed((COMMIT,)), "the metadata table was compacted (every 3 deltacommits)"


def _kill_and_restart(spark, tmp_path: Path, table_type: str, point: str, skip: int, seed: int = 5,
                      driver: str = "cdc_into_hoodie", committed: int | None = None) -> set[str]:  # fmt: skip
    """Kill the driver at `point`, restart, check the table; the data instants the kill left pending.
    `committed`: how many micro-batches the kill leaves committed, checked before the restart
    (through the metadata table, if kept: ours and hudi-rs read the table as of those batches)."""
    src, path, ckpt = tmp_path / "src", tmp_path / "t", tmp_path / "ckpt"
    batches = cdc_files(src, 4, seed=seed, rows=(100, 200))
    marks = tmp_path / "marks"
    env = driver_env(tmp_path / "site", SITECUSTOMIZE)
    args = [str(src), str(path), str(ckpt), table_type]
    run_driver(driver, args, {**env, KILL_AT: f"{point}:{marks}:{skip}"}, marks / point)
    # the pause ran in a Python worker of the driver, not in the test process
    assert int((marks / point).read_text()) != os.getpid()
    # the crashed batch's data is not visible (a), (b); or already complete (c)
    visible = hudi_rs_read(path).num_rows if (path / ".hoodie").exists() else 0
    assert visible <= len(model_of(batches))
    hoodie = path / ".hoodie"
    # the data instants of writes the kill left pending (a service's, as a compaction's, are not)
    begun = {p.name.split(".")[0] for p in hoodie.glob("*") if WRITE_PENDING.fullmatch(p.name)}
    crashed = begun - {
        p.name.split(".")[0] for p in [*hoodie.glob("*.commit"), *hoodie.glob("*.deltacommit")]
    }
    if committed is not None:
        assert crashed, "the kill left the micro-batch's data instant pending"
        assert_table_matches(path, model_of(batches[:committed]))
        assert [v for v in validate_table(Storage(str(path))) if v.check == "metadata-table"] == []
    # the restart: the same query from the checkpoint, in this session
    wait_out_the_killed_heartbeat()
    DRIVERS[driver](spark, *args)
    assert_table_matches(path, model_of(batches))
    # nothing left pending, no file of a rolled-back instant
    pending = [p.name for p in hoodie.iterdir() if p.name.endswith((".inflight", ".requested"))]
    completed = {p.name.split(".")[0] for p in [*hoodie.glob("*.commit"), *hoodie.glob("*.deltacommit")]}
    rollbacks = {p.name.split(".")[0] for p in hoodie.glob("*.rollback")}  # the crashed batch's, as Java's
    assert all(p.split(".")[0] in completed | rollbacks for p in pending)
    data = [p for p in path.rglob("*.parquet") if ".hoodie" not in p.parts]
    assert all(p.stem.rsplit("_", 1)[1] in completed for p in data)
    # every log file on storage was written by a completed deltacommit (the crashed one's are gone)
    reported = {s["path"] for s in all_write_stats(path)}
    logs = [p for p in path.rglob(".*.log.*") if ".hoodie" not in p.parts]
    assert all(str(p.relative_to(path)) in reported for p in logs)
    if table_type == "MERGE_ON_READ":
        assert logs and list(hoodie.glob("*.compaction.requested"))
    return crashed
