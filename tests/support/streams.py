"""Streams of parquet files into the `hoodie` sink, one micro-batch per file, run to the end."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery


def stream_files(
    spark: SparkSession, schema, src: Path, path: Path, ckpt: Path, options: dict, timeout_s: int = 600
) -> StreamingQuery:
    """Every parquet file of `src` (in modification order) as one micro-batch into the table at
    `path` (trigger availableNow); raises what the query raised."""
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
    q = (
        df.writeStream.format("hoodie").options(**options)
        .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start(str(path))
    )  # fmt: skip
    q.awaitTermination(timeout_s)
    q.stop()
    if q.exception():
        raise q.exception()
    return q
