"""A MERGE cut into tasks (docs/design/table-dml.md#in-tasks): the driver makes a `MergeTaskPlan`
(metadata only: the options resolved, the clauses checked, the timeline the merge reads); each
task gets the source rows of its share of the record keys (the source shuffled by `record_keys`),
looks up their stored rows through the index in the snapshot the driver read, and decides their
changes with the same planner as a one-process merge (merge_plan.py); the driver writes the
union of the tasks' changes as one instant.

Why the result equals a one-process merge: a target row is matched only by source rows of its key,
and all of those are in one task, so Delta's multiple-match rule and each pair's clause are
decided there; an insert's key is its source row's key (required below), so two inserts of one key,
and an insert of a stored key, meet in one task too.  WHEN NOT MATCHED BY SOURCE: whether a stored
row was matched depends on the source rows of its key only (the ON predicate equates the record
key), so the stored rows the clause may change (the slices its condition does not rule out,
chosen by the driver) are read by tasks of their own and shuffled by the same key as the source:
each task then holds, for its keys, every source row and every such stored row.  What a task
cannot see is refused on the driver: an insert whose key is not the ON predicate's key expression.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.dml.expressions import Scope, compile_expression
from hoodie_sink.table.dml.merge_plan import (
    INSERT,
    KeyJoin,
    MergeSpec,
    needed_target_columns,
    plan_merge,
)
from hoodie_sink.table.dml.table_merger import DmlTarget, as_arrow_source, non_null_keys, union_rows
from hoodie_sink.table.dml.target_rows import stored_keys
from hoodie_sink.table.format.timeline.instant import Instant
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.write_config import WriteConfig


@dataclass(frozen=True)
class MergeTaskPlan:
    """What every task of one MERGE needs (it pickles)."""

    config: WriteConfig  # resolved against the table, as DmlTarget.open resolves it
    spec: MergeSpec
    source_schema: pa.Schema
    read_instants: tuple[Instant, ...]  # the timeline the merge reads, pinned
    # WHEN NOT MATCHED BY SOURCE: the slices (their read refs) whose stored rows the clauses may
    # change, read by tasks of their own; None without such a clause
    stored_slices: tuple[str, ...] | None = None
    every_slice: bool = False  # stored_slices are all the table's: a task has every row of its keys
    stored_columns: tuple[str, ...] = ()  # what the merge reads of a stored row
    merge_schema: bool = False  # the source's new columns added (DmlTarget.evolved_by)

    @staticmethod
    def of(
        target: DmlTarget, spec: MergeSpec, source_schema: pa.Schema, merge_schema: bool = False
    ) -> MergeTaskPlan:
        """Checked once, on the driver: the spec compiles against the source, and nothing in it
        needs more than one task's share of the keys.  `target`: evolved already when `merge_schema`."""
        join = KeyJoin.of(spec, target.shape, source_schema)
        for clause in spec.clauses:
            if clause.action != INSERT:
                continue
            for k in target.shape.key_fields:
                on_key = join.source_keys[k].expression
                inserted = (
                    f"{spec.source_alias}.`{k}`"
                    if clause.assignments is None
                    else clause.assignments.get(k, "NULL")
                )
                if not _same_expression(inserted, on_key, spec, source_schema):
                    raise HoodieConfigError(
                        f"{clause.describe()} inserts record key field '{k}' as {inserted!r}, not as the ON "
                        f"predicate's {join.source_keys[k].text!r}: in a merge that runs in tasks each task sees "
                        "the keys the ON predicate gives, so the inserted key must be that one."
                    )
        instants = tuple(target.snapshot.timeline.instants)
        columns = tuple(needed_target_columns(spec, target.shape, source_schema))
        if not spec.needs_whole_target:
            return MergeTaskPlan(target.config, spec, source_schema, instants, stored_columns=columns,
                                 merge_schema=merge_schema)  # fmt: skip
        pruning = spec.by_source_pruning
        slices = tuple(target.refs_where(pruning, spec.target_alias))
        every = pruning is None or len(slices) == len(target.refs_where(None))
        return MergeTaskPlan(
            target.config, spec, source_schema, instants, slices, every, columns, merge_schema
        )

    def target(self) -> DmlTarget:
        target = DmlTarget.open(self.config, None, Timeline(self.read_instants))
        return target.evolved_by(self.spec, self.source_schema) if self.merge_schema else target


