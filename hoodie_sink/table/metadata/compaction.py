"""The metadata table's own compaction (I/O, driver side): the `files` file group's latest slice
merged into one HFile base file, so readers and writers read one file plus a few logs whatever
the table's age, and the data timeline may archive (services/archival.py).

When (HoodieBackedTableMetadataWriter.compactIfNecessary and validateTimelineBeforeSchedulingCompaction
at release-0.15.0; docs/hudi/metadata-table-protocol.md#table-services):
- `max_delta_commits` (hoodie.metadata.compact.max.delta.commits, 10) deltacommits since the last
  compaction;
- no data instant at or before the latest metadata deltacommit is pending: the compacted base file
  would otherwise fold in blocks a reader does not trust yet (or miss ones that come later with an
  older time);
- no metadata compaction pending (one a crash left is removed first: nothing reads a base file of a
  compaction that did not complete).
The compaction instant is `<latest deltacommit>001`: after every block it folds in, before any
later data instant.  Steps: `.compaction.requested` (the plan), `.compaction.inflight`, the base
file, then `<c>.commit`; a base file is trusted only once its commit is there.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from hoodie_sink.table.format.bloom import BloomFilter
from hoodie_sink.table.format.commit_metadata import CommitMetadata, WriteStat
from hoodie_sink.table.format.compaction_plan import CompactionOperation, encode_compaction_plan
from hoodie_sink.table.format.metadata_blocks import metadata_hfile
from hoodie_sink.table.format.metadata_instants import latest_compaction_time
from hoodie_sink.table.format.metadata_keys import BLOOM_FILTERS, COLUMN_STATS, RECORD_INDEX
from hoodie_sink.table.format.metadata_listing import (
    FILES_FILE_ID,
    read_files_partition,
    read_slice_records,
    reader_instants,
)
from hoodie_sink.table.format.metadata_record_index import read_slice, record_index_layout
from hoodie_sink.table.format.metadata_records import MetadataRecord
from hoodie_sink.table.format.metadata_schema import COMMIT_SCHEMA_JSON
from hoodie_sink.table.format.metadata_slices import (
    MetadataBaseFile,
    MetadataSlice,
    committed_base_instants,
    partition_slices,
)
from hoodie_sink.table.format.metadata_table import FILES_PARTITION, metadata_storage
from hoodie_sink.table.format.record_index import entries_hfile
from hoodie_sink.table.format.timeline.instant import (
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    INFLIGHT,
    REQUESTED,
    Instant,
)
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.metadata.writer import current_slice
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
COMPACTION_SUFFIX = "001"
COMPACT = "COMPACT"
WRITE_TOKEN = "0-1-0"
DEFAULT_MAX_DELTA_COMMITS = 10


def compact_if_due(
    storage: Storage,
    data_timeline: Timeline,
    max_delta_commits: int = DEFAULT_MAX_DELTA_COMMITS,
    timeline: Timeline | None = None,
) -> str | None:
    """Compact the metadata table of `storage` if it is due and allowed; its instant, or None.
    `timeline`: the metadata table's, if the caller loaded it under the metadata lock."""
    mdt = metadata_storage(storage)
    timeline = timeline or Timeline.load(mdt)
    for pending in timeline.pending((COMPACTION,)):
        _remove_failed_compaction(mdt, pending.timestamp)
        timeline = Timeline.load(mdt)
    deltacommits = [i.timestamp for i in timeline.completed((DELTA_COMMIT,))]
    if not deltacommits:
        return None
    since = latest_compaction_time(timeline) or ""
    if sum(1 for t in deltacommits if t > since) < max_delta_commits:
        return None
    latest = deltacommits[-1]
    blocking = [i.timestamp for i in data_timeline.pending() if i.timestamp <= latest]
    if blocking:
        log.info(
            "hoodie: metadata table of %s not compacted: data instant %s is pending",
            storage.base_uri,
            blocking[0],
        )
        return None
    return compact(storage, mdt, timeline, data_timeline, latest + COMPACTION_SUFFIX)


