"""Snapshot reads of copy-on-write tables: the latest committed base file of each file group.

Each base file is read with pyarrow and conformed to the table schema (columns added since
the file was written are null-filled, narrower types widened), as hudi-rs does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.file_group import BaseFile
from hoodie_sink.table.fs_view import FileSystemView
from hoodie_sink.table.hoodie_table import latest_schema
from hoodie_sink.table.properties import MERGE_ON_READ, TableConfig, read_table_config
from hoodie_sink.table.schema import META_COLUMNS, avro_to_arrow
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.timeline.timeline import Timeline


@dataclass
class Snapshot:
    storage: Storage
    table: TableConfig
    timeline: Timeline
    schema: pa.Schema  # meta columns + data columns
    instant: str | None

    @staticmethod
    def open(path: str, as_of: str | None = None, read_optimized: bool = False) -> Snapshot:
        storage = Storage(path)
        table = read_table_config(storage)
        if table.table_type == MERGE_ON_READ and not read_optimized:
            raise HoodieTableError(
                f"The table at {path} is MERGE_ON_READ; merging its log files on read is not supported yet. "
                "Help: read it with hudi-rs, or set option hoodie.datasource.query.type=read_optimized "
                "(base files only)."
            )
        timeline = Timeline.load(storage)
        avro = latest_schema(storage, timeline, table)
        if avro:
            data = avro_to_arrow(json.loads(avro))
        else:
            data = pa.schema([])
        meta = [pa.field(n, pa.string()) for n in META_COLUMNS]
        schema = pa.schema(meta + [f for f in data if f.name not in META_COLUMNS])
        latest = timeline.latest_completed()
        instant = latest.timestamp if latest else None
        if as_of and instant:
            instant = min(as_of, instant)
        return Snapshot(storage, table, timeline, schema, instant)

    def base_files(self, partition_filter: Callable[[str], bool] | None = None) -> list[BaseFile]:
        view = FileSystemView.load(self.storage, self.timeline)
        return sorted(view.latest_base_files(self.instant, partition_filter))

    def read_file(self, bf: BaseFile, columns: list[str] | None = None) -> pa.Table:
        return read_base_file(self.storage, bf.path, self.schema, columns)


def read_base_file(storage: Storage, rel_path: str, schema: pa.Schema, columns: list[str] | None = None) -> pa.Table:
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
    cols = []
    for f in target:
        if f.name in table.column_names:
            col = table.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=target)


def iter_snapshot(
    path: str,
    columns: list[str] | None = None,
    partition_filter: Callable[[str], bool] | None = None,
    as_of: str | None = None,
    read_optimized: bool = False,
) -> Iterator[pa.Table]:
    snap = Snapshot.open(path, as_of, read_optimized)
    for bf in snap.base_files(partition_filter):
        yield snap.read_file(bf, columns)


def read_snapshot(
    path: str,
    columns: list[str] | None = None,
    partition_filter: Callable[[str], bool] | None = None,
    as_of: str | None = None,
    read_optimized: bool = False,
) -> pa.Table:
    snap = Snapshot.open(path, as_of, read_optimized)
    target = pa.schema([snap.schema.field(c) for c in columns]) if columns else snap.schema
    tables = [snap.read_file(bf, columns) for bf in snap.base_files(partition_filter)]
    return pa.concat_tables(tables) if tables else target.empty_table()
