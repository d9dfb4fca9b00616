"""Reading one base file into Arrow at a given schema (columns it lacks read as nulls)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.schema import conform_column
from hoodie_sink.table.storage import Storage


def read_base_file(
    storage: Storage, rel_path: str, schema: pa.Schema, columns: list[str] | None = None
) -> pa.Table:
    target = pa.schema([schema.field(c) for c in columns]) if columns is not None else schema
    try:
        with storage.open_input_file(rel_path) as f:
            pf = pq.ParquetFile(f)
            present = [n for n in target.names if n in pf.schema_arrow.names]
            table = pf.read(columns=present)
    except (OSError, pa.ArrowInvalid) as e:
        raise HoodieTableError(f"Cannot read base file {storage.full(rel_path)}: {e}") from e
    return conform(table, target)


def conform(table: pa.Table, target: pa.Schema) -> pa.Table:
    """`table` (a file written with an older table schema) in `target`, the table's latest schema:
    columns it lacks read null, promoted types are cast
    (docs/hudi/schema-evolution.md#reading-older-files-in-the-latest-schema)."""
    cols = []
    for f in target:
        if f.name in table.column_names:
            cols.append(conform_column(table.column(f.name), f.type))
        else:
            cols.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=target)


def count_rows(storage: Storage, rel_path: str) -> int:
    """The rows of a base file, from its Parquet footer (nothing else is read)."""
    try:
        with storage.open_input_file(rel_path) as f:
            return int(pq.ParquetFile(f).metadata.num_rows)
    except (OSError, pa.ArrowInvalid) as e:
        raise HoodieTableError(f"Cannot read base file {storage.full(rel_path)}: {e}") from e
