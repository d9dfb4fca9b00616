"""Table-service work items (clustering groups, compaction operations) as the tasks of one Spark
job: the driver plans and commits, each item runs in a task with its own write token."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from hoodie_sink.table.client.jobs import write_token

Item = TypeVar("Item")
Out = TypeVar("Out")


def run_as_tasks(
    spark, items: list[Item], work: Callable[[int, Item, str], Out], description: str
) -> list[Out]:
    """`work(index, item, token)` for every item, one Spark task each; results in item order."""

    def task(indexed):
        from pyspark import TaskContext

        tc = TaskContext.get()
        token = write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId())
        return [(index, work(index, item, token)) for index, item in indexed]

    sc = spark.sparkContext
    sc.setJobDescription(description)
    done = sc.parallelize(list(enumerate(items)), max(1, len(items))).mapPartitions(task).collect()
    return [out for _, out in sorted(done, key=lambda r: r[0])]


def task_map(spark, description: str) -> Callable[[list[Item], Callable[[Item], Out]], list[Out]]:
    """The engine's `task_map(items, work)` as one Spark job: `work(item)` in one task per item."""

    def run(items: list[Item], work: Callable[[Item], Out]) -> list[Out]:
        return run_as_tasks(spark, items, lambda _index, item, _token: work(item), description)

    return run
