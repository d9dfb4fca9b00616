"""Record keys and partition paths, vectorised over Arrow
(docs/hudi/format.md#record-keys-and-partition-paths).

Reproduces the Avro-path key generators of Java Hudi 0.14/0.15 (``SimpleAvroKeyGenerator``,
``ComplexAvroKeyGenerator``, ``NonpartitionedAvroKeyGenerator``, ``TimestampBasedAvroKeyGenerator``
with ``KeyGenUtils``), which is what ``df.write.format("hudi")`` runs. No per-row Python: values are
rendered with pyarrow.compute; partition values are processed once per distinct value.

Value -> string rendering (Java renders the Avro value with ``toString``):

* strings as is; integers as decimal digits; booleans ``true``/``false``; dates ``yyyy-MM-dd``;
  decimals like ``BigDecimal.toString`` (``12345.67890``, ``1E-8``);
* timestamps as **epoch microseconds** (the Avro ``timestamp-micros`` long; Java's default
  ``consistent.logical.timestamp.enabled=false``). Spark SQL's ``SqlKeyGenerator`` instead writes
  ``yyyy-MM-dd HH:mm:ss`` partition values for TIMESTAMP columns; we follow the datasource path;
* floats/doubles like Java's ``Double.toString``/``Float.toString`` (``1.0``, ``1.0E10``, ``NaN``)
  with the shortest round-trip digits as JDK 19+ prints them; the JDK 8/11 that run Hudi 0.14
  print a few values with extra digits (and ``Double.MIN_VALUE`` as ``4.9E-324``, we: ``5.0E-324``);
* binary, nested and other types are refused (Java would write ``HeapByteBuffer[...]`` or JSON).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieConfigError, HoodieKeyError
from hoodie_sink.table.format.date_format import (
    TIME_UNIT_MS,
    check_zone,
    compile_format,
    compile_parser,
    format_millis,
    local_to_utc,
    normalize_zone,
    parse_with,
    unit_to_millis,
)

KEYGEN_CLASSES: dict[str, str] = {
    "SIMPLE": "org.apache.hudi.keygen.SimpleKeyGenerator",
    "COMPLEX": "org.apache.hudi.keygen.ComplexKeyGenerator",
    "NON_PARTITION": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    "TIMESTAMP": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
    "CUSTOM": "org.apache.hudi.keygen.CustomKeyGenerator",
}
SUPPORTED_KEYGEN_TYPES = ("SIMPLE", "COMPLEX", "NON_PARTITION", "TIMESTAMP")

NULL_RECORDKEY_PLACEHOLDER = "__null__"
EMPTY_RECORDKEY_PLACEHOLDER = "__empty__"
DEFAULT_PARTITION_PATH = "__HIVE_DEFAULT_PARTITION__"

_SIMPLE_CLASS_NAMES = {
    "SimpleKeyGenerator": "SIMPLE",
    "SimpleAvroKeyGenerator": "SIMPLE",
    "ComplexKeyGenerator": "COMPLEX",
    "ComplexAvroKeyGenerator": "COMPLEX",
    "NonpartitionedKeyGenerator": "NON_PARTITION",
    "NonpartitionedAvroKeyGenerator": "NON_PARTITION",
    "NonPartitionedKeyGenerator": "NON_PARTITION",
    "TimestampBasedKeyGenerator": "TIMESTAMP",
    "TimestampBasedAvroKeyGenerator": "TIMESTAMP",
    "CustomKeyGenerator": "CUSTOM",
    "CustomAvroKeyGenerator": "CUSTOM",
}
_KEYGEN_PACKAGES = ("", "org.apache.hudi.keygen")
_TIMESTAMP_TYPES = ("UNIX_TIMESTAMP", "EPOCHMILLISECONDS", "EPOCHMICROSECONDS", "DATE_STRING", "SCALAR")

Data: TypeAlias = pa.RecordBatch | pa.Table
Column: TypeAlias = pa.Array | pa.ChunkedArray


def inferred_keygen_type(record_key_fields: tuple[str, ...], partition_fields: tuple[str, ...]) -> str:
    """The key generator type that the key and partition fields imply when none is named (Hudi's
    own inference): no partition field -> NON_PARTITION; several keys or partition fields -> COMPLEX."""
    if not partition_fields:
        return "NON_PARTITION"
    return "COMPLEX" if len(record_key_fields) > 1 or len(partition_fields) > 1 else "SIMPLE"


def supported_keygen_type(class_name: str, option: str) -> str:
    """The type of a key generator class named by `option`, refused unless we implement it."""
    try:
        kind = keygen_type_from_class(class_name)
    except HoodieConfigError:
        kind = None
    if kind not in SUPPORTED_KEYGEN_TYPES:
        raise HoodieConfigError(
            f"{option}='{class_name}' is not supported; supported: "
            f"{', '.join(KEYGEN_CLASSES[t] for t in SUPPORTED_KEYGEN_TYPES)}."
        )
    return kind


def keygen_type_from_class(class_name: str) -> str:
    """Key generator type ("SIMPLE", ...) for a ``hoodie.table.keygenerator.class`` value; also
    accepts the Avro variants, bare class names and type names
    (``hoodie.datasource.write.keygenerator.type``)."""
    name = (class_name or "").strip()
    if name.upper() in KEYGEN_CLASSES:
        return name.upper()
    package, _, simple = name.rpartition(".")
    if package in _KEYGEN_PACKAGES and simple in _SIMPLE_CLASS_NAMES:
        return _SIMPLE_CLASS_NAMES[simple]
    if simple == "SqlKeyGenerator":
        raise HoodieConfigError(
            f"Key generator '{name}' is Spark SQL's wrapper around another key generator; it does not "
            f"say which one. Help: set hoodie.table.keygenerator.class to the wrapped class "
            f"(hoodie.sql.origin.keygen.class), e.g. {KEYGEN_CLASSES['SIMPLE']}."
        )
    raise HoodieConfigError(
        f"Unknown key generator '{name}' (hoodie.table.keygenerator.class). "
        f"Help: use one of {', '.join(KEYGEN_CLASSES[t] for t in SUPPORTED_KEYGEN_TYPES)}."
    )


def _fields(value: Any, option: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.strip()
    items = value.split(",") if isinstance(value, str) and value else list(value or ())
    fields = tuple(str(v).strip() for v in items)
    if any(not f for f in fields):
        raise HoodieConfigError(
            f"Option {option} has an empty field name in {value!r}. Help: e.g. 'id,name'."
        )
    return fields


@dataclass(frozen=True)
class KeyGenConfig:
    """How record keys and partition paths are derived (parsed once from the write options).

    ``record_key_fields``/``partition_fields`` may be given as tuples or comma-separated strings;
    nested fields are dotted (``a.b``). The timezone options follow
    ``hoodie.keygen.timebased.timezone`` / ``.input.timezone`` / ``.output.timezone``.
    """

    keygen_type: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    hive_style: bool = False
    url_encode: bool = False
    timestamp_type: str | None = None
    input_date_format: str | None = None
    output_date_format: str = "yyyy-MM-dd"
    timezone: str = "UTC"
    input_timezone: str | None = None
    output_timezone: str | None = None
    scalar_time_unit: str = "SECONDS"
    input_date_format_delimiter: str = ","
    keyless: bool = False  # no record key fields: keys are generated by the writer (append)
    # Hudi's complex key `f1:v1,f2:v2` is ambiguous for values holding ',' (or equal to a
    # placeholder): refused in written rows unless allowed (hoodie.sink.write.allow.ambiguous.complex.keys)
    allow_ambiguous_keys: bool = False

    def __post_init__(self) -> None:
        kind = str(self.keygen_type).upper()
        object.__setattr__(self, "keygen_type", kind)
        object.__setattr__(
            self, "record_key_fields", _fields(self.record_key_fields, "hoodie.table.recordkey.fields")
        )
        object.__setattr__(
            self, "partition_fields", _fields(self.partition_fields, "hoodie.table.partition.fields")
        )
        if kind == "CUSTOM":
            raise HoodieConfigError(
                "Key generator CUSTOM (CustomKeyGenerator) is not supported by hoodie_sink. "
                "Help: use SIMPLE/COMPLEX for value partitions, or TIMESTAMP for one time-based "
                "partition field."
            )
        if kind not in SUPPORTED_KEYGEN_TYPES:
            raise HoodieConfigError(
                f"Unknown key generator type '{self.keygen_type}'. "
                f"Help: use one of {', '.join(SUPPORTED_KEYGEN_TYPES)}."
            )
        if not self.record_key_fields and not self.keyless:
            raise HoodieConfigError(
                "No record key field configured (hoodie.datasource.write.recordkey.field). "
                "Help: set it to the column(s) that identify a record, e.g. 'id'."
            )
        n_keys, n_parts = len(self.record_key_fields), len(self.partition_fields)
        if kind in ("SIMPLE", "TIMESTAMP") and n_keys != 1 and not self.keyless:
            raise HoodieConfigError(
                f"Key generator {kind} takes exactly one record key field, got {self.record_key_fields}. "
                f"Help: use key generator COMPLEX for composite keys."
            )
        if kind in ("SIMPLE", "TIMESTAMP") and n_parts != 1:
            raise HoodieConfigError(
                f"Key generator {kind} takes exactly one partition field, got {self.partition_fields}. "
                f"Help: use COMPLEX for several partition fields, NON_PARTITION for none."
            )
        if kind == "NON_PARTITION" and n_parts:
            raise HoodieConfigError(
                f"Key generator NON_PARTITION contradicts partition fields {self.partition_fields}. "
                f"Help: drop hoodie.datasource.write.partitionpath.field or use SIMPLE/COMPLEX."
            )
        if kind == "TIMESTAMP":
            self._check_timestamp_options()

    def _check_timestamp_options(self) -> None:
        ttype = self.timestamp_type.upper() if self.timestamp_type else None
        object.__setattr__(self, "timestamp_type", ttype)
        if ttype is not None and ttype not in _TIMESTAMP_TYPES:
            raise HoodieConfigError(
                f"hoodie.keygen.timebased.timestamp.type='{self.timestamp_type}' is not supported. "
                f"Help: use one of {', '.join(_TIMESTAMP_TYPES)}."
            )
        if ttype == "DATE_STRING" and not (self.input_date_format or "").strip():
            raise HoodieConfigError(
                "hoodie.keygen.timebased.input.dateformat is required with timestamp.type DATE_STRING. "
                "Help: set it, e.g. yyyy-MM-dd'T'HH:mm:ss.SSSZ."
            )
        if self.scalar_time_unit.upper() not in TIME_UNIT_MS:
            raise HoodieConfigError(
                f"hoodie.keygen.timebased.timestamp.scalar.time.unit='{self.scalar_time_unit}' is unknown. "
                f"Help: use one of {', '.join(TIME_UNIT_MS)}."
            )
        compile_format(self.output_date_format, "hoodie.keygen.timebased.output.dateformat")
        for fmt in self.input_formats:
            compile_parser(fmt, "hoodie.keygen.timebased.input.dateformat")
        for option, zone in (
            ("hoodie.keygen.timebased.input.timezone", self.input_zone),
            ("hoodie.keygen.timebased.output.timezone", self.output_zone),
        ):
            check_zone(zone, option)

    @property
    def input_zone(self) -> str:
        return self.input_timezone or self.timezone

    @property
    def output_zone(self) -> str:
        return self.output_timezone or self.timezone

    @property
    def input_formats(self) -> tuple[str, ...]:
        raw = self.input_date_format or ""
        return tuple(f.strip() for f in re.split(self.input_date_format_delimiter, raw) if f.strip())

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)


# --------------------------------------------------------------------------------------------
# Column access and Java-style rendering


def _column(data: Data, name: str) -> Column:
    """Column ``name`` (dotted names reach into structs, as Hudi's getNestedFieldVal)."""
    names = data.schema.names
    if name in names:
        col = data.column(name)
    else:
        head, _, rest = name.partition(".")
        col = data.column(head) if rest and head in names else None
        for part in rest.split(".") if col is not None else ():
            if col is None or not pa.types.is_struct(col.type) or col.type.get_field_index(part) < 0:
                col = None
                break
            col = pc.struct_field(col, part)
        if col is None:
            lower = [n for n in names if n.lower() == name.lower()]
            hint = f" A column '{lower[0]}' exists; names are case-sensitive." if lower else ""
            raise HoodieKeyError(
                f"Key/partition field '{name}' is not a column of the input.{hint} "
                f"Available columns: {', '.join(names)}. Help: fix hoodie.datasource.write.recordkey.field / "
                f"partitionpath.field or add the column."
            )
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    return col


def _java_strings(col: Column, field: str) -> Column:
    """String form of each value as Java's Avro key generators write it (nulls stay null)."""
    t = col.type
    if pa.types.is_string(t):
        return col
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return col.cast(pa.string())
    if pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t):
        return col.cast(pa.string())
    if pa.types.is_date(t):
        return col.cast(pa.date32()).cast(pa.string())
    if pa.types.is_timestamp(t):
        micros = col.cast(pa.timestamp("us", tz=t.tz), safe=False).cast(pa.int64())
        return micros.cast(pa.string())
    if pa.types.is_floating(t) and not pa.types.is_float16(t):
        return _java_float_strings(col)
    if pa.types.is_null(t):
        return pa.nulls(len(col), pa.string())
    raise HoodieKeyError(
        f"Key/partition field '{field}' has type {t}, which Hudi cannot render as a key "
        f"(Java would write an object dump). Help: use a STRING, integer, DECIMAL, DATE or TIMESTAMP "
        f"column, e.g. cast it to STRING."
    )


