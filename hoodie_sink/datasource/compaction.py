"""Compaction as a Spark job of its own (async / offline), next to a streaming writer of the table.

The driver finishes pending plans or schedules one; each file slice of the plan is one Spark task
(read the base file and logs, merge, write the new base file); the driver completes the commit.
Tasks and driver share nothing but storage, as the sink's writes do.
"""

from __future__ import annotations

from hoodie_sink.datasource.service_jobs import run_as_tasks
from hoodie_sink.table.client.jobs import (
    CompactionJob,
    CompactionOperation,
    CompactionResult,
    WriteStat,
    compact_operation,
)
from hoodie_sink.table.client.table import Table


def spark_runner(spark):
    def run(job: CompactionJob, ops: list[CompactionOperation]) -> list[WriteStat | None]:
        def work(index: int, op: CompactionOperation, token: str) -> WriteStat | None:
            return compact_operation(job, index, op, token)

        return run_as_tasks(
            spark, ops, work, f"hoodie compaction {job.instant} ({len(ops)} file slices) on {job.path}"
        )

    return run


def run_compaction(spark, path: str, options: dict[str, str] | None = None) -> list[CompactionResult]:
    return Table(path, options).compact(runner=spark_runner(spark), wait_for_writes_s=60.0)
