"""Building the metadata table's `record_index` partition from the table's records (I/O).

As Java initialises it (HoodieBackedTableMetadataWriter.initializeRecordIndexPartition at
release-0.15.0; docs/hudi/metadata-table-protocol.md#record-index):
- the keys of the latest file slices: base files for copy-on-write, merged slices (base and logs)
  for merge-on-read; each key's location is its file group, its instant the slice's base instant;
- the file-group count estimated from the key count (HoodieTableMetadataUtil.estimateFileGroupCount),
  fixed from then on;
- at `<t0>0NN`, `<t0>` the latest completed data instant, NN 10 + the partition's position among
  those initialised together (files, then bloom_filters, column_stats, record_index);
- per file group the empty placeholder log, then an HFile base file of its keys (none for a file
  group without keys), a deltacommit (BULK_INSERT_PREPPED) listing them, and only then the data
  table's properties list `record_index`.
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

from hoodie_sink.table.format.commit_metadata import CommitMetadata, WriteStat, inflight_workload_json
from hoodie_sink.table.format.file_group import PARTITION_METAFILE
from hoodie_sink.table.format.metadata_keys import RECORD_INDEX
from hoodie_sink.table.format.metadata_layout import (
    DEFAULT_WRITE_TOKEN,
    init_instant,
    metadata_file_id,
    metadata_log_file_name,
    metadata_partition_metadata,
    placeholder_log_bytes,
    record_index_file_groups,
)
from hoodie_sink.table.format.metadata_schema import COMMIT_SCHEMA_JSON
from hoodie_sink.table.format.metadata_slices import MetadataBaseFile
from hoodie_sink.table.format.metadata_table import listed_partitions, metadata_storage
from hoodie_sink.table.format.record_index import by_file_group, entries_hfile
from hoodie_sink.table.format.timeline.instant import DELTA_COMMIT
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.metadata.data_properties import read_data_properties, set_listed_partitions
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
BULK_INSERT_PREPPED = "BULK_INSERT_PREPPED"
BASE_WRITE_TOKEN = "0-0-0"


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
    sizing = init.sizing
    mdt = metadata_storage(storage)
    md_timeline = Timeline.load(mdt)
    done = [i.timestamp for i in timeline.instants if i.is_completed]
    instant = init_instant(max(done, default=None), offset)
    while md_timeline.states_of(instant):  # files was built at this <t0> too, with no write since
        offset += 1
        instant = init_instant(max(done, default=None), offset)
    table = init.read_entries(storage, timeline)  # a key given twice: entries_hfile keeps its newest
    count = sizing.file_groups(table.num_rows)  # duplicates counted: Java counts its records too
    if mdt.is_dir(RECORD_INDEX):
        mdt.delete_dir(RECORD_INDEX)
    mdt.write_atomic(
        f"{RECORD_INDEX}/{PARTITION_METAFILE}", metadata_partition_metadata(instant).encode("utf-8")
    )
    for index in range(count):
        name = metadata_log_file_name(metadata_file_id(RECORD_INDEX, index), instant, 1, DEFAULT_WRITE_TOKEN)
        mdt.write_atomic(f"{RECORD_INDEX}/{name}", placeholder_log_bytes(instant))
    store = TimelineStore(mdt, zone="UTC")
    requested = store.create_requested(instant, DELTA_COMMIT, time_checked_under_lock=True)
    inflight = store.transition_to_inflight(requested, inflight_workload_json(BULK_INSERT_PREPPED))
    groups = sorted(by_file_group(table, count).items())
    # one HFile per file group, built in threads (gzip and Arrow release the GIL)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        stats = list(pool.map(lambda g: _write_base_file(mdt, g[0], g[1], instant), groups))
    md = CommitMetadata(
        operation_type=BULK_INSERT_PREPPED, write_stats=stats, extra_metadata={"schema": COMMIT_SCHEMA_JSON}
    )
    store.complete(inflight, md.to_bytes())
    set_listed_partitions(storage, [*listed_partitions(read_data_properties(storage)), RECORD_INDEX])
    log.info(
        "hoodie: built the record index of %s at %s (%d keys, %d file groups)",
        storage.base_uri, instant, table.num_rows, count,
    )  # fmt: skip
    return instant


def _write_base_file(mdt: Storage, index: int, part: pa.Table, instant: str) -> WriteStat:
    file_id = metadata_file_id(RECORD_INDEX, index)
    base = MetadataBaseFile(file_id, BASE_WRITE_TOKEN, instant)
    data = entries_hfile(part, base.name, base=True)
    rel = f"{RECORD_INDEX}/{base.name}"
    if not mdt.create_if_absent(rel, data):
        raise FileExistsError(f"Metadata base file {mdt.full(rel)} exists already.")
    return WriteStat(
        file_id=file_id,
        partition_path=RECORD_INDEX,
        path=rel,
        num_writes=part.num_rows,
        num_inserts=part.num_rows,
        total_write_bytes=len(data),
        file_size_in_bytes=len(data),
    )
