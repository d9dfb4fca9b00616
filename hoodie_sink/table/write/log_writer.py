"""Writes one log file of a merge-on-read file slice: the changes of one write to one file group.

Every write creates a new log version (`max version of the slice + 1`) under its own write token
and never appends to an existing file: what Java does on storage without append (local disks,
object stores; docs/hudi/services.md#log-file-versions), and what makes a failed write's rollback
a plain delete.  The file holds an AVRO_DATA block with the upserted records (meta fields first, as
Java's append handle fills them) and, if any, a DELETE block; both carry the INSTANT_TIME and SCHEMA
headers. A CREATE marker names the log file itself, so Java's marker-based rollback deletes it too.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieCommitError
from hoodie_sink.table.format import log_format
from hoodie_sink.table.format.avro_rows import delete_records_datum, encode_records, records_block_content
from hoodie_sink.table.format.column_stats import column_stats_of_rows
from hoodie_sink.table.format.commit_metadata import WriteStat
from hoodie_sink.table.format.file_group import (
    BaseFile,
    FileSlice,
    LogFile,
    SliceFiles,
    join_partition,
    log_file_name,
)
from hoodie_sink.table.format.markers import CREATE, create_marker, marker_path
from hoodie_sink.table.format.merge_rule import MergeRule
from hoodie_sink.table.format.metadata_records import ColumnStatsInfo
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.format.virtual_keys import with_record_keys
from hoodie_sink.table.read.base_file import read_base_file
from hoodie_sink.table.read.file_slice import (
    DELETED_FLAG,
    ORDERING_VALUE,
    CommittedInstants,
    read_file_slice,
    scan_logs,
)
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.base_file_writer import file_schema
from hoodie_sink.table.write.context import WriteContext, stored_keygen
from hoodie_sink.table.write.instant_guard import InstantGuard
from hoodie_sink.table.write.merge import (
    DELETE,
    KEY,
    KIND,
    PART,
    RECORD_KEY,
    UPSERT,
    data_of,
    without_losers_to_stored,
)


@dataclass
class LogWrite:
    """One log file to write: the slice, its version and the writer's token."""

    slice: SliceFiles
    version: int
    token: str
    instant: str
    partition_id: int

    @property
    def name(self) -> str:
        return log_file_name(self.slice.file_id, self.slice.base_instant, self.version, self.token)

    @property
    def rel_path(self) -> str:
        return join_partition(self.slice.partition_path, self.name)


def write_log_file(
    storage: Storage,
    target: LogWrite,
    changes: pa.Table,
    precombine: str | None,
    avro_with_meta: str,
    guard: InstantGuard | None = None,
    num_inserts: int = 0,
    records: pa.Array | None = None,
    exclusive: bool = False,
    column_stats: tuple[str, ...] | None = None,
) -> WriteStat:
    """Write `changes` (one reduced change per key, with control columns) as a new log file;
    `records`: its upserts already encoded (encode_log_upserts), else they are encoded here.
    `exclusive` (several writers): never replace a log file of the same name (see _create_exclusively).
    `column_stats`: the columns whose statistics of the upserts written go with the write stat (empty:
    every column; None: none), as Hudi's append handle computes them from the records it appends
    (docs/hudi/column-stats.md#log-files-from-the-rows-written).  A log file with deletes only gets
    records of no value (counts 0), as Java's from an empty record list."""
    started = time.monotonic()
    if guard is not None:
        guard.check()
    kinds = np.asarray(changes.column(KIND).to_numpy(), dtype=np.int8)
    is_upsert = kinds == UPSERT
    upserts = changes.filter(pa.array(is_upsert)) if not is_upsert.all() else changes
    deletes = changes.filter(pa.array(~is_upsert)) if not is_upsert.all() else None
    schema = json.loads(avro_with_meta)
    blocks = []
    if upserts.num_rows:
        if records is None:
            records = encode_records(_with_meta([(target, upserts)]), schema)
        content = records_block_content(records)
        header = {log_format.INSTANT_TIME: target.instant, log_format.SCHEMA: avro_with_meta}
        blocks.append(log_format.LogBlock(log_format.AVRO_DATA_BLOCK, header, content))
    if deletes is not None and deletes.num_rows:
        blocks.append(_delete_block(deletes, precombine, target.instant, avro_with_meta))
    body = b"".join(log_format.encode_block(b) for b in blocks)
    if exclusive:
        _create_exclusively(storage, target, body)
    else:
        create_marker(storage, target.instant, target.slice.partition_path, target.name, CREATE)
        with storage.open_output(target.rel_path) as out:
            out.write(body)
    if guard is not None:
        guard.wrote(target.rel_path)
    sl = target.slice
    num_deletes = 0 if deletes is None else deletes.num_rows
    stats: tuple[ColumnStatsInfo, ...] | None = None
    if column_stats is not None:
        stats = tuple(
            column_stats_of_rows(_with_meta([(target, upserts)]), target.name, column_stats or None)
        )
    return WriteStat(
        file_id=sl.file_id,
        partition_path=sl.partition_path,
        path=target.rel_path,
        prev_commit=sl.base_instant,
        num_writes=upserts.num_rows,
        num_inserts=num_inserts,
        num_update_writes=upserts.num_rows - num_inserts,
        num_deletes=num_deletes,
        total_write_bytes=len(body),
        file_size_in_bytes=len(body),
        upsert_time_ms=int((time.monotonic() - started) * 1000),
        extra={
            "logVersion": target.version,
            "logOffset": 0,
            "baseFile": "" if sl.compacting else sl.base_name or "",
            "logFiles": sorted(set(_slice_logs(sl)) | {target.name}),
        },
        column_stats=stats,
    )


