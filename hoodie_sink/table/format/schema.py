"""Arrow <-> Avro schema mapping, meta fields, and the physical Arrow schema of base files.

Pure functions over pyarrow (no Spark, no I/O). References: docs/hudi/format.md#meta-columns,
docs/hudi/format.md#parquet-conventions and docs/hudi/format.md#avro-schemas-and-spark-types.

Three schemas meet here:

* the table's **Avro schema** (`extraMetadata.schema` of every commit, without meta fields) that
  Java Hudi and hudi-rs read: produced by :func:`arrow_to_avro`, shaped exactly like Spark's
  ``SchemaConverters.toAvroType`` + Hudi's naming (record ``<table>_record`` in ``hoodie.<table>``);
* the **Arrow schema hudi-rs returns** for an Avro schema: :func:`avro_to_arrow`;
* the **storage schema** our Parquet files use: :func:`storage_schema` / :func:`cast_to_storage`.

Type decisions that are ours, not Hudi's (Spark never produces these Arrow types):

* unsigned ints are widened losslessly: uint8/uint16 -> ``int``, uint32 -> ``long``; uint64 is
  refused (no lossless Avro type);
* every field, list item and map value is written nullable (``["null", T]``): Java writes every
  Parquet column ``optional`` anyway, and a nullable schema keeps later evolution simple;
* ``_hoodie_*`` meta columns in the input are skipped by :func:`arrow_to_avro` (Hudi strips them
  from incoming data too), so a table read back from hudi-rs can be written again.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pyarrow as pa

from hoodie_sink.errors import HoodieSchemaError

META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)

_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STORAGE_TIMESTAMP = pa.timestamp("us", tz="UTC")
_MAX_DECIMAL128_PRECISION = 38

# Type promotions of Apache Hudi 0.15's schema on write (docs/hudi/schema-evolution.md#type-promotions):
# (table type, input type) -> the table's type after the write.  When the input is wider the table
# widens (old files are read with a cast); when it is narrower the input is cast up to the table's
# type (Hudi's "canonicalization").  string <-> bytes keeps the table's type either way.  Hudi also
# promotes float and double to string; we refuse those (see _REFUSED_PROMOTIONS).
_PROMOTIONS: dict[tuple[str, str], str] = {
    **{(a, b): b for a, b in [("int", "long"), ("int", "float"), ("int", "double"),
                              ("long", "float"), ("long", "double"), ("float", "double")]},
    **{(b, a): b for a, b in [("int", "long"), ("int", "float"), ("int", "double"),
                              ("long", "float"), ("long", "double"), ("float", "double")]},
    ("int", "string"): "string", ("long", "string"): "string",
    ("string", "int"): "string", ("string", "long"): "string",
    ("string", "bytes"): "string", ("bytes", "string"): "bytes",
}  # fmt: skip

# Table type changes check_compatible accepts (table before -> table after): old files, written with
# the left type, are read with a cast to the right one.
_WIDENINGS = frozenset((table, to) for (table, _), to in _PROMOTIONS.items() if to != table)

# Promotions Hudi 0.15 accepts that we refuse, and why.
_FLOAT_TEXT = (
    "Hudi 0.15 would turn the numbers into text with Java's Float/Double.toString (1.0, 1.0E10), "
    "a spelling Arrow does not reproduce, so the table would hold text Java never writes"
)
_REFUSED_PROMOTIONS: dict[tuple[str, str], str] = {
    **{(t, "string"): _FLOAT_TEXT for t in ("float", "double")},
    **{("string", t): _FLOAT_TEXT for t in ("float", "double")},
}

_ARROW_OF_KIND = {
    "int": pa.int32(), "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
    "string": pa.string(), "bytes": pa.binary(),
}  # fmt: skip


# --------------------------------------------------------------------------------------------
# Names


def avro_record_name(table_name: str) -> tuple[str, str]:
    """(record name, namespace) of a table's Avro schema, as Hudi's
    ``AvroConversionUtils.getAvroRecordNameAndNamespace`` derives them: the table name with every
    character outside ``[A-Za-z0-9_]`` (and a leading digit) replaced by ``__``."""
    if not table_name:
        raise HoodieSchemaError("The table name is empty. Help: set hoodie.table.name.")
    name = table_name
    if re.match(r"[^A-Za-z_]", name[0]):
        name = "__" + name[1:]
    name = re.sub(r"[^A-Za-z0-9_]", "__", name)
    return f"{name}_record", f"hoodie.{name}"


def _check_field_name(name: str, path: str) -> None:
    if not _AVRO_NAME.match(name):
        raise HoodieSchemaError(
            f"Column '{path}' has a name that is not a valid Avro name (allowed: letters, digits, "
            f"'_', not starting with a digit); Hudi cannot store it. "
            f"Help: rename the column, e.g. df.withColumnRenamed('{name}', "
            f"'{re.sub(r'[^A-Za-z0-9_]', '_', name) or 'col'}')."
        )


# --------------------------------------------------------------------------------------------
# Unsupported Arrow types (shared by arrow_to_avro and storage_schema so both refuse alike)


def _refuse(t: pa.DataType, path: str) -> None:
    """Raise for Arrow types that have no faithful Hudi representation."""
    if pa.types.is_timestamp(t) and t.tz is None:
        raise HoodieSchemaError(
            f"Column '{path}' is a timestamp without time zone ({t}, Spark TimestampNTZ). Hudi would "
            f"store it as Avro local-timestamp-micros, which hudi-rs 0.5.0 cannot read (it panics). "
            f"Help: cast the column to TIMESTAMP (with session time zone), "
            f"e.g. df.withColumn('{path}', col('{path}').cast('timestamp'))."
        )
    problem = _unsupported(t, path)
    if problem is not None:
        reason, help_ = problem
        raise HoodieSchemaError(
            f"Column '{path}' {reason}; it cannot be written to a Hudi table. Help: {help_}."
        )


def _unsupported(t: pa.DataType, path: str) -> tuple[str, str] | None:
    """(reason, remedy) when ``t`` itself (not its children) cannot be stored, else None."""
    if pa.types.is_null(t):
        return "has the null type (all values NULL, type unknown)", (
            f"give it a concrete type, e.g. lit(None).cast('string').alias('{path}')"
        )
    if pa.types.is_float16(t):
        return "is a half-precision float (float16)", "cast it to FLOAT or DOUBLE"
    if pa.types.is_uint64(t):
        return "is an unsigned 64-bit integer (no lossless Avro type)", "cast it to BIGINT or DECIMAL(20,0)"
    if pa.types.is_time(t):
        return f"is a time-of-day type ({t}) that Spark and Hudi do not support", "cast it to STRING"
    if pa.types.is_duration(t) or pa.types.is_interval(t):
        return f"is a duration/interval type ({t})", "cast it to BIGINT (e.g. micros)"
    if pa.types.is_union(t):
        return f"is a union type ({t})", "use one type per column"
    if isinstance(t, pa.ExtensionType):
        return f"is an Arrow extension type ({t})", "cast it to its storage type"
    if pa.types.is_decimal(t) and (t.precision > _MAX_DECIMAL128_PRECISION or t.scale < 0):
        return f"is {t}; Spark and hudi-rs support DECIMAL(p,s) with p <= 38, s >= 0", (
            "cast it to DECIMAL(38, s) or to STRING"
        )
    if pa.types.is_map(t) and not _is_string(t.key_type):
        return f"is a map with {t.key_type} keys; Avro maps have string keys only", (
            "cast the keys to STRING, e.g. transform_keys(m, (k, v) -> cast(k as string))"
        )
    if pa.types.is_struct(t) and t.num_fields == 0:
        return "is a struct without fields", "drop the column"
    return None


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _is_binary(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    )


def _is_list(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    )


def _min_bytes_for_precision(precision: int) -> int:
    # Spark's Decimal.minBytesForPrecision: smallest n with 2^(8n-1) > 10^precision.
    n = 1
    while 2 ** (8 * n - 1) < 10**precision:
        n += 1
    return n


# --------------------------------------------------------------------------------------------
# Arrow -> Avro


def arrow_to_avro(schema: pa.Schema, table_name: str) -> dict[str, Any]:
    """The table's Avro schema (without meta fields) for an Arrow schema of the input data."""
    name, namespace = avro_record_name(table_name)
    child_ns = f"{namespace}.{name}"
    fields: list[dict[str, Any]] = []
    seen: set[str] = set()
    for f in schema:
        if f.name in META_COLUMNS:
            continue
        _check_field_name(f.name, f.name)
        if f.name in seen:
            raise HoodieSchemaError(
                f"Column '{f.name}' appears twice in the input. Help: rename or drop one."
            )
        seen.add(f.name)
        fields.append(_avro_field(f.name, f.type, f.name, child_ns))
    if not fields:
        raise HoodieSchemaError(
            "The input has no data columns (only _hoodie_* meta columns or none at all). "
            "Help: write a DataFrame with at least one column."
        )
    return {"type": "record", "name": name, "namespace": namespace, "fields": fields}


