"""Point look-ups in the record index: where each key of a batch lives
(docs/design/metadata-table.md#record-index-look-ups).

For a batch of record keys (an Arrow string array), without a loop over the keys in Python:

1. every key is hashed to its file group (`file_group_indexes`, Java's String.hashCode);
2. per file group, the batch's distinct keys are sorted and located in the base HFile's block
   index: only the data blocks whose key range can hold one of them are read (format/hfile/ranged.py),
   and their cells parsed in bulk;
3. the log files of the slice are read, and of their blocks those a reader trusts
   (record_index_files.py) are applied oldest first: an HFILE_DATA block's value replaces the
   older one, a DELETE block removes the key (docs/hudi/metadata-table.md#merge-rules, type 5);
4. the cells are joined with the batch's keys by Arrow (`index_in`), the newest version of each key
   kept, and the surviving values decoded, each distinct value once (format/record_index_values.py).

Caches, per process (= per Spark executor worker), bounded in bytes and least recently used first
out, like key_index.py's: block indexes and parsed data blocks of base HFiles, keyed by (table,
path, block): base files never change; parsed log files, keyed by (table, path, size): a log file
Java appends to on HDFS changes size.  Counters (`cache_stats`) say what storage was read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieKeyError, HoodieTableError
from hoodie_sink.table.arrow_util import as_strings
from hoodie_sink.table.format.hfile import CorruptHFile, HFileReader
from hoodie_sink.table.format.hfile.ranged import (
    candidate_blocks,
    read_block_index,
    read_data_block,
)
from hoodie_sink.table.format.log_format import (
    COMMAND_BLOCK,
    DELETE_BLOCK,
    HFILE_DATA_BLOCK,
    INSTANT_TIME,
    TARGET_INSTANT_TIME,
    CorruptLogBlock,
    deleted_keys,
    read_blocks,
)
from hoodie_sink.table.format.metadata_keys import file_group_indexes
from hoodie_sink.table.format.metadata_records import CorruptMetadataRecord
from hoodie_sink.table.format.metadata_table import metadata_storage
from hoodie_sink.table.format.record_index_values import RecordLocations, decode_locations
from hoodie_sink.table.format.timeline.instant import UTC_ZONE
from hoodie_sink.table.index.record_index_files import RecordIndexFiles, RecordIndexSlice
from hoodie_sink.table.lru_cache import LRUCache
from hoodie_sink.table.storage import Storage

DEFAULT_BLOCK_CACHE_BUDGET = 512 * 1024 * 1024
IO_THREADS = 8

_INDEXES = LRUCache(64 * 1024 * 1024)  # base file -> BlockIndex
_BLOCKS = LRUCache(DEFAULT_BLOCK_CACHE_BUDGET)  # (base file, block) -> (rows, values); (log, size) -> blocks
_COUNTER_NAMES = (
    "keys_looked_up", "keys_found", "bytes_read", "base_bytes_read", "data_blocks_read", "data_blocks_cached",
    "index_reads", "log_files_read", "log_files_cached",
)  # fmt: skip
_COUNTERS = dict.fromkeys(_COUNTER_NAMES, 0)
_COUNTERS_LOCK = threading.Lock()


def set_block_cache_budget(nbytes: int) -> None:
    """Bound the per-process cache of parsed record-index blocks and log files."""
    _BLOCKS.set_budget(int(nbytes))


def cache_stats() -> dict[str, int]:
    """What look-ups read: ``bytes_read`` from storage (base-file indexes and blocks, log files;
    ``base_bytes_read`` of base files only),
    ``data_blocks_read`` (base-file data blocks read from storage) and ``data_blocks_cached``
    (found parsed), ``index_reads``, ``log_files_read``/``log_files_cached``, ``keys_looked_up``,
    ``keys_found``; and the caches' own counters (``block_*``, ``index_*``)."""
    out: dict[str, int] = {}
    for prefix, cache in (("block", _BLOCKS), ("index", _INDEXES)):
        for name, value in cache.stats().items():
            out[f"{prefix}_{name}"] = value
    with _COUNTERS_LOCK:
        out.update(_COUNTERS)
    return out


def clear_caches() -> None:
    _INDEXES.clear()
    _BLOCKS.clear()
    with _COUNTERS_LOCK:
        _COUNTERS.update(dict.fromkeys(_COUNTER_NAMES, 0))


