"""The `hoodie` DataSource: the thin Spark adapter over hoodie_sink.table."""

from __future__ import annotations

import sys

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from hoodie_sink.datasource.batch_writer import HoodieBatchWriter
from hoodie_sink.datasource.reader import HoodiePushdownReader, HoodieReader
from hoodie_sink.datasource.spark_schema import arrow_to_spark
from hoodie_sink.datasource.stream_writer import HoodieStreamWriter
from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.read_config import ReadConfig
from hoodie_sink.table.read.snapshot import Snapshot

STREAMING_READ_UNSUPPORTED = (
    "Streaming reads from a Hudi table (spark.readStream.format('hoodie')) are not supported yet by "
    "hoodie_sink. Help: read the table in batch with spark.read.format('hoodie').load(path); "
    "streaming writes (df.writeStream.format('hoodie')) are supported."
)


class HoodieDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "hoodie"

    def _read_config(self) -> ReadConfig:
        """The read options, parsed once per call site (schema() and reader() may run in
        different Python workers, so nothing is kept between them)."""
        return ReadConfig.from_options(self.options)

    def schema(self) -> StructType:
        cfg = self._read_config()
        return arrow_to_spark(Snapshot.open(cfg.path, cfg.as_of_instant, cfg.read_optimized).schema)

    def reader(self, schema: StructType):
        columns = [f.name for f in schema.fields]
        # Spark refuses a reader that implements pushFilters while
        # spark.sql.python.filterPushdown.enabled is false, and tells the reader nothing about
        # that setting.  Its pushdown worker is the only caller that pushes filters, so the
        # pruning reader is handed out there alone; elsewhere the plain reader reads all files.
        caller = sys._getframe(1).f_globals.get("__name__", "")
        cls = HoodiePushdownReader if caller.endswith("data_source_pushdown_filters") else HoodieReader
        return cls(self._read_config(), columns)

    def streamReader(self, schema: StructType):
        raise HoodieConfigError(STREAMING_READ_UNSUPPORTED)

    def simpleStreamReader(self, schema: StructType):
        raise HoodieConfigError(STREAMING_READ_UNSUPPORTED)

    def writer(self, schema: StructType, overwrite: bool) -> HoodieBatchWriter:
        return HoodieBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> HoodieStreamWriter:
        return HoodieStreamWriter(self.options, schema, overwrite)
