"""Building the metadata table's `files` partition from a storage listing (I/O, driver side).

As Java initialises it (HoodieBackedTableMetadataWriter.initializeFromFilesystem at
release-0.15.0; docs/hudi/metadata-table-protocol.md#initialisation):
- only when no data instant is pending: a pending write's files would be listed before it
  commits, or missed after; the write goes on without a metadata table and the next one builds it;
- at `<t0>010`, `<t0>` the latest completed data instant (`00000000000000` on an empty table), a
  time every reader accepts for a metadata deltacommit without a data instant;
- a stale `.hoodie/metadata` (one the properties do not list) is deleted first;
- the data table's properties list `files` last, so a crash anywhere before leaves a table that
  every reader lists from storage, and the next writer starts over.
Java writes the listing as an HFile base file; we write it as the first data block of the file
group's log (an HFile too), which every reader merges the same way, and leave base files to the
metadata table's compaction.
"""

from __future__ import annotations

import logging

from hoodie_sink.table.format.commit_metadata import CommitMetadata, inflight_workload_json
from hoodie_sink.table.format.file_group import PARTITION_METAFILE
from hoodie_sink.table.format.fs_view import list_storage_files
from hoodie_sink.table.format.metadata_keys import BLOOM_FILTERS, COLUMN_STATS, RECORD_INDEX
from hoodie_sink.table.format.metadata_layout import (
    DEFAULT_WRITE_TOKEN,
    init_instant,
    metadata_log_file_name,
    metadata_partition_metadata,
    metadata_table_properties,
    placeholder_log_bytes,
)
from hoodie_sink.table.format.metadata_schema import COMMIT_SCHEMA_JSON
from hoodie_sink.table.format.metadata_table import (
    FILES_PARTITION,
    METADATA_TABLE_DIR,
    listed_partitions,
    metadata_storage,
)
from hoodie_sink.table.format.properties import PROPERTIES_FILE, render_properties
from hoodie_sink.table.format.timeline.instant import DELTA_COMMIT
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.metadata.bloom_filter_init import BloomFiltersInit, initialize_bloom_filters
from hoodie_sink.table.metadata.cleaning import clean_if_due
from hoodie_sink.table.metadata.column_stats_init import ColumnStatsInit, initialize_column_stats
from hoodie_sink.table.metadata.compaction import DEFAULT_MAX_DELTA_COMMITS, compact_if_due
from hoodie_sink.table.metadata.data_properties import read_data_properties, set_listed_partitions
from hoodie_sink.table.metadata.files_change import FilesChange
from hoodie_sink.table.metadata.record_index_init import RecordIndexInit, initialize_record_index
from hoodie_sink.table.metadata.removal import remove_metadata_table
from hoodie_sink.table.metadata.writer import FILES_FILE_ID, append_block, metadata_lock
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
BULK_INSERT_PREPPED = "BULK_INSERT_PREPPED"


def initialize(
    storage: Storage,
    timeline: Timeline,
    record_index: RecordIndexInit | None = None,
    column_stats: ColumnStatsInit | None = None,
    bloom_filters: BloomFiltersInit | None = None,
) -> bool:
    """Build the metadata table of the table at `storage` from a listing (and its bloom filters,
    column statistics and record index, with `bloom_filters`, `column_stats` and `record_index`, in
    Java's order), unless a data instant is pending.  `timeline`: the data timeline just loaded.
    Whether it was built."""
    with metadata_lock(storage):
        built = _initialize(storage, timeline)
        for init in (bloom_filters, column_stats, record_index):
            if built and init is not None:
                _build(storage, timeline, init, 1)
        return built


def _initialize(storage: Storage, timeline: Timeline) -> bool:
    pending = timeline.pending()
    if pending:
        log.info(
            "hoodie: metadata table of %s not built now: instant %s is pending (the next write builds it)",
            storage.base_uri, pending[0].timestamp,
        )  # fmt: skip
        return False
    done = [i.timestamp for i in timeline.instants if i.is_completed]  # any action, as Java
    init = init_instant(max(done, default=None))
    props = read_data_properties(storage)
    if listed_partitions(props):
        set_listed_partitions(storage, [])
    if storage.is_dir(METADATA_TABLE_DIR):
        storage.delete_dir(METADATA_TABLE_DIR)
    mdt = metadata_storage(storage)
    _create_metadata_table(mdt, props.get("hoodie.table.name", ""), init)
    store = TimelineStore(mdt, zone="UTC")
    requested = store.create_requested(init, DELTA_COMMIT)
    inflight = store.transition_to_inflight(requested, inflight_workload_json(BULK_INSERT_PREPPED))
    change = _committed_files(storage, timeline)
    stats = []
    records = change.records()
    if records:
        stats.append(append_block(mdt, Timeline.load(mdt), FILES_PARTITION, FILES_FILE_ID, init, records))
    md = CommitMetadata(
        operation_type=BULK_INSERT_PREPPED, write_stats=stats, extra_metadata={"schema": COMMIT_SCHEMA_JSON}
    )
    store.complete(inflight, md.to_bytes())
    set_listed_partitions(storage, [FILES_PARTITION])
    files = sum(len(f) for f in change.added.values())
    log.info("hoodie: built the metadata table of %s at %s (%d files)", storage.base_uri, init, files)
    return True