def compact(storage: Storage, mdt: Storage, timeline: Timeline, data_timeline: Timeline, instant: str) -> str:
    current = current_slice(mdt, timeline, FILES_PARTITION, FILES_FILE_ID)
    operation = _operation(current, FILES_PARTITION)
    record_index = record_index_layout(mdt, timeline) if mdt.is_dir(RECORD_INDEX) else None
    hashed = [(p, sl) for p in (BLOOM_FILTERS, COLUMN_STATS) for sl in _hashed_slices(mdt, timeline, p)]
    operations = [
        operation,
        *(_operation(sl) for sl in (record_index.slices if record_index else [])),
        *(_operation(sl, p) for p, sl in hashed),
    ]
    store = TimelineStore(mdt, zone="UTC")
    requested = store.create_requested(instant, COMPACTION, encode_compaction_plan(operations))
    store.transition_to_inflight(requested, b"")
    merged = read_files_partition(storage, data_timeline)
    base = MetadataBaseFile(FILES_FILE_ID, WRITE_TOKEN, instant)
    data = base_file_bytes([r for r in merged.values() if r is not None], base.name)
    rel = f"{FILES_PARTITION}/{base.name}"
    mdt.write_bytes(rel, data)
    stats = [_compacted_stat(FILES_PARTITION, current, rel, len(data), len(merged))]
    if record_index is not None or hashed:
        _, valid, latest = reader_instants(storage, data_timeline)
        for sl in record_index.slices if record_index is not None else []:
            stats.append(_compact_record_index(mdt, sl, valid, latest, instant))
        for partition, sl in hashed:
            stats.append(_compact_records(mdt, partition, sl, valid, latest, instant))
    md = CommitMetadata(
        operation_type=COMPACT,
        write_stats=stats,
        extra_metadata={"schema": COMMIT_SCHEMA_JSON},
        compacted=True,
    )
    store.complete(Instant(instant, COMMIT, INFLIGHT), md.to_bytes())
    log.info(
        "hoodie: compacted the metadata table of %s at %s (%d log files)",
        storage.base_uri,
        instant,
        len(current.log_files),
    )
    return instant


def _operation(current: MetadataSlice, partition: str = RECORD_INDEX) -> CompactionOperation:
    return CompactionOperation(
        partition_path=partition,
        file_id=current.file_id,
        base_instant=current.base_instant,
        base_file=current.base_file.name if current.base_file is not None else None,
        log_files=tuple(lf.name for lf in current.log_files),
        log_bytes=sum(lf.size for lf in current.log_files),
    )


def _hashed_slices(mdt: Storage, timeline: Timeline, partition: str) -> list[MetadataSlice]:
    """The latest slices of a hashed partition's file groups (none when it has no folder)."""
    if not mdt.is_dir(partition):
        return []
    names = [(i.base_name, int(i.size or 0)) for i in mdt.list_dir(partition) if i.is_file]
    return partition_slices(partition, names, committed_base_instants(timeline, names))


def _compact_records(
    mdt: Storage, partition: str, current: MetadataSlice, valid: set[str], latest: str, instant: str
) -> WriteStat:
    """One file group of a partition of Python-object records (column_stats, bloom_filters) merged into an HFile
    base file, tombstones left out (an empty HFile for a file group left without records, as for
    the record index)."""
    merged = read_slice_records(mdt, partition, current, valid, latest)
    base = MetadataBaseFile(current.file_id, WRITE_TOKEN, instant)
    data = base_file_bytes([r for r in merged.values() if r is not None], base.name)
    rel = f"{partition}/{base.name}"
    mdt.write_bytes(rel, data)
    return _compacted_stat(partition, current, rel, len(data), len(merged))


