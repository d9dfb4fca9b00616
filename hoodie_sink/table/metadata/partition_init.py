"""The steps every index partition's build shares (record_index, column_stats, bloom_filters; I/O;
docs/hudi/metadata-table-protocol.md#initialisation).

As Java's bulk insert of an index partition (HoodieBackedTableMetadataWriter.initializeFromFilesystem
and commitInternal at release-0.15.0): at `<t0>0NN`, `<t0>` the latest completed data instant and NN
10 + the partition's position among those built together, the folder is written anew (its partition
metadata, the empty 80-byte placeholder log of every file group), then one HFile base file per file
group with records, a deltacommit (BULK_INSERT_PREPPED) listing them, and only then the data table's
properties list the partition: a crash anywhere before leaves a partition nobody trusts, and the
next write builds it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hoodie_sink.table.format.commit_metadata import CommitMetadata, WriteStat, inflight_workload_json
from hoodie_sink.table.format.file_group import PARTITION_METAFILE
from hoodie_sink.table.format.metadata_layout import (
    DEFAULT_WRITE_TOKEN,
    init_instant,
    metadata_file_id,
    metadata_log_file_name,
    metadata_partition_metadata,
    placeholder_log_bytes,
)
from hoodie_sink.table.format.metadata_schema import COMMIT_SCHEMA_JSON
from hoodie_sink.table.format.metadata_slices import MetadataBaseFile
from hoodie_sink.table.format.metadata_table import listed_partitions, metadata_storage
from hoodie_sink.table.format.timeline.instant import DELTA_COMMIT, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.metadata.data_properties import read_data_properties, set_listed_partitions
from hoodie_sink.table.storage import Storage

BULK_INSERT_PREPPED = "BULK_INSERT_PREPPED"
BASE_WRITE_TOKEN = "0-0-0"


def free_init_instant(storage: Storage, timeline: Timeline, offset: int) -> str:
    """`<t0>0NN` for a partition built `offset`-th: the first such instant the metadata timeline
    does not hold yet (another partition may have been built at this `<t0>` already)."""
    md_timeline = Timeline.load(metadata_storage(storage))
    latest = max((i.timestamp for i in timeline.instants if i.is_completed), default=None)
    instant = init_instant(latest, offset)
    while md_timeline.states_of(instant):
        offset += 1
        instant = init_instant(latest, offset)
    return instant


@dataclass(frozen=True)
class PartitionBuild:
    """A partition's build under way: its deltacommit is inflight."""

    storage: Storage
    partition: str
    instant: str
    inflight: Instant

    @property
    def mdt(self) -> Storage:
        return metadata_storage(self.storage)

    def write_base_file(self, index: int, encode: Callable[[str], bytes], records: int) -> WriteStat:
        """File group `index`'s HFile base file, `encode(file name)` its bytes, holding `records`."""
        mdt = self.mdt
        file_id = metadata_file_id(self.partition, index)
        base = MetadataBaseFile(file_id, BASE_WRITE_TOKEN, self.instant)
        data = encode(base.name)
        rel = f"{self.partition}/{base.name}"
        if not mdt.create_if_absent(rel, data):
            raise FileExistsError(f"Metadata base file {mdt.full(rel)} exists already.")
        return WriteStat(
            file_id=file_id,
            partition_path=self.partition,
            path=rel,
            num_writes=records,
            num_inserts=records,
            total_write_bytes=len(data),
            file_size_in_bytes=len(data),
        )

    def complete(self, stats: list[WriteStat]) -> None:
        """The deltacommit, then the data table's properties list the partition."""
        md = CommitMetadata(
            operation_type=BULK_INSERT_PREPPED,
            write_stats=stats,
            extra_metadata={"schema": COMMIT_SCHEMA_JSON},
        )
        TimelineStore(self.mdt, zone="UTC").complete(self.inflight, md.to_bytes())
        props = read_data_properties(self.storage)
        set_listed_partitions(self.storage, [*listed_partitions(props), self.partition])


def start_partition(storage: Storage, partition: str, instant: str, file_groups: int) -> PartitionBuild:
    """The partition's folder written anew with its placeholders, and its deltacommit inflight."""
    mdt = metadata_storage(storage)
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
    return PartitionBuild(storage, partition, instant, inflight)
