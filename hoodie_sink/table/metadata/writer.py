"""One metadata-table deltacommit per data instant (I/O, driver side: it grows with files, not rows).

Order (docs/hudi/metadata-table-protocol.md#write-protocol): the caller has written its data files and
holds its inflight data instant; this writes the metadata deltacommit `<t>` of the same time,
requested -> inflight -> one log file per touched file group -> completed; only then does the
caller complete data instant `<t>`.  A crash in between leaves a metadata deltacommit "ahead" of
the data table, which every reader ignores (its data instant is not completed) and the next
writer removes (`roll_back_metadata_instant`).  The reverse, a data instant completed without its
metadata deltacommit, would hide its files from every reader that lists through the metadata
table, so nothing here may be skipped once a metadata table exists.

Each deltacommit writes a new log file (the next version in the file group's latest slice), never
appending: the file then holds the blocks of exactly one instant, which is what lets a rollback
delete it whole.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager

import pyarrow as pa

from hoodie_sink.table.format.commit_metadata import CommitMetadata, WriteStat, inflight_workload_json
from hoodie_sink.table.format.file_group import LogFile
from hoodie_sink.table.format.log_format import block_instants, encode_block
from hoodie_sink.table.format.metadata_blocks import metadata_data_block
from hoodie_sink.table.format.metadata_keys import FILES, RECORD_INDEX, file_group_indexes
from hoodie_sink.table.format.metadata_layout import metadata_file_id
from hoodie_sink.table.format.metadata_record_index import record_index_layout
from hoodie_sink.table.format.metadata_records import MetadataRecord
from hoodie_sink.table.format.metadata_schema import COMMIT_SCHEMA_JSON
from hoodie_sink.table.format.metadata_slices import (
    MetadataSlice,
    committed_base_instants,
    latest_slice,
    partition_slices,
)
from hoodie_sink.table.format.metadata_table import FILES_PARTITION, metadata_storage
from hoodie_sink.table.format.record_index import (
    KEY,
    RecordIndexChange,
    by_file_group,
    delete_block,
    upsert_block,
)
from hoodie_sink.table.format.timeline.instant import COMPLETED, DELTA_COMMIT, INFLIGHT, REQUESTED, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.metadata.files_change import FilesChange
from hoodie_sink.table.service_lock import service_lock
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
UPSERT_PREPPED = "UPSERT_PREPPED"
# Our write token for metadata log files: versions already make the names unique within a slice
WRITE_TOKEN = "0-1-0"
FILES_FILE_ID = metadata_file_id(FILES, 0)
METADATA_LOCK = "metadata"


def metadata_lock(storage: Storage) -> AbstractContextManager[None]:
    """The lock every writer of the metadata table holds (the sink's service lock `metadata`): its
    deltacommits, compaction, clean, initialisation and archival run one at a time, across
    processes, as Java runs them inside the data table's lock."""
    return service_lock(storage, METADATA_LOCK, "write the metadata table")


def write_deltacommit(
    storage: Storage,
    instant: str,
    change: FilesChange,
    record_index: RecordIndexChange | None = None,
    hashed: Mapping[str, list[MetadataRecord]] | None = None,
) -> None:
    """Record `change` (and `record_index`, when the table keeps one, and `hashed`: the records of
    the column_stats partition, when kept) in the metadata table as deltacommit `instant` (the data
    instant's time): one deltacommit for every partition, so a reader sees all or none."""
    mdt = metadata_storage(storage)
    timeline = Timeline.load(mdt)
    if timeline.states_of(instant):  # a retry of this instant, or what a failed attempt left
        roll_back_metadata_instant(mdt, timeline, instant)
        timeline = Timeline.load(mdt)
    store = TimelineStore(mdt, zone="UTC")  # explicit instant times: the zone is never used
    # under metadata_lock, and `timeline` (loaded under it) holds nothing at `instant`
    requested = store.create_requested(instant, DELTA_COMMIT, time_checked_under_lock=True)
    inflight = store.transition_to_inflight(requested, inflight_workload_json(UPSERT_PREPPED))
    stats = []
    records = change.records()
    if records:  # Java writes no empty block: a partition with nothing to say is skipped
        stats.append(append_block(mdt, timeline, FILES_PARTITION, FILES_FILE_ID, instant, records))
    if record_index is not None and not record_index.empty:
        stats.extend(append_record_index(mdt, timeline, instant, record_index))
    for partition, hashed_records in sorted((hashed or {}).items()):
        stats.extend(append_hashed(mdt, timeline, partition, instant, hashed_records))
    md = CommitMetadata(
        operation_type=UPSERT_PREPPED, write_stats=stats, extra_metadata={"schema": COMMIT_SCHEMA_JSON}
    )
    store.complete(inflight, md.to_bytes())


def current_slice(mdt: Storage, timeline: Timeline, partition: str, file_id: str) -> MetadataSlice:
    names = [(info.base_name, int(info.size or 0)) for info in mdt.list_dir(partition) if info.is_file]
    current = latest_slice(partition, file_id, names, committed_base_instants(timeline, names))
    if current is None:
        raise FileNotFoundError(
            f"Metadata table {mdt.base_uri}: file group {file_id} of partition {partition} has no file."
        )
    return current


def append_block(
    mdt: Storage,
    timeline: Timeline,
    partition: str,
    file_id: str,
    instant: str,
    records: list[MetadataRecord],
) -> WriteStat:
    """One log file of the file group's latest slice, holding one HFILE_DATA block of `records`."""
    current = current_slice(mdt, timeline, partition, file_id)
    return _write_log(
        mdt, partition, current, encode_block(metadata_data_block(records, instant)), len(records)
    )


def append_hashed(
    mdt: Storage, timeline: Timeline, partition: str, instant: str, records: list[MetadataRecord]
) -> list[WriteStat]:
    """One log file per touched file group of a hashed partition (column_stats, bloom_filters): each record goes
    to the file group its key hashes to (docs/hudi/metadata-table.md#file-groups), among the file
    groups the partition has; one HFILE_DATA block each."""
    if not records:
        return []
    names = [(info.base_name, int(info.size or 0)) for info in mdt.list_dir(partition) if info.is_file]
    slices = partition_slices(partition, names, committed_base_instants(timeline, names))
    if not slices:
        raise FileNotFoundError(f"Metadata table {mdt.base_uri}: partition {partition} has no file group.")
    groups = file_group_indexes(pa.array([r.key for r in records], pa.string()), len(slices))
    by_group: dict[int, list[MetadataRecord]] = {}
    for record, index in zip(records, groups.tolist(), strict=True):
        by_group.setdefault(index, []).append(record)

    def write(group: tuple[int, list[MetadataRecord]]) -> WriteStat:
        index, rs = group
        return _write_log(
            mdt, partition, slices[index], encode_block(metadata_data_block(rs, instant)), len(rs)
        )

    # one thread per file group: gzip of the HFile blocks dominates (bloom filters: ~430 KB a base
    # file) and zlib releases the GIL; each group writes a log file of its own
    touched = sorted(by_group.items())
    if len(touched) == 1:
        return [write(touched[0])]
    with ThreadPoolExecutor(max_workers=min(len(touched), os.cpu_count() or 1)) as pool:
        return list(pool.map(write, touched))


def append_record_index(
    mdt: Storage, timeline: Timeline, instant: str, change: RecordIndexChange
) -> list[WriteStat]:
    """One log file per touched record-index file group (the next version of its latest slice):
    an HFILE_DATA block of the keys set, then a DELETE block of the keys removed
    (docs/hudi/metadata-table-protocol.md#record-index)."""
    layout = record_index_layout(mdt, timeline)
    upserts = by_file_group(change.upserts, layout.file_groups)  # a key twice: the block keeps its newest
    deletes = by_file_group(pa.table({KEY: change.deletes}), layout.file_groups)

    def log_of(index: int) -> WriteStat:
        blocks = []
        if index in upserts:
            blocks.append(encode_block(upsert_block(upserts[index], instant)))
        if index in deletes:
            blocks.append(encode_block(delete_block(deletes[index].column(KEY).combine_chunks(), instant)))
        count = (upserts[index].num_rows if index in upserts else 0) + (
            deletes[index].num_rows if index in deletes else 0
        )
        return _write_log(mdt, RECORD_INDEX, layout.slices[index], b"".join(blocks), count)

    # one file group per thread: the HFile's gzip and Arrow's sorts release the GIL, and a large
    # write (a bulk_insert's keys) spends most of its commit here
    touched = sorted(upserts.keys() | deletes.keys())
    if len(touched) <= 1:
        return [log_of(index) for index in touched]
    with ThreadPoolExecutor(max_workers=min(len(touched), os.cpu_count() or 1)) as pool:
        return list(pool.map(log_of, touched))


def _write_log(mdt: Storage, partition: str, current: MetadataSlice, data: bytes, count: int) -> WriteStat:
    log_file = LogFile(
        partition, current.file_id, current.base_instant, current.next_log_version(), WRITE_TOKEN
    )
    if not mdt.create_if_absent(log_file.path, data):
        raise FileExistsError(f"Metadata log file {mdt.full(log_file.path)} exists already.")
    size = len(data)
    base = current.base_file.name if current.base_file is not None else ""
    return WriteStat(
        file_id=current.file_id,
        partition_path=partition,
        path=log_file.path,
        prev_commit=current.base_instant,
        num_writes=count,
        num_update_writes=count,
        total_write_bytes=size,
        file_size_in_bytes=size,
        extra={"logVersion": log_file.version, "logOffset": 0, "baseFile": base, "logFiles": [log_file.name]},
    )


def roll_back_metadata_instant(mdt: Storage, timeline: Timeline, instant: str) -> None:
    """Remove metadata deltacommit `instant`: the log files holding its blocks, then its timeline
    files, completed first (from then on no reader takes its blocks).  Runs before the data
    instant's rollback completes: Java counts the blocks of a rolled-back data instant as valid
    (HoodieTableMetadataUtil.getValidInstantTimestamps), so they must be gone by then."""
    store = TimelineStore(mdt, zone="UTC")
    for partition in _partitions(mdt):
        for info in mdt.list_dir(partition):
            name = info.base_name
            if not (info.is_file and name.startswith(".") and ".log." in name):
                continue
            rel = f"{partition}/{name}"
            instants, _ = block_instants(mdt.read_bytes(rel), mdt.full(rel))
            if instant in instants:
                mdt.delete(rel)
    for state in (COMPLETED, INFLIGHT, REQUESTED):
        mdt.delete(store.path(Instant(instant, DELTA_COMMIT, state)))
    log.info("hoodie: rolled back metadata-table deltacommit %s of %s", instant, mdt.base_uri)


def _partitions(mdt: Storage) -> list[str]:
    return [i.base_name for i in mdt.list_dir("") if not i.is_file and not i.base_name.startswith(".")]
