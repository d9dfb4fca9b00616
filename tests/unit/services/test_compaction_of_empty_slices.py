"""Compaction of a merge-on-read file slice whose records were all deleted (found by the model test,
tests/unit/test_random_sequences.py, switch ro_after_emptying_compaction): Java writes an empty base
file at the compaction instant (docs/hudi/compaction-of-empty-slices.md), so the slice is settled:
read_optimized (ours and hudi-rs) shows no deleted row, and no later compaction plans the slice
again.  The cleaner then removes the old slice, and the file group takes new writes."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

import hoodie_sink
from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.format.timeline.instant import COMMIT, COMPACTION
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.index.key_index import read_footer
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.snapshot import read_snapshot
from hoodie_sink.table.services import compaction
from hoodie_sink.table.storage import Storage
from tests.support.tables import read_both

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.index.type": "BLOOM",
}


def write(path: str, ids, ts: int, operation: str = "upsert", **options: str) -> None:
    rows = [{"id": i, "part": "a", "ts": ts, "v": f"v{ts}-{i}"} for i in ids]
    hoodie_sink.write(
        pa.Table.from_pylist(rows), path, {**OPTS, **options, "hoodie.datasource.write.operation": operation}
    )


def hudi_rs_read_optimized(path: str) -> pa.Table:
    from hudi import HudiTableBuilder

    table = (
        HudiTableBuilder.from_base_uri(path)
        .with_option("hoodie.read.use.read_optimized.mode", "true")
        .build()
    )
    batches = table.read()
    return pa.Table.from_batches(batches) if batches else pa.table({})


def compaction_instants(path: str) -> list[str]:
    return sorted({i.timestamp for i in Timeline.load(Storage(path)).instants if i.action == COMPACTION})


def test_compaction_of_a_slice_whose_records_were_all_deleted(tmp_path):
    path = str(tmp_path / "t")
    write(path, [1], 1)
    write(path, [1], 2, "delete")
    storage = Storage(path)
    (old,) = FileSystemView.load(storage).file_groups()
    (result,) = compaction.run(WriteConfig.from_options(OPTS, path=path))

    theirs, ours = read_both(path)  # the snapshot: hudi-rs and ours agree
    assert ours.num_rows == 0 and theirs.num_rows == 0
    assert read_snapshot(path, read_optimized=True).num_rows == 0
    assert hudi_rs_read_optimized(path).num_rows == 0

    # the slice is settled by an empty base file of the compaction instant, with the table's
    # schema and Java's footer (bloom filter, no key range: there are no keys)
    (fg,) = FileSystemView.load(storage).file_groups()
    base = fg.latest_slice.base_file
    assert base is not None and base.instant == result.instant and not fg.latest_slice.log_files
    with storage.open_input_file(base.path) as f:
        pf = pq.ParquetFile(f)
        assert pf.metadata.num_rows == 0
        assert pf.schema_arrow.names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                             "_hoodie_partition_path", "_hoodie_file_name"]  # fmt: skip
        assert {"id", "part", "ts", "v"} <= set(pf.schema_arrow.names)
    footer = read_footer(storage, base.path)
    assert footer.bloom() is not None and (footer.min_key, footer.max_key) == (None, None)

    # the write stat: no row written, the deleted record counted (as Java's merge handle counts it)
    (commit,) = [i for i in Timeline.load(storage).completed((COMMIT,)) if i.timestamp == result.instant]
    (stat,) = CommitMetadata.from_json(TimelineStore(storage).read_json(commit)).write_stats
    assert (stat.num_writes, stat.num_inserts, stat.num_update_writes, stat.num_deletes) == (0, 0, 0, 1)
    assert stat.path == base.path and stat.prev_commit == old.latest_slice.base_instant
    assert result.file_groups == 1 and result.rows == 0

    # nothing left to compact: a second run plans nothing
    assert compaction.run(WriteConfig.from_options(OPTS, path=path)) == []
    assert compaction_instants(path) == [result.instant]


def test_the_emptied_file_group_takes_new_writes_and_its_old_slice_is_cleaned(tmp_path):
    """The empty base file is an ordinary latest slice: a later insert lands in the file group (a
    small file), and the cleaner removes the slice whose base file still holds the deleted rows."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.cleaner.commits.retained": "1"}
    write(path, [1, 2], 1, **opts)
    storage = Storage(path)
    (old,) = FileSystemView.load(storage).file_groups()
    old_base = old.latest_slice.base_file.path
    write(path, [1, 2], 2, "delete", **opts)
    (result,) = compaction.run(WriteConfig.from_options(opts, path=path))
    write(path, [3], 3, **opts)
    write(path, [3], 4, **opts)  # its clean removes what the two after the compaction superseded
    assert not storage.exists(old_base)
    (fg,) = FileSystemView.load(storage).file_groups()
    assert fg.file_id == old.file_id and fg.latest_slice.base_instant > result.instant
    theirs, ours = read_both(path)
    assert ours.column("id").to_pylist() == [3] and ours.column("ts").to_pylist() == [4]
    assert read_snapshot(path, read_optimized=True).column("id").to_pylist() == [3]
    assert hudi_rs_read_optimized(path).column("id").to_pylist() == [3]


def test_other_rewrites_of_an_emptied_file_group_settle_it(tmp_path):
    """What the other services that rewrite a slice do when every row is deleted (passing before
    the compaction fix; kept as the check the doc cites): a copy-on-write merge writes an empty base
    file version; clustering writes no file and replaces the emptied file groups."""
    cow = str(tmp_path / "cow")
    write(cow, [1], 1, **{"hoodie.datasource.write.table.type": "COPY_ON_WRITE"})
    write(cow, [1], 2, "delete", **{"hoodie.datasource.write.table.type": "COPY_ON_WRITE"})
    storage = Storage(cow)
    (fg,) = FileSystemView.load(storage).file_groups()
    with storage.open_input_file(fg.latest_slice.base_file.path) as f:
        assert pq.ParquetFile(f).metadata.num_rows == 0
    assert read_both(cow)[1].num_rows == 0 and read_snapshot(cow, read_optimized=True).num_rows == 0

    mor = str(tmp_path / "mor")
    write(mor, [1, 2], 1, "bulk_insert")
    write(mor, [3], 1, "bulk_insert")  # a second file group
    write(mor, [1, 2, 3], 2, "delete")  # every row of both, in logs
    clustering = {"hoodie.clustering.plan.strategy.small.file.limit": str(10 << 20)}
    result = hoodie_sink.cluster(mor, {**OPTS, **clustering})
    assert result is not None and result.input_files == 2 and result.output_files == 0
    assert FileSystemView.load(Storage(mor)).file_groups() == []  # both replaced
    assert read_both(mor)[1].num_rows == 0 and read_snapshot(mor, read_optimized=True).num_rows == 0
    assert hudi_rs_read_optimized(mor).num_rows == 0
