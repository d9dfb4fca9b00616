"""The file-system view: which file slices make up the table as of an instant.

Listing is I/O; deciding visibility is pure and follows the readers' rules: a file is visible if
its instant is committed (completed, or older than the whole active timeline) and at or before
the query instant (docs/hudi/format.md#commit-protocol-and-visibility), and its file group is not
replaced by a completed replacecommit at or before the query instant
(docs/hudi/format.md#replace-commits).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.compaction_plan import decode_compaction_plan
from hoodie_sink.table.format.file_group import (
    BASE_FILE_EXT,
    PARTITION_METAFILE,
    BaseFile,
    FileGroup,
    FileSlice,
    Listing,
    LogFile,
    SliceFiles,
)
from hoodie_sink.table.format.metadata_listing import metadata_listing
from hoodie_sink.table.format.metadata_table import lists_through_metadata_table
from hoodie_sink.table.format.timeline.instant import (
    COMPACTION,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    REQUESTED,
    Instant,
)
from hoodie_sink.table.format.timeline.timeline import META_DIR, ActiveTimeline, Timeline, commit_metadata
from hoodie_sink.table.storage import Storage


def list_table_files(
    storage: Storage, partitions: list[str] | None = None, timeline: Timeline | None = None
) -> Listing:
    """The data files of the table (or of `partitions`): from Hudi's metadata table when the table
    keeps one (format/metadata_listing.py), else from a storage listing.  Which metadata blocks
    count depends on the whole data timeline as it is now, never on the view's: a time-travel view
    passes a timeline cut at its instant, and under it the tombstones of later cleans would not
    count, listing files those cleans deleted.  So the timeline is loaded here, unless `timeline`
    is an ActiveTimeline: that is always the whole timeline as loaded (cuts are plain Timelines),
    and a writer that just loaded it need not list `.hoodie/` again."""
    if lists_through_metadata_table(storage):
        whole = timeline if isinstance(timeline, ActiveTimeline) else Timeline.load(storage)
        return metadata_listing(storage, whole, partitions)
    return list_storage_files(storage, partitions)


def list_storage_files(storage: Storage, partitions: list[str] | None = None) -> Listing:
    """List data files below the base path (or only in `partitions`), skipping `.hoodie`.

    Which folders are partitions follows Hudi (FSUtils.getAllPartitionPaths), not folder-name
    rules: a folder holding `.hoodie_partition_metadata` is a partition whatever its name, e.g.
    `__HIVE_DEFAULT_PARTITION__`, where every key generator writes null and empty partition
    values.  Only folders with a hidden (`.`) segment, or a `_` segment (Spark's `_temporary`,
    ...) and no partition metadata, are skipped.
    """
    out = Listing()
    roots = partitions if partitions is not None else [""]
    files: list[tuple[str, int]] = []
    for root in roots:
        files.extend(storage.walk_file_sizes(root) if root else _walk_data(storage))
    marked = {posixpath.dirname(f) for f, _ in files if posixpath.basename(f).startswith(PARTITION_METAFILE)}
    # Sizes come with the listing (local disks, HDFS and object stores alike): no call per file.
    for rel, size in files:
        part, name = posixpath.split(rel)
        if not _is_partition(part, marked):
            continue
        if name.endswith(BASE_FILE_EXT) and not name.startswith("."):
            bf = BaseFile.parse(part, name, size)
            if bf is None:
                raise HoodieTableError(
                    f"Unexpected parquet file {storage.full(rel)} in the Hudi table: its name is not "
                    "<fileId>_<writeToken>_<instant>.parquet, which breaks every Hudi reader. "
                    "Help: move it out of the table directory."
                )
            out.base_files.append(bf)
            out.partitions.add(part)
        elif ".log." in name and name.startswith("."):
            lf = LogFile.parse(part, name, size)
            if lf is not None:
                out.log_files.append(lf)
                out.partitions.add(part)
    return out


def _is_partition(part: str, marked: set[str]) -> bool:
    if part in marked:
        return True
    segments = part.split("/") if part else []
    return not any(seg.startswith((".", "_")) for seg in segments)


def _walk_data(storage: Storage) -> Iterator[tuple[str, int]]:
    for info in storage.list_dir(""):
        name = info.base_name
        if name == META_DIR:
            continue
        if info.is_file:
            yield name, int(info.size or 0)
        else:
            yield from storage.walk_file_sizes(name)


def replacing_instants(storage: Storage, timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> the completed replacecommit that replaced the file group."""
    out: dict[tuple[str, str], str] = {}
    for inst in timeline.completed((REPLACE_COMMIT,)):
        for part, ids in (
            commit_metadata(storage, timeline, inst).partition_to_replace_file_ids or {}
        ).items():
            out.update(((part, fid), inst.timestamp) for fid in ids)
    return out


