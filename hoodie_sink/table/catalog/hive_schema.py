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


def hive_type(t: pa.DataType, support_timestamp: bool, column: str) -> str:
    """The Hive type name engines read this column's Parquet values as."""
    if pt.is_boolean(t):
        return "boolean"
    if pt.is_int8(t):
        return "tinyint"
    if pt.is_int16(t):
        return "smallint"
    if pt.is_int32(t):
        return "int"
    if pt.is_int64(t):
        return "bigint"
    if pt.is_float32(t):
        return "float"
    if pt.is_float64(t):
        return "double"
    if pt.is_string(t) or pt.is_large_string(t):
        return "string"
    if pt.is_binary(t) or pt.is_large_binary(t) or pt.is_fixed_size_binary(t):
        return "binary"
    if pt.is_date32(t):
        return "date"
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
    simple = (
        (pt.is_boolean, "boolean"), (pt.is_int8, "byte"), (pt.is_int16, "short"), (pt.is_int32, "integer"),
        (pt.is_int64, "long"), (pt.is_float32, "float"), (pt.is_float64, "double"), (pt.is_string, "string"),
        (pt.is_large_string, "string"), (pt.is_binary, "binary"), (pt.is_large_binary, "binary"),
        (pt.is_fixed_size_binary, "binary"), (pt.is_date32, "date"),
    )  # fmt: skip
    for test, name in simple:
        if test(t):
            return name
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