def _avro_field(name: str, t: pa.DataType, path: str, namespace: str) -> dict[str, Any]:
    return {"name": name, "type": ["null", _avro_type(t, path, name, namespace)], "default": None}


def _avro_type(t: pa.DataType, path: str, record_name: str, namespace: str) -> Any:
    """Non-null Avro type of ``t``. Naming follows Spark's SchemaConverters: a nested record is
    named after its field (``record_name``) in the namespace of the enclosing record; list items
    and map values inherit the field's name and namespace."""
    if pa.types.is_dictionary(t):
        return _avro_type(t.value_type, path, record_name, namespace)
    _refuse(t, path)
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return "int"
    if pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return "int"
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if _is_string(t):
        return "string"
    if _is_binary(t):
        return "bytes"
    if pa.types.is_decimal(t):
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{record_name}",
            "size": _min_bytes_for_precision(t.precision),
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):  # tz-aware; naive ones were refused above
        return {"type": "long", "logicalType": "timestamp-micros"}
    if _is_list(t):
        item = _avro_type(t.value_type, f"{path}.element", record_name, namespace)
        return {"type": "array", "items": ["null", item]}
    if pa.types.is_map(t):
        value = _avro_type(t.item_type, f"{path}.value", record_name, namespace)
        return {"type": "map", "values": ["null", value]}
    if pa.types.is_struct(t):
        child_ns = f"{namespace}.{record_name}"
        fields = []
        for f in t:
            _check_field_name(f.name, f"{path}.{f.name}")
            fields.append(_avro_field(f.name, f.type, f"{path}.{f.name}", child_ns))
        return {"type": "record", "name": record_name, "namespace": namespace, "fields": fields}
    raise HoodieSchemaError(
        f"Column '{path}' has Arrow type {t}, which has no Hudi/Avro mapping. "
        f"Help: cast it to a Spark SQL type (STRING, BIGINT, DOUBLE, DECIMAL, DATE, TIMESTAMP, ...)."
    )


