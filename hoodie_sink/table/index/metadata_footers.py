"""What the bloom index needs of a base file, from the metadata table instead of its footer
(hoodie.bloom.index.use.metadata; docs/design/metadata-table.md#bloom-filters).

As Hudi 0.15's bloom index (HoodieBloomIndex.loadColumnRangesFromMetaIndex, HoodieKeyLookupHandle
.getBloomFilter, SparkHoodieBloomIndexHelper; docs/hudi/metadata-table-protocol.md#bloom-filters):
- key ranges come from the `column_stats` partition's statistics of `_hoodie_record_key` when the
  table lists that partition (its value count is the file's row count);
- bloom filters from the `bloom_filters` partition, for the files that still have candidate keys
  after range pruning.
Both are point look-ups: each file's key (metadata_keys) is hashed to its file group, and only the
base HFile's data blocks whose key range can hold it are read, then the slice's log blocks a reader
trusts (the record index's look-up machinery, index/record_index_lookup.py, reused as is).  A file
without a record falls back to its footer (Java fails the look-up for a missing bloom filter, and
silently drops a file without column statistics from the candidates: we read the footer instead,
which is never wrong).

`MetadataIndexFiles` is a snapshot of plain values (the partitions' latest slices and the instants
whose blocks count): picklable, loaded once per look-up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.bloom import BloomFilter
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.metadata_keys import (
    BLOOM_FILTERS,
    COLUMN_STATS,
    bloom_filter_key,
    column_stats_key,
    file_group_indexes,
)
from hoodie_sink.table.format.metadata_listing import reader_instants
from hoodie_sink.table.format.metadata_records import CorruptMetadataRecord, MetadataRecord, decode_record
from hoodie_sink.table.format.metadata_slices import committed_base_instants, partition_slices
from hoodie_sink.table.format.metadata_table import has_files_partition, listed_partitions, metadata_storage
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.index.record_index_files import RecordIndexFiles, RecordIndexSlice
from hoodie_sink.table.index.record_index_lookup import look_up_group
from hoodie_sink.table.metadata.data_properties import read_data_properties
from hoodie_sink.table.storage import Storage

RECORD_KEY_COLUMN = "_hoodie_record_key"


@dataclass(frozen=True)
class FileRange:
    """A base file's row count and record-key range, from its column statistics."""

    num_rows: int
    min_key: str | None
    max_key: str | None


@dataclass(frozen=True)
class MetadataIndexFiles:
    """The bloom_filters and column_stats partitions of one table as a reader sees them now (None: not
    listed)."""

    bloom_filters: RecordIndexFiles | None
    column_stats: RecordIndexFiles | None


def load_metadata_index_files(storage: Storage, data_timeline: Timeline | None = None) -> MetadataIndexFiles:
    """The partitions the bloom index may read, of the table at `storage` now."""
    props = read_data_properties(storage)
    listed = listed_partitions(props) if has_files_partition(props) else []
    wanted = [p for p in (BLOOM_FILTERS, COLUMN_STATS) if p in listed]
    if not wanted:
        return MetadataIndexFiles(None, None)
    mdt = metadata_storage(storage)
    data = data_timeline if data_timeline is not None else Timeline.load(storage)
    md_timeline, trusted, latest = reader_instants(storage, data)
    found = {}
    for partition in wanted:
        names = [(i.base_name, int(i.size or 0)) for i in mdt.list_dir(partition) if i.is_file]
        try:
            slices = partition_slices(partition, names, committed_base_instants(md_timeline, names))
        except ValueError as e:
            raise HoodieTableError(f"The metadata table of {storage.base_uri}: {e}") from e
        groups = tuple(
            RecordIndexSlice(
                sl.file_id,
                f"{partition}/{sl.base_file.name}" if sl.base_file is not None else None,
                sl.base_file.size if sl.base_file is not None else 0,
                tuple((f"{partition}/{lf.name}", lf.size) for lf in sl.log_files),
            )
            for sl in slices
        )
        found[partition] = RecordIndexFiles(storage.base_uri, groups, frozenset(trusted), latest)
    return MetadataIndexFiles(found.get(BLOOM_FILTERS), found.get(COLUMN_STATS))


def _values(storage: Storage, files: RecordIndexFiles, keys: list[str]) -> list[bytes | None]:
    """The newest live value of each metadata key (None: no record), by point look-ups."""
    if not keys or not files.file_groups:
        return [None] * len(keys)
    arr = pa.array(keys, pa.string())
    groups = file_group_indexes(arr, files.file_group_count)
    binary = arr.cast(pa.binary())
    mdt = metadata_storage(storage)
    out: list[bytes | None] = [None] * len(keys)
    for g in np.unique(groups).tolist():
        rows = np.flatnonzero(groups == g)
        found = look_up_group(mdt, files, files.file_groups[g], binary.take(pa.array(rows)))
        for row, value in zip(rows.tolist(), found.to_pylist(), strict=True):
            out[row] = value
    return out


def file_ranges(
    storage: Storage, files: MetadataIndexFiles, base_files: list[BaseFile]
) -> list[FileRange | None]:
    """Each base file's row count and key range from the `_hoodie_record_key` statistics (None: no
    live record, or no column_stats partition)."""
    if files.column_stats is None:
        return [None] * len(base_files)
    keys = [column_stats_key(bf.partition_path, bf.name, RECORD_KEY_COLUMN) for bf in base_files]
    out: list[FileRange | None] = []
    for key, value in zip(keys, _values(storage, files.column_stats, keys), strict=True):
        stats = _decoded(key, value, storage).column_stats if value is not None else None
        if stats is None or stats.is_deleted or stats.value_count is None:
            out.append(None)
            continue
        lo = stats.min_value[1] if stats.min_value is not None else None
        hi = stats.max_value[1] if stats.max_value is not None else None
        usable = isinstance(lo, str) and isinstance(hi, str)  # Hudi assumes a string key (its NOTE)
        out.append(FileRange(int(stats.value_count), lo if usable else None, hi if usable else None))
    return out


def bloom_filters(
    storage: Storage, files: MetadataIndexFiles, base_files: list[BaseFile]
) -> list[BloomFilter | None]:
    """Each base file's bloom filter from the `bloom_filters` partition (None: no live record, an
    unreadable filter, or no partition)."""
    if files.bloom_filters is None:
        return [None] * len(base_files)
    keys = [bloom_filter_key(bf.partition_path, bf.name) for bf in base_files]
    out: list[BloomFilter | None] = []
    for key, value in zip(keys, _values(storage, files.bloom_filters, keys), strict=True):
        info = _decoded(key, value, storage).bloom_filter if value is not None else None
        if info is None or info.is_deleted or not info.bloom_filter:
            out.append(None)
            continue
        try:
            out.append(BloomFilter.from_footer(info.bloom_filter.decode("utf-8"), info.bloom_type))
        except (HoodieTableError, ValueError, UnicodeDecodeError):
            out.append(None)  # an unreadable filter only costs pruning: the footer's is read instead
    return out


def _decoded(key: str, value: bytes, storage: Storage) -> MetadataRecord:
    try:
        return decode_record(key.encode("utf-8"), value, f"metadata table of {storage.base_uri}")
    except CorruptMetadataRecord as e:
        raise HoodieTableError(str(e)) from e