class FileSystemView:
    def __init__(self, storage: Storage, timeline: Timeline, listing: Listing):
        self.storage = storage
        self.timeline = timeline
        self.listing = listing
        self._replaced: dict[str, set[tuple[str, str]]] = {}

    @staticmethod
    def load(
        storage: Storage, timeline: Timeline | None = None, partitions: list[str] | None = None
    ) -> FileSystemView:
        timeline = timeline or Timeline.load(storage)
        return FileSystemView(storage, timeline, list_table_files(storage, partitions, timeline))

    def query_instant(self, as_of: str | None = None) -> str | None:
        latest = self.timeline.latest_completed()
        if latest is None:
            return None
        return min(as_of, latest.timestamp) if as_of else latest.timestamp

    def replaced_file_groups(self, as_of: str | None) -> set[tuple[str, str]]:
        """(partition, fileId) pairs replaced by completed replacecommits <= as_of."""
        key = as_of or ""
        if key not in self._replaced:
            out: set[tuple[str, str]] = set()
            for inst in self.timeline.completed((REPLACE_COMMIT,)):
                if as_of is not None and inst.timestamp > as_of:
                    continue
                md = commit_metadata(self.storage, self.timeline, inst)
                for part, ids in (md.partition_to_replace_file_ids or {}).items():
                    out.update((part, fid) for fid in ids)
            self._replaced[key] = out
        return self._replaced[key]

    def file_groups(
        self, as_of: str | None = None, partition_filter: Callable[[str], bool] | None = None
    ) -> list[FileGroup]:
        """Visible file groups with their committed slices, as of `as_of` (default: latest)."""
        q = self.query_instant(as_of)
        if q is None:
            return []
        replaced = self.replaced_file_groups(q)
        groups: dict[tuple[str, str], FileGroup] = {}

        def visible(ts: str, part: str, fid: str) -> bool:
            if ts > q or (part, fid) in replaced or not self.timeline.is_committed(ts):
                return False
            return partition_filter is None or partition_filter(part)

        slices: dict[tuple[str, str, str], FileSlice] = {}
        for bf in self.listing.base_files:
            if not visible(bf.instant, bf.partition_path, bf.file_id):
                continue
            key = (bf.partition_path, bf.file_id, bf.instant)
            prev = slices.get(key)
            if prev is not None and prev.base_file is not None:
                raise HoodieTableError(
                    f"Two committed base files for file group {bf.file_id} at instant {bf.instant} in "
                    f"{self.storage.full(bf.partition_path)}: {prev.base_file.name} and {bf.name}."
                )
            slices[key] = FileSlice(bf.partition_path, bf.file_id, bf.instant, base_file=bf)
        compacting = self.pending_compactions(q)
        for lf in sorted(self.listing.log_files):
            # logs written while a compaction is pending start the slice of the compaction instant
            if lf.base_instant in compacting:
                if (lf.partition_path, lf.file_id) in replaced or lf.base_instant > q:
                    continue
                if partition_filter is not None and not partition_filter(lf.partition_path):
                    continue
            elif not visible(lf.base_instant, lf.partition_path, lf.file_id):
                continue
            key = (lf.partition_path, lf.file_id, lf.base_instant)
            slices.setdefault(
                key, FileSlice(lf.partition_path, lf.file_id, lf.base_instant)
            ).log_files.append(lf)
        for (part, fid, _), sl in sorted(slices.items()):
            groups.setdefault((part, fid), FileGroup(part, fid)).slices.append(sl)
        return list(groups.values())

    def pending_compactions(self, as_of: str | None = None) -> set[str]:
        return {
            i.timestamp for i in self.timeline.pending((COMPACTION,)) if as_of is None or i.timestamp <= as_of
        }

    def read_slices(
        self, as_of: str | None = None, partition_filter: Callable[[str], bool] | None = None
    ) -> list[FileSlice]:
        """The slice a snapshot reads of every file group: its latest, merged with the slice before
        it while the latest is the (base-less) slice of a pending compaction, as Java's
        getLatestMergedFileSlicesBeforeOrOn does."""
        compacting = self.pending_compactions(self.query_instant(as_of))
        out = []
        for fg in self.file_groups(as_of, partition_filter):
            sl = fg.latest_slice
            if sl is None:
                continue
            if sl.base_file is None and sl.base_instant in compacting and len(fg.slices) > 1:
                prev = fg.slices[-2]
                sl = FileSlice(sl.partition_path, sl.file_id, prev.base_instant, base_file=prev.base_file,
                               log_files=prev.log_files + sl.log_files)  # fmt: skip
            out.append(sl)
        return out

    def latest_base_files(
        self, as_of: str | None = None, partition_filter: Callable[[str], bool] | None = None
    ) -> list[BaseFile]:
        out = []
        for fg in self.file_groups(as_of, partition_filter):
            for sl in reversed(fg.slices):
                if sl.base_file is not None:
                    out.append(sl.base_file)
                    break
        return out


