"""Issue 28: a write of ours with Hudi's metadata table kept, killed by SIGKILL between the two
tables, on a table Java 0.15 created (with its metadata table): at "after-metadata-deltacommit"
(the metadata deltacommit complete, the data instant not) and at "during-metadata-deltacommit"
(the data files and the metadata log file written, the metadata deltacommit not complete).

Then: Java reads the table through its metadata table without the crashed write; the next writer,
Java or we, rolls it back, leaves no completed metadata deltacommit of it and does not initialise
the metadata table again; Java's metadata-table validator passes, and Java, hudi-rs and our reader
agree with the model; then the other writer writes, and all of that holds again.

The killed write runs in its own Python process (the engine's hoodie_sink.write, the path of
begin, write_task and commit), its metadata sync wrapped by tests/support/metadata_kill.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.table.format.metadata_table import metadata_storage
from hoodie_sink.table.format.timeline.instant import COMPLETED
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.storage import Storage
from tests.interop.compare import assert_readers_agree
from tests.interop.conftest import ZONES
from tests.interop.test_crash_recovery import FAST_BEAT, data_files_of
from tests.interop.test_metadata_table_interop import READ_THROUGH_METADATA, init_instants
from tests.interop.test_we_write_into_java_tables import ARROW, BASE, Rounds
from tests.support import metadata_kill
from tests.support.worker_site import REPO
from tests.unit.metadata.test_metadata_table import assert_listing_matches_storage

pytestmark = [pytest.mark.compat, pytest.mark.interop]

JAVA_ZONE = ZONES["0.15.0"]  # java_local's: the table's timeline zone is LOCAL, writers share one
METADATA = {"hoodie.metadata.enable": "true", "hoodie.metadata.compact.max.delta.commits": "3"}

KILLED_WRITER = r"""
import json, os, sys, time
import pyarrow.parquet as pq
import hoodie_sink
from tests.support import metadata_kill

point, marks, path, src, options = sys.argv[1:]


def pause(at):
    if at == point:
        with open(os.path.join(marks, at), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(600)


metadata_kill.install(pause)
hoodie_sink.write(pq.read_table(src), path, json.loads(options))
print("the write was not killed")
"""


@pytest.fixture
def java_zone(monkeypatch):
    """This process's writes in java_local's zone (as tests/interop/conftest.py's writers_zone, without Spark)."""
    monkeypatch.setenv("TZ", JAVA_ZONE)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def kill_our_write(tmp_path: Path, path: Path, batch: list[dict], options: dict, point: str) -> str:
    """Our write of `batch` in a Python process of its own, killed (SIGKILL) at `point`; the data
    instant it was writing."""
    marks, src = tmp_path / "marks", tmp_path / "crash.parquet"
    marks.mkdir()
    pq.write_table(pa.Table.from_pylist(batch, schema=ARROW), src)
    env = {
        **os.environ,
        "TZ": JAVA_ZONE,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    args = [point, str(marks), str(path), str(src), json.dumps(options)]
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, *args], env=env, cwd=REPO,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not (marks / point).exists():
        if proc.poll() is not None:
            raise AssertionError("the write ended before its kill point:\n" + proc.stdout.read()[-3000:])
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError("kill point not reached in 120 s")
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    pending = Timeline.load(Storage(str(path))).pending()
    assert len(pending) == 1, pending
    return pending[0].timestamp


def metadata_states(path: Path, instant: str) -> list[str]:
    return [i.state for i in Timeline.load(metadata_storage(Storage(str(path)))).states_of(instant)]


def assert_all_agree(java, path: Path, model: Rounds, init: list[str], crashed: str) -> None:
    """Nothing of the crashed write is left, the metadata table was continued, not rebuilt, Java's
    validator takes it, and Java (through it), hudi-rs and our reader read the model."""
    assert not data_files_of(path, crashed)
    assert not list((path / ".hoodie").glob(f"{crashed}.*")), "the crashed instant is rolled back"
    mdt = Timeline.load(metadata_storage(Storage(str(path))))
    assert not [s for s in mdt.states_of(crashed) if s.is_completed], "its metadata deltacommit is gone"
    assert init_instants(path) == init, "the metadata table was initialised again"
    java.assert_metadata_valid(path)
    assert_listing_matches_storage(path)
    assert_readers_agree(java.read(path, **READ_THROUGH_METADATA), path, model.rows())


CASES = [  # each point, each writer next; the table types in turn
    (metadata_kill.AFTER, "java", "COPY_ON_WRITE"),
    (metadata_kill.AFTER, "ours", "MERGE_ON_READ"),
    (metadata_kill.DURING, "java", "MERGE_ON_READ"),
    (metadata_kill.DURING, "ours", "COPY_ON_WRITE"),
]


@pytest.mark.parametrize(
    "point,first,table_type", CASES, ids=[f"{p}-then-{w}-{t[:3].lower()}" for p, w, t in CASES]
)
def test_our_write_killed_between_the_two_tables(java_local, java_zone, tmp_path, point, first, table_type):
    java = java_local
    path = tmp_path / "t"
    model = Rounds(seed=28, path=path)
    javas = {**BASE, **METADATA, "hoodie.datasource.write.table.type": table_type}
    ours = {**javas, **FAST_BEAT, "hoodie.datasource.write.operation": "upsert"}

    def java_writes() -> None:
        batch = pa.Table.from_pylist(model.upserts(n_new=10, n_updates=30, duplicates=0), schema=ARROW)
        java.write(path, batch, {**javas, "hoodie.datasource.write.operation": "upsert"})

    def we_write() -> None:
        hoodie_sink.write(pa.Table.from_pylist(model.upserts(n_new=10, n_updates=30, duplicates=0), schema=ARROW),
                          str(path), ours)  # fmt: skip

    java.write(path, pa.Table.from_pylist(model.upserts(n_new=200, n_updates=0, duplicates=0), schema=ARROW),
               {**javas, "hoodie.datasource.write.operation": "insert"})  # fmt: skip
    we_write()  # ours continues Java's metadata table
    we_write()
    init = init_instants(path)
    assert init, "Java built the metadata table"

    crashed_rounds = Rounds(seed=29, path=path)
    crashed_rounds.by_key, crashed_rounds.next_id = dict(model.by_key), model.next_id
    batch = crashed_rounds.upserts(n_new=10, n_updates=50, duplicates=0)
    crashed = kill_our_write(tmp_path, path, batch, ours, point)
    assert data_files_of(path, crashed) or table_type == "MERGE_ON_READ", "the crashed write left files"
    states = metadata_states(path, crashed)
    assert (COMPLETED in states) == (point == metadata_kill.AFTER), states
    # before anyone rolls it back: Java reads through its metadata table without the crashed write
    java.assert_metadata_valid(path)
    assert_readers_agree(java.read(path, **READ_THROUGH_METADATA), path, model.rows())
    time.sleep(3.5)  # the killed write's heartbeat expires

    for writer in (java_writes, we_write) if first == "java" else (we_write, java_writes):
        writer()
        assert_all_agree(java, path, model, init, crashed)
