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
from hoodie_sink.table.reader import Snapshot


class HoodieDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "hoodie"

    def _path(self) -> str:
        path = self.options.get("path")
        if not path:
            raise HoodieConfigError(
                "No table path: use .load('/path/to/table') or .option('path', ...). Help: for SQL, "
                "CREATE TEMPORARY VIEW v USING hoodie OPTIONS (path '/path/to/table')."
            )
        return path

    def _as_of(self) -> str | None:
        for key in ("as.of.instant", "hoodie.datasource.read.as.of.instant"):
            if self.options.get(key):
                return str(self.options[key]).replace("-", "").replace(":", "").replace(" ", "")
        return None

    def _read_optimized(self) -> bool:
        return str(self.options.get("hoodie.datasource.query.type", "snapshot")).lower() == "read_optimized"

    def schema(self) -> StructType:
        return arrow_to_spark(Snapshot.open(self._path(), self._as_of(), self._read_optimized()).schema)

    def reader(self, schema: StructType):
        columns = [f.name for f in schema.fields]
        # Spark refuses a reader that implements pushFilters while
        # spark.sql.python.filterPushdown.enabled is false, and tells the reader nothing about
        # that setting.  Its pushdown worker is the only caller that pushes filters, so the
        # pruning reader is handed out there alone; elsewhere the plain reader reads all files.
        caller = sys._getframe(1).f_globals.get("__name__", "")
        cls = HoodiePushdownReader if caller.endswith("data_source_pushdown_filters") else HoodieReader
        return cls(self._path(), self._as_of(), columns, self._read_optimized())

    def writer(self, schema: StructType, overwrite: bool) -> HoodieBatchWriter:
        return HoodieBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> HoodieStreamWriter:
        return HoodieStreamWriter(self.options, schema, overwrite)
