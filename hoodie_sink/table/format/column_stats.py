"""Column statistics of one data file as the metadata table's `column_stats` partition holds them
(docs/hudi/column-stats.md): one `ColumnStatsInfo` per indexed column, computed the way Hudi
0.15's writers compute them, so that a reader merging ours with Java's sees one kind of value.

- A base file's come from its Parquet footer (ParquetUtils.readColumnStatsFromMetadata): the
  row groups' chunk statistics of a top-level primitive column folded into one (min of the mins,
  max of the maxes, summed null and value counts and compressed/uncompressed sizes).  A nested
  column has no statistics of its own at the top level, so none are written.
- A log file's come from the rows written into it (HoodieTableMetadataUtil
  .collectColumnRangeMetadata): min, max, nulls and the row count; sizes 0.
- Values are wrapped by their Java type after Hudi's conversion: booleans, ints, longs, floats,
  doubles, strings and bytes as such; a date as its epoch day; a decimal at scale 15; a timestamp
  as the long it is stored as (Hudi turns no timestamp into TimestampMicrosWrapper on this path).

Pure: footers and Arrow tables in, records' payloads out.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_sink.table.format.metadata_records import ColumnStatsInfo, StatValue

DECIMAL_SCALE = 15  # the DecimalWrapper's decimal(30, 15)
DECIMAL_PRECISION = 30


def column_stats_of_footer(
    md: pq.FileMetaData, file_name: str, columns: Iterable[str] | None = None
) -> list[ColumnStatsInfo]:
    """The statistics of a base file's top-level primitive columns (all of them, or `columns`)."""
    wanted = None if columns is None else set(columns)
    folded: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for j in range(rg.num_columns):
            chunk = rg.column(j)
            name = chunk.path_in_schema
            if "." in name or (wanted is not None and name not in wanted):
                continue  # a nested leaf: Hudi matches top-level names only
            lo, hi, usable = _chunk_bounds(chunk)
            stats = chunk.statistics
            nulls = stats.null_count if stats is not None and stats.has_null_count else chunk.num_values
            f = folded.get(name)
            if f is None:
                order.append(name)
                folded[name] = {"min": lo, "max": hi, "usable": usable, "nulls": nulls,
                                "values": chunk.num_values, "size": chunk.total_compressed_size,
                                "raw": chunk.total_uncompressed_size}  # fmt: skip
                continue
            f["usable"] = f["usable"] and usable
            f["min"] = _least(f["min"], lo)
            f["max"] = _greatest(f["max"], hi)
            f["nulls"] += nulls
            f["values"] += chunk.num_values
            f["size"] += chunk.total_compressed_size
            f["raw"] += chunk.total_uncompressed_size
    out = []
    for name in order:
        f = folded[name]
        if not f["usable"]:
            continue  # a type Hudi cannot wrap (INT96, fixed bytes, a decimal beyond (30, 15))
        out.append(
            ColumnStatsInfo(file_name, name, f["min"], f["max"], f["values"], f["nulls"], f["size"], f["raw"])
        )
    return out


def column_stats_of_rows(
    table: pa.Table, file_name: str, columns: Iterable[str] | None = None
) -> list[ColumnStatsInfo]:
    """The statistics of the rows written into a log file (sizes 0, as Hudi writes them)."""
    names = table.column_names if columns is None else [c for c in columns if c in table.column_names]
    out = []
    for name in names:
        column = table.column(name)
        kind = _kind(column.type)
        if kind is None:
            continue
        column = _as_stored(column)
        nulls = column.null_count
        lo = hi = None
        if nulls < len(column):
            mm = pc.min_max(column)
            lo, hi = _wrap(kind, mm["min"].as_py()), _wrap(kind, mm["max"].as_py())
            if kind in ("float", "double") and pc.any(pc.is_nan(column)).as_py():
                # Java's Float/Double.compareTo orders NaN above every number: the max is NaN
                hi = (_WRAPPERS[kind], float("nan"))
                lo = lo if lo is not None and lo[1] == lo[1] else hi
            if lo is None or hi is None:
                continue  # a decimal beyond (30, 15)
        out.append(ColumnStatsInfo(file_name, name, lo, hi, len(column), nulls, 0, 0))
    return out


