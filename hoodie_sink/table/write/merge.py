"""Record merging, vectorised: de-duplicate a batch of changes, and merge changes into a file group.

A *change set* is an Arrow table of data columns (table schema) plus four control columns:
`_hk` the record key, `_hp` the partition path, `_ho` the arrival order (int64, larger =
later) and `_hd` the change kind (UPSERT, SOFT_DELETE: a `_hoodie_is_deleted` record that still
obeys the ordering rule, DELETE: the delete operation, which always wins, MOVED_OUT: the stored
copy of a key whose record moves to another partition under a global index; it carries the
record's ordering value and deletes every stored copy of the key that the record beats, each
compared on its own, as Java's `HoodieIndexUtils.mergeForPartitionUpdatesIfNeeded` merges the
record with each copy: a copy that beats the record stays where it is).

A record's identity is its key under a global index and the pair (key, partition path) under
a partition-scoped one (BLOOM, BUCKET): changes are combined per identity, as Hudi's
de-duplication does.

Ordering rule: the write's MergeRule (format/merge_rule.py), the one the readers apply.  A null
ordering value counts as the smallest value (docs/hudi/null-ordering.md): an upsert refuses one
(`refuse_null_ordering`, as Java 0.15 does), but a copy-on-write insert or bulk_insert stores
them, and a stored null then loses to any incoming value, as in Java's copy-on-write merge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieSchemaError
from hoodie_sink.table.format.merge_rule import MergeRule
from hoodie_sink.table.format.partial_update import combine, occurrences
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.read.base_file import conform

KEY, PART, ORDER, KIND = "_hk", "_hp", "_ho", "_hd"
CONTROL = (KEY, PART, ORDER, KIND)
UPSERT, SOFT_DELETE, DELETE, MOVED_OUT = 0, 1, 2, 3
COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME = META_COLUMNS


def data_of(changes: pa.Table) -> pa.Table:
    return changes.drop_columns([c for c in CONTROL if c in changes.column_names])


def refuse_null_ordering(batch: pa.RecordBatch | pa.Table, precombine: str, operation: str) -> None:
    """Refuse a batch holding a null ordering value (vectorised: one null count), for the writes
    that write_path.ordered_input_field names.  Java 0.15's Spark writers fail such an upsert as a
    whole, COW and MOR alike, whatever the payload class ("Ordering value is null for record",
    docs/hudi/null-ordering.md).  The task fails, so the write aborts and the table stays as it was."""
    i = batch.schema.get_field_index(precombine)
    if i < 0:
        return  # the input must have the column: coordinator._check_input_columns refuses it before
    column = batch.column(i)
    if column.null_count == 0:
        return
    first = pc.index(pc.is_null(column), True).as_py()
    raise HoodieSchemaError(
        f"Column '{precombine}' (option 'hoodie.datasource.write.precombine.field', the ordering field) "
        f"is null in {column.null_count} of {batch.num_rows} rows of an input batch (first at row {first}) "
        f"of the {operation} operation, so nothing was written: a record without an ordering value "
        f"cannot be compared with the other records of its key. Apache Hudi 0.15 fails on it too "
        f"('Ordering value is null for record': its upsert refuses it, its merge-on-read readers fail "
        f"on it in a log file). Help: fill or filter those rows, e.g. df.na.drop(subset=['{precombine}']); "
        f"insert and bulk_insert into a copy-on-write table compare nothing and accept them."
    )


def reduce_changes(changes: pa.Table, rule: MergeRule, per_partition: bool = False) -> pa.Table:
    """Keep one change per record: the winner of the ordering rule.  A record is its key, or
    with `per_partition` (partition-scoped indexes) its (key, partition path) pair: a delete of
    k in one partition and an insert of k in another are two records, both kept."""
    if changes.num_rows <= 1:
        return changes
    if pc.count_distinct(changes.column(KEY), mode="all").as_py() == changes.num_rows:
        return changes  # one change per key already (the common case): no sort needed
    scope = [KEY, PART] if per_partition else [KEY]
    if rule.partial:
        return _reduce_partially(changes, rule, scope)
    order = pc.sort_indices(changes, sort_keys=rule.ranking(scope, ORDER))
    ranked = changes.take(order)
    first = first_of_groups(ranked, scope)
    return ranked.filter(pa.array(first))


def _reduce_partially(changes: pa.Table, rule: MergeRule, scope: list[str]) -> pa.Table:
    """PartialUpdateAvroPayload's de-duplication (its preCombine, docs/hudi/partial-update.md): a
    record's changes folded in arrival order, each step keeping the winner by ordering value (a
    tie goes to the later) with its null columns filled from the other.  The fold is not
    associative, so it runs in rounds: round r merges every record's r-th change into what the
    earlier rounds left, all records at once.  A delete (the delete operation) ends the fold
    where it comes and an upsert after it starts afresh (Java: "natural order for delete record")."""
    order = pc.sort_indices(changes, sort_keys=[(c, "ascending") for c in scope] + [(ORDER, "ascending")])
    ranked = changes.take(order)
    first = first_of_groups(ranked, scope)
    group = np.cumsum(first) - 1
    nth = occurrences(group)
    state = ranked.filter(pa.array(nth == 0))  # one row per record, in group order
    data = [c for c in changes.column_names if c not in CONTROL]
    for r in range(1, int(nth.max()) + 1):
        at = nth == r
        newer = ranked.filter(pa.array(at))
        slots = pa.array(group[at])
        older = state.take(slots)
        older_kind = np.asarray(older.column(KIND).to_numpy(), dtype=np.int8)
        newer_kind = np.asarray(newer.column(KIND).to_numpy(), dtype=np.int8)
        both_upserts = (older_kind == UPSERT) & (newer_kind == UPSERT)
        older_first = np.zeros(newer.num_rows, dtype=bool)
        if rule.ordering_field:
            older_first = MergeRule.strictly_greater(
                older.column(rule.ordering_field), newer.column(rule.ordering_field)
            )
        merged = combine(older, newer, older_first & both_upserts, data)
        mask = pa.array(both_upserts)
        for name, values in merged.items():
            i = newer.schema.get_field_index(name)
            # a delete on either side: the newer change as it is
            newer = newer.set_column(i, name, pc.if_else(mask, values, newer.column(name).cast(values.type)))
        # the newer change takes the record's slot; ORDER stays the latest arrival
        take = np.arange(state.num_rows)
        take[group[at]] = state.num_rows + np.arange(newer.num_rows)
        state = pa.concat_tables([state, newer.cast(state.schema)]).take(pa.array(take))
    return state


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


@dataclass(frozen=True)
class _Match:
    """How the stored rows of a file group meet the incoming changes."""

    take_old: np.ndarray  # per surviving old row: its index in concat([old, changes])
    from_changes: np.ndarray  # per surviving old row: replaced by its winning change
    deleted: np.ndarray  # per old row
    updated: np.ndarray  # per old row
    matched: np.ndarray  # per change: met a stored row

    @staticmethod
    def nothing_stored(n_changes: int) -> _Match:
        none = np.zeros(0, dtype=bool)
        return _Match(np.zeros(0, dtype=np.int64), none, none, none, np.zeros(n_changes, dtype=bool))


def merge_file_group(
    old: pa.Table | None,
    changes: pa.Table,
    rule: MergeRule,
    instant: str,
    partition_id: int,
    append_only: bool = False,
) -> MergeResult:
    """Merge reduced `changes` (one per key) into `old` (a base file: meta + data columns).

    `append_only` (the insert operation) adds every change as a new row, matching nothing.
    Unless the rule orders by event time, the change replaces the stored record whatever their
    precombine values (OverwriteWithLatestAvroPayload: they then only de-duplicate `changes`).
    Old rows keep their position (updated ones in place, deleted ones dropped); inserts go
    last.  Copied rows keep their commit time and sequence number, written rows get the new
    instant and a sequence number counting their output position.
    """
    kinds = np.asarray(changes.column(KIND).to_numpy(), dtype=np.int8)
    n_old = old.num_rows if old is not None else 0
    if not n_old:
        match = _Match.nothing_stored(changes.num_rows)
    elif append_only:
        nothing = np.zeros(n_old, dtype=bool)
        match = _Match(np.arange(n_old), nothing, nothing, nothing, np.zeros(changes.num_rows, dtype=bool))
    elif rule.partial:
        match, old = _match_partially(old, changes, kinds, rule)
    else:
        match = _match_stored(old, changes, kinds, rule)
    unmatched = ~match.matched
    inserts = np.nonzero(unmatched & (kinds == UPSERT))[0]
    take = np.concatenate([match.take_old, n_old + inserts]).astype(np.int64)
    is_new = np.concatenate([match.from_changes, np.ones(len(inserts), dtype=bool)])
    data, keys, times, seqnos = _assemble(
        old if n_old else None, changes, take, is_new, instant, partition_id
    )
    return MergeResult(
        data=data,
        keys=keys,
        commit_times=times,
        seqnos=seqnos,
        num_updates=int(match.updated.sum()),
        num_inserts=len(inserts),
        num_deletes=int(match.deleted.sum()),
        num_missing_deletes=int((unmatched & (kinds != UPSERT)).sum()),
    )


def _match_stored(old: pa.Table, changes: pa.Table, kinds: np.ndarray, rule: MergeRule) -> _Match:
    """Which stored rows a change updates or deletes: a change wins unless the stored record's
    ordering value is strictly greater (deletes by the delete operation always win).  Every stored
    row is compared on its own: of a key stored twice, a move deletes the copies it beats only."""
    n_old = old.num_rows
    pos = pc.index_in(old.column(RECORD_KEY), value_set=changes.column(KEY).combine_chunks())
    valid = np.asarray(pc.is_valid(pos).to_numpy(zero_copy_only=False), dtype=bool)
    inc_at = np.asarray(pc.fill_null(pos, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    wins = valid.copy()
    precombine = rule.ordering_field
    if rule.event_time and precombine and valid.any():
        stored = old.column(precombine) if precombine in old.column_names else pa.nulls(n_old)
        incoming = changes.column(precombine).take(pa.array(inc_at))
        wins &= ~MergeRule.strictly_greater(stored, incoming)
    # the delete operation ignores ordering; a move does not: it deletes only the copies it beats
    # (docs/hudi/duplicate-keys.md)
    wins |= valid & (kinds[inc_at] == DELETE)
    matched = np.zeros(changes.num_rows, dtype=bool)
    matched[inc_at[valid]] = True
    deleted = wins & (kinds[inc_at] != UPSERT)
    updated = wins & (kinds[inc_at] == UPSERT)
    keep = ~deleted
    # index into concat([old, changes]): old rows, or the winning change in their place
    take_old = np.where(updated, n_old + inc_at, np.arange(n_old))[keep]
    return _Match(take_old, updated[keep], deleted, updated, matched)


def _match_partially(
    old: pa.Table, changes: pa.Table, kinds: np.ndarray, rule: MergeRule
) -> tuple[_Match, pa.Table]:
    """PartialUpdateAvroPayload against the stored record (its combineAndGetUpdateValue,
    docs/hudi/partial-update.md): every matched upsert rewrites the stored row, which keeps the
    winner's values (the stored record wins only with a strictly greater ordering value) and the
    other's where the winner's are null; a delete deletes.  Returns the match and `old` with the
    updated rows' data columns merged in place (the match takes them from there, as written rows)."""
    n_old = old.num_rows
    pos = pc.index_in(old.column(RECORD_KEY), value_set=changes.column(KEY).combine_chunks())
    valid = np.asarray(pc.is_valid(pos).to_numpy(zero_copy_only=False), dtype=bool)
    inc_at = np.asarray(pc.fill_null(pos, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    matched = np.zeros(changes.num_rows, dtype=bool)
    matched[inc_at[valid]] = True
    deleted = valid & (kinds[inc_at] != UPSERT)
    updated = valid & (kinds[inc_at] == UPSERT)
    keep = ~deleted
    match = _Match(np.arange(n_old)[keep], updated[keep], deleted, updated, matched)
    if not updated.any():
        return match, old
    incoming = changes.take(pa.array(inc_at))
    data = [c for c in changes.column_names if c not in CONTROL]
    old_data = conform(old.select([c for c in data if c in old.column_names]), data_of(changes).schema)
    precombine = rule.ordering_field
    older_first = np.zeros(n_old, dtype=bool)
    if precombine:
        older_first = MergeRule.strictly_greater(old_data.column(precombine), incoming.column(precombine))
    merged = combine(old_data, incoming, older_first, data)
    mask = pa.array(updated)
    out = old
    for name in data:
        values = pc.if_else(mask, merged[name], old_data.column(name))
        i = out.schema.get_field_index(name)
        out = out.set_column(i, name, values) if i >= 0 else out.append_column(name, values)
    return match, out


def _assemble(
    old: pa.Table | None,
    changes: pa.Table,
    take: np.ndarray,
    is_new: np.ndarray,
    instant: str,
    partition_id: int,
) -> tuple[pa.Table, pa.Array, pa.Array, pa.Array]:
    """The merged rows (data, record keys, commit times, sequence numbers), taken from
    concat([old, changes]): copied rows keep their meta values, written ones get new ones."""
    data_cols = [c for c in changes.column_names if c not in CONTROL]
    change_data = changes.select(data_cols)
    inc_keys = changes.column(KEY)
    no_meta = pa.nulls(changes.num_rows, pa.string())
    if old is not None:
        old_data = conform(old.select([c for c in data_cols if c in old.column_names]), change_data.schema)
        both = pa.concat_tables([old_data, change_data])
        both_keys = pa.chunked_array(old.column(RECORD_KEY).chunks + inc_keys.chunks, pa.string())
        both_times = pa.chunked_array(old.column(COMMIT_TIME).chunks + [no_meta], pa.string())
        both_seq = pa.chunked_array(old.column(COMMIT_SEQNO).chunks + [no_meta], pa.string())
    else:
        both, both_keys = change_data, inc_keys
        both_times = both_seq = no_meta
    take_arr = pa.array(take)
    keys = both_keys.take(take_arr).combine_chunks() if len(take) else pa.array([], pa.string())
    if not len(take):
        return both.take(take_arr), keys, keys, keys
    new_mask = pa.array(is_new)
    times = pc.if_else(new_mask, pa.scalar(instant), both_times.take(take_arr))
    positions = pc.cast(pa.array(np.arange(len(take), dtype=np.int64)), pa.string())
    fresh_seq = pc.binary_join_element_wise(f"{instant}_{partition_id}_", positions, "")
    seqnos = pc.if_else(new_mask, fresh_seq, both_seq.take(take_arr))
    return both.take(take_arr), keys, _combined(times), _combined(seqnos)


def _combined(a) -> pa.Array:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def without_losers_to_stored(changes: pa.Table, stored: pa.Table, rule: MergeRule) -> pa.Table:
    """Drop the changes whose stored record wins (event-time ordering: its precombine value is
    strictly greater); `stored` holds the stored rows' RECORD_KEY and precombine columns.  What a
    copy-on-write merge decides per row, decided before a merge-on-read write appends to a log
    (Java's readers would also drop a losing update, but they apply a losing delete)."""
    precombine = rule.ordering_field
    if (
        not rule.drops_losers
        or stored.num_rows == 0
        or changes.num_rows == 0
        or precombine not in stored.column_names
    ):
        return changes
    pos = pc.index_in(changes.column(KEY), value_set=stored.column(RECORD_KEY).combine_chunks())
    valid = np.asarray(pc.is_valid(pos).to_numpy(zero_copy_only=False), dtype=bool)
    if not valid.any():
        return changes
    at = pa.array(np.asarray(pc.fill_null(pos, 0).to_numpy(zero_copy_only=False), dtype=np.int64))
    stored_values = stored.column(precombine).take(at)
    loses = MergeRule.strictly_greater(stored_values, changes.column(precombine)) & valid
    kinds = np.asarray(changes.column(KIND).to_numpy(), dtype=np.int8)
    loses &= kinds < DELETE  # the delete operation (and a move) ignores ordering
    return changes.filter(pa.array(~loses)) if loses.any() else changes
