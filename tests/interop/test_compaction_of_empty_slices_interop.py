"""Compaction of a merge-on-read slice whose records were all deleted (docs/hudi/compaction-of-empty-
slices.md): Java 0.15.0 compacts the same history into an empty base file at the compaction
instant, with the same write stat and footer keys as ours; Java reads the table we compacted
(snapshot and read_optimized) and writes on into its emptied file group."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.format.timeline.instant import COMMIT
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.snapshot import read_snapshot
from hoodie_sink.table.services import compaction
from hoodie_sink.table.storage import Storage
from tests.interop.compare import assert_readers_agree
from tests.interop.test_java_reads_ours import ARROW, BASE, Model, java_options, rows
from tests.support.tables import data_rows, sort_rows

pytestmark = [pytest.mark.compat, pytest.mark.interop]

MOR = {**BASE, "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.index.type": "BLOOM"}
EMPTIED, KEPT = [0, 3], [1]  # ids 0 and 3 share the partition sf (their file group), 1 is in nyc


def _history(write) -> Model:
    """Insert, then delete every record of the sf file group: the same two deltacommits for both."""
    model = Model()
    batch = rows(EMPTIED + KEPT, ts=1)
    write(batch, "upsert")
    model.upsert(batch)
    write(rows(EMPTIED, ts=2), "delete")
    model.delete(EMPTIED)
    return model


def _compacted(path) -> tuple[str, dict, pq.FileMetaData]:
    """The compaction's instant, its one write stat, and the footer of the base file it wrote."""
    storage = Storage(str(path))
    store = TimelineStore(storage)
    (commit,) = [
        i for i in Timeline.load(storage).completed((COMMIT,)) if store.read_json(i).get("compacted")
    ]
    (stat,) = [st for sts in store.read_json(commit)["partitionToWriteStats"].values() for st in sts]
    with storage.open_input_file(stat["path"]) as f:
        return commit.timestamp, stat, pq.ParquetFile(f).metadata


def _ro_rows(table: pa.Table) -> list[dict]:
    return sort_rows(data_rows(table))


def test_ours_compacts_an_emptied_slice_as_java_does_and_java_reads_it(java_hudi, tmp_path):
    # Java's own compaction of the history (inline, after the second deltacommit)
    java_path = tmp_path / "java"
    java_opts = java_options(
        MOR, **{"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2",
                "hoodie.table.timeline.timezone": "UTC"},
    )  # fmt: skip
    _history(lambda batch, op: java_hudi.write(java_path, pa.Table.from_pylist(batch, ARROW),
                                               {**java_opts, "hoodie.datasource.write.operation": op}))  # fmt: skip
    # ours: the same writes, then a compaction
    path = tmp_path / "ours"
    model = _history(lambda batch, op: hoodie_sink.write(pa.Table.from_pylist(batch, ARROW), str(path),
                                                         {**MOR, "hoodie.datasource.write.operation": op}))  # fmt: skip
    (result,) = compaction.run(WriteConfig.from_options(MOR, path=str(path)))

    j_instant, j_stat, j_footer = _compacted(java_path)
    o_instant, o_stat, o_footer = _compacted(path)
    assert o_instant == result.instant
    # an empty base file of the compaction instant, in the emptied file group, in both
    for instant, stat, footer in ((j_instant, j_stat, j_footer), (o_instant, o_stat, o_footer)):
        assert stat["path"].startswith("sf/") and stat["path"].endswith(f"_{instant}.parquet")
        assert footer.num_rows == 0
    counts = ("numWrites", "numInserts", "numUpdateWrites", "numDeletes", "totalLogFilesCompacted")
    assert {k: o_stat[k] for k in counts} == {k: j_stat[k] for k in counts} == {
        "numWrites": 0, "numInserts": 0, "numUpdateWrites": 0, "numDeletes": 2, "totalLogFilesCompacted": 1,
    }  # fmt: skip
    # the same footer: the Avro schema and a bloom filter, no key range (no keys)
    assert set(o_footer.metadata) == set(j_footer.metadata)
    assert o_footer.schema.to_arrow_schema().names == j_footer.schema.to_arrow_schema().names

    # Java reads the table we compacted: snapshot and read_optimized hold no deleted row
    assert_readers_agree(java_hudi.read(path), path, model.rows())
    ro_java = java_hudi.read(path, **{"hoodie.datasource.query.type": "read_optimized"})
    assert (
        _ro_rows(ro_java)
        == _ro_rows(read_snapshot(str(path), read_optimized=True))
        == sort_rows(model.rows())
    )
    slices = java_hudi.call("file_slices", path=str(path), partitions=["sf"])["sf"]
    assert [(s[1], s[2] is not None) for s in slices] == [(o_instant, True)]

    # and Java writes on into the emptied file group (its small file: our empty base file)
    batch = rows([0, 6], ts=3)
    java_hudi.write(path, pa.Table.from_pylist(batch, ARROW), java_options(MOR))
    model.upsert(batch)
    assert_readers_agree(java_hudi.read(path), path, model.rows())
    assert {
        fg.file_id
        for fg in FileSystemView.load(Storage(str(path))).file_groups()
        if fg.partition_path == "sf"
    } == {s[0] for s in slices}
