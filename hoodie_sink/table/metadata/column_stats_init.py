"""Building the metadata table's `column_stats` partition from the table's files (I/O).

As Java initialises it (HoodieBackedTableMetadataWriter.initializeColumnStatsPartition and
HoodieTableMetadataUtil.convertFilesToColumnStatsRecords at release-0.15.0;
docs/hudi/column-stats.md#the-partitions-life):
- the statistics of every file the `files` partition lists (base files from their footers);
- hoodie.metadata.index.column.stats.file.group.count file groups (2), fixed from then on;
- at `<t0>0NN`, `<t0>` the latest completed data instant, NN 10 + the partition's position among
  those initialised together (files, then bloom_filters, column_stats, record_index);
- the partition's layout, deltacommit and listing as every hashed partition's
  (metadata/hashed_init.py).
Java reads base files only; we read the listed log files' rows too (a merge-on-read slice is skipped
by data skipping only when every one of its files has statistics).  Footers and log files are read
in threads by the caller's reader (read/column_stats_files.py: it reads data files, a layer above
this one); the work grows with files (and the rows of log files), once, when the partition is built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hoodie_sink.table.format.file_group import Listing
from hoodie_sink.table.format.fs_view import list_table_files
from hoodie_sink.table.format.metadata_keys import COLUMN_STATS
from hoodie_sink.table.format.metadata_records import ColumnStatsInfo, MetadataRecord, column_stats_record
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.metadata.hashed_init import build_hashed_partition
from hoodie_sink.table.storage import Storage

# read/column_stats_files.listing_stats: (storage, listing, committed, columns) -> stats by path
StatsReader = Callable[
    [Storage, Listing, Callable[[str], bool], tuple[str, ...] | None], dict[str, list[ColumnStatsInfo]]
]


@dataclass(frozen=True)
class ColumnStatsInit:
    """How to build the partition: its file groups, the columns (empty: every column) and the
    reader of the files' statistics."""

    file_groups: int
    columns: tuple[str, ...]
    read_stats: StatsReader


def initialize_column_stats(storage: Storage, timeline: Timeline, init: ColumnStatsInit, offset: int) -> str:
    """Build the `column_stats` partition (the caller holds the metadata lock, no data instant is
    pending, and the `files` partition is listed); its instant."""

    def records(instant: str) -> list[MetadataRecord]:
        listing = list_table_files(storage, timeline=timeline)
        stats = init.read_stats(storage, listing, timeline.is_committed, init.columns or None)
        out: list[MetadataRecord] = []
        for path in sorted(stats):
            partition = path.rpartition("/")[0]
            out.extend(column_stats_record(partition, info) for info in stats[path])
        return out

    return build_hashed_partition(storage, timeline, COLUMN_STATS, init.file_groups, records, offset)
