"""The record keys the record index is built and kept from, read from data files (I/O).

`live_entries`: every live key of the table and its location (the record index's initialisation,
metadata/record_index_init.py, and its validation).  `file_change`: what one file a write produced
changes in the record index (read/record_index_change.py gathers a commit's, in its tasks and at
its commit; the rules are there).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format import log_format
from hoodie_sink.table.format.avro_rows import decode_block_content
from hoodie_sink.table.format.commit_metadata import WriteStat
from hoodie_sink.table.format.metadata_records import instant_epoch_ms
from hoodie_sink.table.format.record_index import ENTRY_SCHEMA, KEY, entries
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.read.snapshot import Snapshot, slice_ref
from hoodie_sink.table.storage import Storage

RECORD_KEY, COMMIT_TIME = "_hoodie_record_key", "_hoodie_commit_time"


def live_entries(storage: Storage, timeline: Timeline) -> pa.Table:
    """(key, partition, file id, instant ms) of every live record of the table, by its latest
    file slices as of `timeline` (base files only for copy-on-write, merged for merge-on-read)."""
    snap = Snapshot.open(storage, timeline=timeline)
    parts = []
    if snap.merges_logs:
        for sl in snap.file_slices():
            keys = snap.read_ref(slice_ref(sl), [RECORD_KEY]).column(RECORD_KEY)
            parts.append(
                located(
                    keys.combine_chunks(), sl.partition_path, sl.file_id, instant_epoch_ms(sl.base_instant)
                )
            )
    else:
        for bf in snap.base_files():
            keys = snap.read_file(bf, [RECORD_KEY]).column(RECORD_KEY)
            parts.append(
                located(keys.combine_chunks(), bf.partition_path, bf.file_id, instant_epoch_ms(bf.instant))
            )
    table = pa.concat_tables(parts) if parts else ENTRY_SCHEMA.empty_table()
    if table.column("key").null_count:
        raise HoodieTableError(
            f"Cannot build the record index of {storage.base_uri}: its files hold no record keys "
            "(hoodie.populate.meta.fields=false), which the record index is not built from yet."
        )
    return table


def located(keys: pa.Array, partition: str, file_id: str, ms: int) -> pa.Table:
    """Entries of `keys`, all at one location."""
    n = len(keys)
    return entries(
        keys,
        pa.repeat(pa.scalar(partition, pa.string()), n),
        pa.repeat(pa.scalar(file_id, pa.string()), n),
        ms,
    )


CHANGE_SCHEMA = pa.schema(
    [("path", pa.string()), (KEY, pa.string()), ("partition", pa.string()), ("file_id", pa.string()),
     ("removed", pa.bool_())]
)  # fmt: skip


def file_change(
    storage: Storage, instant: str, stat: WriteStat, previous: pa.Array | None, clustering: bool
) -> pa.Table:
    """The record-index change of the file `stat` names: keys set at its location (removed=False)
    and keys removed (removed=True).  A base file sets the keys written at `instant` that the slice
    it replaces lacked (`previous`, its keys; empty for a new file group; every key for clustering,
    which moves them all) and removes the keys of `previous` that it lacks; a log file sets the keys
    of its data blocks of `instant` (updates in place too: which were there needs the slice merged)
    and removes those of its delete blocks.  A first row with a null key marks the
    path as done, so a commit can tell a file without changes from one nobody looked at."""
    name = stat.path.rsplit("/", 1)[-1]
    if name.startswith(".") and ".log." in name:
        set_keys, gone = _log_keys(storage, stat.path, instant)
    else:
        keys, times = _base_keys(storage, stat.path)
        before = previous if previous is not None else pa.array([], pa.string())
        set_keys = keys if clustering else keys.filter(pc.equal(times, instant))
        # an update in place (the key was in the slice this file replaces) sets nothing, as Java's
        set_keys = _missing(set_keys, before)
        gone = _missing(before, keys)
    n_set, n_gone = len(set_keys), len(gone)
    keys_col = pa.concat_arrays([pa.nulls(1, pa.string()), set_keys, gone])
    n = 1 + n_set + n_gone
    removed = np.concatenate([np.zeros(1 + n_set, bool), np.ones(n_gone, bool)])
    return pa.Table.from_arrays(
        [pa.repeat(pa.scalar(stat.path, pa.string()), n), keys_col,
         pa.repeat(pa.scalar(stat.partition_path, pa.string()), n),
         pa.repeat(pa.scalar(stat.file_id, pa.string()), n), pa.array(removed)],
        schema=CHANGE_SCHEMA,
    )  # fmt: skip


def base_file_keys(storage: Storage, path: str) -> pa.Array:
    return _base_keys(storage, path)[0]


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


def _missing(before: pa.Array, after: pa.Array) -> pa.Array:
    if not len(before):
        return before
    return before.filter(pc.invert(pc.is_in(before, after)))


_KEY_SCHEMA = pa.schema([pa.field(RECORD_KEY, pa.string())])


def _log_keys(storage: Storage, path: str, instant: str) -> tuple[pa.Array, pa.Array]:
    """Keys of this instant's data blocks and of its delete blocks in a log file."""
    written: list[pa.Array] = []
    deleted: list[pa.Array] = []
    for block in log_format.read_blocks(storage.read_bytes(path), storage.full(path)):
        if block.header.get(log_format.INSTANT_TIME) != instant:
            continue
        if block.block_type == log_format.AVRO_DATA_BLOCK:
            rows = decode_block_content(block.content, block.header[log_format.SCHEMA], _KEY_SCHEMA)
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
