"""How versions of one metadata-table record combine (docs/hudi/metadata-table.md#merge-rules),
as HoodieMetadataPayload.preCombine does it.

Readers fold a key's versions in two stages: first the log blocks of the file slice, oldest
instant first (an MDT delete drops what came before it, a record after a delete starts afresh),
then the result onto the base file's record (a delete in the logs removes the key).  The `files`
records (types 1 and 2) are merged so that the order of writes barely matters: sizes only grow,
and a tombstone drops the entry it meets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from hoodie_sink.table.format.metadata_keys import (
    TYPE_BLOOM_FILTER,
    TYPE_COLUMN_STATS,
    TYPE_FILE_LIST,
    TYPE_PARTITION_LIST,
    TYPE_RECORD_INDEX,
)
from hoodie_sink.table.format.metadata_records import ColumnStatsInfo, FileInfo, MetadataRecord, StatValue

# one version of a key in a log: a record, or None for an MDT delete (a delete block's key)
Version = MetadataRecord | None


def merge_file_infos(older: Mapping[str, FileInfo], newer: Mapping[str, FileInfo]) -> dict[str, FileInfo]:
    """Types 1 and 2: the union of both maps.  For a name in both, a newer tombstone drops it (and
    stays a tombstone if the older entry was one too); otherwise the larger size, not deleted.  A
    tombstone meeting no entry stays, so that it can cancel the base file's entry later."""
    out = dict(older)
    for name, new in newer.items():
        old = out.get(name)
        if old is None:
            out[name] = new
        elif new.is_deleted:
            if old.is_deleted:
                out[name] = new
            else:
                del out[name]
        else:
            out[name] = FileInfo(max(old.size, new.size), False)
    return out


def merge_column_stats(older: ColumnStatsInfo, newer: ColumnStatsInfo) -> ColumnStatsInfo:
    """Type 3: a tombstone on either side makes the newer one win; otherwise min of the minimums,
    max of the maximums, and the counts and sizes summed."""
    if (older.file_name, older.column_name) != (newer.file_name, newer.column_name):
        raise ValueError(
            f"column statistics of {older.file_name}/{older.column_name} and {newer.file_name}/"
            f"{newer.column_name} share a key"
        )
    if older.is_deleted or newer.is_deleted:
        return newer
    return replace(
        newer,
        min_value=_extreme(older.min_value, newer.min_value, min),
        max_value=_extreme(older.max_value, newer.max_value, max),
        value_count=_sum(older.value_count, newer.value_count),
        null_count=_sum(older.null_count, newer.null_count),
        total_size=_sum(older.total_size, newer.total_size),
        total_uncompressed_size=_sum(older.total_uncompressed_size, newer.total_uncompressed_size),
    )


def _extreme(a: StatValue | None, b: StatValue | None, pick: Any) -> StatValue | None:
    if a is None or b is None:
        return b if a is None else a
    if a[0] != b[0]:
        raise ValueError(f"column statistics of one column as {a[0]} and {b[0]}: they do not compare")
    return (a[0], pick(a[1], b[1]))


def _sum(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def merge_records(older: MetadataRecord, newer: MetadataRecord) -> MetadataRecord:
    """`newer` combined onto `older`, by the rule of their type (bloom filters and record-index
    entries: the newer one replaces the older)."""
    if older.key != newer.key or older.type != newer.type:
        raise ValueError(
            f"metadata records of key '{older.key}' (type {older.type}) and '{newer.key}' (type {newer.type}) "
            "do not merge"
        )
    if newer.type in (TYPE_PARTITION_LIST, TYPE_FILE_LIST):
        files = merge_file_infos(older.files or {}, newer.files or {})
        return replace(newer, files=files)
    if newer.type == TYPE_COLUMN_STATS:
        if older.column_stats is None or newer.column_stats is None:
            raise ValueError(f"column-stats record '{newer.key}' without its statistics")
        return replace(newer, column_stats=merge_column_stats(older.column_stats, newer.column_stats))
    if newer.type in (TYPE_BLOOM_FILTER, TYPE_RECORD_INDEX):
        return newer
    raise ValueError(f"metadata record '{newer.key}' has type {newer.type}; table version 6 has 1 to 5")


_ABSENT = object()


def merge_log_versions(versions: Iterable[Version]) -> Version | object:
    """The logs' versions of one key folded, oldest first: a record, None (deleted last), or
    `NOT_IN_LOGS` when there were none."""
    merged: Version | object = _ABSENT
    for version in versions:
        if version is None or merged is _ABSENT or merged is None:
            merged = version
        else:
            assert isinstance(merged, MetadataRecord)
            merged = merge_records(merged, version)
    return merged


NOT_IN_LOGS = _ABSENT


def merge_slice(base: MetadataRecord | None, log_versions: Iterable[Version]) -> MetadataRecord | None:
    """A key's value in a file slice: its base-file record (or None), then its log versions in
    instant order (None for a delete).  None: the key is absent or deleted."""
    logs = merge_log_versions(log_versions)
    if logs is _ABSENT:
        return base
    if logs is None:
        return None
    assert isinstance(logs, MetadataRecord)
    return logs if base is None else merge_records(base, logs)


def live_files(record: MetadataRecord | None) -> dict[str, int]:
    """The entries of a merged type-1 or type-2 record that are not deleted: name -> size."""
    if record is None or record.files is None:
        return {}
    return {name: info.size for name, info in record.files.items() if not info.is_deleted}
