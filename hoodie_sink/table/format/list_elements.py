"""Null elements in list columns, which Apache Hudi's own merge cannot rewrite.

Java Hudi 0.14/0.15 merges a file group (an upsert or delete touching it) through parquet-avro,
whose writer keeps the old two-level list structure (`parquet.avro.write-old-list-structure`,
default true) and fails on a null element ("Array contains a null element"): one such record
makes every later Java write into its file group fail, whatever layout the base file has
(checked with Java 0.15 on our three-level lists).  So a write refuses them, unless
`hoodie.sink.write.allow.null.array.elements=true` says no Java writer will merge the table.
Vectorised: one null count per list level of a batch, no per-row work.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from hoodie_sink.errors import HoodieSchemaError

ALLOW_OPTION = "hoodie.sink.write.allow.null.array.elements"


def has_lists(schema: pa.Schema) -> bool:
    return any(_has_list(f.type) for f in schema)


def _has_list(t: pa.DataType) -> bool:
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_list(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _has_list(t.item_type)
    return False


def _null_element_paths(arr: pa.Array, path: str) -> Iterator[str]:
    t = arr.type
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        values = arr.flatten()  # the elements of the non-null lists, offsets respected
        if values.null_count:
            yield path
        yield from _null_element_paths(values, f"{path}.element")
    elif pa.types.is_struct(t):
        # flatten() merges the struct's validity into its fields: a null struct hides its children
        for i, child in enumerate(arr.flatten()):
            yield from _null_element_paths(child, f"{path}.{t.field(i).name}")
    elif pa.types.is_map(t):
        yield from _null_element_paths(arr.items, f"{path}.value")


def check_no_null_elements(batch: pa.RecordBatch) -> None:
    """Refuse a batch with a null element in any list column, nested ones included, naming it."""
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if not _has_list(column.type):
            continue
        for path in _null_element_paths(column, name):
            raise HoodieSchemaError(
                f"Column '{path}' holds a list with a null element. Apache Hudi's own writers (0.14/0.15) "
                "cannot merge a file group holding one ('Array contains a null element'): every later "
                f"Java upsert or delete into it would fail. Help: drop or replace null elements (Spark: "
                f"filter(x -> x IS NOT NULL, {name})), or set {ALLOW_OPTION}=true if no Java writer will "
                "ever upsert into this table."
            )
