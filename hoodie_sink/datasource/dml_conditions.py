"""UPDATE and DELETE in Spark tasks: `Table.update(..., spark=s)` / `Table.delete(..., spark=s)`
(docs/design/table-dml.md#in-tasks).

The driver opens the table, prunes its file slices by the condition and plans
(table/dml/condition_tasks.ConditionTaskPlan: metadata only), then begins the instant; one Spark
job reads each share of slices in a task, decides its rows' changes (`changes_of`, the function
the one-process call runs) and writes them (`write_task`, as any unrouted write); the driver
commits the tasks' results as one instant, none when nothing changed, or rolls the instant back if
a task failed.  No stored row reaches the driver.

Counts come back in each task's result, not through accumulators: Spark keeps the result of one
attempt of each task, while an accumulator would also count an attempt that failed or was retried.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from typing import Any

from hoodie_sink.datasource.batch_writer import task_identity
from hoodie_sink.errors import HoodieCommitStateUnknown, HoodieError
from hoodie_sink.table import client
from hoodie_sink.table.dml import condition_tasks
from hoodie_sink.table.dml.condition_changes import ConditionDml
from hoodie_sink.table.dml.condition_tasks import ConditionTaskPlan, Share, changes_of
from hoodie_sink.table.dml.table_merger import DmlTarget
from hoodie_sink.table.options.write_config import WriteConfig

_TASKS_PER_CORE = 4  # more slices than this many per core: adjacent slices share a task

# a task's answer: (pickled TaskResult or None when it changed nothing, its counts, a refusal)
TaskAnswer = tuple[bytes | None, dict[str, int], HoodieError | None]


def run_condition_dml(spark: Any, cfg: WriteConfig, dml: ConditionDml) -> dict[str, int]:
    """`dml` as one Spark job and at most one instant; its metrics summed over the tasks."""
    sc = spark.sparkContext
    target = DmlTarget.open(cfg, None)  # the tasks write, the driver only commits
    plan, shares = ConditionTaskPlan.of(target, dml, _TASKS_PER_CORE * sc.defaultParallelism)
    if not shares:
        return {dml.metric: 0}  # every slice ruled out by statistics: no instant at all
    empty = target.shape.schema.empty_table()
    change_schema = target.change_rows(empty, empty).schema
    ctx = client.begin(target.config, change_schema, read_on=target.snapshot.timeline)

    def decide_and_write(items: Iterable[Share]) -> Iterator[TaskAnswer]:
        share = tuple(ref for s in items for ref in s)
        try:
            changes, metrics = changes_of(plan, share)
        except HoodieError as e:
            # a refusal (a lowered ordering value, a key field set, ...) is the same in every
            # attempt: hand it to the driver, which raises it as the one-process call would
            yield None, {}, e
            return
        if not changes.num_rows:
            yield None, metrics, None
            return
        result = client.write_task(ctx, task_identity(), changes.to_batches())
        yield pickle.dumps(result), metrics, None

    sc.setJobDescription(f"hoodie {dml.action.upper()} of {target.config.path}")
    try:
        answers = sc.parallelize(shares, len(shares)).mapPartitions(decide_and_write).collect()
        refused = [e for _, _, e in answers if e is not None]
        if refused:
            raise refused[0]
        results = [pickle.loads(r) for r, _, _ in answers if r is not None]
        if sum(r.num_records for r in results):
            client.complete(ctx, results, label=dml.label)
        else:
            client.abort(ctx)  # nothing to change: no commit, as the one-process call makes none
    except HoodieCommitStateUnknown:
        raise  # the commit may have landed: its files stay (the next writer's rollback decides)
    except BaseException:
        client.abort(ctx)
        raise
    return {dml.metric: sum(m.get(dml.metric, 0) for _, m, _ in answers)}


condition_tasks.register_condition_job(run_condition_dml)
