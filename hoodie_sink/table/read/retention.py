"""How far back a time-travel read can go once cleaning and archival have run.

A snapshot as of an instant needs, in every file group, the newest slice at or before it.  The
cleaner keeps those only from its earliest commit to retain (ECTR) on (KEEP_LATEST_FILE_VERSIONS
keeps no instant at all: nothing before that clean is guaranteed), and archival removes the
instants before the active timeline, whose replacecommits and pending writes a view needs.  A
read before that point would silently miss rows, so it is refused (no partial answers).
"""

from __future__ import annotations

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.clean_metadata import decode_clean_metadata
from hoodie_sink.table.format.timeline.instant import CLEAN
from hoodie_sink.table.format.timeline.timeline import META_DIR, Timeline, TimelineStore
from hoodie_sink.table.storage import Storage


def oldest_readable_instant(storage: Storage, timeline: Timeline) -> str | None:
    """The oldest instant a time-travel read may name, None when there is no limit."""
    oldest = None
    store = TimelineStore(storage)
    for clean in timeline.completed((CLEAN,)):
        try:
            md = decode_clean_metadata(storage.read_bytes(store.path(clean)))
        except (FileNotFoundError, ValueError) as e:
            raise HoodieTableError(
                f"Corrupt clean metadata {storage.full(store.path(clean))} ({e}): cannot tell which "
                "instants a time-travel read can still see."
            ) from e
        bound = md.get("earliestCommitToRetain") or clean.timestamp
        oldest = bound if oldest is None else max(oldest, bound)
    completed = timeline.completed()
    if completed and storage.list_names(f"{META_DIR}/archived"):
        oldest = completed[0].timestamp if oldest is None else max(oldest, completed[0].timestamp)
    return oldest


def check_time_travel(storage: Storage, timeline: Timeline, as_of: str) -> None:
    oldest = oldest_readable_instant(storage, timeline)
    if oldest is not None and as_of < oldest:
        raise HoodieTableError(
            f"Time travel to {as_of} on {storage.base_uri} is not possible: the table keeps file versions and "
            f"instants from {oldest} on (cleaning and archival removed older ones). Help: read as of {oldest} "
            "or later, or raise hoodie.cleaner.commits.retained / hoodie.keep.min.commits for the table's writers."
        )
