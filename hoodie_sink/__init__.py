"""hoodie_sink: land streaming and batch data in Apache Hudi (v6) tables from Spark, in Python."""

from __future__ import annotations

from hoodie_sink.errors import (
    HoodieCommitError,
    HoodieConfigError,
    HoodieError,
    HoodieKeyError,
    HoodieSchemaError,
    HoodieTableError,
)

__version__ = "0.1.0"

__all__ = [
    "HoodieCommitError",
    "HoodieConfigError",
    "HoodieError",
    "HoodieKeyError",
    "HoodieSchemaError",
    "HoodieTableError",
    "Table",
    "cluster",
    "read",
    "compact",
    "record_bucket_layout",
    "register",
    "write",
]


def register(spark) -> None:
    """Register the `hoodie` data source with a SparkSession (optional: it is auto-registered)."""
    from hoodie_sink.datasource.source import HoodieDataSource

    spark.dataSource.register(HoodieDataSource)


def write(data, path: str, options: dict | None = None, mode: str = "append"):
    """Write an Arrow table / record batches into the Hudi table at `path`, without Spark."""
    from hoodie_sink.table.client import write as _write

    return _write(data, path, options or {}, mode=mode)


def read(path: str, options: dict | None = None, **kwargs):
    """Read the Hudi table at `path` into an Arrow table, without Spark: its latest snapshot, or
    what `options` (Hudi's read options, as for spark.read: query type, as.of.instant, the
    incremental query's begin and end instants, its path glob, the cdc format; S3's fs.s3a.*
    settings) ask for.
    `kwargs`: `columns`, `partition_filter`, and for snapshots `filters` (see table/read/snapshot.py).
    The same as `Table(path, options).read(**kwargs)`."""
    from hoodie_sink.table.client.table import Table

    return Table(path, options).read(**kwargs)


def cluster(path: str, options: dict | None = None, spark=None):
    """Schedule (or resume) and execute one clustering of the table at `path`: as a Spark job
    when `spark` is given (one task per clustering group), else in a local thread pool.
    Returns a ClusteringResult, or None when there is nothing to cluster."""
    if spark is not None:
        from hoodie_sink.datasource.clustering import run_clustering

        return run_clustering(spark, path, options)
    from hoodie_sink.table.client.table import Table

    return Table(path, options).cluster()


def compact(path: str, options: dict | None = None, spark=None):
    """Finish pending compactions of the merge-on-read table at `path`, then schedule and execute
    one (of every file slice with log files): as a Spark job when `spark` is given (one task per
    file slice), else in a local thread pool.  Returns the CompactionResults (empty: nothing to
    compact)."""
    if spark is not None:
        from hoodie_sink.datasource.compaction import run_compaction

        return run_compaction(spark, path, options)
    from hoodie_sink.table.client.table import Table

    # beside a stream, a plan waits for a moment between micro-batches (up to a minute)
    return Table(path, options).compact(wait_for_writes_s=60.0)


def record_bucket_layout(path: str, options: dict | None = None, spark=None):
    """Check the bucket count and hash fields of `options` (a BUCKET write's options) against the
    stored keys of the table at `path`, which records no bucket layout (Apache Hudi's tables do not),
    and record them in hoodie.properties.  A BUCKET write does this itself for a table of up to
    2 GiB; a larger one needs this first, with `spark` (one task per file group)."""
    from hoodie_sink.table.write.bucket_layout import record_bucket_layout as record

    if spark is None:
        return record(path, dict(options or {}))
    from hoodie_sink.datasource.service_jobs import task_map

    return record(path, dict(options or {}), task_map(spark, f"hoodie bucket layout check of {path}"))


def __getattr__(name: str):
    # `hoodie_sink.Table` on first use: importing the package stays light (no pyarrow, no engine)
    if name == "Table":
        # a merge may take a Spark DataFrame, an update or delete a SparkSession: the Spark
        # adapter registers how (datasource/dml.py, datasource/dml_conditions.py)
        import hoodie_sink.datasource.dml  # noqa: F401
        import hoodie_sink.datasource.dml_conditions  # noqa: F401
        from hoodie_sink.table.client.table import Table as table_class

        return table_class
    raise AttributeError(f"module 'hoodie_sink' has no attribute {name!r}")
