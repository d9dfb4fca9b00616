"""UPDATE and DELETE cut into tasks (docs/design/table-dml.md#in-tasks): the driver prunes the
table's file slices by the condition (partition pruning and data skipping, metadata only) and makes
a `ConditionTaskPlan` (the options resolved, the timeline it read pinned, the DML); each task reads
its share of the surviving slices in that snapshot and decides their rows' changes with the same
function as the one-process call (condition_changes.py).  A row's change depends on that row
alone, so the union of the shares' changes is the one-process call's.

A file slice is one file group, and each is in one share, so every stored row is changed by one
task.  An update that moves a row to another partition (a global index with
`update.partition.path`) writes it into a file group of that partition that another task may be
writing too; the write path settles that as in any unrouted write (a create-if-absent claim per
file group; the loser's changes are merged at the commit: write/upsert_task.py, step 4).

The engine that runs the tasks registers itself (`register_condition_job`: the Spark adapter,
datasource/dml_conditions.py), so that this layer imports no engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.dml.condition_changes import ConditionDml
from hoodie_sink.table.dml.table_merger import DmlTarget
from hoodie_sink.table.format.timeline.instant import Instant
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.write_config import WriteConfig

Share = tuple[str, ...]  # the read refs of one task's file slices


@dataclass(frozen=True)
class ConditionTaskPlan:
    """What every task of one UPDATE or DELETE needs (it pickles; the slices travel apart, each
    with its task)."""

    config: WriteConfig  # resolved against the table, as DmlTarget.open resolves it
    read_instants: tuple[Instant, ...]  # the timeline the driver read, pinned
    dml: ConditionDml

    @staticmethod
    def of(target: DmlTarget, dml: ConditionDml, max_tasks: int) -> tuple[ConditionTaskPlan, list[Share]]:
        """The plan and the tasks' shares of the slices the condition does not rule out (none:
        nothing can change).  The DML is compiled here first, so that a mistake fails before any
        task runs."""
        dml.check(target.shape)
        plan = ConditionTaskPlan(target.config, tuple(target.snapshot.timeline.instants), dml)
        return plan, shares(target.refs_where(dml.predicate), max_tasks)

    def target(self) -> DmlTarget:
        return DmlTarget.open(self.config, None, Timeline(self.read_instants))


def shares(refs: Sequence[str], max_tasks: int) -> list[Share]:
    """One share per slice, or, with more slices than `max_tasks`, `max_tasks` runs of adjacent
    slices (sorted refs: a partition's slices stay together)."""
    refs = sorted(refs)
    n = max(1, min(len(refs), max_tasks))
    size, extra = divmod(len(refs), n)
    out, at = [], 0
    for i in range(n if refs else 0):
        take = size + (1 if i < extra else 0)
        out.append(tuple(refs[at : at + take]))
        at += take
    return out


def changes_of(plan: ConditionTaskPlan, share: Share) -> tuple[pa.Table, dict[str, int]]:
    """One task's change rows (what `write_task` writes: DmlTarget.change_rows) and its count."""
    target = plan.target()
    outcome = plan.dml.changes(target.shape, target.data(target.rows_of_refs(list(share))))
    return target.change_rows(outcome.upserts, outcome.deletes), outcome.metrics


# ------------------------------------------------------------------------ the engine that runs it

ConditionJob = Callable[[Any, WriteConfig, ConditionDml], dict[str, int]]
_JOB: list[ConditionJob] = []  # the one registered, if any


def register_condition_job(run: ConditionJob) -> None:
    _JOB[:] = [run]


def run_in_engine(spark: Any, cfg: WriteConfig, dml: ConditionDml) -> dict[str, int]:
    """The DML as one job of `spark`'s engine (registered by its adapter)."""
    if not _JOB:
        raise HoodieConfigError(
            "spark= needs the Spark adapter, which registers itself when imported: use hoodie_sink.Table "
            "(or import hoodie_sink.datasource.dml_conditions)."
        )
    return _JOB[0](spark, cfg, dml)