def _create_exclusively(storage: Storage, target: LogWrite, body: bytes) -> None:
    """A log file's name carries no writer instant: two writers appending to one file slice may pick
    the same version and write token (Spark ids repeat across jobs).  The file is created only if
    absent, taking the next free version otherwise; the marker is made for the name taken, so a
    rollback of this write never deletes another writer's log."""
    part = target.slice.partition_path
    for _ in range(1000):
        if not storage.exists(target.rel_path):
            create_marker(storage, target.instant, part, target.name, CREATE)
            if storage.create_if_absent(target.rel_path, body):
                return
            storage.delete(marker_path(target.instant, part, target.name, CREATE))  # taken meanwhile
        target.version += 1
    raise HoodieCommitError(f"No free log file version for file group {target.slice.file_id} in '{part}'.")


def _slice_logs(sl: SliceFiles) -> list[str]:
    """The log files of the slice written to (not those of the slice a pending compaction merges)."""
    if not sl.compacting:
        return list(sl.log_names)
    logs = (LogFile.parse(sl.partition_path, n) for n in sl.log_names)
    return [lf.name for lf in logs if lf is not None and lf.base_instant == sl.base_instant]


def upserts_of(changes: pa.Table) -> pa.Table:
    kinds = np.asarray(changes.column(KIND).to_numpy(), dtype=np.int8)
    return changes if (kinds == UPSERT).all() else changes.filter(pa.array(kinds == UPSERT))


def encode_log_upserts(logs: list[tuple[LogWrite, pa.Table]], avro_with_meta: str) -> list[pa.Array]:
    """The encoded upsert records of several log files, in one vectorised pass: a micro-batch of
    random keys writes hundreds of small logs, and encoding costs per column, not per row, so
    one pass over all of them is an order of magnitude cheaper than one per file."""
    pairs = [(target, upserts_of(changes)) for target, changes in logs]
    pairs = [(target, upserts) for target, upserts in pairs if upserts.num_rows]
    if not pairs:
        return [pa.array([], pa.large_binary()) for _ in logs]
    records = encode_records(_with_meta(pairs), json.loads(avro_with_meta))
    out, start = {}, 0
    for target, upserts in pairs:
        out[id(target)] = records.slice(start, upserts.num_rows)
        start += upserts.num_rows
    empty = pa.array([], pa.large_binary())
    return [out.get(id(target), empty) for target, _ in logs]


