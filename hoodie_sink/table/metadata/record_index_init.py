"""Building the metadata table's `record_index` partition from the table's records (I/O).

As Java initialises it (HoodieBackedTableMetadataWriter.initializeRecordIndexPartition at
release-0.15.0; docs/hudi/metadata-table-protocol.md#record-index):
- the keys of the latest file slices: base files for copy-on-write, merged slices (base and logs)
  for merge-on-read; each key's location is its file group, its instant the slice's base instant;
- the file-group count estimated from the key count (HoodieTableMetadataUtil.estimateFileGroupCount),
  fixed from then on;
- the steps every index partition's build takes (metadata/partition_init.py), at `<t0>0NN` after
  files, bloom_filters and column_stats; an HFile base file per file group with keys.
Vectorised: keys are read as Arrow columns, hashed and encoded per distinct location
(format/record_index.py).  The keys of the whole table pass through this process: a table too big
for one process's memory needs the write tasks to build the file groups instead (not done).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from hoodie_sink.table.format.commit_metadata import WriteStat
from hoodie_sink.table.format.metadata_keys import RECORD_INDEX
from hoodie_sink.table.format.metadata_layout import record_index_file_groups
from hoodie_sink.table.format.record_index import by_file_group, entries_hfile
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.metadata.partition_init import free_init_instant, start_partition
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordIndexSizing:
    """hoodie.metadata.record.index.{min,max}.filegroup.count, .growth.factor, .max.filegroup.size."""

    min_file_groups: int = 10
    max_file_groups: int = 10000
    growth_factor: float = 2.0
    max_file_group_bytes: int = 1 << 30

    def file_groups(self, records: int) -> int:
        return record_index_file_groups(
            records, self.min_file_groups, self.max_file_groups, self.growth_factor, self.max_file_group_bytes
        )


EntriesReader = Callable[[Storage, Timeline], pa.Table]  # read/record_index_keys.live_entries


@dataclass(frozen=True)
class RecordIndexInit:
    """How to build a record index: its sizing, and the reader of the table's live keys (it reads
    data files, a layer above this one, so the writer passes it in)."""

    sizing: RecordIndexSizing
    read_entries: EntriesReader


def initialize_record_index(storage: Storage, timeline: Timeline, init: RecordIndexInit, offset: int) -> str:
    """Build the `record_index` partition (the caller holds the metadata lock, no data instant is
    pending, and the `files` partition is listed); its instant."""
    instant = free_init_instant(storage, timeline, offset)
    table = init.read_entries(storage, timeline)  # a key given twice: entries_hfile keeps its newest
    count = init.sizing.file_groups(table.num_rows)  # duplicates counted: Java counts its records too
    build = start_partition(storage, RECORD_INDEX, instant, count)
    groups = sorted(by_file_group(table, count).items())

    def write(group: tuple[int, pa.Table]) -> WriteStat:
        index, part = group
        return build.write_base_file(index, lambda name: entries_hfile(part, name, base=True), part.num_rows)

    # one HFile per file group, built in threads (gzip and Arrow release the GIL)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        build.complete(list(pool.map(write, groups)))
    log.info(
        "hoodie: built the record index of %s at %s (%d keys, %d file groups)",
        storage.base_uri, instant, table.num_rows, count,
    )  # fmt: skip
    return instant
