"""Building the metadata table's `bloom_filters` partition from the table's base files (I/O).

As Java initialises it (HoodieBackedTableMetadataWriter.initializeBloomFiltersPartition and
HoodieTableMetadataUtil.convertFilesToBloomFilterRecords at release-0.15.0;
docs/hudi/metadata-table-protocol.md#bloom-filters): the footer bloom filter of every base file the
`files` partition lists (log files have none; a file without a filter gets no record), stamped with
the initialisation's instant, in hoodie.metadata.index.bloom.filter.file.group.count file groups (4)
at `<t0>0NN` (after `files`, before column_stats and record_index); the layout as every hashed
partition's (metadata/hashed_init.py).  The footers are read in threads by the caller's reader
(read/column_stats_files.listing_blooms: it reads data files, a layer above this one); the work grows
with files, once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hoodie_sink.table.format.file_group import Listing
from hoodie_sink.table.format.fs_view import list_table_files
from hoodie_sink.table.format.metadata_keys import BLOOM_FILTERS
from hoodie_sink.table.format.metadata_records import MetadataRecord, bloom_filter_record
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.metadata.hashed_init import build_hashed_partition
from hoodie_sink.table.storage import Storage

# (storage, listing) -> relative path of each listed base file with a filter -> (type code, footer text)
BloomsReader = Callable[[Storage, Listing], dict[str, tuple[str, str]]]


@dataclass(frozen=True)
class BloomFiltersInit:
    """How to build the partition: its file groups and the reader of the base files' filters."""

    file_groups: int
    read_blooms: BloomsReader


def initialize_bloom_filters(
    storage: Storage, timeline: Timeline, init: BloomFiltersInit, offset: int
) -> str:
    """Build the `bloom_filters` partition (the caller holds the metadata lock, no data instant is
    pending, and the `files` partition is listed); its instant."""

    def records(instant: str) -> list[MetadataRecord]:
        blooms = init.read_blooms(storage, list_table_files(storage, timeline=timeline))
        out = []
        for path in sorted(blooms):
            partition, _, name = path.rpartition("/")
            type_code, text = blooms[path]
            out.append(bloom_filter_record(partition, name, instant, text.encode("utf-8"), type_code))
        return out

    return build_hashed_partition(storage, timeline, BLOOM_FILTERS, init.file_groups, records, offset)
