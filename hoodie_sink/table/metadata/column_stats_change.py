"""What one data-table action changes in the metadata table's `column_stats` partition: its records
(driver side; docs/design/metadata-table.md#column-statistics).

Hudi's rules (HoodieTableMetadataUtil.convertMetadataToColumnStatsRecords for commits and cleans,
release-0.15.0; docs/hudi/column-stats.md):
- a commit, deltacommit, replacecommit or compaction commit adds the statistics of every file its
  write stats name: a base file's from its footer, a log file's from the records appended to it.
  The write tasks computed them (`WriteStat.column_stats`, format/column_stats.py): here they are
  only turned into records.  A log file is written by one instant of ours (each write makes a new
  log version), so no two commits add statistics of one log file; Java's merge of such records
  (min of mins, summed counts) would hold anyway;
- a clean writes a tombstone per indexed column of every file it deleted (no bounds, counts -1).
  Java tombstones deleted base files only; we tombstone deleted log files too, so the partition does
  not keep statistics of files that are gone (a reader treats both alike: a deleted file is not
  listed);
- rollbacks write nothing here: the rolled-back instant's metadata deltacommit is removed whole
  (metadata/writer.roll_back_metadata_instant), and a restore rebuilds the metadata table.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq

from hoodie_sink.table.format.column_stats import column_stats_of_footer
from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.format.file_group import LogFile
from hoodie_sink.table.format.metadata_records import (
    ColumnStatsInfo,
    MetadataRecord,
    column_stats_record,
    column_stats_tombstone,
)
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.format.table_schema import latest_schema
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
FOOTER_THREADS = 8  # object stores: one request per footer


def of_commit(storage: Storage, md: CommitMetadata) -> list[MetadataRecord]:
    """The `column_stats` records of a commit: the statistics its tasks put on the write stats.
    A base file without them (a table service run without hoodie.metadata.index.column.stats.enable
    on a table that keeps the partition) is read here, footer only, every column; a log file
    without them cannot be (its rows would have to be read back) and fails the commit."""
    # a file named by two stats (a commit's re-merged file group) gets one set of records: the
    # metadata table would sum their counts
    stats = list({s.path: s for s in md.write_stats if s.path}.values())
    missing = [s for s in stats if s.column_stats is None]
    logs = [
        s.path for s in missing if LogFile.parse(s.partition_path, posixpath.basename(s.path)) is not None
    ]
    if logs:
        raise ValueError(
            f"the table keeps column_stats but the write stats of {len(logs)} log files carry no column "
            f"statistics, e.g. {logs[0]}. Help: write with hoodie.metadata.index.column.stats.enable=true."
        )
    computed: dict[str, tuple[ColumnStatsInfo, ...]] = {}
    if missing:
        log.info("hoodie: reading %d footers for column statistics the tasks did not compute", len(missing))
        with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, len(missing))) as pool:
            footers = list(pool.map(lambda s: base_file_stats(storage, s.path), missing))
        computed = {s.path: tuple(f) for s, f in zip(missing, footers, strict=True)}
    out: list[MetadataRecord] = []
    for s in stats:
        for info in s.column_stats if s.column_stats is not None else computed[s.path]:
            out.append(column_stats_record(s.partition_path, info))
    return out


def base_file_stats(
    storage: Storage, path: str, columns: Iterable[str] | None = None
) -> list[ColumnStatsInfo]:
    """A base file's statistics from its footer (`path` relative to the table; `columns`: every
    column when None)."""
    with storage.open_input_file(path) as f:
        footer = pq.read_metadata(f)
    return column_stats_of_footer(footer, posixpath.basename(path), columns)


def of_clean(storage: Storage, deleted: Iterable[str]) -> list[MetadataRecord]:
    """Tombstones for the files a clean deleted (relative paths), one per column that may have a
    record: the meta columns and every top-level column of the table's latest schema, Java's
    columns to index when no column list is set (a column list names a subset of these)."""
    paths = sorted(deleted)
    if not paths:
        return []
    columns = indexable_columns(storage, Timeline.load(storage))
    out: list[MetadataRecord] = []
    for path in paths:
        partition, name = posixpath.split(path)
        out.extend(column_stats_tombstone(partition, name, column) for column in columns)
    return out


def indexable_columns(storage: Storage, timeline: Timeline) -> list[str]:
    """The meta columns, then the top-level fields of the table's latest Avro schema."""
    schema = latest_schema(storage, timeline)
    fields = [f["name"] for f in json.loads(schema)["fields"]] if schema else []
    return [*META_COLUMNS, *(f for f in fields if f not in META_COLUMNS)]