def _count(**deltas: int) -> None:
    with _COUNTERS_LOCK:
        for name, value in deltas.items():
            _COUNTERS[name] += value


@dataclass(frozen=True)
class _LogBlock:
    """A log block reduced to what a look-up needs: its instant, and its cells (HFILE_DATA: rows
    and values), deleted keys (DELETE: rows, values None) or rollback target (COMMAND)."""

    instant: str
    block_type: int
    rows: pa.BinaryArray
    values: pa.BinaryArray | None
    rollback_target: str | None = None

    @property
    def nbytes(self) -> int:
        return self.rows.nbytes + (self.values.nbytes if self.values is not None else 0) + 128


_EMPTY = pa.array([], pa.binary())


def look_up(
    storage: Storage, files: RecordIndexFiles, keys: pa.Array | pa.ChunkedArray, zone: str = UTC_ZONE
) -> RecordLocations:
    """Where the record index says each key's record lives (null where it has no entry)."""
    keys = as_strings(keys, "record keys", large_ok=False)
    if keys.null_count:
        raise HoodieKeyError(
            f"{keys.null_count} null record key(s) given to the record index. "
            "Help: every record needs a non-null record key."
        )
    n = len(keys)
    _count(keys_looked_up=n)
    if n == 0:
        return RecordLocations.nulls(0)
    groups = file_group_indexes(keys, files.file_group_count)
    order = np.argsort(groups, kind="stable")
    present, starts = np.unique(groups[order], return_index=True)
    ends = np.r_[starts[1:], n]
    batches = [order[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
    mdt = metadata_storage(storage)
    binary = keys.cast(pa.binary())

    def one(j: int) -> pa.Array:
        rows = batches[j]
        return look_up_group(mdt, files, files.file_groups[int(present[j])], binary.take(pa.array(rows)))

    try:
        found = _parallel(one, list(range(len(batches))))
    except (CorruptHFile, CorruptLogBlock, CorruptMetadataRecord) as e:
        raise HoodieTableError(
            f"Corrupt record index in the metadata table of {storage.base_uri}: {e}"
        ) from e
    # back to the batch's order: the values of group j belong to rows batches[j]
    at = np.empty(n, np.int64)
    at[order] = np.arange(n, dtype=np.int64)
    values = pa.concat_arrays([f.cast(pa.binary()) for f in found]).take(pa.array(at))
    _count(keys_found=n - values.null_count)
    return decode_locations(values, zone, f"record index of {storage.base_uri}")


def look_up_group(
    mdt: Storage, files: RecordIndexFiles, group: RecordIndexSlice, keys: pa.BinaryArray
) -> pa.Array:
    """The newest value (null: none, or deleted) of each of `keys` in one file group."""
    distinct = pc.unique(keys)
    distinct = distinct.take(pc.sort_indices(distinct))
    # oldest first: (rows, their values) where values(at) gives the values of rows `at`, None for
    # a delete block (its keys are removed)
    sources: list[tuple[pa.BinaryArray, Callable[[np.ndarray], pa.Array] | None]] = []
    if group.base_file is not None:
        sources += _base_cells(mdt, files.table_uri, group, distinct)
    for b in _applied_log_blocks(mdt, files, group):
        sources.append((b.rows, None if b.values is None else _taker(b.values)))
    # every cell holding one of the keys: (key's place in `distinct`, its value or null), oldest first
    places, values = [], []
    for rows, value_of in sources:
        hit = pc.index_in(rows, value_set=distinct)
        where = np.flatnonzero(np.asarray(hit.is_valid()))
        if not len(where):
            continue
        places.append(np.asarray(hit.take(pa.array(where)), np.int64))
        values.append(value_of(where) if value_of is not None else pa.nulls(len(where), pa.binary()))
    if not places:
        return pa.nulls(len(keys), pa.binary())
    place = np.concatenate(places)
    newest = np.full(len(distinct), -1, np.int64)
    np.maximum.at(newest, place, np.arange(len(place), dtype=np.int64))  # the last cell of a key wins
    merged = pa.concat_arrays(values).take(pa.array(newest, mask=newest < 0))
    return merged.take(pc.index_in(keys, value_set=distinct))


def _taker(values: pa.BinaryArray) -> Callable[[np.ndarray], pa.Array]:
    return lambda at: values.take(pa.array(at))


def _base_cells(
    mdt: Storage, table_uri: str, group: RecordIndexSlice, distinct: pa.BinaryArray
) -> list[tuple[pa.BinaryArray, Callable[[np.ndarray], pa.Array]]]:
    """The cells of the base file's data blocks that can hold one of `distinct` (sorted), a
    source per block: its rows, and its values cut out only for the rows a look-up hits."""
    path = group.base_file
    assert path is not None
    handle: list[Any] = []

    def read_at(offset: int, length: int) -> bytes:
        if not handle:
            handle.append(mdt.open_input_file(path))
        data = handle[0].read_at(length, offset)
        _count(bytes_read=len(data), base_bytes_read=len(data))
        return bytes(data)

    try:
        index = _INDEXES.get((table_uri, path))
        if index is None:
            index = read_block_index(read_at, group.base_size or mdt.size(path), mdt.full(path))
            _INDEXES.put((table_uri, path), index, index.nbytes)
            _count(index_reads=1)
        out: list[tuple[pa.BinaryArray, Callable[[np.ndarray], pa.Array]]] = []
        read = cached = 0
        for block in candidate_blocks(index, distinct).tolist():
            key = (table_uri, path, block)
            cells = _BLOCKS.get(key)
            if cells is None:
                cells, _ = read_data_block(read_at, index, block)
                _BLOCKS.put(key, cells, cells.nbytes)
                read += 1
            else:
                cached += 1
            out.append((cells.rows, cells.values))
        _count(data_blocks_read=read, data_blocks_cached=cached)
    except OSError as e:
        raise HoodieTableError(f"Cannot read record-index base file {mdt.full(path)}: {e}") from e
    finally:
        for f in handle:
            f.close()
    return out


def _applied_log_blocks(mdt: Storage, files: RecordIndexFiles, group: RecordIndexSlice) -> list[_LogBlock]:
    """The slice's log blocks a reader applies, oldest first (as format/metadata_listing.py)."""
    blocks: list[_LogBlock] = []
    for path, size in group.log_files:
        blocks += _log_blocks(mdt, files.table_uri, path, size)
    undone = {b.rollback_target for b in blocks if b.block_type == COMMAND_BLOCK}
    return [
        b for b in blocks
        if b.block_type != COMMAND_BLOCK and files.counts(b.instant) and b.instant not in undone
    ]  # fmt: skip


def _log_blocks(mdt: Storage, table_uri: str, path: str, size: int) -> list[_LogBlock]:
    key = (table_uri, path, size)
    cached = _BLOCKS.get(key)
    if cached is not None:
        _count(log_files_cached=1)
        return cached
    data = mdt.read_bytes(path)
    _count(bytes_read=len(data), log_files_read=1)
    name = mdt.full(path)
    out = []
    for block in read_blocks(data, name):
        instant = block.header.get(INSTANT_TIME, "")
        if block.block_type == HFILE_DATA_BLOCK:
            rows, values = HFileReader(block.content, name=f"{name} (block of {instant})").keys_and_values()
            out.append(_LogBlock(instant, HFILE_DATA_BLOCK, rows, values))
        elif block.block_type == DELETE_BLOCK:
            deleted = [d["recordKey"] for d in deleted_keys(block)]  # few: the deletes of one commit
            if any(k is None for k in deleted):
                raise CorruptLogBlock(f"{name}: a record-index delete block at {instant} holds a null key")
            out.append(
                _LogBlock(instant, DELETE_BLOCK, pa.array(deleted, pa.string()).cast(pa.binary()), None)
            )
        elif block.block_type == COMMAND_BLOCK:
            out.append(_LogBlock(instant, COMMAND_BLOCK, _EMPTY, None, block.header.get(TARGET_INSTANT_TIME)))
        else:
            raise CorruptLogBlock(
                f"{name}: block type {block.block_type} at {instant} has no place in a metadata log"
            )
    if len(data) == size or not size:  # cached under the size it was listed with, if it still has it
        _BLOCKS.put(key, out, sum(b.nbytes for b in out))
    return out


def _parallel(fn: Callable[[int], Any], items: list[int]) -> list:
    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(IO_THREADS, len(items))) as pool:
        return list(pool.map(fn, items))