def _create_metadata_table(mdt: Storage, data_table_name: str, init: str) -> None:
    """The metadata table's properties, its `files` partition's metadata file and the file group's
    empty first log, as Java's initialisation leaves them before its first deltacommit."""
    mdt.write_atomic(
        PROPERTIES_FILE, render_properties(metadata_table_properties(data_table_name)).encode("ascii")
    )
    mdt.write_atomic(
        f"{FILES_PARTITION}/{PARTITION_METAFILE}", metadata_partition_metadata(init).encode("utf-8")
    )
    placeholder = metadata_log_file_name(FILES_FILE_ID, init, 1, DEFAULT_WRITE_TOKEN)
    mdt.write_atomic(f"{FILES_PARTITION}/{placeholder}", placeholder_log_bytes(init))


def _committed_files(storage: Storage, timeline: Timeline) -> FilesChange:
    """The data files of completed instants (and older than the active timeline, which counts as
    committed), every partition named even when empty.  Log files are all kept: with no instant
    pending, every failed write has been rolled back and its logs deleted."""
    listing = list_storage_files(storage)
    change = FilesChange()
    for partition in listing.partitions:
        change.added.setdefault(partition, {})
    for bf in listing.base_files:
        if timeline.is_committed(bf.instant):
            change.add(bf.partition_path, bf.name, bf.size)
    for lf in listing.log_files:
        change.add(lf.partition_path, lf.name, lf.size)
    return change


def settle(
    storage: Storage,
    timeline: Timeline,
    enabled: bool,
    compact_after: int = DEFAULT_MAX_DELTA_COMMITS,
    record_index: RecordIndexInit | None = None,
    column_stats: ColumnStatsInit | None = None,
    bloom_filters: BloomFiltersInit | None = None,
) -> None:
    """Before a write of ours begins (after failed writes are rolled back, before its instant
    exists): keep the metadata table, build it, or remove it.
    - `enabled` and a trusted metadata table: partitions we do not keep (bloom_filters,
      column_stats and record_index unless `bloom_filters`, `column_stats` and `record_index` are
      given) are dropped, as Java drops a disabled partition;
    - `enabled` and none, or one without a completed instant (Java's `isBootstrapNeeded`): built;
    - `record_index` (its sizing and key reader) and no record_index partition: built (metadata/record_index_init.py)
      when no data instant is pending, else the next write builds it; `bloom_filters` and
      `column_stats` likewise (metadata/bloom_filter_init.py, column_stats_init.py), before it, in
      Java's order of initialisation;
    - not `enabled`: removed (metadata/removal.py).
    Then its compaction runs if due (metadata/compaction.py), and after a compaction its clean
    (metadata/cleaning.py), as Java's writers run the metadata table's services at the start of a
    write."""
    props = read_data_properties(storage)
    if not enabled:
        remove_metadata_table(storage, props)
        return
    with metadata_lock(storage):
        listed = listed_partitions(props)
        kept = [FILES_PARTITION]
        kept += [BLOOM_FILTERS] if bloom_filters is not None else []
        kept += [COLUMN_STATS] if column_stats is not None else []
        kept += [RECORD_INDEX] if record_index is not None else []
        md_timeline = _metadata_timeline(storage) if FILES_PARTITION in listed else None
        offset = 0  # of the record index's initialisation instant among those built now
        if md_timeline is not None and any(i.is_completed for i in md_timeline.instants):
            unkept = [p for p in listed if p not in kept]
            if unkept:
                drop_unkept_partitions(storage, unkept, [p for p in listed if p in kept])
        elif not _initialize(storage, timeline):
            return
        else:
            md_timeline = None  # built anew: its timeline is loaded again
            offset = 1
            listed = [FILES_PARTITION]
        builds = ((BLOOM_FILTERS, bloom_filters), (COLUMN_STATS, column_stats), (RECORD_INDEX, record_index))
        for partition, init in builds:
            if init is None or partition in listed:
                continue
            if timeline.pending():
                log.info(
                    "hoodie: %s of %s not built now: instant %s is pending (the next write builds it)",
                    partition, storage.base_uri, timeline.pending()[0].timestamp,
                )  # fmt: skip
                continue
            _build(storage, timeline, init, offset)
            md_timeline = None
        if compact_if_due(storage, timeline, compact_after, md_timeline) is not None:
            clean_if_due(storage)


def _build(
    storage: Storage,
    timeline: Timeline,
    init: RecordIndexInit | ColumnStatsInit | BloomFiltersInit,
    offset: int,
) -> None:
    if isinstance(init, BloomFiltersInit):
        initialize_bloom_filters(storage, timeline, init, offset)
    elif isinstance(init, ColumnStatsInit):
        initialize_column_stats(storage, timeline, init, offset)
    else:
        initialize_record_index(storage, timeline, init, offset)


def drop_unkept_partitions(storage: Storage, partitions: list[str], kept: list[str] | None = None) -> None:
    """Unlist, then delete, metadata partitions we do not keep (Java's deleteMetadataTablePartition
    order: the properties first, so no reader trusts a partition that is being deleted)."""
    set_listed_partitions(storage, kept or [FILES_PARTITION])
    mdt = metadata_storage(storage)
    for partition in partitions:
        if mdt.is_dir(partition):
            mdt.delete_dir(partition)
    log.info(
        "hoodie: dropped metadata-table partitions %s of %s (not kept by hoodie_sink)",
        partitions,
        storage.base_uri,
    )


def _metadata_timeline(storage: Storage) -> Timeline | None:
    """The metadata table's timeline (loaded once per settle: a listing of its `.hoodie/`), or None
    when it has no `.hoodie/` folder."""
    mdt = metadata_storage(storage)
    return Timeline.load(mdt) if mdt.is_dir(".hoodie") else None