def _compacted_stat(partition: str, current: MetadataSlice, rel: str, size: int, records: int) -> WriteStat:
    """The write stat of the base file `rel` (of `size` bytes, `records` records) that compacts
    slice `current` of `partition`."""
    return WriteStat(
        file_id=current.file_id,
        partition_path=partition,
        path=rel,
        prev_commit=current.base_instant,
        num_writes=records,
        total_write_bytes=size,
        file_size_in_bytes=size,
        extra={
            "totalLogFilesCompacted": len(current.log_files),
            "totalLogSizeCompacted": sum(lf.size for lf in current.log_files),
        },
    )


def _compact_record_index(
    mdt: Storage, current: MetadataSlice, valid: set[str], latest: str, instant: str
) -> WriteStat:
    """One record-index file group's latest slice merged (vectorised: format/record_index.py) into
    an HFile base file as Java's HoodieAvroHFileWriter writes one (bloom filter, key range).  Java
    writes none for a file group without keys; we write an empty one, so every file group's slice
    starts at the compaction and the clean treats all alike (an empty HFile is valid)."""
    merged = read_slice(mdt, current, valid, latest)
    base = MetadataBaseFile(current.file_id, WRITE_TOKEN, instant)
    data = entries_hfile(merged, base.name, base=True)
    rel = f"{RECORD_INDEX}/{base.name}"
    mdt.write_bytes(rel, data)
    return _compacted_stat(RECORD_INDEX, current, rel, len(data), merged.num_rows)


def base_file_bytes(records: list[MetadataRecord], name: str) -> bytes:
    """An HFile base file as Java's HoodieAvroHFileWriter writes one: cells in key order, each with
    the file's own name, a bloom filter of the keys (the data table's defaults) as meta block
    `bloomFilter`, and the key range in the file info (docs/hudi/metadata-table-protocol.md#hfile-base-files).
    Deleted entries are left out: nothing older than a base file remains for them to cancel."""
    live = sorted(
        (_without_tombstones(r) for r in records if not _is_tombstone(r)), key=lambda r: r.key.encode("utf-8")
    )
    keys = [r.key for r in live]
    bloom = BloomFilter.new_dynamic()
    if keys:
        bloom.add_keys(keys)
    info = {
        b"bloomFilterTypeCode": bloom.type_code.encode("utf-8"),
        b"minRecordKey": keys[0].encode("utf-8") if keys else b"",
        b"maxRecordKey": keys[-1].encode("utf-8") if keys else b"",
    }
    meta = {"bloomFilter": bloom.to_base64().encode("utf-8")}
    return metadata_hfile(live, name, file_info=info, meta_blocks=meta)


def _is_tombstone(record: MetadataRecord) -> bool:
    """A deleted column-statistics or bloom-filter record: nothing in a base file for it to cancel."""
    stats, bloom = record.column_stats, record.bloom_filter
    return (stats is not None and stats.is_deleted) or (bloom is not None and bloom.is_deleted)


def _without_tombstones(record: MetadataRecord) -> MetadataRecord:
    if record.files is None:
        return record
    return replace(record, files={n: i for n, i in record.files.items() if not i.is_deleted})


def _remove_failed_compaction(mdt: Storage, instant: str) -> None:
    """A compaction that did not complete: its base file (never read: its commit is missing) goes,
    then its plan, so it is scheduled afresh."""
    for partition in (FILES_PARTITION, RECORD_INDEX, COLUMN_STATS, BLOOM_FILTERS):
        for info in mdt.list_dir(partition) if mdt.is_dir(partition) else []:
            if info.is_file and info.base_name.endswith(f"_{instant}.hfile"):
                mdt.delete(f"{partition}/{info.base_name}")
    store = TimelineStore(mdt, zone="UTC")
    for state in (INFLIGHT, REQUESTED):
        mdt.delete(store.path(Instant(instant, COMPACTION, state)))
    log.info("hoodie: removed the failed metadata-table compaction %s of %s", instant, mdt.base_uri)