# ------------------------------------------------------------------------------------- values


def _chunk_bounds(chunk: pq.ColumnChunkMetaData) -> tuple[StatValue | None, StatValue | None, bool]:
    """(min, max, whether the column's type can be wrapped) of one column chunk."""
    stats = chunk.statistics
    kind = _physical_kind(chunk, stats)
    if kind is None:
        return None, None, False
    if stats is None or not stats.has_min_max:
        return None, None, True
    lo, hi = (
        _footer_value(kind, stats, stats.min_raw, stats.min),
        _footer_value(kind, stats, stats.max_raw, stats.max),
    )
    if lo is None or hi is None:
        return None, None, False
    return lo, hi, True


def _physical_kind(chunk: pq.ColumnChunkMetaData, stats: pq.Statistics | None) -> str | None:
    logical = str(stats.logical_type) if stats is not None else "None"
    physical = chunk.physical_type
    if logical.startswith("Decimal"):
        return "decimal"
    if logical == "Date":
        return "date"
    if physical == "BOOLEAN":
        return "boolean"
    if physical == "INT32":
        return "int"
    if physical == "INT64":
        return "long"  # timestamps and times too: Hudi keeps the stored long
    if physical == "FLOAT":
        return "float"
    if physical == "DOUBLE":
        return "double"
    if physical == "BYTE_ARRAY":
        return "string" if logical in ("String", "Enum", "Json") else "bytes"
    return None  # INT96, FIXED_LEN_BYTE_ARRAY without a decimal: Java's wrapper refuses them


def _footer_value(kind: str, stats: pq.Statistics, raw: Any, value: Any) -> StatValue | None:
    if kind == "decimal":
        return _decimal(value)
    if kind == "date":
        return ("DateWrapper", int(raw))
    if kind in ("int", "long"):
        return ("IntWrapper" if kind == "int" else "LongWrapper", int(raw))
    if kind == "string":
        return ("StringWrapper", raw.decode("utf-8") if isinstance(raw, bytes) else str(value))
    if kind == "bytes":
        return ("BytesWrapper", bytes(raw))
    return _WRAPPERS[kind], value


_WRAPPERS = {"boolean": "BooleanWrapper", "float": "FloatWrapper", "double": "DoubleWrapper"}


def _kind(t: pa.DataType) -> str | None:
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return "date"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "long" if t.bit_width == 64 or t == pa.uint32() else "int"
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return "long"
    if pa.types.is_time32(t):
        return "int"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    return None


def _as_stored(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Dates as their epoch days, timestamps and times as the integers they are stored as."""
    t = column.type
    if pa.types.is_date64(t):
        column = column.cast(pa.date32())
        t = column.type
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return column.cast(pa.int32())
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return column.cast(pa.int64())
    return column


def _wrap(kind: str, value: Any) -> StatValue | None:
    if kind == "decimal":
        return _decimal(value)
    if kind == "date":
        return ("DateWrapper", int(value))
    if kind in ("int", "long"):
        return ("IntWrapper" if kind == "int" else "LongWrapper", int(value))
    if kind == "string":
        return ("StringWrapper", value)
    if kind == "bytes":
        return ("BytesWrapper", bytes(value))
    return _WRAPPERS[kind], value


def _decimal(value: decimal.Decimal) -> StatValue | None:
    """A decimal at scale 15 (HoodieTableMetadataUtil.tryUpcastDecimal); None where Java fails."""
    try:
        scaled = value.quantize(decimal.Decimal(1).scaleb(-DECIMAL_SCALE), context=decimal.Context(prec=64))
    except decimal.InvalidOperation:
        return None
    if scaled != value or len(scaled.as_tuple().digits) > DECIMAL_PRECISION:
        return None
    return ("DecimalWrapper", scaled)


def _least(a: StatValue | None, b: StatValue | None) -> StatValue | None:
    if a is None or b is None:
        return b if a is None else a
    return b if b[1] < a[1] else a


def _greatest(a: StatValue | None, b: StatValue | None) -> StatValue | None:
    if a is None or b is None:
        return b if a is None else a
    return b if b[1] > a[1] else a
