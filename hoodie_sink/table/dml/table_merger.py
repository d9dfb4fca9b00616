"""MERGE, UPDATE and DELETE on a Hudi table, with delta-rs's names (`TableMerger`), in one process
over Arrow (docs/design/table-dml.md).

A call reads what it needs of the table (the stored rows of the source's keys, found through the
table's index; every row only for WHEN NOT MATCHED BY SOURCE, or a condition's rows after data
skipping), decides the changes (merge_plan.py, pure), and writes them as one upsert: updated and
inserted rows, and the deleted keys marked as deletes, in one instant.  Under OCC a write that
completed since the read and changed the same file groups fails it (nothing committed).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieConfigError, HoodieKeyError, HoodieTableError
from hoodie_sink.table.dml.checkpoint import BatchCheckpoint, BatchCommitted
from hoodie_sink.table.dml.condition_changes import ConditionDml
from hoodie_sink.table.dml.merge_plan import (
    DELETE,
    INSERT,
    MATCHED,
    NOT_MATCHED,
    NOT_MATCHED_BY_SOURCE,
    UPDATE,
    Clause,
    KeyJoin,
    MergeSpec,
    TableShape,
    needed_target_columns,
    plan_merge,
)
from hoodie_sink.table.dml.skipping import skipping_predicates
from hoodie_sink.table.dml.target_rows import KeyLookup, refs_of_predicate, rows_of_keys, rows_of_refs
from hoodie_sink.table.format.keygen import KeyGenerator
from hoodie_sink.table.format.merge_rule import MergeRule
from hoodie_sink.table.format.properties import read_table_config
from hoodie_sink.table.format.schema import META_COLUMNS, avro_to_arrow
from hoodie_sink.table.format.table_schema import latest_schema
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.index.registry import index_of
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.snapshot import Snapshot
from hoodie_sink.table.write.plan import keygen_config_of
from hoodie_sink.table.write.table_setup import resolve_with_table, table_exists
from hoodie_sink.table.write.upsert.incoming import DML_DELETE

log = logging.getLogger(__name__)

# How a merge whose source is an engine's DataFrame runs, and which sources it takes: the Spark
# adapter registers itself (datasource/dml.py), so that the engine imports no engine.
_DATAFRAME_MERGES: list[tuple[Callable[[TableMerger], dict[str, int]], Callable[[Any], bool]]] = []


def register_dataframe_merge(
    run: Callable[[TableMerger], dict[str, int]], accepts: Callable[[Any], bool]
) -> None:
    _DATAFRAME_MERGES.append((run, accepts))


# How the changes are written: the write client's `write_read_changes` (the Table passes it in, so
# that this layer does not reach up into the client): one instant, services after it as any write.
# Its last argument, when given, is asked just before the commit for the commit's extraMetadata.
ChangeWriter = Callable[[WriteConfig, pa.Table, Timeline, Callable[[], dict[str, str]] | None], Any]
# What a merge whose micro-batch the table holds already returns: it read and wrote nothing.
SKIPPED_METRICS = {
    "num_source_rows": 0,
    "num_target_rows_updated": 0,
    "num_target_rows_inserted": 0,
    "num_target_rows_deleted": 0,
    "batch_skipped": 1,
}


@dataclass
class TableMerger:
    """A MERGE being built: `Table.merge(...)` returns one; each `when_*` adds a clause (applied in
    the order given, per kind) and returns it; `execute()` runs it and returns its metrics."""

    config: WriteConfig
    writer: ChangeWriter
    source: pa.Table
    predicate: str
    source_alias: str = "source"
    target_alias: str = "target"
    clauses: list[Clause] = field(default_factory=list)
    checkpoint: BatchCheckpoint | None = None
    # delta-rs's merge_schema: the source's columns the table lacks are added to it (nullable) by
    # the *_all clauses; without it they are left out, as Delta leaves them
    merge_schema: bool = False

    def with_checkpoint(self, identifier: str, batch_id: int) -> TableMerger:
        """Make the merge idempotent per micro-batch (`foreachBatch`; Delta's txnAppId/txnVersion):
        when the table's checkpoint map holds `identifier` at `batch_id` or later, `execute()` writes
        nothing and returns `batch_skipped: 1`; otherwise its one commit records `batch_id` under
        `identifier` with its data.  A merge that changes nothing commits nothing, and so records
        nothing: run again, it changes nothing again (docs/design/table-dml.md#exactly-once-from-a-stream)."""
        self.checkpoint = BatchCheckpoint(identifier, batch_id)
        return self

    def when_matched_update(self, updates: Mapping[str, str], predicate: str | None = None) -> TableMerger:
        return self._add(Clause(MATCHED, UPDATE, predicate, _assignments(updates)))

    def when_matched_update_all(self, predicate: str | None = None) -> TableMerger:
        return self._add(Clause(MATCHED, UPDATE, predicate, None))

    def when_matched_delete(self, predicate: str | None = None) -> TableMerger:
        return self._add(Clause(MATCHED, DELETE, predicate))

    def when_not_matched_insert(
        self, updates: Mapping[str, str], predicate: str | None = None
    ) -> TableMerger:
        return self._add(Clause(NOT_MATCHED, INSERT, predicate, _assignments(updates)))

    def when_not_matched_insert_all(self, predicate: str | None = None) -> TableMerger:
        return self._add(Clause(NOT_MATCHED, INSERT, predicate, None))

    def when_not_matched_by_source_update(
        self, updates: Mapping[str, str], predicate: str | None = None
    ) -> TableMerger:
        return self._add(Clause(NOT_MATCHED_BY_SOURCE, UPDATE, predicate, _assignments(updates)))

    def when_not_matched_by_source_delete(self, predicate: str | None = None) -> TableMerger:
        return self._add(Clause(NOT_MATCHED_BY_SOURCE, DELETE, predicate))

    def _add(self, clause: Clause) -> TableMerger:
        self.clauses.append(clause)
        return self

    def execute(self) -> dict[str, int]:
        try:
            metrics = self._execute()
        except BatchCommitted as done:
            log.info("hoodie: %s; the merge into %s is skipped", done, self.config.path)
            return dict(SKIPPED_METRICS)
        return metrics if self.checkpoint is None else {**metrics, "batch_skipped": 0}

    def _execute(self) -> dict[str, int]:
        for run, accepts in _DATAFRAME_MERGES:
            if accepts(self.source):
                return run(self)  # in the engine's tasks, one instant
        spec = MergeSpec(self.predicate, self.source_alias, self.target_alias, tuple(self.clauses))
        target = DmlTarget.open(self.config, self.writer, checkpoint=self.checkpoint)
        source = as_arrow_source(self.source)
        if self.merge_schema:
            target = target.evolved_by(spec, source.schema)
        join = KeyJoin.of(spec, target.shape, source.schema)
        key_table = join.source_key_table(source, self.source_alias, target.shape)
        asked = target.keygen.record_keys(non_null_keys(key_table))
        columns = needed_target_columns(spec, target.shape, source.schema)
        looked_up = target.rows_of_keys(asked, columns)
        whole = None
        if spec.needs_whole_target:
            whole = target.rows_where(spec.by_source_pruning, self.target_alias, columns)
            whole = union_rows(whole, looked_up, target)
        outcome = plan_merge(spec, target.shape, source, target.data(looked_up),
                             target.data(whole) if whole is not None else None, join)  # fmt: skip
        if outcome.inserted_identities is not None:
            target.refuse_stored_inserts(outcome.inserted_identities, asked)
        target.write(outcome.upserts, outcome.deletes)
        return outcome.metrics


@dataclass
class DmlTarget:
    """The table a DML call changes: its settings resolved once, the snapshot it reads, and how it
    writes the changes back."""

    config: WriteConfig
    writer: ChangeWriter | None
    snapshot: Snapshot
    shape: TableShape
    keygen: KeyGenerator
    lookup: KeyLookup
    checkpoint: BatchCheckpoint | None = None
    added: tuple[str, ...] = ()  # columns a merge_schema merge adds: no stored row has them

    @staticmethod
    def open(
        options_cfg: WriteConfig,
        writer: ChangeWriter | None,
        read_on: Timeline | None = None,
        checkpoint: BatchCheckpoint | None = None,
    ) -> DmlTarget:
        """The table at `options_cfg.path` as its timeline shows it now, or as `read_on` showed it
        (a task of a distributed DML reads the snapshot its driver read).  With a `checkpoint`:
        BatchCommitted when that snapshot holds the micro-batch already."""
        storage = options_cfg.storage()
        if not table_exists(storage):
            raise HoodieTableError(f"There is no Hudi table at {options_cfg.path}: nothing to merge into.")
        table = read_table_config(storage)
        cfg = resolve_with_table(options_cfg.with_(operation="upsert", dml_deletes=True), table)
        snap = Snapshot.open(storage, timeline=read_on)
        if checkpoint is not None:
            checkpoint.refuse_if_committed(storage, snap.timeline)
        avro = latest_schema(storage, snap.timeline, table)
        if avro is None:
            raise HoodieTableError(f"The table at {cfg.path} has no completed write yet, so no schema.")
        schema = pa.schema([f for f in avro_to_arrow(json.loads(avro)) if f.name not in META_COLUMNS])
        index = index_of(cfg.index_type)
        rule = MergeRule.of_table(table)
        shape = TableShape(
            schema=schema,
            key_fields=cfg.record_key_fields,
            partition_fields=cfg.partition_fields,
            global_keys=index.is_global,
            moves_partitions=index.is_global and index.moves_partitions(cfg.index_update_partition_path),
            event_time_field=rule.ordering_field if rule.base_ordering else None,
            nulls_keep_stored=rule.partial,
        )
        keygen = KeyGenerator(keygen_config_of(cfg))
        stored = None if cfg.populate_meta_fields else keygen
        lookup = KeyLookup(index, keygen, stored, cfg.num_buckets, cfg.bucket_hash_fields)
        return DmlTarget(cfg, writer, snap, shape, keygen, lookup, checkpoint)

    def rows_of_keys(self, record_keys: pa.Array, columns: list[str] | None = None) -> pa.Table:
        return rows_of_keys(self.snapshot, self.lookup, record_keys, columns)

    def rows_where(
        self, predicate: str | None, alias: str | None = None, columns: list[str] | None = None
    ) -> pa.Table:
        """The stored rows of the slices a condition's conjuncts do not rule out (all without one)."""
        return self.rows_of_refs(self.refs_where(predicate, alias), columns)

    def refs_where(self, predicate: str | None, alias: str | None = None) -> list[str]:
        """The file slices a condition's conjuncts do not rule out (partition pruning and data
        skipping, the snapshot's metadata statistics included), as read refs: metadata only."""
        preds = skipping_predicates(predicate, self.shape.schema, alias) if predicate else []
        return refs_of_predicate(self.snapshot, preds)

    def rows_of_refs(self, refs: list[str], columns: list[str] | None = None) -> pa.Table:
        return rows_of_refs(self.snapshot, refs, columns)

    def evolved_by(self, spec: MergeSpec, source_schema: pa.Schema) -> DmlTarget:
        """This target with the source's columns it lacks added (nullable, after its own), when a
        clause takes every source column (`update_all`, `insert_all`): delta-rs's `merge_schema`.
        The write evolves the table's schema as any write adding columns does (Hudi 0.15's rules,
        docs/hudi/schema-evolution.md), and refuses there what they refuse, naming the column."""
        takes_all = any(c.assignments is None and c.action in (UPDATE, INSERT) for c in spec.clauses)
        have = set(self.shape.schema.names)
        new = [f.with_nullable(True) for f in source_schema if f.name not in have] if takes_all else []
        if not new:
            return self
        schema = pa.schema([*self.shape.schema, *new])
        return replace(self, shape=replace(self.shape, schema=schema), added=tuple(f.name for f in new))

    def data(self, rows: pa.Table) -> pa.Table:
        """The data columns read (all of the table's, or those a merge needs), in table order; a
        column a merge_schema merge adds is null in every stored row."""
        out = []
        for f in self.shape.schema:
            if f.name in rows.column_names:
                out.append((f.name, rows.column(f.name)))
            elif f.name in self.added:
                out.append((f.name, pa.nulls(rows.num_rows, f.type)))
        return pa.table(dict(out)) if out else rows.select([])

    def identities(self, rows: pa.Table) -> pa.Array:
        """Each stored row's (record key, partition path), as one string."""
        if self.lookup.stored_keygen is None:
            keys, parts = rows.column("_hoodie_record_key"), rows.column("_hoodie_partition_path")
        else:
            keys = self.lookup.stored_keygen.record_keys(rows)
            parts = self.lookup.stored_keygen.partition_paths(rows)
        joined = pc.binary_join_element_wise(keys, parts, "\x00")
        return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined

    def refuse_stored_inserts(self, identities: pa.Table, asked: pa.Array) -> None:
        """An insert whose identity is stored would replace that record (Delta would keep both):
        refused.  The keys the merge looked up (`asked`) the planner checked against the rows
        found; an insert of another key (an insert expression other than the ON's) is looked up here."""
        keys = self.keygen.record_keys(identities)
        rest = keys.filter(pc.invert(pc.is_in(keys, value_set=asked)))
        if not len(rest):
            return
        stored = self.data(self.rows_of_keys(rest))
        ident = list(self.shape.identity_fields)
        clash = identities.join(stored.select(ident), keys=ident, join_type="inner")
        if clash.num_rows:
            raise HoodieKeyError(
                f"The merge inserts {clash.num_rows} row(s) whose key is already stored, e.g. "
                f"{clash.slice(0, 1).to_pylist()[0]}: the insert would replace the stored record. Nothing was "
                "written. Help: match on the inserted key, or update it."
            )

    def change_rows(self, upserts: pa.Table, deletes: pa.Table) -> pa.Table:
        """The rows one upsert writes: the new rows, and the deleted rows marked as deletes."""
        flags = [
            pa.array([False] * upserts.num_rows, pa.bool_()),
            pa.array([True] * deletes.num_rows, pa.bool_()),
        ]
        # a delete needs its key, partition and ordering value only (always read): the columns a
        # merge did not read are null in it, never in an upsert (merge_plan.needed_target_columns)
        deletes = _with_all_columns(deletes, self.shape.schema)
        data = pa.concat_tables([_with_all_columns(upserts, self.shape.schema), deletes])
        return data.append_column(DML_DELETE, pa.concat_arrays(flags))

    def write(self, upserts: pa.Table, deletes: pa.Table) -> None:
        """One upsert instant of the changes.  Nothing to change: no instant."""
        self.write_changes(self.change_rows(upserts, deletes))

    def write_changes(self, changes: pa.Table) -> None:
        if not changes.num_rows:
            return
        if self.writer is None:
            raise ValueError("this DmlTarget reads only (a task's): its changes are written by the driver")
        checkpoint, storage = self.checkpoint, self.config.storage()
        extra = None if checkpoint is None else (lambda: checkpoint.commit_extra(storage))
        self.writer(self.config, changes, self.snapshot.timeline, extra)

    def commit_extra(self) -> dict[str, str] | None:
        """What the commit of these changes adds to its extraMetadata, asked just before it: the
        micro-batch's checkpoint (BatchCommitted if the table holds it by now), or nothing."""
        return None if self.checkpoint is None else self.checkpoint.commit_extra(self.config.storage())


# ------------------------------------------------------------------------------- update, delete


def update(
    cfg: WriteConfig, writer: ChangeWriter, updates: Mapping[str, str], predicate: str | None = None
) -> dict[str, int]:
    """UPDATE table SET updates WHERE predicate: the rows the condition selects (data skipping
    first), each assignment over the stored row; one upsert instant."""
    return run_condition(cfg, writer, update_dml(updates, predicate))


def delete(cfg: WriteConfig, writer: ChangeWriter, predicate: str | None = None) -> dict[str, int]:
    """DELETE FROM table WHERE predicate (every row without one); one upsert instant of deletes."""
    return run_condition(cfg, writer, delete_dml(predicate))


def update_dml(updates: Mapping[str, str], predicate: str | None = None) -> ConditionDml:
    if not updates:
        raise HoodieConfigError("update() needs at least one column to set.")
    return ConditionDml(UPDATE, predicate, _assignments(updates))


def delete_dml(predicate: str | None = None) -> ConditionDml:
    return ConditionDml(DELETE, predicate)


def run_condition(cfg: WriteConfig, writer: ChangeWriter, dml: ConditionDml) -> dict[str, int]:
    """An UPDATE or DELETE in this process: the rows of the slices the condition does not rule
    out, their changes (condition_changes.py, as each task of a distributed one decides its
    slices'), one upsert instant."""
    target = DmlTarget.open(cfg, writer)
    outcome = dml.changes(target.shape, target.data(target.rows_where(dml.predicate)))
    target.write(outcome.upserts, outcome.deletes)
    return outcome.metrics


# ------------------------------------------------------------------------------------- helpers


def _assignments(updates: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(updates, Mapping) or not updates:
        raise HoodieConfigError(f"Expected a non-empty mapping of column -> SQL expression, got {updates!r}.")
    out = {}
    for column, expr in updates.items():
        if not isinstance(expr, str):
            raise HoodieConfigError(
                f"The value for column '{column}' must be a SQL expression string, got {expr!r} "
                "(a string literal is quoted: \"'text'\")."
            )
        out[_unquoted(column)] = expr
    return out


def _unquoted(column: str) -> str:
    """delta-rs takes assignment targets as `col` or `target.col`; the target column's name."""
    name = column.strip().strip("`")
    return name.split(".", 1)[1] if "." in name and not name.startswith("`") else name


def as_arrow_source(source) -> pa.Table:
    if isinstance(source, pa.Table):
        return source
    if isinstance(source, pa.RecordBatch):
        return pa.Table.from_batches([source])
    if isinstance(source, pa.RecordBatchReader):
        return source.read_all()
    raise HoodieConfigError(
        f"A merge source must be a pyarrow Table, RecordBatch or RecordBatchReader, or a Spark DataFrame "
        f"(through hoodie_sink.Table), got {type(source).__name__}."
    )


def _with_all_columns(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    cols = [
        rows.column(f.name) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def non_null_keys(keys: pa.Table) -> pa.Table:
    mask = None
    for col in keys.columns:
        valid = pc.is_valid(col)
        mask = valid if mask is None else pc.and_(mask, valid)
    return keys.filter(mask) if mask is not None else keys


def union_rows(whole: pa.Table, looked_up: pa.Table, target: DmlTarget) -> pa.Table:
    """The pruned rows plus the looked-up ones they miss (a pruned-away row may still be matched)."""
    if not looked_up.num_rows:
        return whole
    missing = pc.invert(pc.is_in(target.identities(looked_up), value_set=target.identities(whole)))
    return pa.concat_tables([whole, looked_up.filter(missing)], promote_options="permissive")
