"""The write client: the one entry to a write, for the Spark adapter and for Python callers.

A write is: `begin` an instant (driver), `write_task` for each task's share of the input,
then `complete` (the commit, then the table services that run inline after a commit) or
`abort`.  `write` runs all of it in one process over Arrow data, without Spark.
Like Hudi's write client it sits above the write path and the table services, so neither
needs the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeAlias

import pyarrow as pa

from hoodie_sink.config import WriteConfig
from hoodie_sink.errors import HoodieCommitStateUnknown, HoodieConfigError
from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.services.after_commit import run_after_commit
from hoodie_sink.table.write import write_path
from hoodie_sink.table.write.context import TaskIdentity, TaskResult, WriteContext
from hoodie_sink.table.write.coordinator import abort
from hoodie_sink.table.write.write_path import begin, write_task

__all__ = ["abort", "begin", "complete", "write", "write_task"]

DataLike: TypeAlias = pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable[pa.RecordBatch]


def complete(
    ctx: WriteContext, results: list[TaskResult], extra: dict[str, str] | None = None, label: str = "write"
) -> CommitMetadata:
    """Commit the write, then run the table services due inline (clustering, cleaning, archival)."""
    metadata = write_path.complete(ctx, results, extra, label)
    run_after_commit(ctx.config)
    return metadata


def _batches(data: DataLike) -> tuple[pa.Schema, Iterable[pa.RecordBatch]]:
    if isinstance(data, pa.Table):
        return data.schema, data.to_batches()
    if isinstance(data, pa.RecordBatch):
        return data.schema, [data]
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, data
    batches = list(data)
    if not batches:
        raise HoodieConfigError("write() got no record batches; pass a pyarrow Table to write an empty one.")
    return batches[0].schema, batches


def write(data: DataLike, path: str, options: Mapping[str, str], mode: str = "append") -> CommitMetadata:
    if mode not in ("append", "overwrite"):
        raise HoodieConfigError(f"mode must be 'append' or 'overwrite', got '{mode}'.")
    schema, batches = _batches(data)
    cfg = WriteConfig.from_options(options, path=path, overwrite=(mode == "overwrite"))
    ctx = begin(cfg, schema)
    try:
        result = write_task(ctx, TaskIdentity(only_task=True), batches)
        return complete(ctx, [result])
    except HoodieCommitStateUnknown:
        raise  # the commit may have landed: its files must stay (the next writer's rollback decides)
    except BaseException:
        abort(ctx, settle_seconds=0)  # one process: no straggling tasks
        raise
