"""Compaction as a Spark job of its own (async / offline), next to a streaming writer of the table.

The driver finishes pending plans or schedules one; each file slice of the plan is one Spark task
(read the base file and logs, merge, write the new base file); the driver completes the commit.
Tasks and driver share nothing but storage, as the sink's writes do.
"""

from __future__ import annotations

from hoodie_sink.table.format.commit_metadata import WriteStat
from hoodie_sink.table.format.compaction_plan import CompactionOperation
from hoodie_sink.table.format.file_group import write_token
from hoodie_sink.table.services import compaction
from hoodie_sink.table.services.compaction import CompactionJob, CompactionResult


def spark_runner(spark):
    def run(job: CompactionJob, ops: list[CompactionOperation]) -> list[WriteStat | None]:
        def task(items):
            from pyspark import TaskContext

            tc = TaskContext.get()
            out = []
            for index, op in items:
                token = write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId())
                out.append((index, compaction.compact_operation(job, index, op, token)))
            return out

        sc = spark.sparkContext
        sc.setJobDescription(f"hoodie compaction {job.instant} ({len(ops)} file slices) on {job.path}")
        done = sc.parallelize(list(enumerate(ops)), max(1, len(ops))).mapPartitions(task).collect()
        return [stat for _, stat in sorted(done, key=lambda r: r[0])]

    return run


def run_compaction(spark, path: str, options: dict[str, str] | None = None) -> list[CompactionResult]:
    return compaction.run(path, dict(options or {}), runner=spark_runner(spark))
