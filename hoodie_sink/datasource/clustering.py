"""Clustering as a Spark job of its own (async / offline), next to any writer of the table.

The driver schedules (or resumes) a plan and keeps its heartbeat; each clustering group is one
Spark task (read the group's small files, sort, write large files); the driver completes the
replacecommit.  Tasks and driver share nothing but storage, as the sink's writes do.
"""

from __future__ import annotations

from hoodie_sink.datasource.service_jobs import run_as_tasks
from hoodie_sink.table.client.jobs import ClusteringGroup, ClusteringJob, ClusteringResult, execute_group
from hoodie_sink.table.client.table import Table


def spark_runner(spark):
    def run(job: ClusteringJob, groups: list[ClusteringGroup]):
        def work(index: int, group: ClusteringGroup, token: str):
            return execute_group(job, index, group, token)

        return run_as_tasks(spark, list(groups), work,
                            f"hoodie clustering {job.instant} ({len(groups)} groups) on {job.path}")  # fmt: skip

    return run


def run_clustering(spark, path: str, options: dict[str, str] | None = None) -> ClusteringResult | None:
    """Schedule (or resume) and execute one clustering of the table at `path` on `spark`."""
    return Table(path, options).cluster(runner=spark_runner(spark))