def _per_distinct(col: Column, fn: Any) -> pa.Array:
    """Apply ``fn`` (Array -> string Array) once per distinct value (null included) and spread
    the results back: one hashing pass, so cheap for few partitions and still linear for many."""
    encoded = pc.dictionary_encode(_to_array(col), null_encoding="encode")
    return fn(encoded.dictionary).take(encoded.indices)


def top_level_columns(fields: Iterable[str]) -> list[str]:
    """The top-level columns that key or partition fields read (`a.b` reads `a`), each once, in order."""
    out: list[str] = []
    for f in fields:
        head = f.partition(".")[0]
        if head not in out:
            out.append(head)
    return out


def _to_array(col: Column) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _np(col: Column) -> np.ndarray:
    return np.asarray(_to_array(col).to_numpy(zero_copy_only=False))


def _count_and_first(mask: Column) -> tuple[int, int]:
    """(number of True rows, index of the first one)."""
    count = pc.sum(mask).as_py() or 0
    first = pc.index(mask, True).as_py() if count else -1
    return count, first


# --------------------------------------------------------------------------------------------
# Partition path escaping (Hive's FileUtils.escapePathName, via PartitionPathEncodeUtils)

_ESCAPED_CHARS = [chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^")
_HEX_ESCAPE = re.compile("%([0-9A-Fa-f]{2})")
_ESCAPE_RE = "[\\x00-\\x1f\"#%'*/:=?\\\\\\x7f{\\[\\]^]"


def escape_partition_values(values: Column) -> Column:
    """Hive escaping of each value: listed characters become ``%XX`` (upper-case hex)."""
    if not pc.any(pc.match_substring_regex(values, _ESCAPE_RE)).as_py():
        return values
    # '%' first, so the '%' of the escapes added afterwards is not escaped again.
    for ch in ["%"] + [c for c in _ESCAPED_CHARS if c != "%"]:
        if pc.any(pc.match_substring(values, ch)).as_py():
            values = pc.replace_substring(values, ch, f"%{ord(ch):02X}")
    return values


def escape_path_name(value: str) -> str:
    """Scalar form of :func:`escape_partition_values`."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED_CHARS else c for c in value)


def unescape_path_name(value: str) -> str:
    """Inverse of :func:`escape_path_name`, as Hive's unescapePathName: each ``%XX`` hex pair
    becomes that one character; a ``%`` not followed by two hex digits stays."""
    return _HEX_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), value) if "%" in value else value


# --------------------------------------------------------------------------------------------
# Complex record keys that two different rows can share

AMBIGUOUS_KEYS_OPTION = "hoodie.sink.write.allow.ambiguous.complex.keys"


def _refuse_ambiguous_values(values: Column, field: str, fields: tuple[str, ...], num_rows: int) -> None:
    """Refuse values that make Hudi's complex key `f1:v1,f2:v2` ambiguous (docs/hudi/complex-keys.md):
    a ',' lets one value take in the next field's part (("a,f2:b", "c") and ("a", "b,f2:c") make the
    same key), and a value spelled like a placeholder (`__null__`, `__empty__`) reads as a null or
    empty value.  Without those the key splits back into its values exactly (':' inside a value is
    harmless: each part begins with its own field name and is split on its first ':').
    Vectorised: one substring match and two comparisons per key field."""
    bad = pc.or_kleene(
        pc.match_substring(values, ","),
        pc.is_in(values, value_set=pa.array([NULL_RECORDKEY_PLACEHOLDER, EMPTY_RECORDKEY_PLACEHOLDER])),
    )
    count, first = _count_and_first(pc.fill_null(bad, False))
    if count:
        example = _to_array(values)[first].as_py()
        raise HoodieKeyError(
            f"Record key field '{field}' holds a value that makes the complex record key ambiguous in "
            f"{count} of {num_rows} rows (first at row {first}: {example!r}): Hudi joins the key fields "
            f"({', '.join(fields)}) as 'field:value' parts separated by ',', so a value containing ',' (or "
            f"spelled '{NULL_RECORDKEY_PLACEHOLDER}' / '{EMPTY_RECORDKEY_PLACEHOLDER}') can give two "
            f"different rows the same key, and one would silently replace the other. Help: remove or "
            f"replace ',' in that column; or, for a table that needs Hudi's ambiguous encoding, set "
            f"{AMBIGUOUS_KEYS_OPTION}=true."
        )


# --------------------------------------------------------------------------------------------
# Key generator


class KeyGenerator:
    """Record keys and partition paths for batches, per a :class:`KeyGenConfig` (picklable)."""

    def __init__(self, config: KeyGenConfig) -> None:
        self.config = config

    # -- record keys ------------------------------------------------------------------------

    def record_keys(self, data: Data) -> pa.Array:
        """``_hoodie_record_key`` of every row (string array, no nulls)."""
        fields = self.config.record_key_fields
        if len(fields) == 1:
            # One key field: the bare value (0.14/0.15 write no 'field:' prefix even for COMPLEX).
            keys = _java_strings(_column(data, fields[0]), fields[0])
            bad = pc.or_kleene(pc.is_null(keys), pc.equal(keys, ""))
            count, first = _count_and_first(bad)
            if count:
                raise HoodieKeyError(
                    f"Record key field '{fields[0]}' is null or empty in {count} of {data.num_rows} rows "
                    f"(first at row {first}); Hudi requires a non-empty record key. Help: filter or fill "
                    f"those rows before writing, e.g. df.na.drop(subset=['{fields[0]}'])."
                )
            return _to_array(keys)
        parts: list[Column] = []
        all_bad: Column | None = None
        for field in fields:
            values = _java_strings(_column(data, field), field)
            if not self.config.allow_ambiguous_keys:
                _refuse_ambiguous_values(values, field, fields, data.num_rows)
            is_null = pc.is_null(values)
            is_empty = pc.fill_null(pc.equal(values, ""), False)
            part = pc.if_else(
                is_null, NULL_RECORDKEY_PLACEHOLDER, pc.if_else(is_empty, EMPTY_RECORDKEY_PLACEHOLDER, values)
            )
            parts.append(pc.binary_join_element_wise(f"{field}:", part, ""))
            bad = pc.or_(is_null, is_empty)
            all_bad = bad if all_bad is None else pc.and_(all_bad, bad)
        count, first = _count_and_first(all_bad)
        if count:
            raise HoodieKeyError(
                f"All record key fields ({', '.join(fields)}) are null or empty in {count} of "
                f"{data.num_rows} rows (first at row {first}); Hudi requires at least one non-empty part. "
                f"Help: filter those rows before writing, e.g. df.na.drop(how='all', subset={list(fields)})."
            )
        return _to_array(pc.binary_join_element_wise(*parts, ","))

    # -- partition paths --------------------------------------------------------------------

    def partition_paths(self, data: Data) -> pa.Array:
        """``_hoodie_partition_path`` of every row (``""`` for non-partitioned tables)."""
        cfg = self.config
        if not cfg.partition_fields:
            return pa.repeat(pa.scalar("", pa.string()), data.num_rows)
        if cfg.keygen_type == "TIMESTAMP":
            field = cfg.partition_fields[0]
            return _to_array(
                _per_distinct(_column(data, field), lambda v: self._timestamp_segments(v, field))
            )
        segments = [
            _per_distinct(_column(data, f), lambda v, f=f: self._value_segments(v, f))
            for f in cfg.partition_fields
        ]
        if len(segments) == 1:
            return _to_array(segments[0])
        return _to_array(pc.binary_join_element_wise(*segments, "/"))

    def _value_segments(self, values: pa.Array, field: str) -> pa.Array:
        strings = _java_strings(values, field)
        missing = pc.or_kleene(pc.is_null(strings), pc.equal(strings, ""))
        if self.config.url_encode:
            strings = escape_partition_values(strings)
        segment = pc.if_else(missing, DEFAULT_PARTITION_PATH, strings)
        return self._hive(segment, field)

    def _hive(self, segment: Column, field: str) -> Column:
        return pc.binary_join_element_wise(f"{field}=", segment, "") if self.config.hive_style else segment

    def _timestamp_segments(self, values: pa.Array, field: str) -> pa.Array:
        cfg = self.config
        millis = _to_epoch_millis(values, field, cfg)
        path = format_millis(
            millis, compile_format(cfg.output_date_format, ""), normalize_zone(cfg.output_zone)
        )
        if cfg.url_encode:
            path = escape_partition_values(path)
        return self._hive(path, field)


# --------------------------------------------------------------------------------------------
# Reading partition paths back


def parse_partition_path(
    path: str, fields: tuple[str, ...] | list[str], hive_style: bool, url_encode: bool = False
) -> dict[str, str]:
    """Partition values by field for a partition path (the inverse of partition_paths, for pruning).

    Values are returned as written (``__HIVE_DEFAULT_PARTITION__`` stays as is); with
    ``url_encode`` they are unescaped. A single partition field takes the whole path, so values
    containing ``/`` (TIMESTAMP key generator, no url encoding) come back whole.
    """
    fields = tuple(fields)
    if not fields:
        if path:
            raise HoodieKeyError(f"Partition path '{path}' given for a non-partitioned table.")
        return {}
    segments = [path] if len(fields) == 1 else path.split("/")
    if len(segments) != len(fields):
        raise HoodieKeyError(
            f"Partition path '{path}' has {len(segments)} segments but the table has {len(fields)} "
            f"partition fields ({', '.join(fields)}). Help: check hoodie.table.partition.fields."
        )
    out: dict[str, str] = {}
    for field, segment in zip(fields, segments, strict=True):
        value = segment
        if hive_style:
            prefix = f"{field}="
            if not segment.startswith(prefix):
                raise HoodieKeyError(
                    f"Partition path '{path}' segment '{segment}' does not start with '{prefix}' "
                    f"(hive-style partitioning). Help: check hoodie.datasource.write.hive_style_partitioning."
                )
            value = segment[len(prefix) :]
        out[field] = unescape_path_name(value) if url_encode else value
    return out


# --------------------------------------------------------------------------------------------
# Java float rendering


_FLOAT_TEXT = r"^(?P<sign>-?)(?P<int>\d+)(?:\.(?P<frac>\d+))?(?:e(?P<exp>[+-]\d+))?$"
_MAX_TEXT = 1 << 20


def _java_float_strings(values: Column) -> pa.Array:
    """Java ``Double.toString``/``Float.toString`` of each value, vectorised.

    Arrow prints the shortest round-trip digits (float32 values as float32), as JDK 19+ does;
    we move them into Java's layout: plain ``123.0`` for 1e-3 <= |x| < 1e7, else ``1.5E-7``;
    ``NaN``, ``Infinity``, ``-0.0``."""
    arr = _to_array(values)
    text = pc.fill_null(arr.cast(pa.string()), "0")
    parts = pc.extract_regex(text, _FLOAT_TEXT)  # null for nan / inf
    finite = pc.fill_null(parts.is_valid(), False)
    sign, int_digits, frac_digits, exp_text = (
        pc.fill_null(pc.struct_field(parts, name), "") for name in ("sign", "int", "frac", "exp")
    )
    exp_text = pc.replace_substring(exp_text, "+", "")
    exp = pc.if_else(pc.equal(exp_text, ""), "0", exp_text).cast(pa.int64())
    all_digits = pc.binary_join_element_wise(int_digits, frac_digits, "")
    stripped = pc.utf8_ltrim(all_digits, characters="0")
    digits = pc.utf8_rtrim(stripped, characters="0")
    leading_zeros = pc.subtract(pc.utf8_length(all_digits), pc.utf8_length(stripped))
    # decimal exponent of the first significant digit: value = d.ddd x 10^k
    k = _np(pc.add(pc.subtract(pc.subtract(pc.utf8_length(int_digits), 1), leading_zeros), exp))
    # String kernels take scalar positions, so lay out the rows of each distinct exponent together.
    order = np.argsort(k, kind="stable")
    bounds = np.flatnonzero(np.diff(k[order])) + 1
    pieces = [
        _java_float_layout(digits.take(pa.array(rows)), int(k[rows[0]]))
        for rows in np.split(order, bounds)
        if len(rows)
    ]
    body = pa.concat_arrays(pieces).take(pa.array(np.argsort(order))) if pieces else digits
    body = pc.if_else(pc.equal(digits, ""), "0.0", body)
    out = pc.binary_join_element_wise(sign, body, "")
    special = pc.replace_substring_regex(pc.replace_substring(text, "nan", "NaN"), "inf$", "Infinity")
    out = pc.if_else(finite, out, special)
    return pc.if_else(arr.is_null(), pa.scalar(None, pa.string()), out)


def _java_float_layout(digits: pa.Array, k: int) -> pa.Array:
    """Java layout of significant ``digits`` (d.ddd x 10^k), all rows sharing ``k``."""
    if -3 <= k < 7:
        if k < 0:
            return pc.binary_join_element_wise("0." + "0" * (-k - 1), digits, "")
        head = pc.utf8_rpad(pc.utf8_slice_codeunits(digits, 0, k + 1), width=k + 1, padding="0")
        tail = pc.utf8_slice_codeunits(digits, k + 1, _MAX_TEXT)
        return pc.binary_join_element_wise(head, pc.if_else(pc.equal(tail, ""), "0", tail), ".")
    first = pc.utf8_slice_codeunits(digits, 0, 1)
    rest = pc.utf8_slice_codeunits(digits, 1, _MAX_TEXT)
    rest = pc.if_else(pc.equal(rest, ""), "0", rest)
    return pc.binary_join_element_wise(first, ".", rest, f"E{k}", "")


# --------------------------------------------------------------------------------------------
# TIMESTAMP key generator: partition values -> epoch millis


def _numeric_unit(cfg: KeyGenConfig) -> str | None:
    return {
        "UNIX_TIMESTAMP": "SECONDS",
        "EPOCHMILLISECONDS": "MILLISECONDS",
        "EPOCHMICROSECONDS": "MICROSECONDS",
        "SCALAR": cfg.scalar_time_unit.upper(),
    }.get(cfg.timestamp_type or "")


def _to_epoch_millis(values: pa.Array, field: str, cfg: KeyGenConfig) -> pa.Array:
    """Epoch millis of each (distinct) partition value for the TIMESTAMP key generator.

    Nulls take Java's default value 1 (one unit after the epoch; for DATE_STRING the epoch + 1 ms
    printed with the first input format and parsed back). Native TIMESTAMP columns use their
    instant and DATE columns midnight in the output zone, whatever timestamp.type says (Java would
    misread the Avro long/int through the configured unit)."""
    unit = _numeric_unit(cfg)
    if pa.types.is_null(values.type):  # an all-null column: every row gets the default value
        values = values.cast(
            pa.int64() if unit else pa.string() if cfg.input_formats else pa.timestamp("ms", "UTC")
        )
    t = values.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        default = unit_to_millis(np.array([1]), unit)[0] if unit else 1
        if pa.types.is_date(t):
            days = _np(values.cast(pa.date32()).cast(pa.int32()).cast(pa.int64()).fill_null(0))
            millis = local_to_utc(days * 86_400_000, np.ones(len(days), bool), cfg.output_zone)
        elif t.tz is None:
            local = _np(values.cast(pa.timestamp("ms"), safe=False).cast(pa.int64()).fill_null(0))
            millis = local_to_utc(local, np.ones(len(local), bool), cfg.input_zone)
        else:
            millis = _np(values.cast(pa.timestamp("ms", tz=t.tz), safe=False).cast(pa.int64()).fill_null(0))
        return pa.array(np.where(_np(values.is_null()), default, millis), pa.int64())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        if cfg.timestamp_type != "DATE_STRING":
            raise HoodieKeyError(
                f"Partition field '{field}' is a string column but hoodie.keygen.timebased.timestamp.type is "
                f"{cfg.timestamp_type}. Help: set timestamp.type=DATE_STRING with input.dateformat, or cast "
                f"the column to a number/timestamp."
            )
        return _parse_date_strings(values.cast(pa.string()), field, cfg)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        if unit is None:
            raise HoodieKeyError(
                f"Partition field '{field}' is numeric ({t}) but hoodie.keygen.timebased.timestamp.type is "
                f"{cfg.timestamp_type}. Help: set it to UNIX_TIMESTAMP, EPOCHMILLISECONDS, EPOCHMICROSECONDS "
                f"or SCALAR."
            )
        if pa.types.is_floating(t):
            values = pc.if_else(pc.is_nan(values), 0.0, values)  # Java: NaN.longValue() == 0
        longs = _np(values.cast(pa.int64(), safe=False).fill_null(1))
        return pa.array(unit_to_millis(longs, unit), pa.int64())
    raise HoodieKeyError(
        f"Partition field '{field}' has type {t}, which the TIMESTAMP key generator cannot read. "
        f"Help: use a TIMESTAMP, DATE, numeric epoch or date-string column."
    )


def _parse_date_strings(strings: pa.Array, field: str, cfg: KeyGenConfig) -> pa.Array:
    option = "hoodie.keygen.timebased.input.dateformat"
    parsers = [compile_parser(f, option) for f in cfg.input_formats]
    if strings.null_count:
        epoch_plus_1 = format_millis(
            pa.array([1], pa.int64()),
            compile_format(parsers[0].pattern, option),
            normalize_zone(cfg.input_zone),
        )
        strings = pc.fill_null(strings, epoch_plus_1[0])
    result = pa.nulls(len(strings), pa.int64())
    for parser in parsers:  # the first format that matches wins
        result = pc.coalesce(result, parse_with(strings, parser, cfg.input_zone))
    unparsed = pc.is_null(result)
    count = pc.sum(unparsed).as_py() or 0
    if count:
        example = strings.filter(unparsed)[0].as_py()
        raise HoodieKeyError(
            f"{count} distinct values of partition field '{field}' do not match {option}="
            f"'{cfg.input_date_format}' (e.g. {example!r}). Help: fix the values or list every format in "
            f"the option, separated by '{cfg.input_date_format_delimiter}'."
        )
    return result


# --------------------------------------------------------------------------------------------
# From the write options, and checked against the input schema before a write starts


def check_key_columns(config: KeyGenConfig, schema: pa.Schema, partitions: bool = True) -> None:
    """Refuse key and partition fields that the input's types cannot render, before any data is
    read: the key generator runs on an empty batch of the input schema, so every check that
    depends on a type (not on values) raises here exactly as it would in a task."""
    gen = KeyGenerator(config)
    empty = schema.empty_table()
    if config.record_key_fields:
        gen.record_keys(empty)
    if partitions and config.partition_fields:
        gen.partition_paths(empty)
