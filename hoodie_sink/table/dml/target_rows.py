"""The stored rows a MERGE, UPDATE or DELETE reads: the rows of given record keys, found through
the table's index so that only the file groups holding them are read, or the rows a predicate may
select, after partition pruning and data skipping (docs/design/table-dml.md#reading-the-target).

Rows come as the snapshot's readers return them (merge-on-read slices merged), with Hudi's meta
columns; the record key of each is the stored `_hoodie_record_key`, or, in a virtual-key table,
the key generator's over its columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.file_group import FileSlice
from hoodie_sink.table.format.keygen import KeyGenerator
from hoodie_sink.table.index.bucket import bucket_of_file_id, record_key_bucket_ids
from hoodie_sink.table.index.key_index import KeyIndex
from hoodie_sink.table.index.protocol import Index
from hoodie_sink.table.index.record_index import RecordIndex
from hoodie_sink.table.read.data_skipping import Predicate
from hoodie_sink.table.read.snapshot import Snapshot, skip_slices, slice_ref

RECORD_KEY = "_hoodie_record_key"
IDENTITY_META = (RECORD_KEY, "_hoodie_partition_path")
_READ_THREADS = 4  # slices read at once: pyarrow's Parquet reads release the GIL


@dataclass(frozen=True)
class KeyLookup:
    """How the target's index finds the file groups of record keys."""

    index: Index
    keygen: KeyGenerator
    stored_keygen: KeyGenerator | None  # a virtual-key table's stored rows' keys
    num_buckets: int = 0
    bucket_hash_fields: tuple[str, ...] = ()

    def file_groups(self, snap: Snapshot, record_keys: pa.Array) -> set[tuple[str, str]] | None:
        """(partition path, file id) of every file group that may hold one of the keys; None: any."""
        if self.index.bucketed:
            hash_fields = self.bucket_hash_fields or tuple(self.keygen.config.record_key_fields)
            buckets = set(
                np.unique(record_key_bucket_ids(record_keys, hash_fields, self.num_buckets)).tolist()
            )
            return {(sl.partition_path, sl.file_id) for sl in snap.file_slices()
                    if bucket_of_file_id(sl.file_id) in buckets}  # fmt: skip
        base_files = snap.base_files()
        if isinstance(self.index, RecordIndex):
            locator: KeyIndex | None = self.index.locator(snap.storage, base_files, self.stored_keygen)
        elif self.index.locator(snap.storage, base_files, self.stored_keygen) is not None:
            # every copy of a key, in any partition: a target row matched by key may live anywhere
            locator = KeyIndex(snap.storage, base_files, global_index=True, key_generator=self.stored_keygen)
        else:
            return None
        assert locator is not None
        found = locator.locate(record_keys)
        ids, parts = found.tags.file_id, found.tags.partition_path
        hit = pc.is_valid(ids)
        groups = set(zip(parts.filter(hit).to_pylist(), ids.filter(hit).to_pylist(), strict=True))
        # a file group without a base file holds keys no base file shows (log-only inserts)
        if snap.merges_logs:
            groups |= {(sl.partition_path, sl.file_id) for sl in snap.file_slices() if sl.base_file is None}
        return groups


def rows_of_keys(
    snap: Snapshot, lookup: KeyLookup, record_keys: pa.Array, columns: list[str] | None = None
) -> pa.Table:
    """The stored rows whose record key is one of `record_keys` (every copy of it); `columns`: only
    those (and the meta columns that identify a row)."""
    keys = pc.unique(record_keys.filter(pc.is_valid(record_keys)))
    if not len(keys):
        return snap.schema.empty_table()
    groups = lookup.file_groups(snap, keys)
    slices = snap.file_slices()
    if groups is not None:
        slices = [sl for sl in slices if (sl.partition_path, sl.file_id) in groups]
    rows = _read(snap, slices, columns)
    return rows.filter(pc.is_in(stored_keys(rows, lookup.stored_keygen), value_set=keys))


def refs_of_predicate(snap: Snapshot, predicates: Sequence[Predicate]) -> list[str]:
    """Every file slice that `predicates` (conjuncts of the DML's condition) do not rule out, one
    read ref each (`Snapshot.read_ref`'s): partition pruning and data skipping by column statistics,
    as a filtered read does; the exact condition is the caller's.  Metadata only, so that a driver
    can hand each slice to a task of its own."""
    return _refs(snap, skip_slices(snap.storage, snap.file_slices(), predicates, snap.metadata_stats()))


def rows_of_refs(snap: Snapshot, refs: Sequence[str], columns: list[str] | None = None) -> pa.Table:
    """The stored rows of the file slices `refs` names (`refs_of_predicate`'s)."""
    if columns is not None:  # the meta columns that identify a stored row come too
        columns = [c for c in (*IDENTITY_META, *columns) if c in snap.schema.names]
        columns = list(dict.fromkeys(columns))
    schema = snap.schema if columns is None else pa.schema([snap.schema.field(c) for c in columns])
    if not refs:
        return schema.empty_table()
    with ThreadPoolExecutor(min(_READ_THREADS, len(refs))) as pool:
        tables = list(pool.map(lambda ref: snap.read_ref(ref, columns), refs))
    return pa.concat_tables(tables, promote_options="permissive")


def stored_keys(rows: pa.Table, stored_keygen: KeyGenerator | None) -> pa.Array:
    if stored_keygen is None:
        col = rows.column(RECORD_KEY)
        return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return stored_keygen.record_keys(rows)


def _read(snap: Snapshot, slices: list[FileSlice], columns: list[str] | None = None) -> pa.Table:
    return rows_of_refs(snap, _refs(snap, slices), columns)


def _refs(snap: Snapshot, slices: list[FileSlice]) -> list[str]:
    """A slice's base file path, or with merged logs the slice itself; a log-only slice is read
    only by a snapshot that merges logs (a read-optimized one has no rows there)."""
    return [_ref(snap, sl) for sl in slices if snap.merges_logs or sl.base_file is not None]


def _ref(snap: Snapshot, sl: FileSlice) -> str:
    if snap.merges_logs or sl.base_file is None:
        return slice_ref(sl)
    return sl.base_file.path
