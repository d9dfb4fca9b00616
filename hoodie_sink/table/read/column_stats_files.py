"""The column statistics a data file gives, computed again from the file itself (I/O): what the
metadata table's `column_stats` partition must hold for it (docs/hudi/column-stats.md).

- a base file's from its Parquet footer (format/column_stats.column_stats_of_footer);
- a log file's from the rows of its data blocks of committed instants, as Hudi's append handle
  computes them from the records it appends (column_stats_of_rows over all of them: a log file of
  ours holds one instant's blocks; a Java log file appended by several instants has one record per
  append, which the metadata table merges into the same min of mins and summed counts).

Used by the partition's initialisation (metadata/column_stats_init.py, which takes these as its
reader: they read data files, a layer above it) and by validation (services/validation.py).
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_sink.table.format import log_format
from hoodie_sink.table.format.avro_rows import decode_block_content
from hoodie_sink.table.format.column_stats import column_stats_of_rows
from hoodie_sink.table.format.file_group import Listing
from hoodie_sink.table.format.metadata_records import ColumnStatsInfo
from hoodie_sink.table.format.schema import avro_to_arrow
from hoodie_sink.table.metadata.column_stats_change import base_file_stats
from hoodie_sink.table.metadata.column_stats_init import ColumnStatsInit
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage

Committed = Callable[[str], bool]  # whether a block's instant is committed (Timeline.is_committed)


def log_file_stats(
    storage: Storage, path: str, committed: Committed, columns: Iterable[str] | None = None
) -> list[ColumnStatsInfo]:
    """A log file's statistics from the rows of its data blocks whose instant is committed (a
    rolled-back Java append leaves its block behind a command block)."""
    tables = []
    for block in log_format.read_blocks(storage.read_bytes(path), storage.full(path)):
        if not committed(block.header.get(log_format.INSTANT_TIME, "")):
            continue
        if block.block_type == log_format.AVRO_DATA_BLOCK:
            writer = block.header[log_format.SCHEMA]
            arrow = avro_to_arrow(json.loads(writer), force_nullable=True)
            tables.append(decode_block_content(block.content, writer, arrow))
        elif block.block_type == log_format.PARQUET_DATA_BLOCK:
            tables.append(pq.read_table(pa.BufferReader(block.content)))
    if not tables:
        tables = [pa.table({})]
    rows = pa.concat_tables(tables, promote_options="permissive")
    return column_stats_of_rows(rows, posixpath.basename(path), columns)


def listing_stats(
    storage: Storage, listing: Listing, committed: Committed, columns: Iterable[str] | None = None
) -> dict[str, list[ColumnStatsInfo]]:
    """Every listed file's statistics, by relative path, read in threads (a footer per base file;
    the rows of each log file)."""
    wanted = list(columns) if columns is not None else None
    jobs = [(bf.path, False) for bf in listing.base_files] + [(lf.path, True) for lf in listing.log_files]
    if not jobs:
        return {}

    def read(job: tuple[str, bool]) -> list[ColumnStatsInfo]:
        path, is_log = job
        return (
            log_file_stats(storage, path, committed, wanted)
            if is_log
            else base_file_stats(storage, path, wanted)
        )

    with ThreadPoolExecutor(max_workers=min(8, max(1, (os.cpu_count() or 1) * 2), len(jobs))) as pool:
        results = list(pool.map(read, jobs))
    return {path: stats for (path, _), stats in zip(jobs, results, strict=True)}


def column_stats_init(cfg: WriteConfig) -> ColumnStatsInit | None:
    """How a write with these options builds the column_stats partition (None: it does not keep it)."""
    if not cfg.column_stats_enable:
        return None
    return ColumnStatsInit(cfg.column_stats_file_groups, cfg.column_stats_columns, listing_stats)
