"""`hoodie_sink.spark.debezium_changes`: Debezium change events read from Kafka, flattened into the
records Apache Hudi's `PostgresDebeziumSource` makes of them (docs/hudi/debezium.md#the-flattened-record),
as a DataFrame transform in Spark SQL (no Python per record).

The Kafka value is Debezium's JSON envelope, with or without its schema part (`{"schema": ...,
"payload": {...}}` when the converter's schemas.enable is true, the payload alone otherwise). A
change becomes one record: the row's columns from `after`, or from `before` for a delete (op 'd'),
and Hudi's columns `_change_operation_type` (op), `_upstream_event_processed_ts_ms` (ts_ms),
`db_shard_source_partition` (source.name), `db_schema_source_partition` (source.schema),
`_event_origin_ts_ms` (source.ts_ms), `_event_tx_id` (source.txId), `_event_lsn` (source.lsn),
`_event_xmin` (source.xmin). Write them with `PostgresDebeziumAvroPayload` and
`hoodie.datasource.write.precombine.field=_event_lsn` (`DEBEZIUM_OPTIONS`)."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, _parse_datatype_string

from hoodie_sink.errors import HoodieConfigError

POSTGRES_PAYLOAD = "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload"
# the options a Debezium table is written with (docs/hudi/debezium.md#options)
DEBEZIUM_OPTIONS = {
    "hoodie.datasource.write.payload.class": POSTGRES_PAYLOAD,
    "hoodie.datasource.write.precombine.field": "_event_lsn",
}
# Hudi's DebeziumConstants: (flattened column, field of the event, type)
_META = (
    ("_change_operation_type", "op", StringType()),
    ("_upstream_event_processed_ts_ms", "ts_ms", LongType()),
    ("db_shard_source_partition", "source.name", StringType()),
    ("db_schema_source_partition", "source.schema", StringType()),
    ("_event_origin_ts_ms", "source.ts_ms", LongType()),
    ("_event_tx_id", "source.txId", LongType()),
    ("_event_lsn", "source.lsn", LongType()),
    ("_event_xmin", "source.xmin", LongType()),
)
_SOURCE = StructType([
    StructField("name", StringType()), StructField("schema", StringType()), StructField("ts_ms", LongType()),
    StructField("txId", LongType()), StructField("lsn", LongType()), StructField("xmin", LongType()),
])  # fmt: skip


def debezium_changes(
    schema: StructType | str, flavour: str = "postgres", value_column: str = "value"
) -> Callable[[DataFrame], DataFrame]:
    """A `df.transform` that flattens the Debezium events in `value_column` (Kafka's `value`,
    binary or string) whose row has `schema` (a StructType or a DDL string such as
    "id BIGINT, name STRING"); other input columns are dropped, and so are tombstones (null values)."""
    if flavour != "postgres":
        raise HoodieConfigError(
            f"debezium_changes(flavour='{flavour}') is not supported: hoodie_sink implements Hudi's "
            "PostgresDebeziumSource and PostgresDebeziumAvroPayload; MySQL's binlog ordering is not implemented "
            "(docs/hudi/debezium.md#mysql). Help: flavour='postgres'."
        )
    row = _parse_datatype_string(schema) if isinstance(schema, str) else schema
    if not isinstance(row, StructType):
        raise HoodieConfigError(
            f"debezium_changes(schema={schema!r}): the row schema must be a struct of columns."
        )
    clash = {f.name for f in row.fields} & {name for name, _, _ in _META}
    if clash:
        raise HoodieConfigError(
            f"debezium_changes: the row has column(s) {sorted(clash)}, which Hudi's flattened record uses for the "
            "event's metadata. Help: rename them at the source."
        )
    change = StructType([
        StructField("before", row), StructField("after", row), StructField("op", StringType()),
        StructField("ts_ms", LongType()), StructField("source", _SOURCE),
    ])  # fmt: skip
    envelope = StructType([StructField("payload", change), *change.fields])

    def transform(df: DataFrame) -> DataFrame:
        parsed = F.from_json(F.col(value_column).cast("string"), envelope)
        event = F.coalesce(parsed.getField("payload"), parsed.dropFields("payload").cast(change)).alias("e")
        # Debezium follows a delete with a tombstone (a null value, for Kafka's log compaction): no change
        e = df.where(F.col(value_column).isNotNull()).select(event)
        is_delete = F.lower(F.col("e.op")) == F.lit("d")
        meta = [F.col(f"e.{field}").cast(t).alias(name) for name, field, t in _META]
        cols = [
            F.when(is_delete, F.col(f"e.before.`{f.name}`"))
            .otherwise(F.col(f"e.after.`{f.name}`"))
            .alias(f.name)
            for f in row.fields
        ]
        return e.select(*meta, *cols)

    return transform
