"""Spark <-> Arrow schema conversion (the adapter's only type knowledge)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from hoodie_sink.errors import HoodieSchemaError


def spark_to_arrow(schema: StructType) -> pa.Schema:
    """Spark TimestampType -> timestamp[us, UTC]; TimestampNTZType -> tz-naive (refused later)."""
    try:
        return to_arrow_schema(schema, timezone="UTC")
    except Exception as e:  # pyspark raises its own error types for unsupported types
        raise HoodieSchemaError(f"Cannot write Spark schema {schema.simpleString()}: {e}") from e


def arrow_to_spark(schema: pa.Schema) -> StructType:
    return from_arrow_schema(schema, prefer_timestamp_ntz=False)
