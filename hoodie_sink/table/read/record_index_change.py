"""What a write changes in the record index, gathered in its tasks and finished at its commit (I/O).

Java derives the record index's records from the write statuses of its tagged records
(HoodieBackedTableMetadataWriter.getRecordIndexUpdates at release-0.15.0;
docs/hudi/metadata-table-protocol.md#record-index): inserts set key -> location, deletes remove the
key, updates in place write nothing, a key both deleted and inserted in one commit (a partition
move) keeps the insert.  Our tasks' per-record decisions are not final (the commit may still drop
duplicate inserts and merge contended file groups: write/commit_merge.py), so the change is read
back from the files, by key column (read/record_index_keys.file_change), in two steps:

1. each write task, for every file it wrote whose replaced slice it knows (the write's plan carries
   the base files and merge-on-read slices as of its begin), writes the files' changes to one
   Parquet file in the instant's work folder and names it in its result (`task_change`);
2. the commit keeps those of the files its final write stats name, reads the rest itself (files
   the commit wrote, or whose slice no task knew), removes the keys of replaced file groups
   (insert_overwrite), and settles keys both removed and set (moved: set) or removed but still
   present in a base file of the commit (a duplicate copy went: the index points at the one that
   stays; found through the new files' key ranges and bloom filters, then their key columns).
Compaction changes nothing.  An update in place rewritten into a base file sets nothing (its key was
in the slice the file replaces), as Java's; one appended to a log file is set again (same location,
this instant's time; telling it from an insert would need the slice merged).
The work grows with the write, and its bulk (reading what the tasks wrote) runs in the tasks.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_sink.table.format.commit_metadata import CommitMetadata, WriteStat
from hoodie_sink.table.format.markers import work_dir
from hoodie_sink.table.format.metadata_records import instant_epoch_ms
from hoodie_sink.table.format.record_index import ENTRY_SCHEMA, KEY, RecordIndexChange, entries
from hoodie_sink.table.index.key_index import cached_footer, read_footer
from hoodie_sink.table.read.record_index_keys import (
    CHANGE_SCHEMA,
    RECORD_KEY,
    base_file_keys,
    file_change,
    located,
)
from hoodie_sink.table.read.snapshot import Snapshot, slice_ref
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
CLUSTER = "cluster"
PreviousKeys = dict[tuple[str, str], str]  # (partition, file id) -> base file path of the replaced slice


def task_change(
    storage: Storage,
    instant: str,
    token: str,
    stats: list[WriteStat],
    previous: PreviousKeys,
    clustering: bool = False,
) -> str | None:
    """Step 1, in a write (or clustering) task: the changes of the files in `stats` whose replaced
    slice is known (`previous`: base files without logs as the write began), written to the work
    folder (`task_logs_dir`); its path."""
    parts = []
    for stat in stats:
        if _is_log(stat) or stat.prev_commit in ("", "null", None) or clustering:
            parts.append(file_change(storage, instant, stat, None, clustering))
        elif (stat.partition_path, stat.file_id) in previous:
            before = base_file_keys(storage, previous[(stat.partition_path, stat.file_id)])
            parts.append(file_change(storage, instant, stat, before, False))
    if not parts:
        return None
    rel = f"{task_logs_dir(instant)}/{token}.parquet"
    with storage.open_output(rel) as out:
        pq.write_table(pa.concat_tables(parts), out, compression="lz4")
    return rel


def task_logs_dir(instant: str) -> str:
    return f"{work_dir(instant)}/record_index"


def task_logs(storage: Storage, instant: str) -> list[str]:
    """Every task change log of `instant` (a clustering's: its runner returns write stats only;
    logs of failed attempts name files the commit does not keep, and are filtered out)."""
    folder = task_logs_dir(instant)
    if not storage.is_dir(folder):
        return []
    return sorted(f"{folder}/{i.base_name}" for i in storage.list_dir(folder) if i.is_file)


def commit_change(
    storage: Storage, instant: str, md: CommitMetadata, task_logs: list[str] | tuple[str, ...] = ()
) -> RecordIndexChange:
    """Step 2, at the commit (before its metadata deltacommit)."""
    if md.compacted:
        return RecordIndexChange()  # compaction keeps every key in its file group
    final = {s.path: s for s in md.write_stats}
    changes = [_kept_rows(pq.read_table(storage.open_input_file(rel)), final) for rel in task_logs]
    done = set()
    for c in changes:
        done.update(pc.unique(c.column("path")).to_pylist())
    rest = [s for s in md.write_stats if s.path not in done]
    log.info(
        "hoodie: record index of %s at %s: %d files read by the tasks, %d at the commit",
        storage.base_uri, instant, len(done), len(rest),
    )  # fmt: skip
    clustering = md.operation_type == CLUSTER
    replaced = {} if clustering else (md.partition_to_replace_file_ids or {})
    snap = _Previous(storage, {s.partition_path for s in rest} | set(replaced)) if rest or replaced else None
    for stat in rest:
        assert snap is not None
        changes.append(file_change(storage, instant, stat, snap.keys(stat), clustering))
    removed = [snap.group_keys(p, f) for p, ids in replaced.items() for f in ids] if snap else []
    table = pa.concat_tables(changes) if changes else CHANGE_SCHEMA.empty_table()
    table = table.filter(pc.is_valid(table.column(KEY)))
    return _settled(storage, instant, md, table, removed)


def _kept_rows(table: pa.Table, final: dict[str, WriteStat]) -> pa.Table:
    """A task's rows of the files the commit kept (a file the commit dropped or rewrote is not)."""
    return table.filter(pc.is_in(table.column("path"), pa.array(list(final), pa.string())))


