"""The file listing read from the metadata table's `files` partition, as Java's readers see it (I/O).

One file group, `files-0000-0`: its latest slice (format/metadata_slices.py) is an HFile base file
and log files whose HFILE_DATA blocks hold `HoodieMetadataRecord`s keyed by partition path (file
list) and `__all_partitions__` (partition list).  Records merge oldest to newest
(docs/hudi/metadata-table.md#merge-rules); a block counts only if its instant is valid
(format/metadata_instants.py).  The result is a `Listing`, the shape a storage listing has, so
the file-system view decides visibility the same way whichever produced it.
"""

from __future__ import annotations

import logging

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.file_group import BaseFile, Listing, LogFile
from hoodie_sink.table.format.hfile import CorruptHFile
from hoodie_sink.table.format.log_format import COMMAND_BLOCK, CorruptLogBlock
from hoodie_sink.table.format.metadata_blocks import MetadataLogBlock, read_metadata_hfile, read_metadata_log
from hoodie_sink.table.format.metadata_instants import (
    committed_in_metadata,
    latest_completed_time,
    valid_instants,
)
from hoodie_sink.table.format.metadata_keys import (
    ALL_PARTITIONS_KEY,
    FILES,
    NON_PARTITIONED_NAME,
    file_list_key,
)
from hoodie_sink.table.format.metadata_layout import metadata_file_id
from hoodie_sink.table.format.metadata_merge import Version, live_files, merge_slice
from hoodie_sink.table.format.metadata_records import CorruptMetadataRecord, MetadataRecord
from hoodie_sink.table.format.metadata_slices import (
    MetadataSlice,
    committed_base_instants,
    file_ids_in,
    latest_slice,
)
from hoodie_sink.table.format.metadata_table import metadata_storage
from hoodie_sink.table.format.rollback_metadata import decode_rollback_metadata
from hoodie_sink.table.format.savepoint_metadata import decode_restore_metadata
from hoodie_sink.table.format.timeline.instant import ROLLBACK, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
FILES_FILE_ID = metadata_file_id(FILES, 0)
Records = dict[str, MetadataRecord | None]  # key -> merged record (None: deleted)


def read_files_partition(storage: Storage, data_timeline: Timeline) -> Records:
    """The merged records of the `files` partition: key -> record, as a reader sees them now."""
    records = read_partition(storage, data_timeline, FILES)
    if records is None:
        raise HoodieTableError(
            f"The metadata table of {storage.base_uri} has no file in its files partition."
        )
    return records


def read_partition(storage: Storage, data_timeline: Timeline, partition: str) -> Records | None:
    """The merged records of every file group of a metadata-table partition (key -> record, as a
    reader sees them now); None when the partition has no file.  For the small partitions
    (`files`, `column_stats`): a Python object per record."""
    mdt = metadata_storage(storage)
    md_timeline, valid, latest = reader_instants(storage, data_timeline)
    names = [(i.base_name, int(i.size or 0)) for i in mdt.list_dir(partition) if i.is_file]
    completed = committed_base_instants(md_timeline, names)
    out: Records = {}
    found = False
    for file_id in file_ids_in(partition, names):
        current = latest_slice(partition, file_id, names, completed)
        if current is None:
            continue
        found = True
        out.update(read_slice_records(mdt, partition, current, valid, latest))
    return out if found else None


def read_slice_records(
    mdt: Storage, partition: str, current: MetadataSlice, valid: set[str], latest: str
) -> Records:
    """The merged records of one file group's latest slice (the base file, then the blocks a reader
    applies, oldest first)."""
    base: dict[str, MetadataRecord] = {}
    try:
        if current.base_file is not None:
            rel = f"{partition}/{current.base_file.name}"
            base = {r.key: r for r in read_metadata_hfile(mdt.read_bytes(rel), mdt.full(rel))}
        versions: dict[str, list[Version]] = {}
        for block in _applied_blocks(mdt, current.log_files, valid, latest):
            for record in block.records:
                versions.setdefault(record.key, []).append(record)
            for key in block.deleted_keys:
                versions.setdefault(key, []).append(None)
    except (CorruptHFile, CorruptLogBlock, CorruptMetadataRecord, ValueError) as e:
        raise HoodieTableError(f"Corrupt metadata table at {mdt.base_uri}: {e}") from e
    return {key: merge_slice(base.get(key), versions.get(key, ())) for key in base.keys() | versions.keys()}


