"""Snapshot read of one merge-on-read file slice: its base file merged with its log files.

The log scan follows Java 0.14's `AbstractHoodieLogRecordReader` (docs/hudi/services.md#log-scan):
log files in slice order (version, then write token), blocks in file order; a block of an instant after
the query instant, or of one not committed, is skipped; a rollback command block drops the
earlier blocks of its target instant.  Which instants count is one rule, `CommittedInstants`,
for every fold of a slice's logs: reads, the writers' rewrites of a base file and their look-ups
of stored values, compaction, clustering (docs/hudi/uncommitted-log-blocks.md).  Records are
then merged as Java's payloads do (docs/hudi/services.md#merge-semantics):

- log records among themselves, in scan order: a data record replaces the earlier one of its key
  unless ordering is by event time (a precombine field and DefaultHoodieRecordPayload, or a table
  whose payload compares ordering values) and the earlier value is strictly greater (a null
  ordering value being the smallest, as Java's merge takes it: docs/hudi/null-ordering.md); a data record
  after a delete always wins (Java: "natural order for delete record"); a delete wins unless it
  carries an ordering value and the earlier record's value is strictly greater;
- the merged log record against the base row: a delete removes it; a data record replaces it
  unless event-time ordering keeps the base row (strictly greater value); a data record with
  `_hoodie_is_deleted` = true deletes.  A key stored twice in the base file: the log record
  meets its first copy only (as Java's readers and hudi-rs), the later copies are read as stored.
- PartialUpdateAvroPayload (docs/hudi/partial-update.md): the same winners, but two data records
  (log and log, log and base) become one, the winner's columns with its nulls filled from the
  other's (`_fold_partially`, `_with_base_merged`).

Everything is vectorised over Arrow: the fold runs once per log block (one block per write of
the file group), never once per record.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format import log_format
from hoodie_sink.table.format.avro_rows import decode_block_content
from hoodie_sink.table.format.debezium import op_deleted
from hoodie_sink.table.format.file_group import FileSlice, LogFile
from hoodie_sink.table.format.merge_rule import MergeRule
from hoodie_sink.table.format.partial_update import combine
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.read.base_file import conform, read_base_file
from hoodie_sink.table.storage import Storage

RECORD_KEY = META_COLUMNS[2]
IS_DELETED = "_hoodie_is_deleted"
_DEL, _ORD, _POS = "_hoodie_sink_deleted", "_hoodie_sink_ordering", "_hoodie_sink_position"
DELETED_FLAG = _DEL  # column of scan_logs' result: the key's latest log record is a delete
ORDERING_VALUE = _ORD  # column of scan_logs' result: that record's ordering value
_EPOCH = dt.date(1970, 1, 1)


@dataclass(frozen=True)
class CommittedInstants:
    """The instants whose data and delete blocks a fold of a slice's logs counts: those completed on
    `timeline` (or older than its first write: archived), and earlier than `before` when given (a
    writer's or a service's own instant).  A block of a pending instant (a write that died before
    its commit, or one still running) never counts, whoever folds the logs: a writer that rewrote
    a base file from it would publish the dead write's records under its own commit, and they
    would outlive the dead instant's rollback (docs/hudi/uncommitted-log-blocks.md).  Picklable
    (a write's tasks carry it): pass a plain Timeline, not an ActiveTimeline."""

    timeline: Timeline
    before: str | None = None

    def __call__(self, instant: str) -> bool:
        if self.before is not None and instant >= self.before:
            return False
        return self.timeline.is_committed(instant)


@dataclass
class LogStats:
    """What a scan found (compaction reports it)."""

    records: int = 0
    blocks: int = 0
    rollback_blocks: int = 0
    files: int = 0
    bytes: int = 0
    deletes: int = 0  # records the logs deleted from the merge result (Java's numDeletes of a compaction)


@dataclass(frozen=True)
class _Block:
    instant: str
    kind: int
    data: pa.Table | None = None  # data: rows of the read schema; delete: KEY, _ORD (natural: null)


def read_file_slice(
    storage: Storage,
    sl: FileSlice,
    schema: pa.Schema,
    rule: MergeRule,
    committed: CommittedInstants,
    as_of: str | None = None,
    stats: LogStats | None = None,
    skip_merge: bool = False,
) -> pa.Table:
    """The merged rows of `sl` at `schema` (meta + data columns, as the snapshot's schema).
    `skip_merge` (Hudi's merge.type=skip_merge): the base rows, then the log records merged among
    themselves (deletes dropped), the two never merged: a key updated in the logs appears twice."""
    base = read_base_file(storage, sl.base_file.path, schema) if sl.base_file is not None else None
    if not sl.log_files:
        return base if base is not None else schema.empty_table()
    merged = scan_logs(storage, sl.log_files, schema, rule, committed, as_of, stats)
    if skip_merge:
        logs = merge_with_base(None, merged, schema, rule)
        return pa.concat_tables([base, logs.cast(base.schema)]) if base is not None else logs
    rows = merge_with_base(base, merged, schema, rule)
    if stats is not None and merged is not None:
        stats.deletes += _deleted_records(merged, rows, rule)
    return rows


# ------------------------------------------------------------------------------------ log scan


def scan_logs(
    storage: Storage,
    log_files: list[LogFile],
    schema: pa.Schema,
    rule: MergeRule,
    committed: CommittedInstants,
    as_of: str | None = None,
    stats: LogStats | None = None,
) -> pa.Table | None:
    """The slice's log records merged per key: `schema` columns plus the delete flag and the
    ordering value; None if no block counts."""
    blocks: list[_Block] = []
    for lf in sorted(log_files, key=lambda f: (f.base_instant, f.version, f.write_token)):
        data = storage.read_bytes(lf.path)
        if stats is not None:
            stats.files += 1
            stats.bytes += len(data)
        try:
            for block in log_format.read_blocks(data, storage.full(lf.path)):
                _collect(block, blocks, schema, rule, committed, as_of, storage.full(lf.path), stats)
        except (log_format.CorruptLogBlock, ValueError, KeyError) as e:
            raise HoodieTableError(f"Cannot read log file {storage.full(lf.path)}: {e}") from e
    state: pa.Table | None = None
    position = 0
    for b in blocks:
        if b.data is None or b.data.num_rows == 0:
            continue
        incoming = _as_records(b, schema, rule, position)
        position += incoming.num_rows
        if stats is not None:
            stats.records += incoming.num_rows
        state = _fold(state, incoming, rule)
    return state


def _collect(
    block: log_format.LogBlock, blocks: list[_Block], schema: pa.Schema, rule: MergeRule,
    committed: CommittedInstants, as_of: str | None, name: str, stats: LogStats | None,
) -> None:  # fmt: skip
    instant = block.header.get(log_format.INSTANT_TIME, "")
    if as_of is not None and instant > as_of:
        return
    if block.block_type == log_format.COMMAND_BLOCK:
        if block.header.get(log_format.COMMAND_BLOCK_TYPE) == log_format.ROLLBACK_COMMAND:
            target = block.header.get(log_format.TARGET_INSTANT_TIME)
            blocks[:] = [b for b in blocks if b.instant != target]
            if stats is not None:
                stats.rollback_blocks += 1
        return
    if not committed(instant):
        return
    if stats is not None:
        stats.blocks += 1
    if block.block_type == log_format.AVRO_DATA_BLOCK:
        table = decode_block_content(block.content, block.header[log_format.SCHEMA], schema)
        blocks.append(_Block(instant, block.block_type, table))
    elif block.block_type == log_format.PARQUET_DATA_BLOCK:
        table = conform(pq.read_table(pa.BufferReader(block.content)), schema)
        blocks.append(_Block(instant, block.block_type, table))
    elif block.block_type == log_format.DELETE_BLOCK:
        blocks.append(_Block(instant, block.block_type, _deletes(block, schema, rule)))
    else:
        raise HoodieTableError(f"{name}: log block type {block.block_type} is not readable here")


def _deletes(block: log_format.LogBlock, schema: pa.Schema, rule: MergeRule) -> pa.Table:
    records = log_format.deleted_keys(block, record_names=True)
    keys = pa.array([r["recordKey"] for r in records], pa.string())
    ordering_type = schema.field(rule.ordering_field).type if rule.ordering_field else pa.int64()
    values = [_ordering_value(r["orderingVal"]) for r in records]
    try:
        ordering = pa.array(values, ordering_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        ordering = pa.nulls(len(values), ordering_type)  # another type: Java compares nothing either
    return pa.table({RECORD_KEY: keys, _ORD: ordering})


def _ordering_value(wrapped):
    """The ordering value of a delete record; None for natural order (null, or IntWrapper 0)."""
    if wrapped is None:
        return None
    name, record = wrapped
    value = record["value"] if isinstance(record, dict) else record
    short = name.rsplit(".", 1)[-1]
    if short == "IntWrapper" and value == 0:
        return None
    if short == "DateWrapper" and isinstance(value, int):
        return _EPOCH + dt.timedelta(days=value)
    if short == "TimestampMicrosWrapper" and isinstance(value, int):
        return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=value)
    return value


def _as_records(b: _Block, schema: pa.Schema, rule: MergeRule, position: int) -> pa.Table:
    """A block as log records: schema columns, delete flag, ordering value, scan position."""
    assert b.data is not None
    n = b.data.num_rows
    pos = pa.array(np.arange(position, position + n, dtype=np.int64))
    if b.kind == log_format.DELETE_BLOCK:
        cols = {f.name: pa.nulls(n, f.type) for f in schema}
        cols[RECORD_KEY] = b.data.column(RECORD_KEY)
        ordering = b.data.column(_ORD)
        deleted = pa.array(np.ones(n, dtype=bool))
    else:
        cols = {f.name: b.data.column(f.name) for f in schema}
        ordering = b.data.column(rule.ordering_field) if rule.ordering_field else pa.nulls(n, pa.int64())
        deleted = pa.array(np.zeros(n, dtype=bool))
    cols[_DEL] = deleted
    cols[_ORD] = ordering
    cols[_POS] = pos
    return pa.table(cols)


def _bools(a) -> np.ndarray:
    return np.asarray(pc.fill_null(a, False).to_numpy(zero_copy_only=False), dtype=bool)


def _fold(state: pa.Table | None, incoming: pa.Table, rule: MergeRule) -> pa.Table:
    """Merge a block's records into the state (one record per key), in scan order."""
    for batch in _rounds(incoming):
        state = batch if state is None else _fold_unique(state, batch, rule)
    assert state is not None
    return state


def _rounds(incoming: pa.Table) -> list[pa.Table]:
    """A block's records split so that each part holds a key once (in order of occurrence)."""
    keys = incoming.column(RECORD_KEY)
    if pc.count_distinct(keys, mode="all").as_py() == incoming.num_rows:
        return [incoming]
    order = pc.sort_indices(incoming, sort_keys=[(RECORD_KEY, "ascending"), (_POS, "ascending")])
    sorted_keys = keys.take(order).combine_chunks()
    n = len(sorted_keys)
    starts = np.ones(n, dtype=bool)
    starts[1:] = ~_bools(pc.equal(sorted_keys.slice(1), sorted_keys.slice(0, n - 1)))
    group_start = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    occurrence = np.empty(n, dtype=np.int64)
    occurrence[np.asarray(order)] = np.arange(n) - group_start
    return [incoming.filter(pa.array(occurrence == r)) for r in range(int(occurrence.max()) + 1)]


def _fold_unique(state: pa.Table, incoming: pa.Table, rule: MergeRule) -> pa.Table:
    pos = pc.index_in(incoming.column(RECORD_KEY), value_set=state.column(RECORD_KEY).combine_chunks())
    matched = np.asarray(pc.is_valid(pos).to_numpy(zero_copy_only=False), dtype=bool)
    at = np.asarray(pc.fill_null(pos, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    wins = np.ones(incoming.num_rows, dtype=bool)
    if matched.any() and rule.ordering_field:
        prior = state.take(pa.array(at))
        prior_del = _bools(prior.column(_DEL))
        new_del = _bools(incoming.column(_DEL))
        prior_greater = MergeRule.strictly_greater(prior.column(_ORD), incoming.column(_ORD))
        # data after a delete: natural order; a delete without ordering value (null): natural order
        new_natural = ~_bools(pc.is_valid(incoming.column(_ORD))) & new_del
        wins = prior_del | new_natural | ~prior_greater
        wins |= ~matched
    if rule.partial and matched.any():
        incoming, wins = _fold_partially(state, incoming, rule, matched, at, wins)
    replaced = np.zeros(state.num_rows, dtype=bool)
    replaced[at[matched & wins]] = True
    kept = state.filter(pa.array(~replaced))
    added = incoming.filter(pa.array(wins))
    return pa.concat_tables([kept, added.cast(kept.schema)])


def _fold_partially(
    state: pa.Table,
    incoming: pa.Table,
    rule: MergeRule,
    matched: np.ndarray,
    at: np.ndarray,
    wins: np.ndarray,
) -> tuple[pa.Table, np.ndarray]:
    """PartialUpdateAvroPayload between two log records of a key (Java's log scanner calls its
    preCombine, docs/hudi/partial-update.md): two data records become one, the winner's values
    with its nulls filled from the other (the earlier wins only with a strictly greater ordering
    value); its meta fields are the later record's where it has them.  A delete on either side
    merges nothing (the rules above decide)."""
    prior = state.take(pa.array(at))
    both_data = matched & ~_bools(prior.column(_DEL)) & ~_bools(incoming.column(_DEL))
    if not both_data.any():
        return incoming, wins
    older_first = np.zeros(incoming.num_rows, dtype=bool)
    if rule.ordering_field:
        older_first = MergeRule.strictly_greater(prior.column(_ORD), incoming.column(_ORD))
    columns = [c for c in incoming.column_names if c not in (_DEL, _POS)]
    merged = combine(prior, incoming, older_first, columns, newer_first=META_COLUMNS)
    mask = pa.array(both_data)
    for name in columns:
        i = incoming.schema.get_field_index(name)
        values = pc.if_else(mask, merged[name], incoming.column(name).cast(merged[name].type))
        incoming = incoming.set_column(i, name, values)
    return incoming, wins | both_data


# ------------------------------------------------------------------------------ base vs logs


def _soft_deleted(logs: pa.Table, rule: MergeRule) -> np.ndarray:
    """Log data records that delete their key: `_hoodie_is_deleted` true, or under Debezium's
    payload an operation 'd' (docs/hudi/debezium.md#ordering-and-deletes)."""
    deleted = _bools(logs.column(_DEL))
    if IS_DELETED in logs.column_names:
        deleted |= _bools(logs.column(IS_DELETED))
    if rule.delete_op and (op_del := op_deleted(logs)) is not None:
        deleted |= op_del
    return deleted


def _deleted_records(logs: pa.Table, rows: pa.Table, rule: MergeRule) -> int:
    """Keys whose merged log record is a delete and that the merge result does not hold (a delete
    that lost to the base row deletes nothing): what Java's merge handle counts as deleted, also
    for a key the base file never held (docs/hudi/compaction-of-empty-slices.md)."""
    deleted = _soft_deleted(logs, rule)
    if not deleted.any():
        return 0
    keys = logs.column(RECORD_KEY).filter(pa.array(deleted))
    kept = pc.is_in(keys, value_set=rows.column(RECORD_KEY).combine_chunks())
    return int(len(keys) - pc.sum(kept).as_py())


def merge_with_base(
    base: pa.Table | None, logs: pa.Table | None, schema: pa.Schema, rule: MergeRule
) -> pa.Table:
    """Base rows updated in place or deleted by the merged log records; log-only keys appended."""
    if logs is None or logs.num_rows == 0:
        return base if base is not None else schema.empty_table()
    log_del = _soft_deleted(logs, rule)
    if base is None or base.num_rows == 0:
        return logs.filter(pa.array(~log_del)).select(schema.names)
    pos = pc.index_in(base.column(RECORD_KEY), value_set=logs.column(RECORD_KEY).combine_chunks())
    hit = np.asarray(pc.is_valid(pos).to_numpy(zero_copy_only=False), dtype=bool)
    at = np.asarray(pc.fill_null(pos, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    _first_copy_only(hit, at)
    log_wins = hit.copy()
    if rule.partial and hit.any():
        # every log record meeting a base row replaces it, merged with it: no base row wins whole
        logs = _with_base_merged(base, logs, schema, rule, hit, at)
    elif rule.ordering_field and rule.base_ordering and hit.any():
        # a log delete always removes the base row (Java: an empty payload deletes); a log data
        # record loses to a base row whose ordering value is strictly greater
        stored = base.column(rule.ordering_field)
        base_greater = MergeRule.strictly_greater(stored, logs.column(_ORD).take(pa.array(at)))
        explicit_delete = _bools(logs.column(_DEL))[at]
        log_wins &= ~(base_greater & ~explicit_delete)
    drop = log_wins & log_del[at]
    replace = log_wins & ~log_del[at]
    n_base = base.num_rows
    used = np.zeros(logs.num_rows, dtype=bool)
    used[at[hit]] = True
    only_log = np.nonzero(~used & ~log_del)[0]
    base_rows = base.select(schema.names)
    both = pa.concat_tables([base_rows, logs.select(schema.names).cast(base_rows.schema)])
    take = np.where(replace, n_base + at, np.arange(n_base))[~drop]
    take = np.concatenate([take, n_base + only_log]).astype(np.int64)
    return both.take(pa.array(take))


def _with_base_merged(
    base: pa.Table, logs: pa.Table, schema: pa.Schema, rule: MergeRule, hit: np.ndarray, at: np.ndarray
) -> pa.Table:
    """PartialUpdateAvroPayload between the merged log record and the base row of its key (Java's
    readers call its combineAndGetUpdateValue, docs/hudi/partial-update.md): the log data record
    takes the base row's values where its own are null, unless the base row wins on ordering (a
    strictly greater value), whose values then come first; meta fields from the log record.  A log
    delete merges nothing.  `logs` comes back with those rows merged: the log record replaces the
    base row."""
    rows = np.flatnonzero(hit)
    log_rows = at[rows]
    base_rows = base.take(pa.array(rows))
    log_part = logs.take(pa.array(log_rows))
    older_first = np.zeros(len(rows), dtype=bool)
    if rule.ordering_field:
        older_first = MergeRule.strictly_greater(base_rows.column(rule.ordering_field), log_part.column(_ORD))
    merged = combine(base_rows, log_part, older_first, schema.names, newer_first=META_COLUMNS)
    data_record = ~_bools(log_part.column(_DEL))
    take = np.arange(logs.num_rows)
    take[log_rows[data_record]] = logs.num_rows + np.flatnonzero(data_record)
    mask = pa.array(data_record)
    replacement = log_part
    for name in schema.names:
        i = replacement.schema.get_field_index(name)
        merged_values = pc.if_else(mask, merged[name], log_part.column(name).cast(merged[name].type))
        replacement = replacement.set_column(i, name, merged_values)
    return pa.concat_tables([logs, replacement.cast(logs.schema)]).take(pa.array(take))


def _first_copy_only(hit: np.ndarray, at: np.ndarray) -> None:
    """A base file holding a key twice (Java's bulk_insert or insert keeps duplicates): the key's
    merged log record meets the first base row with the key only, the later copies are read as
    stored.  Java's readers take the record out of the merged-log map when a base row claims it,
    and hudi-rs reads the same (docs/hudi/duplicate-keys.md).  Clears `hit` in place."""
    rows = np.flatnonzero(hit)
    if len(rows) < 2:
        return
    _, first = np.unique(at[rows], return_index=True)
    if len(first) == len(rows):
        return
    later = np.ones(len(rows), dtype=bool)
    later[first] = False
    hit[rows[later]] = False