def _compaction_targets(view: FileSystemView) -> dict[tuple[str, str], str]:
    """(partition, file id) -> the pending compaction whose plan holds the file group."""
    out: dict[tuple[str, str], str] = {}
    for ts in sorted(view.pending_compactions()):
        rel = f"{META_DIR}/{Instant(ts, COMPACTION, REQUESTED).file_name}"
        try:
            plan = decode_compaction_plan(view.storage.read_bytes(rel))
        except (FileNotFoundError, ValueError, KeyError) as e:
            raise HoodieTableError(
                f"The plan of pending compaction {ts} on {view.storage.base_uri} is unreadable ({e}): the file "
                "groups it compacts are unknown. Help: roll the compaction back with Apache Hudi."
            ) from e
        out.update(((op.partition_path, op.file_id), ts) for op in plan)
    return out


def _logs_with_deletes(view: FileSystemView) -> set[str]:
    """Paths of log files whose write reported deletes (numDeletes of its deltacommit)."""
    out: set[str] = set()
    for inst in view.timeline.completed((DELTA_COMMIT,)):
        for stat in commit_metadata(view.storage, view.timeline, inst).write_stats:
            if stat.num_deletes and ".log." in stat.path:
                out.add(stat.path)
    return out


def latest_slice_files(view: FileSystemView) -> tuple[SliceFiles, ...]:
    """The latest slice of every visible file group, with its log files and next log version.
    The versions of every log of the slice on storage count, committed or not: a version number
    is never reused, even one a failed write left behind."""
    versions: dict[tuple[str, str, str], int] = {}
    for lf in view.listing.log_files:
        key = (lf.partition_path, lf.file_id, lf.base_instant)
        versions[key] = max(versions.get(key, 0), lf.version)
    with_deletes = _logs_with_deletes(view)
    out = []
    targets = _compaction_targets(view)
    for sl in view.read_slices():
        # new logs go to the latest slice: for a file group in a pending compaction plan, the slice
        # of the compaction instant (Java's file-system view adds it, empty, to each such group)
        base_instant = targets.get((sl.partition_path, sl.file_id), sl.base_instant)
        out.append(
            SliceFiles(
                partition_path=sl.partition_path,
                file_id=sl.file_id,
                base_instant=base_instant,
                base_name=sl.base_file.name if sl.base_file is not None else None,
                log_names=tuple(lf.name for lf in sl.log_files),
                max_version=versions.get((sl.partition_path, sl.file_id, base_instant), 0),
                has_deletes=any(lf.path in with_deletes for lf in sl.log_files),
                compacting=base_instant != sl.base_instant,
            )
        )
    return tuple(out)
