"""The `hoodie` DataSource: the thin Spark adapter over hoodie_sink.table.

Spark imports this module in a Python process of its own for each step of a query (the lookup of
data sources, the write's set-up, each task's worker, the commit, a read's schema and plan), so it
imports the engine only in the method that needs it: the lookup then costs no engine import at
all, and each step imports only its own side (the reader, or the writer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyspark
from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from hoodie_sink.errors import HoodieConfigError

if TYPE_CHECKING:
    from hoodie_sink.datasource.batch_writer import HoodieBatchWriter
    from hoodie_sink.datasource.reader import HoodieReader
    from hoodie_sink.datasource.stream_reader import HoodieStreamReader
    from hoodie_sink.datasource.stream_writer import HoodieStreamWriter
    from hoodie_sink.table.options.read_config import ReadConfig

SIMPLE_STREAM_READER_UNSUPPORTED = (
    "hoodie reads a table as a stream with Spark's DataSourceStreamReader (offsets are commit instants), "
    "not with a simple stream reader."
)


class HoodieDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "hoodie"

    def _read_config(self, streaming: bool = False) -> ReadConfig:
        """The read options, parsed once per call site (schema() and reader() may run in
        different Python workers, so nothing is kept between them)."""
        from hoodie_sink.table.options.read_config import ReadConfig

        return ReadConfig.from_options(self.options, streaming=streaming)

    def schema(self) -> StructType:
        # Spark asks for the schema before it says whether the read is a stream: a streaming
        # option here means one; reader() / streamReader() then check the options strictly.
        streaming = any(k.lower().startswith("hoodie.datasource.streaming.") for k in self.options)
        streaming = streaming or (
            self.options.get("hoodie.datasource.query.incremental.format", "").lower() == "cdc"
            and "hoodie.datasource.read.begin.instanttime" not in self.options
        )
        cfg = self._read_config(streaming)
        from hoodie_sink.datasource.spark_schema import arrow_to_spark

        if cfg.cdc:
            from hoodie_sink.table.client.scans import CDC_SCHEMA

            return arrow_to_spark(CDC_SCHEMA)
        from hoodie_sink.table.client.table import Table

        return arrow_to_spark(Table.of(cfg).open_snapshot(cfg.as_of_instant, cfg.read_optimized).schema)

    def reader(self, schema: StructType) -> HoodieReader:
        # One reader for every query, filter pushdown on or off: it takes no filters, because Spark
        # 4.3 would serve one query's pushed filters to other queries (datasource/reader.py).
        from hoodie_sink.datasource.reader import HoodieReader

        return HoodieReader(self._read_config(), [f.name for f in schema.fields])

    def streamReader(self, schema: StructType) -> HoodieStreamReader:
        from hoodie_sink.datasource.stream_reader import HoodieStreamReader

        return HoodieStreamReader(self._read_config(streaming=True), [f.name for f in schema.fields])

    def simpleStreamReader(self, schema: StructType):
        raise HoodieConfigError(SIMPLE_STREAM_READER_UNSUPPORTED)

    def writer(self, schema: StructType, overwrite: bool) -> HoodieBatchWriter:
        from hoodie_sink.datasource.batch_writer import HoodieBatchWriter

        return HoodieBatchWriter(_with_spark_version(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> HoodieStreamWriter:
        from hoodie_sink.datasource.stream_writer import HoodieStreamWriter

        return HoodieStreamWriter(_with_spark_version(self.options), schema, overwrite)


SPARK_VERSION_OPTION = "hoodie.meta_sync.spark.version"


def _with_spark_version(options: Mapping[str, str]) -> dict[str, str]:
    """The write options with the running Spark's version for the catalog sync's
    `spark.sql.create.version`, as Hudi's Spark writer hands its sync tools
    (docs/hudi/hive-sync.md#when-the-spark-writer-syncs); the user's value wins."""
    if any(k.lower() == SPARK_VERSION_OPTION for k in options):
        return dict(options)
    return {**options, SPARK_VERSION_OPTION: pyspark.__version__}
