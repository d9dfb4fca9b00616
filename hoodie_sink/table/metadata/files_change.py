"""What one data-table action changes in the file listing: the `files` partition's update (pure).

Hudi's rules (HoodieTableMetadataUtil.convertMetadataToFilesPartitionRecords and its clean,
rollback and restore siblings at release-0.15.0; docs/hudi/metadata-table-protocol.md#files-records):
- a commit, deltacommit, replacecommit or compaction commit adds each file its write stats name,
  with the size after the write (the largest, when stats repeat a file); replaced file groups
  stay listed until a clean deletes their files;
- a clean removes the files it deleted;
- every change that adds files names the partitions it touched, so the partition list grows.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.format.metadata_records import MetadataRecord, file_list_record, partition_list_record


@dataclass
class FilesChange:
    """Files added (partition -> file name -> size) and removed (partition -> file names).
    Partition paths as the data table writes them ("" for a non-partitioned table)."""

    added: dict[str, dict[str, int]] = field(default_factory=dict)
    removed: dict[str, set[str]] = field(default_factory=dict)

    def add(self, partition: str, name: str, size: int) -> None:
        files = self.added.setdefault(partition, {})
        files[name] = max(size, files.get(name, 0))

    def remove(self, partition: str, name: str) -> None:
        self.removed.setdefault(partition, set()).add(name)

    @property
    def touched_partitions(self) -> set[str]:
        return set(self.added) | set(self.removed)

    def is_empty(self) -> bool:
        return not self.added and not self.removed

    def records(self) -> list[MetadataRecord]:
        """The `files` partition's records of this change: the partition list when files were
        added (the partitions touched), then one file-list record per partition that has files to
        add or remove (docs/hudi/metadata-table-protocol.md#files-records)."""
        out = []
        if self.added:
            out.append(partition_list_record(sorted(self.added)))
        for partition in sorted(self.touched_partitions):
            added, removed = self.added.get(partition, {}), self.removed.get(partition, set())
            if added or removed:
                out.append(file_list_record(partition, added, sorted(removed)))
        return out


def of_commit(md: CommitMetadata) -> FilesChange:
    """A commit's, deltacommit's, replacecommit's or compaction commit's additions.  A stat's path
    is relative to the base path; the listing keys files by name within their partition."""
    change = FilesChange()
    for stat in md.write_stats:
        if not stat.path:
            continue  # a delete-only stat of a file group with nothing written
        change.add(stat.partition_path, posixpath.basename(stat.path), stat.file_size_in_bytes)
        cdc = stat.extra.get("cdcStats") or {}
        for path, size in cdc.items():
            change.add(stat.partition_path, posixpath.basename(path), int(size))
    for partition in md.partition_to_write_stats():
        change.added.setdefault(partition, {})
    return change


def of_deleted_files(paths: Iterable[str]) -> FilesChange:
    """A clean's (or a rollback's) removals, from paths relative to the base path."""
    change = FilesChange()
    for path in paths:
        partition, name = posixpath.split(path)
        change.remove(partition, name)
    return change


def of_added_files(files: Iterable[tuple[str, int]]) -> FilesChange:
    """Files appended by a rollback (its command-block log files), as (relative path, size)."""
    change = FilesChange()
    for path, size in files:
        partition, name = posixpath.split(path)
        change.add(partition, name, size)
    return change
