"""The latest file slice of a metadata-table file group (pure).

The metadata table is a merge-on-read table of its own (docs/hudi/metadata-table.md#layout): a
file group such as `files-0000-0` has HFile base files `<fileId>_<token>_<instant>.hfile`, written
by its compactions (and by Java's initialisation), and log files `.<fileId>_<baseInstant>.log.<v>_<token>`
appended after them.  The latest slice is the newest base file whose instant is completed on the
metadata timeline, with the log files named after that base instant; with no such base file, the
slice is the log files named after the partition's initialisation instant (`<t>010`, ...).
A base file of a compaction that has not completed is not part of any slice yet, as in Java's
file-system view.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hoodie_sink.table.format.file_group import LogFile
from hoodie_sink.table.format.metadata_layout import (
    metadata_base_file_name,
    metadata_file_id,
    parse_metadata_base_file_name,
)
from hoodie_sink.table.format.timeline.instant import COMMIT, DELTA_COMMIT
from hoodie_sink.table.format.timeline.timeline import Timeline


@dataclass(frozen=True)
class MetadataBaseFile:
    file_id: str
    write_token: str
    instant: str
    size: int = 0

    @property
    def name(self) -> str:
        return metadata_base_file_name(self.file_id, self.write_token, self.instant)

    @staticmethod
    def parse(name: str, size: int = 0) -> MetadataBaseFile | None:
        parts = parse_metadata_base_file_name(name)
        return MetadataBaseFile(*parts, size=size) if parts is not None else None


@dataclass
class MetadataSlice:
    """The base file (None: logs only) and the log files in version order."""

    file_id: str
    base_instant: str
    base_file: MetadataBaseFile | None = None
    log_files: list[LogFile] = field(default_factory=list)

    def next_log_version(self) -> int:
        return max((lf.version for lf in self.log_files), default=0) + 1


def file_ids_in(partition: str, names: list[tuple[str, int]]) -> list[str]:
    """The file groups that have a file in the partition's folder."""
    ids = set()
    for name, size in names:
        if name.startswith("."):
            lf = LogFile.parse(partition, name, size)
            if lf is not None:
                ids.add(lf.file_id)
        else:
            bf = MetadataBaseFile.parse(name, size)
            if bf is not None:
                ids.add(bf.file_id)
    return sorted(ids)


def committed_base_instants(md_timeline: Timeline, names: list[tuple[str, int]]) -> set[str]:
    """The instants a base file of the metadata table counts as committed at: the completed
    deltacommits and compaction commits of its active timeline, and any instant before that
    timeline starts (a compaction archived since; Java's file-system view counts it as committed:
    HoodieDefaultTimeline.containsOrBeforeTimelineStarts)."""
    completed = {
        i.timestamp for i in md_timeline.instants if i.is_completed and i.action in (DELTA_COMMIT, COMMIT)
    }
    first = min((i.timestamp for i in md_timeline.instants), default=None)
    if first is not None:
        for name, _ in names:
            bf = MetadataBaseFile.parse(name)
            if bf is not None and bf.instant < first:
                completed.add(bf.instant)
    return completed


def latest_slice(
    partition: str, file_id: str, names: list[tuple[str, int]], completed: set[str]
) -> MetadataSlice | None:
    """The latest slice of `file_id` from the names (and sizes) in its partition folder.
    `completed`: the instants a base file counts as committed at (`committed_base_instants`: a
    record-index file group without keys gets no base file at later compactions, so its latest one
    can be older than the active timeline).  None when the file group has no file at all (its
    partition was never initialised)."""
    bases = []
    logs = []
    for name, size in names:
        if name.startswith("."):
            lf = LogFile.parse(partition, name, size)
            if lf is not None and lf.file_id == file_id:
                logs.append(lf)
        else:
            bf = MetadataBaseFile.parse(name, size)
            if bf is not None and bf.file_id == file_id and bf.instant in completed:
                bases.append(bf)
    base = max(bases, key=lambda b: b.instant, default=None)
    if base is not None:
        base_instant = base.instant
    elif logs:
        base_instant = min(lf.base_instant for lf in logs)  # the initialisation's placeholder log
    else:
        return None
    in_slice = sorted(
        (lf for lf in logs if lf.base_instant == base_instant), key=lambda lf: (lf.version, lf.write_token)
    )
    return MetadataSlice(file_id, base_instant, base, in_slice)


def partition_slices(
    partition: str, names: list[tuple[str, int]], completed: set[str]
) -> list[MetadataSlice]:
    """The latest slice of every file group of a hashed partition (column_stats, bloom_filters,
    record_index), in file-group order: `<prefix><index %04d>-0` for index 0..n-1, n the number
    of file groups with a file (fixed at the partition's initialisation; Java's writers hash into
    the file groups that exist).  A gap in the numbering is an error: keys would hash elsewhere."""
    ids = file_ids_in(partition, names)
    slices = []
    for index in range(len(ids)):
        file_id = metadata_file_id(partition, index)
        current = latest_slice(partition, file_id, names, completed)
        if current is None:
            raise ValueError(
                f"metadata partition {partition}: file group {file_id} has no file though {len(ids)} exist"
            )
        slices.append(current)
    return slices
