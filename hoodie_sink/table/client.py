"""The engine's own Python API: write Arrow data into a Hudi table without Spark.

The same coordinator and task code that the Spark adapter drives, run in one process: begin
an instant, write every batch as one task, complete (or abort on any error but one that leaves
the commit's outcome unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pyarrow as pa

from hoodie_sink.config import WriteConfig
from hoodie_sink.errors import HoodieCommitStateUnknown, HoodieConfigError
from hoodie_sink.table import commit, write_path
from hoodie_sink.table.metadata import CommitMetadata
from hoodie_sink.table.write_task import TaskIdentity

DataLike = pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable[pa.RecordBatch]


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
    cfg = WriteConfig.from_options(options, path=path)
    ctx = commit.begin(cfg, schema, overwrite=(mode == "overwrite"))
    try:
        result = write_path.write_task(ctx, TaskIdentity(only_task=True), batches)
        return write_path.complete(ctx, [result])
    except HoodieCommitStateUnknown:
        raise  # the commit may have landed: its files must stay (the next writer's rollback decides)
    except BaseException:
        commit.abort(ctx, settle_seconds=0)  # one process: no straggling tasks
        raise