def record_keys(plan: MergeTaskPlan, source: pa.Table, target: DmlTarget | None = None) -> pa.Array:
    """Each source row's record key by the ON predicate (null where a key field is null): what the
    source is shuffled by, so that each key's rows meet in one task.  `target`: `plan.target()`,
    opened once by a caller that keys many batches."""
    target = target if target is not None else plan.target()
    join = KeyJoin.of(plan.spec, target.shape, plan.source_schema)
    keys = join.source_key_table(source, plan.spec.source_alias, target.shape)
    valid = np.ones(keys.num_rows, dtype=bool)
    for col in keys.columns:
        valid &= np.asarray(pc.is_valid(col).to_numpy(zero_copy_only=False), dtype=bool)
    found = target.keygen.record_keys(keys.filter(pa.array(valid)))
    # each row's place among the keyed rows; null where it has none
    at = pa.array(np.cumsum(valid) - 1, pa.int64(), mask=~valid)
    return pc.take(found, at)


def stored_rows_of(plan: MergeTaskPlan, slice_refs: list[str]) -> tuple[pa.Table, pa.Array]:
    """A scan task's share of the stored rows WHEN NOT MATCHED BY SOURCE may change: the columns
    the merge reads (with the meta columns identifying a row) of the slices named, and each row's
    record key (what they are shuffled by, with the source)."""
    target = plan.target()
    rows = target.rows_of_refs(slice_refs, list(plan.stored_columns))
    return rows, stored_keys(rows, target.lookup.stored_keygen)


def changes_of(
    plan: MergeTaskPlan, source, stored: pa.Table | None = None
) -> tuple[pa.Table, dict[str, int]]:
    """The change rows of one task's source rows (all source rows of each of its keys), and its
    metrics: what DmlTarget.write_changes writes, once every task's are together.  `stored`: with
    WHEN NOT MATCHED BY SOURCE, the task's share of `stored_rows_of` (every such stored row of
    its keys)."""
    source = as_arrow_source(source)
    target = plan.target()
    join = KeyJoin.of(plan.spec, target.shape, source.schema)
    asked = target.keygen.record_keys(
        non_null_keys(join.source_key_table(source, plan.spec.source_alias, target.shape))
    )
    columns = list(plan.stored_columns)  # MergeTaskPlan.of derived them once, on the driver
    whole = None
    if plan.spec.needs_whole_target:
        if stored is None:
            raise ValueError("a merge with WHEN NOT MATCHED BY SOURCE needs the task's stored rows")
        if plan.every_slice:  # the scan read every stored row of this task's keys: no look-up
            looked_up = stored.filter(
                pc.is_in(stored_keys(stored, target.lookup.stored_keygen), value_set=asked)
            )
            whole = stored
        else:  # a matched row may sit in a slice the clause's condition pruned away
            looked_up = target.rows_of_keys(asked, columns)
            whole = union_rows(stored, looked_up, target)
    else:
        looked_up = target.rows_of_keys(asked, columns)
    outcome = plan_merge(plan.spec, target.shape, source, target.data(looked_up),
                         target.data(whole) if whole is not None else None, join)  # fmt: skip
    return target.change_rows(outcome.upserts, outcome.deletes), outcome.metrics


def _same_expression(a: str, b: pc.Expression, spec: MergeSpec, source_schema: pa.Schema) -> bool:
    scope = Scope.of_table(source_schema, spec.source_alias)
    try:
        return compile_expression(a, scope).expression.equals(b)
    except HoodieConfigError:
        return False
