"""`hoodie_sink.spark.merge_micro_batches`: a MERGE per micro-batch of a stream, exactly once,
through `foreachBatch` (docs/design/table-dml.md#exactly-once-from-a-stream).

Each micro-batch builds its merge on the table as it is then (user code: `build(table, df)`),
records its batch id with the merge's one commit (`TableMerger.with_checkpoint`), and is skipped
when the table holds that batch already: Spark replays the last batch after a crash between our
commit and its own checkpoint.  A merge that loses a write conflict is built and run again from
the start, since its changes were computed from the table the other writer changed."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from pyspark.sql import DataFrame

from hoodie_sink.datasource import dml  # noqa: F401 - registers the merge of a Spark DataFrame source
from hoodie_sink.datasource.routing import IDENTIFIER_OPTION
from hoodie_sink.errors import HoodieConfigError, HoodieWriteConflictError
from hoodie_sink.table.client import micro_batches as streaming
from hoodie_sink.table.client.table import Table
from hoodie_sink.table.dml.table_merger import TableMerger
from hoodie_sink.table.options.write_config import WriteConfig

log = logging.getLogger(__name__)

# Options of the stream, not of the table: they only name the stream (the default identifier).
_STREAM_ONLY = ("checkpointlocation", "queryname")


def merge_micro_batches(
    path: str, build: Callable[[Table, DataFrame], TableMerger], options: Mapping[str, str] | None = None
) -> Callable[[DataFrame, int], dict[str, int]]:
    """A function for `DataStreamWriter.foreachBatch` that merges each micro-batch into the Hudi
    table at `path` (which must exist) exactly once.  `build(table, df)` returns the merge, its
    clauses added (`table.merge(df, "t.id = s.id", "s", "t").when_matched_update_all()...`), not
    executed.  The batch id is recorded under the stream's checkpoint identifier (option
    hoodie.datasource.write.streaming.checkpoint.identifier; by default derived from the
    `checkpointLocation` or `queryName` in `options`, as `micro_batches` does); a batch the table
    holds already is skipped.  A merge that loses a write conflict is built and run again, up to
    hoodie.datasource.write.streaming.retry.count times, waiting
    hoodie.datasource.write.streaming.retry.interval.ms (doubling) in between."""
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    identifier = opts.get(IDENTIFIER_OPTION) or streaming.default_identifier(
        {k.lower(): v for k, v in opts.items()}
    )
    table_options = {k: v for k, v in opts.items() if k.lower() not in _STREAM_ONLY}
    cfg = WriteConfig.from_options({**table_options, IDENTIFIER_OPTION: identifier}, path=path)

    def merge_batch(df: DataFrame, batch_id: int) -> dict[str, int]:
        wait_s = cfg.stream_retry_interval_ms / 1000
        for attempt in range(cfg.stream_retries + 1):
            merger = build(Table(path, table_options), df)
            if not isinstance(merger, TableMerger):
                raise HoodieConfigError(
                    f"merge_micro_batches: build(table, df) must return the merge (table.merge(...) with its "
                    f"when_* clauses, not executed), got {type(merger).__name__}."
                )
            if merger.checkpoint is not None:
                raise HoodieConfigError(
                    "merge_micro_batches records each micro-batch's checkpoint itself: build(table, df) must not "
                    "call with_checkpoint. Help: set the identifier with option "
                    f"'{IDENTIFIER_OPTION}'."
                )
            try:
                return merger.with_checkpoint(identifier, batch_id).execute()
            except Exception as e:  # a conflict raised in a Spark task reaches us wrapped: known by its name
                conflict = isinstance(e, HoodieWriteConflictError) or "HoodieWriteConflictError" in str(e)
                if not conflict or attempt == cfg.stream_retries:
                    raise
                log.warning(
                    "hoodie: merge of micro-batch %d of %s: write conflict, merged again in %.1f s (retry %d of %d)",
                    batch_id, identifier, wait_s, attempt + 1, cfg.stream_retries,
                )  # fmt: skip
                time.sleep(wait_s)
                wait_s *= 2
        raise AssertionError("unreachable")

    return merge_batch
