"""Apache Hudi (Java) reads the merge-on-read tables the sink writes (issue 12): snapshot and
read-optimized, with log files of upserts and deletes, after compaction, with writes during a pending
compaction; then Java upserts into them (its log files on ours) and hudi-rs and our reader read Java's."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.snapshot import read_snapshot
from hoodie_sink.table.services import compaction
from hoodie_sink.table.storage import Storage
from tests.interop.compare import assert_readers_agree, assert_timeline_agrees
from tests.interop.test_java_reads_ours import (
    ARROW,
    BASE,
    INDEX_IDS,
    INDEXES,
    Model,
    java_options,
    ours,
    rows,
)
from tests.support.tables import data_rows, sort_rows

pytestmark = [pytest.mark.compat, pytest.mark.interop]

MOR = {
    **BASE,
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.parquet.small.file.limit": "0",  # updates go to log files from the second write on
    "hoodie.compact.inline.max.delta.commits": "4",
}


def java_agrees(java_hudi, path, model: Model) -> None:
    assert_readers_agree(java_hudi.read(path), path, model.rows())
    ro_java = java_hudi.read(path, **{"hoodie.datasource.query.type": "read_optimized"})
    ro_ours = read_snapshot(str(path), read_optimized=True)
    key = lambda r: r["id"]  # noqa: E731
    assert sorted(data_rows(ro_java), key=key) == sorted(data_rows(ro_ours), key=key)


@pytest.mark.parametrize("index", INDEXES, ids=INDEX_IDS)
def test_java_reads_our_mor_tables(spark, any_java_hudi, tmp_path, index):
    java_hudi = any_java_hudi
    path, model, opts = tmp_path / "t", Model(), {**MOR, **index}
    first = rows(range(300), ts=1)
    bucket = index["hoodie.index.type"] == "BUCKET"  # (bulk_insert writes outside the hash buckets)
    ours(
        spark,
        path,
        first,
        {**opts, "hoodie.datasource.write.operation": "upsert" if bucket else "bulk_insert"},
    )
    model.upsert(first)
    for ts in (2, 3):  # updates (logs) and inserts (new file groups)
        batch = rows(range(ts, 300, 4), ts) + rows(range(300 + ts * 10, 305 + ts * 10), ts)
        ours(spark, path, batch, opts)
        model.upsert(batch)
        java_agrees(java_hudi, path, model)
    ours(spark, path, rows(range(0, 40), ts=4), {**opts, "hoodie.datasource.write.operation": "delete"})
    model.delete(range(0, 40))
    java_agrees(java_hudi, path, model)  # 4 deltacommits: compacted inline after this one
    # (under a global index a delete rewrites its file groups: nothing left to compact then)
    assert (
        list((path / ".hoodie").glob("*.compaction.requested"))
        or index["hoodie.index.type"] == "GLOBAL_BLOOM"
    )

    # a pending compaction with writes into the new slices; Java reads both states
    manual = {**opts, "hoodie.compact.inline": "false"}
    batch = rows(range(100, 200, 3), ts=5)
    ours(spark, path, batch, manual)
    model.upsert(batch)
    cfg = WriteConfig.from_options(manual, path=str(path))
    c = compaction.schedule(Storage(str(path)), cfg, force=True)
    batch = rows(range(150, 250, 2), ts=6)
    ours(spark, path, batch, manual)
    model.upsert(batch)
    theirs_snapshot = java_hudi.read(path)
    assert sort_rows(data_rows(theirs_snapshot)) == sort_rows(model.rows())
    compaction.execute(Storage(str(path)), c, cfg)
    java_agrees(java_hudi, path, model)
    assert_timeline_agrees(java_hudi, path)

    # Java upserts into our table with the same settings: its logs on our slices, read by all
    theirs = rows(range(240, 260), ts=9)
    keep_v6 = {"hoodie.write.auto.upgrade": "false", "hoodie.write.table.version": "6"}
    java_hudi.write(path, pa.Table.from_pylist(theirs, schema=ARROW), java_options(opts, **keep_v6))
    model.upsert(theirs)
    java_agrees(java_hudi, path, model)
    # and we write on after Java
    batch = rows(range(250, 270), ts=10)
    hoodie_sink.write(pa.Table.from_pylist(batch, schema=ARROW), str(path), opts)
    model.upsert(batch)
    java_agrees(java_hudi, path, model)
    if not bucket:  # clustering merges the logs into large sorted files (a Spark job)
        sort = {"hoodie.clustering.plan.strategy.sort.columns": "fare"}
        assert hoodie_sink.cluster(str(path), {**opts, **sort}, spark=spark) is not None
        java_agrees(java_hudi, path, model)
