"""Which files make up the record index now, and which of their log blocks count (I/O: two
timelines and one folder listing; docs/design/metadata-table.md#record-index-look-ups).

The `record_index` partition of the metadata table has N file groups `record-index-<i %04d>-0`
(N fixed when it was built: Java uses the number of existing file groups, HoodieBackedTableMetadataWriter
`prepRecords`); a key lives in file group `|String.hashCode(key)| % N`.  Each file group is read
as its latest slice (format/metadata_slices.py), and a log block counts only if its instant is
trusted as Java's log scanner trusts it (format/metadata_listing.reader_instants), is not newer
than the latest completed metadata instant and is not undone by a rollback command block.

A `RecordIndexFiles` is a snapshot of plain values: picklable, built once per look-up task.
"""

from __future__ import annotations

from dataclasses import dataclass

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.metadata_keys import RECORD_INDEX
from hoodie_sink.table.format.metadata_listing import reader_instants
from hoodie_sink.table.format.metadata_record_index import record_index_layout
from hoodie_sink.table.format.metadata_table import listed_partitions, metadata_storage
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.metadata.data_properties import read_data_properties
from hoodie_sink.table.storage import Storage


@dataclass(frozen=True)
class RecordIndexSlice:
    """The latest slice of one record-index file group: paths relative to the metadata table."""

    file_id: str
    base_file: str | None
    base_size: int
    log_files: tuple[tuple[str, int], ...]  # (path, size) in version order


@dataclass(frozen=True)
class RecordIndexFiles:
    """The record index of one table as a reader sees it: its file groups in index order, and
    the instants whose log blocks count."""

    table_uri: str
    file_groups: tuple[RecordIndexSlice, ...]
    trusted: frozenset[str]
    latest: str  # the latest completed metadata instant: newer blocks are ignored

    @property
    def file_group_count(self) -> int:
        return len(self.file_groups)

    def counts(self, instant: str) -> bool:
        return instant in self.trusted and instant <= self.latest


def not_listed_error(table_uri: str) -> HoodieTableError:
    return HoodieTableError(
        f"Table {table_uri} has no record index: its hoodie.properties does not list '{RECORD_INDEX}' in "
        "hoodie.table.metadata.partitions. Help: use hoodie.index.type=GLOBAL_BLOOM (or BLOOM), or build the "
        "record index with Apache Hudi (hoodie.metadata.enable=true, hoodie.metadata.record.index.enable=true)."
    )


def load_record_index_files(storage: Storage, data_timeline: Timeline | None = None) -> RecordIndexFiles:
    """The record index of the table at `storage` now (`data_timeline`: its timeline, if loaded)."""
    if RECORD_INDEX not in listed_partitions(read_data_properties(storage)):
        raise not_listed_error(storage.base_uri)
    mdt = metadata_storage(storage)
    data = data_timeline if data_timeline is not None else Timeline.load(storage)
    md_timeline, trusted, latest = reader_instants(storage, data)
    groups = []
    for current in record_index_layout(mdt, md_timeline).slices:  # the layout rule the full read uses
        base = current.base_file
        groups.append(
            RecordIndexSlice(
                current.file_id,
                f"{RECORD_INDEX}/{base.name}" if base is not None else None,
                base.size if base is not None else 0,
                tuple((lf.path, lf.size) for lf in current.log_files),
            )
        )
    if not groups:
        raise HoodieTableError(
            f"The record index of {storage.base_uri} has no file group in {mdt.full(RECORD_INDEX)}. "
            "Help: rebuild it (drop the record_index partition and write with "
            "hoodie.metadata.record.index.enable=true)."
        )
    return RecordIndexFiles(storage.base_uri, tuple(groups), frozenset(trusted), latest)
