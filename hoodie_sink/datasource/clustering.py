"""Clustering as a Spark job of its own (async / offline), next to any writer of the table.

The driver schedules (or resumes) a plan and keeps its heartbeat; each clustering group is one
Spark task (read the group's small files, sort, write large files); the driver completes the
replacecommit.  Tasks and driver share nothing but storage, as the sink's writes do.
"""

from __future__ import annotations

from hoodie_sink.table.format.file_group import write_token
from hoodie_sink.table.services import clustering
from hoodie_sink.table.services.clustering import ClusteringGroup, ClusteringJob, ClusteringResult


def spark_runner(spark):
    def run(job: ClusteringJob, groups: list[ClusteringGroup]):
        def task(items):
            from pyspark import TaskContext

            tc = TaskContext.get()
            out = []
            for index, group in items:
                token = write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId())
                out.append((index, clustering.execute_group(job, index, group, token)))
            return out

        sc = spark.sparkContext
        sc.setJobDescription(f"hoodie clustering {job.instant} ({len(groups)} groups) on {job.path}")
        done = sc.parallelize(list(enumerate(groups)), max(1, len(groups))).mapPartitions(task).collect()
        return [stats for _, stats in sorted(done, key=lambda r: r[0])]

    return run


def run_clustering(spark, path: str, options: dict[str, str] | None = None) -> ClusteringResult | None:
    """Schedule (or resume) and execute one clustering of the table at `path` on `spark`."""
    return clustering.run(path, dict(options or {}), runner=spark_runner(spark))