def reader_instants(storage: Storage, data_timeline: Timeline) -> tuple[Timeline, set[str], str]:
    """The metadata timeline, the instants whose blocks a reader applies, and the latest completed
    metadata instant (newer blocks are ignored): Java's log-scanner gate, for every partition."""
    md_timeline = Timeline.load(metadata_storage(storage))
    latest = latest_completed_time(md_timeline)
    if latest is None:
        raise HoodieTableError(
            f"The metadata table of {storage.base_uri} has no completed instant. Help: write to the table "
            "with hoodie.metadata.enable=true to rebuild it, or with false to remove it."
        )
    valid = valid_instants(data_timeline, md_timeline, lambda i: _rolled_back_by(storage, i))
    committed = committed_in_metadata(md_timeline)  # and committed in the metadata table itself
    return md_timeline, {t for t in valid if committed(t)}, latest


def metadata_listing(
    storage: Storage, data_timeline: Timeline, partitions: list[str] | None = None
) -> Listing:
    """The table's data files as the metadata table lists them (of `partitions` only, if given)."""
    return listing_of(read_files_partition(storage, data_timeline), partitions)


def listing_of(records: Records, partitions: list[str] | None = None) -> Listing:
    """A `Listing` from merged `files` records: partitions from `__all_partitions__`, files from
    each partition's record (deleted entries left out)."""
    out = Listing()
    wanted = set(partitions) if partitions is not None else None
    for identifier in live_files(records.get(ALL_PARTITIONS_KEY)):
        partition = "" if identifier == NON_PARTITIONED_NAME else identifier
        if wanted is not None and partition not in wanted:
            continue
        out.partitions.add(partition)
        for name, size in live_files(records.get(file_list_key(partition))).items():
            if name.startswith("."):
                lf = LogFile.parse(partition, name, size)
                if lf is not None:
                    out.log_files.append(lf)
            else:
                bf = BaseFile.parse(partition, name, size)
                if bf is not None:
                    out.base_files.append(bf)
    return out


def _applied_blocks(
    mdt: Storage, log_files: list[LogFile], valid: set[str], latest: str
) -> list[MetadataLogBlock]:
    """The blocks a reader applies, oldest first: of a valid instant, not newer than the latest
    completed metadata instant, not undone by a rollback command block (Java's log scanner)."""
    blocks: list[MetadataLogBlock] = []
    for lf in log_files:
        blocks.extend(read_metadata_log(mdt.read_bytes(lf.path), mdt.full(lf.path)))
    undone = {b.rollback_target for b in blocks if b.block_type == COMMAND_BLOCK}
    return [
        b for b in blocks
        if b.block_type != COMMAND_BLOCK and b.instant in valid and b.instant <= latest and b.instant not in undone
    ]  # fmt: skip


def _rolled_back_by(storage: Storage, instant: Instant) -> list[str]:
    """The instants a completed data rollback or restore undid (its Avro metadata)."""
    data = storage.read_bytes(TimelineStore(storage).path(instant))
    if instant.action == ROLLBACK:
        return list(decode_rollback_metadata(data).get("commitsRollback") or [])
    out: list[str] = []
    for rollbacks in (decode_restore_metadata(data).get("hoodieRestoreMetadata") or {}).values():
        for md in rollbacks:
            out.extend(md.get("commitsRollback") or [])
    return out
