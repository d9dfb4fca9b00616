"""Record merging, vectorised: de-duplicate a batch of changes, and merge changes into a file group.

A *change set* is an Arrow table of data columns (table schema) plus four control columns:
`_hk` the record key, `_hp` the partition path, `_ho` the arrival order (int64, larger =
later) and `_hd` the change kind (UPSERT, SOFT_DELETE: a `_hoodie_is_deleted` record that still
obeys the ordering rule, DELETE: the delete operation, which always wins, MOVED_OUT: the stored
copy of a key whose record moves to another partition under a global index; the task has
already checked that the record beats the stored one, so it deletes like DELETE).

A record's identity is its key under a global index and the pair (key, partition path) under
a partition-scoped one (BLOOM, BUCKET): changes are combined per identity, as Hudi's
de-duplication does.

Ordering rule (Hudi's DefaultHoodieRecordPayload / OverwriteWithLatest): with a precombine
field the record with the highest value wins, within a batch and against the stored record;
ties (and nulls) go to the later/incoming record.  Without one, the latest write wins.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.read.base_file import conform

KEY, PART, ORDER, KIND = "_hk", "_hp", "_ho", "_hd"
CONTROL = (KEY, PART, ORDER, KIND)
UPSERT, SOFT_DELETE, DELETE, MOVED_OUT = 0, 1, 2, 3
COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME = META_COLUMNS


def data_of(changes: pa.Table) -> pa.Table:
    return changes.drop_columns([c for c in CONTROL if c in changes.column_names])


def _not_greater(a: pa.ChunkedArray | pa.Array, b: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """a <= b, with nulls on either side counted as 'not greater' (the later record wins)."""
    gt = pc.greater(a, b)
    return ~np.asarray(pc.fill_null(gt, False).to_numpy(zero_copy_only=False), dtype=bool)


def reduce_changes(changes: pa.Table, precombine: str | None, per_partition: bool = False) -> pa.Table:
    """Keep one change per record: the winner of the ordering rule.  A record is its key, or
    with `per_partition` (partition-scoped indexes) its (key, partition path) pair: a delete of
    k in one partition and an insert of k in another are two records, both kept."""
    if changes.num_rows <= 1:
        return changes
    if pc.count_distinct(changes.column(KEY), mode="all").as_py() == changes.num_rows:
        return changes  # one change per key already (the common case): no sort needed
    scope = [KEY, PART] if per_partition else [KEY]
    sort_keys = [(c, "ascending") for c in scope]
    if precombine:
        sort_keys.append((precombine, "descending", "at_end"))
    sort_keys.append((ORDER, "descending"))
    order = pc.sort_indices(changes, sort_keys=sort_keys)
    ranked = changes.take(order)
    first = first_of_groups(ranked, scope)
    return ranked.filter(pa.array(first))


def first_of_groups(ranked: pa.Table, scope: list[str]) -> np.ndarray:
    """Mask of the first row of each run of equal `scope` values (rows sorted by scope)."""
    n = ranked.num_rows
    first = np.zeros(n, dtype=bool)
    if n == 0:
        return first
    first[0] = True
    for c in scope:
        col = ranked.column(c).combine_chunks()
        same = pc.equal(col.slice(1), col.slice(0, n - 1))
        first[1:] |= ~np.asarray(pc.fill_null(same, False).to_numpy(zero_copy_only=False), dtype=bool)
    return first


@dataclass
class MergeResult:
    """A new version of one file group: rows in output order and their meta fields."""

    data: pa.Table  # data columns only, table schema
    keys: pa.Array
    commit_times: pa.Array
    seqnos: pa.Array
    num_updates: int
    num_inserts: int
    num_deletes: int
    num_missing_deletes: int

    @property
    def inserted_keys(self) -> pa.Array:
        """Keys new to the file group (the old version's bloom filter lacks them): inserts go last."""
        return self.keys.slice(len(self.keys) - self.num_inserts)


def merge_file_group(
    old: pa.Table | None,
    changes: pa.Table,
    precombine: str | None,
    instant: str,
    partition_id: int,
    append_only: bool = False,
    commit_time_ordering: bool = False,
) -> MergeResult:
    """Merge reduced `changes` (one per key) into `old` (a base file: meta + data columns).

    `append_only` (the insert operation) adds every change as a new row, matching nothing.
    `commit_time_ordering` (OverwriteWithLatestAvroPayload): the change replaces the stored record
    whatever their precombine values (which then only de-duplicate `changes`).
    Old rows keep their position (updated ones in place, deleted ones dropped); inserts go
    last.  Copied rows keep their commit time and sequence number, written rows get the new
    instant and a sequence number counting their output position.
    """
    data_cols = [c for c in changes.column_names if c not in CONTROL]
    n_old = old.num_rows if old is not None else 0
    inc_keys = changes.column(KEY)
    kinds = np.asarray(changes.column(KIND).to_numpy(), dtype=np.int8)
    matched_inc = np.zeros(changes.num_rows, dtype=bool)

    if n_old and append_only:
        take_old, src_new_old = np.arange(n_old), np.zeros(n_old, dtype=bool)
        deleted = updated = np.zeros(n_old, dtype=bool)
    elif n_old:
        old_keys = old.column(RECORD_KEY)
        pos = pc.index_in(old_keys, value_set=inc_keys.combine_chunks())
        valid = np.asarray(pc.is_valid(pos).to_numpy(zero_copy_only=False), dtype=bool)
        inc_at = np.asarray(pc.fill_null(pos, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
        wins = valid.copy()
        if precombine and not commit_time_ordering and valid.any():
            stored = old.column(precombine) if precombine in old.column_names else pa.nulls(n_old)
            incoming = changes.column(precombine).take(pa.array(inc_at))
            # the stored record survives only if its ordering value is strictly greater
            wins &= _not_greater(stored, incoming)
        wins |= valid & (kinds[inc_at] >= DELETE)  # the delete operation (and a move) ignores ordering
        matched_inc[inc_at[valid]] = True
        deleted = wins & (kinds[inc_at] != UPSERT)
        updated = wins & (kinds[inc_at] == UPSERT)
        keep = ~deleted
        # index into concat([old, changes]): old rows, or the winning change in their place
        take_old = np.where(updated, n_old + inc_at, np.arange(n_old))[keep]
        src_new_old = updated[keep]
    else:
        take_old = np.zeros(0, dtype=np.int64)
        src_new_old = np.zeros(0, dtype=bool)
        deleted = np.zeros(0, dtype=bool)
        updated = np.zeros(0, dtype=bool)

    unmatched = ~matched_inc
    inserts = np.nonzero(unmatched & (kinds == UPSERT))[0]
    missing_deletes = int((unmatched & (kinds != UPSERT)).sum())
    take = np.concatenate([take_old, n_old + inserts]).astype(np.int64)
    is_new = np.concatenate([src_new_old, np.ones(len(inserts), dtype=bool)])

    change_data = changes.select(data_cols)
    if n_old:
        old_data = conform(old.select([c for c in data_cols if c in old.column_names]), change_data.schema)
        both = pa.concat_tables([old_data, change_data])
        both_keys = pa.chunked_array(old.column(RECORD_KEY).chunks + inc_keys.chunks, pa.string())
        both_times = pa.chunked_array(
            old.column(COMMIT_TIME).chunks + [pa.nulls(changes.num_rows, pa.string())], pa.string()
        )
        both_seq = pa.chunked_array(
            old.column(COMMIT_SEQNO).chunks + [pa.nulls(changes.num_rows, pa.string())], pa.string()
        )
    else:
        both, both_keys = change_data, inc_keys
        both_times = both_seq = pa.nulls(changes.num_rows, pa.string())
    take_arr = pa.array(take)
    out = both.take(take_arr)
    keys = both_keys.take(take_arr).combine_chunks() if len(take) else pa.array([], pa.string())
    new_mask = pa.array(is_new)
    times = pc.if_else(new_mask, pa.scalar(instant), both_times.take(take_arr)) if len(take) else keys
    positions = pc.cast(pa.array(np.arange(len(take), dtype=np.int64)), pa.string())
    fresh_seq = pc.binary_join_element_wise(f"{instant}_{partition_id}_", positions, "")
    seqnos = pc.if_else(new_mask, fresh_seq, both_seq.take(take_arr)) if len(take) else keys
    return MergeResult(
        data=out,
        keys=keys,
        commit_times=_combined(times),
        seqnos=_combined(seqnos),
        num_updates=int(updated.sum()),
        num_inserts=len(inserts),
        num_deletes=int(deleted.sum()),
        num_missing_deletes=missing_deletes,
    )


def _combined(a) -> pa.Array:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