def _with_meta(pairs: list[tuple[LogWrite, pa.Table]]) -> pa.Table:
    """The upserts of one or more log files with the meta fields as Java's append handle fills
    them (the file name field holds the file id), concatenated in order."""
    counts = np.array([u.num_rows for _, u in pairs], dtype=np.int64)
    n = int(counts.sum())
    which = pa.array(np.repeat(np.arange(len(pairs)), counts))
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    positions = pc.cast(pa.array(np.arange(n, dtype=np.int64) - starts + 1), pa.string())
    prefixes = pa.array([f"{t.instant}_{t.partition_id}_" for t, _ in pairs]).take(which)
    upserts = pa.concat_tables([u for _, u in pairs], promote_options="permissive")
    meta = {
        META_COLUMNS[0]: pa.array([t.instant for t, _ in pairs]).take(which),
        META_COLUMNS[1]: pc.binary_join_element_wise(prefixes, positions, ""),
        META_COLUMNS[2]: upserts.column(KEY),
        META_COLUMNS[3]: upserts.column(PART),
        META_COLUMNS[4]: pa.array([t.slice.file_id for t, _ in pairs]).take(which),
    }
    data = data_of(upserts)
    return pa.Table.from_arrays([*meta.values(), *data.columns], names=[*meta, *data.column_names])


def _delete_block(
    deletes: pa.Table, precombine: str | None, instant: str, schema: str
) -> log_format.LogBlock:
    """Deleted keys with their ordering values: a `_hoodie_is_deleted` record keeps its precombine
    value (readers compare it with the stored record's); the delete operation writes the natural
    order, which wins whatever the stored value (Java's SQL DELETE does the same)."""
    ordering = None
    if precombine and precombine in deletes.column_names:
        kinds = np.asarray(deletes.column(KIND).to_numpy(), dtype=np.int8)
        values = deletes.column(precombine).combine_chunks()
        # a key moved to another partition keeps the mover's value (it beat the stored one): natural
        # order mixed with values in one block is refused by hudi-rs
        ordering = pc.if_else(pa.array(kinds == DELETE), pa.nulls(len(values), values.type), values)
    datum = delete_records_datum(
        deletes.column(KEY).combine_chunks(), deletes.column(PART).combine_chunks(), ordering
    )
    content = log_format.delete_block_content(datum)
    header = {log_format.INSTANT_TIME: instant, log_format.SCHEMA: schema}
    return log_format.LogBlock(log_format.DELETE_BLOCK, header, content)


def log_blocks(ctx: WriteContext) -> CommittedInstants:
    """The instants whose log blocks the write counts when it folds a slice's logs: those completed
    when it began (docs/hudi/uncommitted-log-blocks.md).  Not merely those before its instant: a
    write that died after writing its log, and whose heartbeat has not expired yet, is left pending
    by the rollback at begin; folding its blocks into a rewritten base file would commit them."""
    assert ctx.log_blocks is not None, "begin sets it for every write that lists file slices"
    return ctx.log_blocks


def read_current_slice(storage: Storage, sl: SliceFiles, schema: pa.Schema, rule: MergeRule,
                       committed: CommittedInstants) -> pa.Table:  # fmt: skip
    """The merged rows of a slice as the write found it (a rewrite of its base file starts from
    them): the blocks of the instants `committed` counts."""
    base = BaseFile.parse(sl.partition_path, sl.base_name) if sl.base_name else None
    logs = [lf for name in sl.log_names if (lf := LogFile.parse(sl.partition_path, name)) is not None]
    file_slice = FileSlice(sl.partition_path, sl.file_id, sl.base_instant, base_file=base, log_files=logs)
    return read_file_slice(storage, file_slice, schema, rule, committed)


def rewritten_slices(ctx: WriteContext) -> set[str]:
    """File groups whose changes rewrite the base file instead of adding a log: in a merge-on-read
    table ordered by commit time but with a precombine field (OverwriteWithLatestAvroPayload, as
    Java's tables often are), a slice that has logs already, since Java's readers order log records
    by the precombine value and a late record would lose there while it wins in hudi-rs
    (docs/hudi/services.md#merge-semantics): the one table state both read alike is a single log
    record per key."""
    cfg = ctx.config
    if not (ctx.plan.merge_on_read and cfg.precombine_field and cfg.commit_time_ordering):
        return set()
    return {s.file_id for s in ctx.log_slices if s.has_logs}


