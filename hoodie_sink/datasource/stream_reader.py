"""`spark.readStream.format("hoodie").load(path)`: a table's writes as a stream.

Offsets are completed write instants (`{"instant": "20260101093000123"}`), as in Hudi's
HoodieStreamSource; a micro-batch (start, end] is the incremental query of that range, read from
the file groups its writes touched, as of `end`.  Spark writes each batch's offsets to the query's
checkpoint before it runs the batch, and a snapshot as of an instant never changes, so a batch
replayed after a crash reads exactly the same rows: with an exactly-once sink (ours), a pipeline of
two streams is exactly-once end to end.

Rate limiting: `hoodie.datasource.streaming.max.instants.per.batch` (hoodie_sink's own option)
caps the writes per micro-batch.  Spark's only way to tell a source its limit is a built-in
ReadLimit, so the cap travels as ReadMaxFiles (one "file" = one instant); when Spark asks for
everything (ReadAllAvailable) it gets everything, as the API requires.  Trigger.AvailableNow
reads up to the newest write when the query starts, in capped batches, then stops.
"""

from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from hoodie_sink.datasource.reader import HoodieReader, cdc_partitions, incremental_partitions
from hoodie_sink.table.client import scans
from hoodie_sink.table.client.scans import ChangeRead, IncrementalPlan
from hoodie_sink.table.client.table import Table
from hoodie_sink.table.options.read_config import ReadConfig

log = logging.getLogger(__name__)


class HoodieStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, config: ReadConfig, columns: list[str]):
        self.config = config
        self.columns = columns
        self._cap: str | None = None  # Trigger.AvailableNow: the newest write when the query started

    def _table(self) -> Table:
        return Table.of(self.config)

    def initialOffset(self) -> dict:
        return {"instant": scans.stream_start(self._table(), self.config.start_offset)}

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.config.max_instants_per_batch
        return ReadMaxFiles(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._cap = scans.stream_end(self._table(), "000")

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        table = self._table()
        timeline = scans.timeline_of(table)
        begin = start["instant"]
        max_instants = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        end = scans.stream_end(table, begin, max_instants, self._cap, timeline)
        if end == begin:
            blocked, latest = scans.stream_blocked_by(table, begin, timeline)
            if blocked and latest is not None and latest > blocked:
                log.warning(
                    "hoodie stream on %s waits for write %s, still pending while later writes have completed; "
                    "it resumes when that write completes or is rolled back",
                    self.config.path,
                    blocked,
                )
        return {"instant": end}

    def reportLatestOffset(self) -> dict | None:
        latest = scans.latest_write(self._table())
        return {"instant": latest} if latest else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, stop = start["instant"], end["instant"]
        if stop <= begin:
            return []
        if self.config.cdc:
            return cdc_partitions(self._table(), begin, stop)
        return incremental_partitions(HoodieReader(self.config, self.columns), begin, stop)

    def read(self, partition: InputPartition):
        _slot, _n, plan, refs = partition.value
        if isinstance(plan, ChangeRead):
            yield from scans.read_changes(self._table(), plan, self.columns)
            return
        assert isinstance(plan, IncrementalPlan)
        yield from scans.read_incremental_refs(self._table(), plan, refs, self.columns, whole_schema=True)

    def commit(self, end: dict) -> None:
        pass  # nothing to release: offsets live in Spark's checkpoint

    def stop(self) -> None:
        pass
