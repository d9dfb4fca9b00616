"""A table's Arrow schema as the metastore keeps it: Hive type names for the columns, and Spark's
JSON schema for the data source table properties (docs/hudi/hive-sync.md#what-a-table-looks-like).

Pure functions, no I/O.  Hudi converts the Parquet schema of its base files (HiveSchemaUtil); our
Arrow schema is the one those files are written with (format/schema.py), so the mapping below is
the Parquet one: int64 is `bigint`, a timestamp is `bigint` unless `support_timestamp`, and so on.
A type with no Hive spelling is refused, naming the column, rather than registered wrongly.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.types as pt

from hoodie_sink.errors import HoodieCatalogError

# Arrow type test -> (Hive type name, Spark's JSON type name) for the types that map one to one
# (Parquet's physical and logical types as HiveSchemaUtil names them; DataType.jsonValue)
_SIMPLE = (
    (pt.is_boolean, "boolean", "boolean"), (pt.is_int8, "tinyint", "byte"), (pt.is_int16, "smallint", "short"),
    (pt.is_int32, "int", "integer"), (pt.is_int64, "bigint", "long"), (pt.is_float32, "float", "float"),
    (pt.is_float64, "double", "double"), (pt.is_string, "string", "string"), (pt.is_large_string, "string", "string"),
    (pt.is_binary, "binary", "binary"), (pt.is_large_binary, "binary", "binary"),
    (pt.is_fixed_size_binary, "binary", "binary"), (pt.is_date32, "date", "date"),
)  # fmt: skip


def hive_type(t: pa.DataType, support_timestamp: bool, column: str) -> str:
    """The Hive type name engines read this column's Parquet values as."""
    for test, hive, _spark in _SIMPLE:
        if test(t):
            return hive
    if pt.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pt.is_timestamp(t):
        # an INT64 column annotated TIMESTAMP_MILLIS/MICROS: Hive `timestamp` only when asked, for
        # the older readers Hudi keeps `bigint` for by default (docs/hudi/hive-sync.md#what-a-table-looks-like)
        return "timestamp" if support_timestamp else "bigint"
    if pt.is_list(t) or pt.is_large_list(t):
        return f"array<{hive_type(t.value_type, support_timestamp, column)}>"
    if pt.is_map(t):
        key = hive_type(t.key_type, support_timestamp, column)
        return f"map<{key},{hive_type(t.item_type, support_timestamp, column)}>"
    if pt.is_struct(t):
        inner = ",".join(f"{f.name}:{hive_type(f.type, support_timestamp, column)}" for f in t)
        return f"struct<{inner}>"
    raise HoodieCatalogError(
        f"column '{column}' has type {t}, which has no Hive type: the table cannot be registered in a metastore"
    )


def spark_type(t: pa.DataType, column: str) -> Any:
    """Spark's JSON form of the type (DataType.jsonValue): what Spark reads a data source table by."""
    for test, _hive, spark in _SIMPLE:
        if test(t):
            return spark
    if pt.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pt.is_timestamp(t):
        # Avro timestamp-* is Spark's TimestampType; local-timestamp-* (no zone) is TimestampNTZType
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pt.is_list(t) or pt.is_large_list(t):
        item = t.value_field
        return {"type": "array", "elementType": spark_type(item.type, column), "containsNull": item.nullable}
    if pt.is_map(t):
        return {
            "type": "map",
            "keyType": spark_type(t.key_type, column),
            "valueType": spark_type(t.item_type, column),
            "valueContainsNull": t.item_field.nullable,
        }
    if pt.is_struct(t):
        return spark_struct(list(t), column)
    raise HoodieCatalogError(f"column '{column}' has type {t}, which Spark's table schema cannot express")


def spark_struct(fields: list[pa.Field], column: str = "") -> dict[str, Any]:
    return {
        "type": "struct",
        "fields": [
            {
                "name": f.name,
                "type": spark_type(f.type, f"{column}.{f.name}" if column else f.name),
                "nullable": f.nullable,
                "metadata": {},
            }
            for f in fields
        ],
    }


def spark_schema_parts(schema: pa.Schema, partition_columns: list[str], threshold: int) -> list[str]:
    """The table's Spark schema as JSON, partition columns moved to its end (as Spark orders a
    partitioned data source table), cut in pieces of at most `threshold` characters
    (`spark.sql.sources.schema.part.<i>`)."""
    keys = set(partition_columns)
    ordered = [f for f in schema if f.name not in keys] + [
        schema.field(n) for n in partition_columns if n in schema.names
    ]
    text = json.dumps(spark_struct(ordered), separators=(",", ":"))
    return [text[i : i + threshold] for i in range(0, len(text), threshold)] or [text]