def current_rows(ctx: WriteContext, fid: str, base: BaseFile | None, schema: pa.Schema) -> pa.Table | None:
    """The stored rows of a file group a write rewrites: its base file, merged with the logs of its
    slice in a merge-on-read table."""
    storage = ctx.storage
    sl = ctx.slices_by_id.get(fid) if ctx.plan.merge_on_read else None
    if sl is not None and sl.has_logs:
        return read_current_slice(storage, sl, schema, MergeRule.of_table(ctx.plan.table), log_blocks(ctx))
    if base is None:
        return None
    return with_record_keys(read_base_file(storage, base.path, schema), stored_keygen(ctx))


def log_changes(ctx: WriteContext, sl: SliceFiles, changes: pa.Table) -> pa.Table | None:
    """What of `changes` (one reduced change per record) goes into a new log of `sl`; None if the
    file group must be rewritten instead.

    With event-time ordering a change that the stored record beats is dropped, as a copy-on-write
    merge would drop it.  Rewrites: under a global index, any delete; a key deleted in the logs
    and written again (see below)."""
    if (
        ctx.plan.index.finds_keys_in_base_files_only
        and pc.any(pc.not_equal(changes.column(KIND), UPSERT)).as_py()
    ):
        # A global index finds keys in base files only: a key deleted in a log would still be
        # found there (and a new copy elsewhere would make two); the file group is rewritten.
        return None
    rule = ctx.plan.merge_rule
    precombine = rule.ordering_field
    if not sl.has_deletes and not ctx.plan.index.bucketed:
        # with event-time ordering, the task already dropped the changes the stored record beats
        # (upsert/stored_records.without_stored_winners; the BUCKET index looks nothing up, so not there)
        return changes
    # A key deleted in the logs and written again: Java lets the new record win (natural order
    # after a delete), hudi-rs compares it with the delete's ordering value (0 when it has none),
    # and Java's reader then compares it with the base row too.  The file group is rewritten from
    # its merged slice, where the key is simply gone, so every reader agrees.
    schema = file_schema(ctx.data_schema)
    upserts = changes.filter(pc.equal(changes.column(KIND), UPSERT)).column(KEY).combine_chunks()
    if sl.has_deletes and len(upserts) and tombstoned(ctx, sl, schema).intersection(upserts.to_pylist()):
        return None
    if not rule.drops_losers or precombine is None or sl.base_name is None:
        return changes
    base_path = join_partition(sl.partition_path, sl.base_name)
    stored = read_base_file(ctx.storage, base_path, schema, [RECORD_KEY, precombine])
    return without_losers_to_stored(changes, stored, rule)


def tombstoned(ctx: WriteContext, sl: SliceFiles, schema: pa.Schema) -> set[str]:
    """Keys whose latest record in the slice's logs is a delete."""
    logs = [lf for name in sl.log_names if (lf := LogFile.parse(sl.partition_path, name)) is not None]
    state = scan_logs(ctx.storage, logs, schema, MergeRule.of_table(ctx.plan.table), log_blocks(ctx))
    if state is None:
        return set()
    return set(state.filter(state.column(DELETED_FLAG)).column(META_COLUMNS[2]).to_pylist())


def current_ordering_values(
    ctx: WriteContext, keys: pa.Array, file_ids: pa.Array, base_values: pa.Array, schema: pa.Schema
) -> pa.Array:
    """The current ordering values of stored keys (`base_values`: their base files'): a key's
    newest log record overrides its base value, a delete makes it null (nothing stored)."""
    slices = ctx.slices_by_id
    out = base_values
    rule = MergeRule.of_table(ctx.plan.table)
    for fid in pc.unique(file_ids).to_pylist():
        sl = slices.get(fid)
        if sl is None or not sl.has_logs:
            continue
        logs = [lf for name in sl.log_names if (lf := LogFile.parse(sl.partition_path, name)) is not None]
        state = scan_logs(ctx.storage, logs, schema, rule, log_blocks(ctx))
        if state is None:
            continue
        pos = pc.index_in(keys, value_set=state.column(RECORD_KEY).combine_chunks())
        hit = pc.and_(pc.is_valid(pos), pc.equal(file_ids, fid))
        if not pc.any(hit).as_py():
            continue
        at = pc.fill_null(pos, 0)
        logged = state.column(ORDERING_VALUE).take(at).cast(out.type)
        deleted = state.column(DELETED_FLAG).take(at)
        current = pc.if_else(deleted, pa.nulls(len(out), out.type), logged)
        out = pc.if_else(hit, current, out)
    return out
