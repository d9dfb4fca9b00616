"""Issue 11: savepoints and restore as Apache Hudi writes them, in both directions.

Ours -> Java: Java lists and decodes our savepoint (the files it pins), reads the table after our
restore (rows equal the savepoint's, as hudi-rs and our reader) and decodes our restore metadata.
Java -> ours: we restore to a savepoint Java created (its `create_savepoint` procedure)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.services import compaction
from hoodie_sink.table.services import savepoint as sp
from hoodie_sink.table.storage import Storage
from tests.interop.compare import assert_readers_agree
from tests.interop.test_java_reads_ours import ARROW, BASE, Model, java_options, rows

pytestmark = [pytest.mark.compat, pytest.mark.interop]
SERVICES = {
    "hoodie.cleaner.commits.retained": "2",
    "hoodie.keep.min.commits": "3",
    "hoodie.keep.max.commits": "5",
}


def _ours(path, model: Model, ts_range) -> None:
    for ts in ts_range:
        batch = rows(range(ts % 7, ts % 7 + 8), ts=ts)
        hoodie_sink.write(pa.Table.from_pylist(batch, ARROW), str(path), {**BASE, **SERVICES})
        model.upsert(batch)


def test_java_reads_our_savepoint_and_our_restore(spark, java_hudi, tmp_path):
    path = tmp_path / "t"
    model = Model()
    _ours(path, model, range(1, 6))
    saved = model.rows()
    info = sp.create_savepoint(str(path), user="tester", comments="nightly")
    _ours(path, model, range(6, 20))  # cleaning and archival run; the savepoint's files stay
    [java_sp] = java_hudi.call("savepoints", path=str(path))
    assert (java_sp["timestamp"], java_sp["by"], java_sp["comments"]) == (info.instant, "tester", "nightly")
    assert sum(len(f) for f in java_sp["files"].values()) == info.files
    for part, names in java_sp["files"].items():
        assert all((path / part / n).exists() for n in names)
    undone = sp.restore(str(path), info.instant)
    assert_readers_agree(java_hudi.read(path), path, saved)
    [java_restore] = java_hudi.call("restores", path=str(path))
    assert java_restore["rolled_back"] == undone


def test_we_restore_to_a_savepoint_java_created(spark, java_hudi, tmp_path):
    path = tmp_path / "t"
    model = Model()
    _ours(path, model, range(1, 4))
    java_opts = java_options({**BASE, **SERVICES})
    batch = rows(range(20, 25), ts=50)
    java_hudi.write(path, pa.Table.from_pylist(batch, ARROW), java_opts)
    model.upsert(batch)
    saved = model.rows()
    instant = Timeline.load(Storage(str(path))).latest_completed().timestamp
    java_hudi.call("sql", statement=f"call create_savepoint(path => '{path}', commit_time => '{instant}')")
    assert [s.instant for s in sp.list_savepoints(str(path))] == [instant]
    _ours(path, model, range(60, 66))
    sp.restore(str(path), instant)
    assert_readers_agree(java_hudi.read(path), path, saved)


MOR = {
    **BASE,
    **SERVICES,
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.compact.inline": "false",
}


def test_java_reads_our_restored_mor_table_and_writes_on(spark, java_hudi, tmp_path):
    # issue 25 items 4-5: the restore deletes the logs later deltacommits added to the savepoint's
    # slices and the plan of a compaction scheduled after it; Java reads the savepoint's rows, and
    # its own upsert afterwards (which rolls back nothing) is read alike by all three readers
    path = tmp_path / "t"
    model = Model()
    first = rows(range(12), ts=1)
    hoodie_sink.write(pa.Table.from_pylist(first, ARROW), str(path), MOR)
    model.upsert(first)
    saved = model.rows()
    info = sp.create_savepoint(str(path))
    hoodie_sink.write(pa.Table.from_pylist(rows(range(0, 12, 2), ts=5), ARROW), str(path), MOR)
    assert compaction.schedule(Storage(str(path)), WriteConfig.from_options(MOR, path=str(path)), force=True)
    sp.restore(str(path), info.instant)
    assert_readers_agree(java_hudi.read(path), path, saved)
    batch = rows(range(1, 12, 3), ts=7)
    java_hudi.write(path, pa.Table.from_pylist(batch, ARROW), java_options(MOR))
    model = Model()
    model.upsert(first)
    model.upsert(batch)
    assert_readers_agree(java_hudi.read(path), path, model.rows())
