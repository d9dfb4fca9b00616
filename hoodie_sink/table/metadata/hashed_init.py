"""Building a hashed partition of the metadata table (column_stats, bloom_filters) from its records
(I/O; docs/hudi/metadata-table-protocol.md#initialisation).

As Java's bulk insert of an index partition (HoodieBackedTableMetadataWriter.initializeFromFilesystem
and commitInternal at release-0.15.0): at `<t0>0NN`, `<t0>` the latest completed data instant and NN
10 + the partition's position among those built together, the folder is written anew: its partition
metadata, the empty 80-byte placeholder log of every file group, then one HFile base file per file
group holding the records whose keys hash to it (none for a group without records), a deltacommit
(BULK_INSERT_PREPPED) listing them, and only then the data table's properties list the partition, so
a crash anywhere before leaves a partition nobody trusts and the next write builds it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pyarrow as pa

from hoodie_sink.table.format.commit_metadata import CommitMetadata, WriteStat, inflight_workload_json
from hoodie_sink.table.format.file_group import PARTITION_METAFILE
from hoodie_sink.table.format.metadata_keys import file_group_indexes
from hoodie_sink.table.format.metadata_layout import (
    DEFAULT_WRITE_TOKEN,
    init_instant,
    metadata_file_id,
    metadata_log_file_name,
    metadata_partition_metadata,
    placeholder_log_bytes,
)
from hoodie_sink.table.format.metadata_records import MetadataRecord
from hoodie_sink.table.format.metadata_schema import COMMIT_SCHEMA_JSON
from hoodie_sink.table.format.metadata_slices import MetadataBaseFile
from hoodie_sink.table.format.metadata_table import listed_partitions, metadata_storage
from hoodie_sink.table.format.timeline.instant import DELTA_COMMIT
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.metadata.compaction import base_file_bytes
from hoodie_sink.table.metadata.data_properties import read_data_properties, set_listed_partitions
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
BULK_INSERT_PREPPED = "BULK_INSERT_PREPPED"
BASE_WRITE_TOKEN = "0-0-0"


def build_hashed_partition(
    storage: Storage,
    timeline: Timeline,
    partition: str,
    file_groups: int,
    records_at: Callable[[str], list[MetadataRecord]],
    offset: int,
) -> str:
    """Build `partition` (the caller holds the metadata lock, no data instant is pending, and the
    `files` partition is listed) from `records_at(instant)`; its instant."""
    mdt = metadata_storage(storage)
    md_timeline = Timeline.load(mdt)
    done = [i.timestamp for i in timeline.instants if i.is_completed]
    instant = init_instant(max(done, default=None), offset)
    while md_timeline.states_of(instant):  # another partition was built at this <t0> already
        offset += 1
        instant = init_instant(max(done, default=None), offset)
    records = records_at(instant)
    if mdt.is_dir(partition):
        mdt.delete_dir(partition)
    mdt.write_atomic(
        f"{partition}/{PARTITION_METAFILE}", metadata_partition_metadata(instant).encode("utf-8")
    )
    for index in range(file_groups):
        name = metadata_log_file_name(metadata_file_id(partition, index), instant, 1, DEFAULT_WRITE_TOKEN)
        mdt.write_atomic(f"{partition}/{name}", placeholder_log_bytes(instant))
    store = TimelineStore(mdt, zone="UTC")
    requested = store.create_requested(instant, DELTA_COMMIT, time_checked_under_lock=True)
    inflight = store.transition_to_inflight(requested, inflight_workload_json(BULK_INSERT_PREPPED))
    groups: dict[int, list[MetadataRecord]] = {}
    if records:
        indexes = file_group_indexes(pa.array([r.key for r in records], pa.string()), file_groups)
        for record, index in zip(records, indexes.tolist(), strict=True):
            groups.setdefault(index, []).append(record)
    written = [_write_base_file(mdt, partition, index, groups[index], instant) for index in sorted(groups)]
    md = CommitMetadata(
        operation_type=BULK_INSERT_PREPPED, write_stats=written, extra_metadata={"schema": COMMIT_SCHEMA_JSON}
    )
    store.complete(inflight, md.to_bytes())
    set_listed_partitions(storage, [*listed_partitions(read_data_properties(storage)), partition])
    log.info(
        "hoodie: built the %s partition of the metadata table of %s at %s (%d records, %d file groups)",
        partition, storage.base_uri, instant, len(records), file_groups,
    )  # fmt: skip
    return instant


def _write_base_file(
    mdt: Storage, partition: str, index: int, records: list[MetadataRecord], instant: str
) -> WriteStat:
    file_id = metadata_file_id(partition, index)
    base = MetadataBaseFile(file_id, BASE_WRITE_TOKEN, instant)
    data = base_file_bytes(records, base.name)
    rel = f"{partition}/{base.name}"
    if not mdt.create_if_absent(rel, data):
        raise FileExistsError(f"Metadata base file {mdt.full(rel)} exists already.")
    return WriteStat(
        file_id=file_id,
        partition_path=partition,
        path=rel,
        num_writes=len(records),
        num_inserts=len(records),
        total_write_bytes=len(data),
        file_size_in_bytes=len(data),
    )
