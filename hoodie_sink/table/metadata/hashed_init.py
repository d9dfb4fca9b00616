"""Building a hashed partition of the metadata table (column_stats, bloom_filters) from its records
(I/O): the steps of metadata/partition_init.py, each file group's HFile base file holding the
records whose keys hash to it (none for a group without records).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pyarrow as pa

from hoodie_sink.table.format.commit_metadata import WriteStat
from hoodie_sink.table.format.metadata_keys import file_group_indexes
from hoodie_sink.table.format.metadata_records import MetadataRecord
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.metadata.compaction import base_file_bytes
from hoodie_sink.table.metadata.partition_init import free_init_instant, start_partition
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)


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
    instant = free_init_instant(storage, timeline, offset)
    records = records_at(instant)
    build = start_partition(storage, partition, instant, file_groups)
    groups: dict[int, list[MetadataRecord]] = {}
    if records:
        indexes = file_group_indexes(pa.array([r.key for r in records], pa.string()), file_groups)
        for record, index in zip(records, indexes.tolist(), strict=True):
            groups.setdefault(index, []).append(record)

    def write(index: int) -> WriteStat:
        rs = groups[index]
        return build.write_base_file(index, lambda name: base_file_bytes(rs, name), len(rs))

    build.complete([write(index) for index in sorted(groups)])
    log.info(
        "hoodie: built the %s partition of the metadata table of %s at %s (%d records, %d file groups)",
        partition, storage.base_uri, instant, len(records), file_groups,
    )  # fmt: skip
    return instant
