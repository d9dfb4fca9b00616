"""What an engine running a table service as a distributed job needs (datasource/clustering.py,
compaction.py): the work items of a plan, the function that executes one in a task, and the write
token that names a task's files.  The driver's side (schedule, commit) is `Table.cluster` /
`Table.compact` with the engine's runner."""

from __future__ import annotations

from hoodie_sink.table.format.commit_metadata import WriteStat
from hoodie_sink.table.format.compaction_plan import CompactionOperation
from hoodie_sink.table.format.file_group import write_token
from hoodie_sink.table.services.clustering import (
    ClusteringGroup,
    ClusteringJob,
    ClusteringResult,
    execute_group,
)
from hoodie_sink.table.services.compaction import CompactionJob, CompactionResult, compact_operation

__all__ = [
    "ClusteringGroup",
    "ClusteringJob",
    "ClusteringResult",
    "CompactionJob",
    "CompactionOperation",
    "CompactionResult",
    "WriteStat",
    "compact_operation",
    "execute_group",
    "write_token",
]