def _settled(
    storage: Storage, instant: str, md: CommitMetadata, table: pa.Table, removed: list[pa.Array]
) -> RecordIndexChange:
    ms = instant_epoch_ms(instant)
    sets = table.filter(pc.invert(table.column("removed")))
    upserts = entries(sets.column(KEY), sets.column("partition"), sets.column("file_id"), ms)
    gone_parts = [table.filter(table.column("removed")).column(KEY).combine_chunks(), *removed]
    gone = pc.unique(pa.chunked_array(gone_parts, pa.string()).combine_chunks())
    gone = gone.filter(pc.invert(pc.is_in(gone, upserts.column(KEY))))  # moved: set elsewhere
    if len(gone):
        copies = _still_present(storage, md, gone, ms)
        upserts = pa.concat_tables([upserts, copies])
        gone = gone.filter(pc.invert(pc.is_in(gone, copies.column(KEY))))
    if len(gone):
        copies = _live_elsewhere(storage, md, gone, ms)
        upserts = pa.concat_tables([upserts, copies])
        gone = gone.filter(pc.invert(pc.is_in(gone, copies.column(KEY))))
    return RecordIndexChange(upserts, gone)


def _live_elsewhere(storage: Storage, md: CommitMetadata, gone: pa.Array, ms: int) -> pa.Table:
    """Removed keys still stored in a file group this commit left alone: a key stored twice (the
    insert operation does not look for it elsewhere) whose other copy an insert_overwrite or a delete
    removed; the index then points at the copy that stays.  Candidates by each base file's key range
    and bloom filter (cached footers, as the global index reads them), confirmed by its key column:
    the cost of a global bloom lookup of the removed keys.  Keys only in merge-on-read log files are
    not looked for (docs/design/metadata-table.md#record-index)."""
    touched = {(s.partition_path, s.file_id) for s in md.write_stats}
    touched |= {(p, f) for p, ids in (md.partition_to_replace_file_ids or {}).items() for f in ids}
    found = []
    lo, hi = (v.as_py() for v in pc.min_max(gone).values())
    for bf in Snapshot.open(storage).base_files():
        if (bf.partition_path, bf.file_id) in touched:
            continue
        footer = cached_footer(storage, bf.path)
        if footer.range_usable and (footer.max_key < lo or footer.min_key > hi):
            continue
        bloom = footer.bloom((storage.base_uri, bf.path))
        candidates = gone if bloom is None else gone.filter(pa.array(bloom.might_contain(gone)))
        if not len(candidates):
            continue
        present = candidates.filter(pc.is_in(candidates, base_file_keys(storage, bf.path)))
        if len(present):
            found.append(located(present, bf.partition_path, bf.file_id, ms))
    return pa.concat_tables(found) if found else ENTRY_SCHEMA.empty_table()


def _still_present(storage: Storage, md: CommitMetadata, gone: pa.Array, ms: int) -> pa.Table:
    """Removed keys that a base file of this commit still holds (the surviving copy of a key stored
    twice): candidates by each file's key range and bloom filter, confirmed by its key column."""
    found = []
    lo, hi = pc.min_max(gone).values()
    for stat in md.write_stats:
        if _is_log(stat):
            continue
        footer = read_footer(storage, stat.path)
        if footer.range_usable and (footer.max_key < lo.as_py() or footer.min_key > hi.as_py()):
            continue
        bloom = footer.bloom()
        candidates = gone if bloom is None else gone.filter(pa.array(bloom.might_contain(gone)))
        if not len(candidates):
            continue
        keys = base_file_keys(storage, stat.path)
        present = candidates.filter(pc.is_in(candidates, keys))
        if len(present):
            found.append(located(present, stat.partition_path, stat.file_id, ms))
    return pa.concat_tables(found) if found else ENTRY_SCHEMA.empty_table()


def _is_log(stat: WriteStat) -> bool:
    name = stat.path.rsplit("/", 1)[-1]
    return name.startswith(".") and ".log." in name


class _Previous:
    """The latest slices of some partitions before the commit (the commit's own fallback)."""

    def __init__(self, storage: Storage, partitions: set[str]) -> None:
        self.snap = Snapshot.open(storage)  # the table before this commit (its instant is not complete)
        slices = self.snap.file_slices(lambda p: p in partitions)
        self.slices = {(sl.partition_path, sl.file_id): sl for sl in slices}

    def keys(self, stat: WriteStat) -> pa.Array | None:
        if _is_log(stat) or stat.prev_commit in ("", "null", None):
            return None
        return self.group_keys(stat.partition_path, stat.file_id)

    def group_keys(self, partition: str, file_id: str) -> pa.Array:
        sl = self.slices.get((partition, file_id))
        if sl is None:
            return pa.array([], pa.string())
        if sl.log_files and self.snap.merges_logs:
            rows = self.snap.read_ref(slice_ref(sl), [RECORD_KEY])
        elif sl.base_file is not None:
            rows = self.snap.read_file(sl.base_file, [RECORD_KEY])
        else:
            return pa.array([], pa.string())
        return rows.column(RECORD_KEY).combine_chunks().cast(pa.string())
