"""The record keys the record index is built and kept from, read from data files (I/O).

`live_entries`: every live key of the table and its location (the record index's initialisation,
metadata/record_index_init.py, and its validation).  `commit_change`: what a commit changes in
the record index, read from the files it wrote (at the commit, before its metadata deltacommit).

Java derives the record index's records from the write statuses of its tagged records
(HoodieBackedTableMetadataWriter.getRecordIndexUpdates at release-0.15.0): inserts (no previous
location) set key -> location, deletes remove the key, updates in place write nothing, and a key
both deleted and inserted in one commit (a partition move of a global index) keeps the insert.
docs/hudi/metadata-table.md#record-index.  Our write tasks do not carry final per-record
decisions to the commit (the commit may still drop duplicate inserts, merge contended file groups:
write/commit_merge.py), so the change is read back from the files the commit wrote, by key column:
- a new base file: keys whose `_hoodie_commit_time` is this instant (written by it; copied rows keep
  theirs) are set to its file group; for clustering, every key of the new file (moved there);
- a base file that replaces a slice of the same file group (copy-on-write update, merge-on-read
  small-file rewrite): keys of the previous slice missing from the new file are removed;
- a log file: keys of this instant's data blocks are set, keys of its delete blocks removed;
- replaced file groups (insert_overwrite, delete_partition): their keys are removed;
- a key both set and removed is set (moved); data compaction changes nothing (same file groups).
So updates in place of this write are set again (same location, this instant's time: Java leaves
the insert's time), which costs entries in proportion to the write, never to the table.
Vectorised: key columns as Arrow arrays, set differences with `pc.is_in`.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format import log_format
from hoodie_sink.table.format.avro_rows import decode_block_content
from hoodie_sink.table.format.commit_metadata import CommitMetadata, WriteStat
from hoodie_sink.table.format.file_group import FileSlice
from hoodie_sink.table.format.metadata_records import instant_epoch_ms
from hoodie_sink.table.format.record_index import ENTRY_SCHEMA, KEY, RecordIndexChange, entries
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.read.snapshot import Snapshot, slice_ref
from hoodie_sink.table.storage import Storage

RECORD_KEY, COMMIT_TIME = "_hoodie_record_key", "_hoodie_commit_time"
CLUSTER = "cluster"


def live_entries(storage: Storage, timeline: Timeline) -> pa.Table:
    """(key, partition, file id, instant ms) of every live record of the table, by its latest
    file slices as of `timeline` (base files only for copy-on-write, merged for merge-on-read)."""
    snap = Snapshot.open(storage, timeline=timeline)
    parts = []
    if snap.merges_logs:
        for sl in snap.file_slices():
            keys = snap.read_ref(slice_ref(sl), [RECORD_KEY]).column(RECORD_KEY)
            parts.append(
                _located(
                    keys.combine_chunks(), sl.partition_path, sl.file_id, instant_epoch_ms(sl.base_instant)
                )
            )
    else:
        for bf in snap.base_files():
            keys = snap.read_file(bf, [RECORD_KEY]).column(RECORD_KEY)
            parts.append(
                _located(keys.combine_chunks(), bf.partition_path, bf.file_id, instant_epoch_ms(bf.instant))
            )
    table = pa.concat_tables(parts) if parts else ENTRY_SCHEMA.empty_table()
    if table.column("key").null_count:
        raise HoodieTableError(
            f"Cannot build the record index of {storage.base_uri}: its files hold no record keys "
            "(hoodie.populate.meta.fields=false), which the record index is not built from yet."
        )
    return table


def commit_change(storage: Storage, instant: str, md: CommitMetadata) -> RecordIndexChange:
    if md.compacted:
        return RecordIndexChange()  # compaction keeps every key in its file group
    snap = Snapshot.open(storage)  # the table before this commit (its instant is not complete)
    touched = {s.partition_path for s in md.write_stats} | set(md.partition_to_replace_file_ids or {})
    previous = {(sl.partition_path, sl.file_id): sl for sl in snap.file_slices(lambda p: p in touched)}
    ms = instant_epoch_ms(instant)
    upserts: list[pa.Table] = []
    removed: list[pa.Array] = []
    kept: list[pa.Table] = []  # every key of the new base files: a copy elsewhere is removed, not the key
    clustering = md.operation_type == CLUSTER
    for stat in md.write_stats:
        name = stat.path.rsplit("/", 1)[-1]
        if name.startswith(".") and ".log." in name:
            set_keys, gone = _log_keys(storage, snap, stat.path, instant)
        else:
            keys, times = _base_keys(storage, stat.path)
            set_keys = keys if clustering else keys.filter(pc.equal(times, instant))
            kept.append(_located(keys, stat.partition_path, stat.file_id, ms))
            gone = _missing(_slice_keys(snap, previous.get((stat.partition_path, stat.file_id)), stat), keys)
        if len(set_keys):
            upserts.append(_located(set_keys, stat.partition_path, stat.file_id, ms))
        removed.append(gone)
    if not clustering:
        for partition, file_ids in (md.partition_to_replace_file_ids or {}).items():
            for file_id in file_ids:
                sl = previous.get((partition, file_id))
                if sl is not None:
                    removed.append(_merged_keys(snap, sl))
    return _combined(upserts, removed, kept)


def _combined(upserts: list[pa.Table], removed: list[pa.Array], kept: list[pa.Table]) -> RecordIndexChange:
    """A key removed somewhere but set or still present in a file this commit wrote is not
    removed: it moved (a global index's partition move), or one of its duplicate copies went (the
    index then points at a copy that stays: the one in this commit's files)."""
    table = pa.concat_tables(upserts) if upserts else ENTRY_SCHEMA.empty_table()
    gone = pa.chunked_array(removed, pa.string()).combine_chunks() if removed else pa.array([], pa.string())
    if kept and len(gone):
        present = pa.concat_tables(kept)
        copies = present.filter(
            pc.and_(
                pc.is_in(present.column(KEY), gone),
                pc.invert(pc.is_in(present.column(KEY), table.column(KEY))),
            )
        )
        table = pa.concat_tables([table, copies])
    if table.num_rows and len(gone):
        gone = gone.filter(pc.invert(pc.is_in(gone, table.column(KEY))))
    return RecordIndexChange(table, pc.unique(gone) if len(gone) else gone)


def _located(keys: pa.Array, partition: str, file_id: str, ms: int) -> pa.Table:
    n = len(keys)
    return entries(
        keys,
        pa.repeat(pa.scalar(partition, pa.string()), n),
        pa.repeat(pa.scalar(file_id, pa.string()), n),
        ms,
    )


def _checked(keys: pa.Array, where: str) -> pa.Array:
    if keys.null_count:
        raise HoodieTableError(
            f"{where} holds rows without a record key (virtual keys, hoodie.populate.meta.fields=false): "
            "the record index is not kept for such tables."
        )
    return keys


def _base_keys(storage: Storage, path: str) -> tuple[pa.Array, pa.Array]:
    with storage.open_input_file(path) as f:
        table = pq.ParquetFile(f).read(columns=[RECORD_KEY, COMMIT_TIME])
    keys = _checked(table.column(RECORD_KEY).combine_chunks().cast(pa.string()), storage.full(path))
    return keys, table.column(COMMIT_TIME).combine_chunks().cast(pa.string())


def _slice_keys(snap: Snapshot, sl: FileSlice | None, stat: WriteStat) -> pa.Array:
    """Keys of the slice a new base file replaces (none for a new file group)."""
    if sl is None or stat.prev_commit in ("", "null", None):
        return pa.array([], pa.string())
    return _merged_keys(snap, sl)


def _merged_keys(snap: Snapshot, sl: FileSlice) -> pa.Array:
    if sl.log_files and snap.merges_logs:
        rows = snap.read_ref(slice_ref(sl), [RECORD_KEY])
    elif sl.base_file is not None:
        rows = snap.read_file(sl.base_file, [RECORD_KEY])
    else:
        return pa.array([], pa.string())
    return rows.column(RECORD_KEY).combine_chunks().cast(pa.string())


def _missing(before: pa.Array, after: pa.Array) -> pa.Array:
    if not len(before):
        return before
    return before.filter(pc.invert(pc.is_in(before, after)))


def _log_keys(storage: Storage, snap: Snapshot, path: str, instant: str) -> tuple[pa.Array, pa.Array]:
    """Keys of this instant's data blocks and of its delete blocks in a log file."""
    key_schema = pa.schema([snap.schema.field(RECORD_KEY)])
    written: list[pa.Array] = []
    deleted: list[pa.Array] = []
    for block in log_format.read_blocks(storage.read_bytes(path), storage.full(path)):
        if block.header.get(log_format.INSTANT_TIME) != instant:
            continue
        if block.block_type == log_format.AVRO_DATA_BLOCK:
            rows = decode_block_content(block.content, block.header[log_format.SCHEMA], key_schema)
            written.append(rows.column(RECORD_KEY).combine_chunks())
        elif block.block_type == log_format.PARQUET_DATA_BLOCK:
            rows = pq.read_table(pa.BufferReader(block.content), columns=[RECORD_KEY])
            written.append(rows.column(RECORD_KEY).combine_chunks())
        elif block.block_type == log_format.DELETE_BLOCK:
            keys = [d["recordKey"] for d in log_format.deleted_keys(block)]
            deleted.append(pa.array(keys, pa.string()))
    set_keys = (
        pa.chunked_array(written, pa.string()).combine_chunks() if written else pa.array([], pa.string())
    )
    gone = pa.chunked_array(deleted, pa.string()).combine_chunks() if deleted else pa.array([], pa.string())
    return _checked(set_keys.cast(pa.string()), storage.full(path)), gone
