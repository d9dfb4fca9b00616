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

from hoodie_sink.datasource.reader import (
    CdcRead,
    HoodieReader,
    cdc_partitions,
    incremental_partitions,
    read_cdc_partition,
    read_incremental_partition,
)
from hoodie_sink.read_config import ReadConfig
from hoodie_sink.table.read.incremental import IncrementalPlan
from hoodie_sink.table.read.snapshot import load_timeline
from hoodie_sink.table.read.stream_offsets import blocking_write, initial_instant, next_end

log = logging.getLogger(__name__)


class HoodieStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, config: ReadConfig, columns: list[str]):
        self.config = config
        self.columns = columns
        self._cap: str | None = None  # Trigger.AvailableNow: the newest write when the query started

    def _timeline(self):
        storage = self.config.storage()
        return storage, load_timeline(storage)

    def initialOffset(self) -> dict:
        _, timeline = self._timeline()
        return {"instant": initial_instant(timeline, self.config.start_offset)}

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.config.max_instants_per_batch
        return ReadMaxFiles(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        storage, timeline = self._timeline()
        self._cap = next_end(storage, timeline, "000")

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        storage, timeline = self._timeline()
        begin = start["instant"]
        max_instants = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        end = next_end(storage, timeline, begin, max_instants, self._cap)
        if end == begin:
            blocked = blocking_write(storage, timeline, begin)
            latest = timeline.latest_completed()
            if blocked and latest is not None and latest.timestamp > blocked:
                log.warning(
                    "hoodie stream on %s waits for write %s, still pending while later writes have completed; "
                    "it resumes when that write completes or is rolled back",
                    self.config.path,
                    blocked,
                )
        return {"instant": end}

    def reportLatestOffset(self) -> dict | None:
        _, timeline = self._timeline()
        latest = timeline.latest_completed()
        return {"instant": latest.timestamp} if latest else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, stop = start["instant"], end["instant"]
        if stop <= begin:
            return []
        if self.config.cdc:
            return cdc_partitions(self.config.storage(), begin, stop)
        return incremental_partitions(HoodieReader(self.config, self.columns), begin, stop)

    def read(self, partition: InputPartition):
        _slot, _n, plan, refs = partition.value
        if isinstance(plan, CdcRead):
            yield from read_cdc_partition(self.config.storage(), plan, self.columns)
            return
        assert isinstance(plan, IncrementalPlan)
        yield from read_incremental_partition(
            self.config.storage(), plan, refs, self.columns, whole_schema=True
        )

    def commit(self, end: dict) -> None:
        pass  # nothing to release: offsets live in Spark's checkpoint

    def stop(self) -> None:
        pass