def _meta_field(name: str) -> dict[str, Any]:
    return {"name": name, "type": ["null", "string"], "doc": "", "default": None}


def with_meta_fields(avro: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``avro`` with the five meta fields first, in the form of `parquet.avro.schema` and
    log block headers. Meta fields already present are moved, not duplicated (as Hudi's
    ``HoodieAvroUtils.addMetadataFields``)."""
    out = copy.deepcopy(avro)
    data_fields = [f for f in out["fields"] if f["name"] not in META_COLUMNS]
    out["fields"] = [_meta_field(n) for n in META_COLUMNS] + data_fields
    return out


def without_meta_fields(avro: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``avro`` without meta fields (e.g. from a footer's `parquet.avro.schema`)."""
    out = copy.deepcopy(avro)
    out["fields"] = [f for f in out["fields"] if f["name"] not in META_COLUMNS]
    return out


def avro_schema_json(avro: dict[str, Any]) -> str:
    """Compact JSON as Java's ``Schema.toString()`` writes it (byte-identical for the fixtures)."""
    return json.dumps(avro, separators=(",", ":"), ensure_ascii=False)


def parse_avro_schema(avro: dict[str, Any] | str) -> dict[str, Any]:
    """Parse an Avro schema given as dict or JSON text; accepts the backslash escapes Java's
    ``Properties`` adds in hoodie.properties (``\\:`` ``\\=`` ``\\#`` ``\\!``)."""
    if isinstance(avro, dict):
        return avro
    try:
        parsed = json.loads(avro)
    except json.JSONDecodeError:
        try:
            parsed = json.loads(re.sub(r"\\([:=#! ])", r"\1", avro))
        except json.JSONDecodeError as e:
            raise HoodieSchemaError(
                f"The Avro schema is not valid JSON ({e}): {avro[:200]!r}. "
                f"Help: check hoodie.table.create.schema / the commit's extraMetadata.schema."
            ) from e
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise HoodieSchemaError(
            f"The Avro schema is not a record: {str(avro)[:200]!r}. "
            f"Help: a Hudi table schema is an Avro record."
        )
    return parsed


# --------------------------------------------------------------------------------------------
# Avro -> Arrow (what hudi-rs 0.5.0 returns)


class _Names:
    """Named Avro types (record, fixed, enum) seen so far, so later references resolve."""

    def __init__(self) -> None:
        self._by_name: dict[str, Any] = {}

    def register(self, node: dict[str, Any], namespace: str) -> str:
        name = node.get("name", "")
        ns = node.get("namespace", namespace)
        full = name if "." in name or not ns else f"{ns}.{name}"
        self._by_name[full] = node
        self._by_name.setdefault(name.rsplit(".", 1)[-1], node)
        return full.rsplit(".", 1)[0] if "." in full else ""

    def resolve(self, ref: str, namespace: str) -> Any:
        for key in (f"{namespace}.{ref}" if namespace else ref, ref):
            if key in self._by_name:
                return self._by_name[key]
        return None


_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


def _split_nullable(node: Any, path: str) -> tuple[Any, bool]:
    """(non-null branch, nullable) of a type; unions other than [null, T] / [T, null] are refused."""
    if not isinstance(node, list):
        return node, node == "null"
    branches = [b for b in node if b != "null"]
    if len(branches) > 1:
        raise HoodieSchemaError(
            f"Column '{path}' has the Avro union {json.dumps(node)}; only [\"null\", T] unions are "
            f"supported (hudi-rs turns others into dense unions). Help: use one type per column."
        )
    return (branches[0] if branches else "null"), len(branches) < len(node)


def avro_to_arrow(avro: dict[str, Any] | str, *, force_nullable: bool = False) -> pa.Schema:
    """The Arrow schema hudi-rs 0.5.0 returns for an Avro table schema.

    Nullability follows the Avro schema as hudi-rs does: union-with-null fields (everything Hudi
    writes) are nullable, plain types are not, map values always are. ``force_nullable=True``
    makes every field and list item nullable (a safe cast target for incoming data).
    """
    record = parse_avro_schema(avro)
    names = _Names()
    ns = names.register(record, "")
    fields = [_arrow_field(f, f["name"], ns, names, force_nullable) for f in record.get("fields", [])]
    return pa.schema(fields)


def _arrow_field(f: dict[str, Any], path: str, namespace: str, names: _Names, force: bool) -> pa.Field:
    t, nullable = _arrow_type(f["type"], path, namespace, names, force)
    return pa.field(f["name"], t, nullable=nullable or force)


def _arrow_type(node: Any, path: str, namespace: str, names: _Names, force: bool) -> tuple[pa.DataType, bool]:
    node, nullable = _split_nullable(node, path)
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return _PRIMITIVES[node], nullable
        target = names.resolve(node, namespace)
        if target is None:
            raise HoodieSchemaError(f"Column '{path}' refers to the unknown Avro type '{node}'.")
        # hudi-rs 0.5.0 panics on named references; we resolve them, and never write them.
        t, _ = _arrow_type(target, path, namespace, names, force)
        return t, nullable
    if not isinstance(node, dict):
        raise HoodieSchemaError(f"Column '{path}' has an invalid Avro type {json.dumps(node)}.")
    return _arrow_complex(node, path, namespace, names, force), nullable


def _arrow_complex(
    node: dict[str, Any], path: str, namespace: str, names: _Names, force: bool
) -> pa.DataType:
    kind = node.get("type")
    logical = node.get("logicalType")
    if isinstance(logical, str) and logical.startswith("local-timestamp"):
        raise HoodieSchemaError(
            f"Column '{path}' has Avro type {logical} (Spark TimestampNTZ), which hudi-rs 0.5.0 cannot "
            f"read. Help: store the column as TIMESTAMP (timestamp-micros) instead."
        )
    if kind in ("record", "fixed", "enum"):
        child_ns = names.register(node, namespace)
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(node["precision"]), int(node.get("scale", 0))
        if precision > _MAX_DECIMAL128_PRECISION:
            return pa.decimal256(precision, scale)
        return pa.decimal128(precision, scale)
    simple: dict[tuple[Any, Any], pa.DataType] = {
        ("int", "date"): pa.date32(),
        ("int", "time-millis"): pa.time32("ms"),
        ("long", "time-micros"): pa.time64("us"),
        ("long", "timestamp-millis"): pa.timestamp("ms", tz="UTC"),
        ("long", "timestamp-micros"): pa.timestamp("us", tz="UTC"),
        ("long", "timestamp-nanos"): pa.timestamp("ns", tz="UTC"),
        # hudi-rs maps the uuid logical type to 16 fixed bytes (mirrored, though Spark never writes it).
        ("string", "uuid"): pa.binary(16),
    }
    if (kind, logical) in simple:
        return simple[(kind, logical)]
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "fixed":
        return pa.binary(int(node["size"]))
    if kind == "enum":
        return pa.string()
    if kind == "array":
        item, item_nullable = _arrow_type(node["items"], f"{path}.element", namespace, names, force)
        return pa.list_(pa.field("element", item, nullable=item_nullable or force))
    if kind == "map":
        value, _ = _arrow_type(node["values"], f"{path}.value", namespace, names, force)
        return pa.map_(pa.string(), pa.field("value", value, nullable=True))
    if kind == "record":
        return pa.struct(
            [_arrow_field(f, f"{path}.{f['name']}", child_ns, names, force) for f in node.get("fields", [])]
        )
    raise HoodieSchemaError(f"Column '{path}' has the unsupported Avro type {json.dumps(node)}.")


# --------------------------------------------------------------------------------------------
# Storage schema (the physical Arrow schema of our base files, docs/hudi/format.md#parquet-conventions)


def storage_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema our Parquet files are written with: what Java writes through
    parquet-avro, expressed in Arrow. int8/int16 -> int32 (plain INT32 like Hudi, not INT(8)),
    timestamps -> timestamp[us, UTC], large/view strings and binaries -> string/binary,
    lists with an ``element`` item, every field nullable (recursively). Field and schema
    metadata are dropped (no pandas/Spark metadata in the footer)."""
    return pa.schema([pa.field(f.name, _storage_type(f.type, f.name), nullable=True) for f in schema])


def _storage_type(t: pa.DataType, path: str) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _storage_type(t.value_type, path)
    _refuse(t, path)
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return pa.int32()
    if pa.types.is_uint32(t):
        return pa.int64()
    if _is_string(t):
        return pa.string()
    if _is_binary(t):
        return pa.binary()
    if pa.types.is_decimal(t):
        return pa.decimal128(t.precision, t.scale)
    if pa.types.is_date(t):
        return pa.date32()
    if pa.types.is_timestamp(t):
        return _STORAGE_TIMESTAMP
    if _is_list(t):
        return pa.list_(pa.field("element", _storage_type(t.value_type, f"{path}.element"), nullable=True))
    if pa.types.is_map(t):
        value = _storage_type(t.item_type, f"{path}.value")
        return pa.map_(pa.string(), pa.field("value", value, nullable=True))
    if pa.types.is_struct(t):
        return pa.struct(
            [pa.field(f.name, _storage_type(f.type, f"{path}.{f.name}"), nullable=True) for f in t]
        )
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t):
        return t
    raise HoodieSchemaError(
        f"Column '{path}' has Arrow type {t}, which has no Hudi/Avro mapping. "
        f"Help: cast it to a Spark SQL type (STRING, BIGINT, DOUBLE, DECIMAL, DATE, TIMESTAMP, ...)."
    )


def _has_sub_micro_timestamp(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t):
        return bool(t.unit == "ns")
    if pa.types.is_dictionary(t):
        return _has_sub_micro_timestamp(t.value_type)
    if _is_list(t):
        return _has_sub_micro_timestamp(t.value_type)
    if pa.types.is_map(t):
        return _has_sub_micro_timestamp(t.item_type)
    if pa.types.is_struct(t):
        return any(_has_sub_micro_timestamp(f.type) for f in t)
    return False


def cast_to_storage(batch: pa.RecordBatch | pa.Table, target: pa.Schema) -> pa.RecordBatch | pa.Table:
    """Cast ``batch`` (vectorised, column by column) to ``target``, selecting and ordering the
    columns by name. Returns the same kind (RecordBatch or Table) as given.

    Nanosecond timestamps are truncated to micros (as Spark does); every other cast must be
    lossless, otherwise a HoodieSchemaError names the column."""
    names = batch.schema.names
    missing = [f.name for f in target if f.name not in names]
    extra = [n for n in names if target.get_field_index(n) < 0]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing from the input: {', '.join(missing)}")
        if extra:
            parts.append(f"not in the target schema: {', '.join(extra)}")
        raise HoodieSchemaError(
            f"The input columns do not match the table schema ({'; '.join(parts)}). "
            f"Help: select exactly the table's columns {target.names}."
        )
    arrays = []
    for field in target:
        col = batch.column(field.name)
        if col.type != field.type:
            try:
                col = col.cast(field.type, safe=not _has_sub_micro_timestamp(col.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise HoodieSchemaError(
                    f"Column '{field.name}' cannot be cast from {col.type} to the storage type "
                    f"{field.type}: {e}. Help: cast the column to {field.type} before writing."
                ) from e
        arrays.append(col)
    if isinstance(batch, pa.Table):
        return pa.Table.from_arrays(arrays, schema=target)
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def to_storage_table(data: pa.Table | pa.RecordBatch) -> pa.Table:
    """``data`` cast to :func:`storage_schema` of its own schema, as a Table."""
    out = cast_to_storage(data, storage_schema(data.schema))
    return out if isinstance(out, pa.Table) else pa.Table.from_batches([out])


# --------------------------------------------------------------------------------------------
# Schema drift


def check_compatible(table_avro: dict[str, Any] | str, incoming_avro: dict[str, Any] | str) -> None:
    """Check that ``incoming_avro`` may become the table's schema: every table column must still be
    there with the same type or one Hudi 0.15 widens it to (int -> long/float/double/string,
    long -> float/double/string, float -> double; docs/hudi/schema-evolution.md#type-promotions);
    new columns, top-level or inside a struct, must be nullable.  ``incoming_avro`` is the writer
    schema after :func:`evolve_schema`.  Raises one HoodieSchemaError listing every problem."""
    drift = _Drift()
    drift.compare(parse_avro_schema(table_avro), parse_avro_schema(incoming_avro), "", "", "")
    if drift.problems:
        raise HoodieSchemaError(
            "The input schema is not compatible with the table schema: "
            + "; ".join(drift.problems)
            + ". Help: cast the input columns back to the table's types, add missing columns as "
            "typed NULLs (lit(None).cast(...)) or set hoodie.write.set.null.for.missing.columns=true "
            "(nullable columns); dropping columns or narrowing types needs a new table."
        )


def evolve_schema(
    data_schema: pa.Schema, table_avro: dict[str, Any] | str, *, fill_missing: bool, reconcile: bool = False
) -> pa.Schema:
    """The write's storage schema for input of storage schema `data_schema` into a table whose latest
    schema is `table_avro`, as Hudi 0.15's ``HoodieSchemaUtils.deduceWriterSchema`` deduces it
    (docs/hudi/schema-evolution.md):

    * an input type narrower than the table's is cast up to it, a wider one widens the table
      (:data:`_PROMOTIONS`); other type changes are left for :func:`check_compatible` to refuse;
    * columns (top-level or struct fields) in the table's order, new ones after them;
    * `fill_missing` (``hoodie.write.set.null.for.missing.columns``): table columns the input lacks
      are kept and written as nulls; refused by name when the table declares them NOT NULL;
    * `reconcile` (``hoodie.datasource.write.reconcile.schema``): an input that only lacks columns
      is written in the table's schema (missing columns null, as `fill_missing`); an input that also
      brings new columns would make its own schema the table's and drop the missing columns (Hudi's
      legacy reconciliation), which we refuse by name.

    Columns the result lacks are reported by :func:`check_compatible`."""
    table = avro_to_arrow(table_avro)
    walk = _Evolution(fill_missing or reconcile)
    fields = walk.fields(list(table), list(data_schema), "")
    if walk.required:
        raise HoodieSchemaError(
            f"The input lacks column(s) {', '.join(repr(n) for n in walk.required)}, which the table "
            "declares NOT NULL, so they cannot be written as nulls. Help: add the column(s) to the input."
        )
    if reconcile and walk.added and walk.missing:
        raise HoodieSchemaError(
            f"With hoodie.datasource.write.reconcile.schema=true the input brings new column(s) "
            f"{', '.join(repr(n) for n in walk.added)} and lacks table column(s) "
            f"{', '.join(repr(n) for n in walk.missing)}: Apache Hudi 0.15 would then make the input's "
            "schema the table's and drop the missing columns from the table (docs/hudi/schema-evolution.md"
            "#reconcile-schema). Help: add the missing columns to the input, or write the new columns "
            "in a batch that has every table column."
        )
    return storage_schema(pa.schema(fields))


class _Evolution:
    """Walks the table's and the input's Arrow schemas side by side (see evolve_schema)."""

    def __init__(self, fill_missing: bool) -> None:
        self.fill_missing = fill_missing
        self.required: list[str] = []  # missing and NOT NULL in the table
        self.missing: list[str] = []  # missing (filled with nulls when fill_missing)
        self.added: list[str] = []  # in the input only

    def fields(self, table: list[pa.Field], data: list[pa.Field], path: str) -> list[pa.Field]:
        by_name = {f.name: f for f in data}
        out = []
        for tf in table:
            name = f"{path}.{tf.name}" if path else tf.name
            if tf.name in META_COLUMNS and not path:
                continue
            df = by_name.get(tf.name)
            if df is not None:
                out.append(pa.field(tf.name, self.type(tf.type, df.type, name), nullable=True))
                continue
            self.missing.append(name)
            if self.fill_missing:
                if not tf.nullable:
                    self.required.append(name)
                out.append(tf)
        known = {f.name for f in table}
        for df in data:
            if df.name not in known:
                self.added.append(f"{path}.{df.name}" if path else df.name)
                out.append(df)
        return out

    def type(self, table: pa.DataType, data: pa.DataType, path: str) -> pa.DataType:
        if table == data:
            return data
        if pa.types.is_struct(table) and pa.types.is_struct(data):
            return pa.struct(self.fields(list(table), list(data), path))
        if _is_list(table) and _is_list(data):
            item = self.type(table.value_type, data.value_type, f"{path}.element")
            return pa.list_(pa.field("element", item, nullable=True))
        if pa.types.is_map(table) and pa.types.is_map(data):
            value = self.type(table.item_type, data.item_type, f"{path}.value")
            return pa.map_(data.key_type, pa.field("value", value, nullable=True))
        promoted = _PROMOTIONS.get((_kind(table), _kind(data)))
        return _ARROW_OF_KIND[promoted] if promoted else data  # other changes: check_compatible names them


def _kind(t: pa.DataType) -> str:
    """The Avro primitive of a storage type ('' when it is not one _PROMOTIONS knows)."""
    for kind, arrow in _ARROW_OF_KIND.items():
        if t == arrow:
            return kind
    return ""


def conform_column(column: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """`column`, read from a file written with an older table schema, in the table's latest type
    `target`: promoted types are cast (int 7 -> long 7, -> double 7.0, -> string "7"), struct fields
    the file lacks read null.  Promotions from integers to floating point round to the nearest value
    like Java's widening conversion (Avro schema resolution), so they are cast without Arrow's
    exactness check; every other cast is checked."""
    if column.type == target:
        return column
    return column.cast(target, safe=not _int_to_float(column.type, target))


def _int_to_float(src: pa.DataType, dst: pa.DataType) -> bool:
    if pa.types.is_integer(src) and pa.types.is_floating(dst):
        return True
    if pa.types.is_struct(src) and pa.types.is_struct(dst):
        return any(
            _int_to_float(f.type, dst.field(f.name).type) for f in src if dst.get_field_index(f.name) >= 0
        )
    if _is_list(src) and _is_list(dst):
        return _int_to_float(src.value_type, dst.value_type)
    if pa.types.is_map(src) and pa.types.is_map(dst):
        return _int_to_float(src.item_type, dst.item_type)
    return False


def check_ordering_field(data_schema: pa.Schema, field: str | None) -> None:
    """The precombine field decides which record wins by comparing values: it must be a
    primitive column (number, string, date, timestamp, decimal, boolean, binary)."""
    if not field or field not in data_schema.names:
        return
    t = data_schema.field(field).type
    if pa.types.is_nested(t) or pa.types.is_dictionary(t):
        raise HoodieSchemaError(
            f"Option 'hoodie.datasource.write.precombine.field' names column '{field}' of type {t}, which "
            "cannot be ordered. Help: use a number, string, date or timestamp column."
        )


def _describe(node: Any) -> str:
    if isinstance(node, str):
        return node
    kind, logical = node.get("type"), node.get("logicalType")
    if logical == "decimal":
        return f"decimal({node.get('precision')},{node.get('scale', 0)})"
    if logical:
        return str(logical)
    if kind == "array":
        return f"array<{_describe(_split_nullable(node['items'], '')[0])}>"
    if kind == "map":
        return f"map<string,{_describe(_split_nullable(node['values'], '')[0])}>"
    return str(kind)


class _Drift:
    """Walks the table (old) and incoming (new) Avro schemas side by side, collecting problems."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.old_names, self.new_names = _Names(), _Names()

    def compare(self, old: Any, new: Any, path: str, old_ns: str, new_ns: str) -> None:
        old, old_nullable = _split_nullable(old, path or "<root>")
        new, new_nullable = _split_nullable(new, path or "<root>")
        if isinstance(old, str) and old not in _PRIMITIVES:
            old = self.old_names.resolve(old, old_ns) or old
        if isinstance(new, str) and new not in _PRIMITIVES:
            new = self.new_names.resolve(new, new_ns) or new
        if old_nullable and not new_nullable:
            self.problems.append(f"column '{path}' is nullable in the table but not in the input")
        kind_old = old.get("type") if isinstance(old, dict) else old
        kind_new = new.get("type") if isinstance(new, dict) else new
        if kind_old == kind_new == "record":
            self.compare_records(old, new, path, old_ns, new_ns)
        elif kind_old == kind_new == "array":
            self.compare(old["items"], new["items"], f"{path}.element", old_ns, new_ns)
        elif kind_old == kind_new == "map":
            self.compare(old["values"], new["values"], f"{path}.value", old_ns, new_ns)
        else:
            d_old, d_new = _describe(old), _describe(new)
            if d_old != d_new and (d_old, d_new) not in _WIDENINGS:
                why = _REFUSED_PROMOTIONS.get((d_old, d_new))
                self.problems.append(
                    f"column '{path}' changed type from {d_old} (table) to {d_new} (input)"
                    + (f" ({why})" if why else "")
                )

    def compare_records(
        self, old: dict[str, Any], new: dict[str, Any], path: str, old_ns: str, new_ns: str
    ) -> None:
        old_ns, new_ns = self.old_names.register(old, old_ns), self.new_names.register(new, new_ns)
        new_fields = {f["name"]: f for f in new.get("fields", []) if f["name"] not in META_COLUMNS}
        old_fields = {f["name"]: f for f in old.get("fields", []) if f["name"] not in META_COLUMNS}
        lower = {n.lower(): n for n in new_fields}
        for name, f in old_fields.items():
            child = f"{path}.{name}" if path else name
            if name in new_fields:
                self.compare(f["type"], new_fields[name]["type"], child, old_ns, new_ns)
            else:
                other = lower.get(name.lower())
                hint = f" (the input has '{other}'; names are case-sensitive)" if other else ""
                self.problems.append(f"column '{child}' is missing from the input{hint}")
        for name, f in new_fields.items():
            if name not in old_fields and not _split_nullable(f["type"], name)[1] and "default" not in f:
                child = f"{path}.{name}" if path else name
                self.problems.append(f"new column '{child}' must be nullable (old rows have no value for it)")
