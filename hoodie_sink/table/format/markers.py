"""Write markers under `.hoodie/.temp/<instant>/` (docs/hudi/format.md#markers), of both kinds Java writes.

A marker is created before its data file, so after any failure the files an instant may
have left are known without listing the table: the commit deletes files of failed task
attempts, and a rollback deletes every file of a failed instant.

* Direct markers (ours, and Java's `hoodie.write.markers.type=DIRECT`): one empty file per
  data file, `<instant dir>/<partition>/<file>.marker.<IOType>`.
* Timeline-server markers (Java Spark's default, TIMELINE_SERVER_BASED): `MARKERS.type` holds
  the type's name and `MARKERS0`, `MARKERS1`, ... hold one marker name per line (Java
  `MarkerUtils.readTimelineServerBasedMarkersFromFileSystem`).  A rollback of a crashed Java
  write must read these, or it deletes none of that write's files.

Java's rollback parses every file in the marker folder as a marker, so nothing else may live
there: our own per-instant scratch files (claims, staged changes, key logs) go to
`work_dir(instant)` under `.hoodie/.aux/`, which `delete_markers` removes together with the
markers.  Why `.aux`: Java 0.15/1.x only ever reads named entries there (the bootstrap index
`.aux/.bootstrap`, Flink's `.aux/ckp_meta`) or lists its top level for timeline files
(`<instant>.compaction.requested` copies, which the archiver lists with the timeline's
extension filter and deletes by name); a sub-folder of ours is never listed, parsed or cleaned.
"""

from __future__ import annotations

import posixpath

from hoodie_sink.table.format.file_group import join_partition
from hoodie_sink.table.storage import Storage

TEMP_DIR = ".hoodie/.temp"
# Our scratch space, out of Java's sight (see the module doc): per-instant work folders and
# the streaming sink's state.
WORK_ROOT = ".hoodie/.aux/hoodie_sink"
CREATE = "CREATE"
MERGE = "MERGE"
APPEND = "APPEND"
_SUFFIX = ".marker."
MARKER_TYPE_FILE = "MARKERS.type"
_MARKERS_PREFIX = "MARKERS"
TIMELINE_SERVER_BASED = "TIMELINE_SERVER_BASED"


def marker_dir(instant: str) -> str:
    return f"{TEMP_DIR}/{instant}"


def work_dir(instant: str) -> str:
    """Where an instant's non-marker scratch files live (never inside its marker folder)."""
    return f"{WORK_ROOT}/{instant}"


def marker_path(instant: str, partition_path: str, file_name: str, io_type: str) -> str:
    return posixpath.join(
        marker_dir(instant), join_partition(partition_path, f"{file_name}{_SUFFIX}{io_type}")
    )


def create_marker(storage: Storage, instant: str, partition_path: str, file_name: str, io_type: str) -> None:
    storage.create_if_absent(marker_path(instant, partition_path, file_name, io_type))


def parse_marker(name: str) -> tuple[str, str] | None:
    """`<partition>/<file>.marker.<IOType>` -> (data file path, IO type); None if not a marker."""
    if _SUFFIX not in name:
        return None
    data, _, io_type = name.rpartition(_SUFFIX)
    return data, io_type


def is_timeline_server_based(storage: Storage, instant: str) -> bool:
    try:
        return storage.read_text(f"{marker_dir(instant)}/{MARKER_TYPE_FILE}").strip() == TIMELINE_SERVER_BASED
    except FileNotFoundError:
        return False


def list_marked_files(storage: Storage, instant: str) -> list[tuple[str, str]]:
    """(data file path relative to the base path, IO type) for every marker of `instant`,
    direct or timeline-server based."""
    if is_timeline_server_based(storage, instant):
        return _timeline_server_markers(storage, instant)
    return _direct_markers(storage, instant)


def _direct_markers(storage: Storage, instant: str) -> list[tuple[str, str]]:
    root = marker_dir(instant)
    out = []
    for rel in storage.walk_files(root):
        inner = rel[len(root) + 1 :] if rel.startswith(root + "/") else rel
        marker = parse_marker(inner)
        if marker is not None:
            out.append(marker)
    return out


def _timeline_server_markers(storage: Storage, instant: str) -> list[tuple[str, str]]:
    root = marker_dir(instant)
    seen: dict[str, tuple[str, str]] = {}
    for name in sorted(storage.list_names(root)):
        if not name.startswith(_MARKERS_PREFIX) or name == MARKER_TYPE_FILE:
            continue
        for line in storage.read_text(f"{root}/{name}").splitlines():
            marker = parse_marker(line.strip())
            if marker is not None:
                seen.setdefault(line.strip(), marker)
    return list(seen.values())


def delete_markers(storage: Storage, instant: str) -> None:
    """Remove the instant's marker folder and its work folder (the end of every instant)."""
    storage.delete_dir(marker_dir(instant))
    storage.delete_dir(work_dir(instant))
