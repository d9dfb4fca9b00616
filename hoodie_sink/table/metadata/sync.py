"""The hooks that keep the metadata table in step with the data timeline (I/O, driver side).

Every action that changes the file listing calls one of these after its data files are written
and before its data instant completes (docs/hudi/metadata-table-protocol.md#write-protocol): the write
path's commit, clustering, compaction, clean and rollback.  A table whose properties list no
metadata table is left alone; one that lists it is never left behind: these raise rather than
skip, and the caller's data instant then stays pending (rolled back by the next writer).
Every write of the metadata table holds its lock (`writer.metadata_lock`): two writers, or a
writer and a service, would otherwise pick the same log version, or a compaction would miss a
log file written beside it.
"""

from __future__ import annotations

from collections.abc import Iterable

from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.format.metadata_keys import BLOOM_FILTERS, COLUMN_STATS, RECORD_INDEX
from hoodie_sink.table.format.metadata_table import has_files_partition, listed_partitions, metadata_storage
from hoodie_sink.table.format.record_index import RecordIndexChange
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.metadata import bloom_filter_change, column_stats_change, files_change
from hoodie_sink.table.metadata.data_properties import read_data_properties
from hoodie_sink.table.metadata.writer import metadata_lock, roll_back_metadata_instant, write_deltacommit
from hoodie_sink.table.storage import Storage


def is_kept(storage: Storage) -> bool:
    """Whether the data table has a metadata table that readers trust (its `files` partition is
    listed in hoodie.properties)."""
    return has_files_partition(read_data_properties(storage))


def keeps_record_index(storage: Storage) -> bool:
    """Whether the data table's properties list the metadata table's `record_index` partition."""
    props = read_data_properties(storage)
    return has_files_partition(props) and RECORD_INDEX in listed_partitions(props)


def kept_partitions(storage: Storage) -> list[str]:
    """The metadata partitions the data table's properties list (none without `files`)."""
    props = read_data_properties(storage)
    return listed_partitions(props) if has_files_partition(props) else []


def on_commit(
    storage: Storage, instant: str, md: CommitMetadata, record_index: RecordIndexChange | None = None
) -> None:
    """A commit, deltacommit, replacecommit (clustering, insert_overwrite) or compaction commit.
    `record_index`: its change to the record index, when the table keeps one (the caller reads it
    from the files it wrote: read/record_index_keys.commit_change; a compaction changes nothing).
    The column statistics and bloom filters come with the write stats
    (metadata/column_stats_change.py, bloom_filter_change.py)."""
    kept = kept_partitions(storage)
    if record_index is None and RECORD_INDEX in kept and not md.compacted:
        raise ValueError(f"commit {instant} of {storage.base_uri}: the record index's change is missing")
    if kept:
        hashed = {}
        try:
            if COLUMN_STATS in kept:
                hashed[COLUMN_STATS] = column_stats_change.of_commit(storage, md)
        except ValueError as e:
            raise ValueError(f"commit {instant} of {storage.base_uri}: {e}") from e
        if BLOOM_FILTERS in kept:
            hashed[BLOOM_FILTERS] = bloom_filter_change.of_commit(storage, instant, md)
        with metadata_lock(storage):
            write_deltacommit(storage, instant, files_change.of_commit(md), record_index, hashed)


def on_clean(storage: Storage, instant: str, deleted: Iterable[str]) -> None:
    """A clean: the files it deleted (relative paths) leave the listing, and their column
    statistics and bloom filters are tombstoned."""
    kept = kept_partitions(storage)
    if kept:
        deleted = list(deleted)
        hashed = {}
        if COLUMN_STATS in kept:
            hashed[COLUMN_STATS] = column_stats_change.of_clean(storage, deleted)
        if BLOOM_FILTERS in kept:
            hashed[BLOOM_FILTERS] = bloom_filter_change.of_clean(instant, deleted)
        with metadata_lock(storage):
            write_deltacommit(storage, instant, files_change.of_deleted_files(deleted), None, hashed)


def on_rollback(storage: Storage, instant: str, rolled_back: str) -> None:
    """A rollback of the failed write `rolled_back`: its metadata deltacommit, if it got that far,
    is removed first (its files are being deleted and must never be listed), then the rollback
    gets its own deltacommit.  Our rollbacks delete files and append nothing, so that deltacommit
    adds no file; a failed write's files never reached the listing, so none is removed either."""
    if not is_kept(storage):
        return
    with metadata_lock(storage):
        mdt = metadata_storage(storage)
        timeline = Timeline.load(mdt)
        if timeline.states_of(rolled_back):
            roll_back_metadata_instant(mdt, timeline, rolled_back)
        write_deltacommit(storage, instant, files_change.FilesChange())
