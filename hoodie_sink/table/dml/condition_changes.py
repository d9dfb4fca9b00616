"""UPDATE and DELETE decided on the stored rows a condition may select (pure: no I/O), the one
function both the one-process call (table_merger.update / delete) and each task of a distributed
one (condition_tasks.py) run, so that the two agree by construction.

Each row's change depends on that row alone (the condition and the assignments read no other row;
the planner's refusals, a lowered ordering value or a moved partition, are per row too), so the
changes of a set of rows are the union of those of its parts: a task may decide its file slices'
rows without seeing the rest of the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from hoodie_sink.table.dml.expressions import Scope, compile_expression, is_true
from hoodie_sink.table.dml.merge_plan import (
    DELETE,
    NOT_MATCHED_BY_SOURCE,
    UPDATE,
    Clause,
    MergeSpec,
    TableShape,
    plan_merge,
)

_TARGET, _SOURCE = "target", "__source"


@dataclass(frozen=True)
class ConditionChanges:
    upserts: pa.Table  # the updated rows (table schema)
    deletes: pa.Table  # the stored rows removed (table schema)
    metrics: dict[str, int]  # num_updated_rows or num_deleted_rows


@dataclass(frozen=True)
class ConditionDml:
    """An UPDATE (`assignments`: column -> SQL over the stored row) or a DELETE, of the rows whose
    `predicate` is true (every row without one).  It pickles: a task plan carries it."""

    action: str  # UPDATE or DELETE
    predicate: str | None
    assignments: Mapping[str, str] | None = None

    @property
    def metric(self) -> str:
        return "num_updated_rows" if self.action == UPDATE else "num_deleted_rows"

    @property
    def label(self) -> str:
        return self.action  # "update" / "delete": the commit's report line

    def changes(self, shape: TableShape, rows: pa.Table) -> ConditionChanges:
        """The changes of `rows` (stored rows, data columns in table order)."""
        if self.action == DELETE:
            if self.predicate is not None:
                scope = Scope.of_table(shape.schema)
                rows = rows.filter(is_true(rows, compile_expression(self.predicate, scope)))
            return ConditionChanges(shape.schema.empty_table(), rows, {self.metric: rows.num_rows})
        # an UPDATE is a merge of the table with an empty source whose one WHEN NOT MATCHED BY
        # SOURCE clause updates: the merge planner's checks (key fields, partition moves, ordering,
        # partial-update nulls) apply unchanged
        on = " AND ".join(f"{_TARGET}.`{k}` = {_SOURCE}.`{k}`" for k in shape.key_fields)
        clause = Clause(NOT_MATCHED_BY_SOURCE, UPDATE, self.predicate, self.assignments)
        spec = MergeSpec(on, _SOURCE, _TARGET, (clause,))
        outcome = plan_merge(spec, shape, rows.schema.empty_table(), rows, rows)
        updated = outcome.metrics["num_target_rows_updated"]
        return ConditionChanges(outcome.upserts, outcome.deletes, {self.metric: updated})

    def check(self, shape: TableShape) -> None:
        """Compile the condition and the assignments against the table's columns (on no rows), so
        that a mistake in them fails on the driver, before any task."""
        self.changes(shape, shape.schema.empty_table())  # the planner's checks of the assignments
        # on no rows nothing is evaluated: compile each expression as the rows would see it
        scope = (
            Scope.of_sides({_TARGET: shape.schema}) if self.action == UPDATE else Scope.of_table(shape.schema)
        )
        for text in [self.predicate, *(self.assignments or {}).values()]:
            if text is not None:
                compile_expression(text, scope)
