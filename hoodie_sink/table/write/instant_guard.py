"""Task-side check that the task's instant is still in flight.

A task attempt can outlive its write: Spark calls `abort` while cancelled tasks are still
running, and a speculative or zombie attempt may still be writing when the commit lands.
Such an attempt must not leave a file behind: before it starts a file, and again after it
has closed one, it checks that the instant's inflight file exists and that no completed
file does.  A file finished too late is deleted by the attempt that wrote it.

Every file an attempt writes (data files, markers, claims, staged changes) is written
first and checked after (`wrote`): if the check passes, the write happened before the
instant ended, so the abort's sweep or the commit sees it; if it fails, the attempt removes
the file and the instant's temp folder itself, since nobody else will come back for them.
"""

from __future__ import annotations

from hoodie_sink.errors import HoodieCommitError
from hoodie_sink.table.format.markers import delete_markers
from hoodie_sink.table.format.timeline.instant import COMPLETED, INFLIGHT, Instant
from hoodie_sink.table.format.timeline.timeline import META_DIR
from hoodie_sink.table.storage import Storage


class InstantGuard:
    def __init__(self, storage: Storage, instant: str, action: str):
        self.storage = storage
        self.instant = instant
        self._inflight = f"{META_DIR}/{Instant(instant, action, INFLIGHT).file_name}"
        self._completed = f"{META_DIR}/{Instant(instant, action, COMPLETED).file_name}"

    def alive(self) -> bool:
        return self.storage.exists(self._inflight) and not self.storage.exists(self._completed)

    def check(self) -> None:
        if not self.alive():
            raise HoodieCommitError(
                f"Instant {self.instant} on {self.storage.base_uri} is no longer in flight (aborted, rolled "
                "back or committed without this task attempt); this attempt stops writing."
            )

    def wrote(self, *rels: str) -> None:
        """Call after writing `rels`: if the instant ended meanwhile, remove them (and the
        instant's temp folder, which the abort or commit has already swept) and stop."""
        if self.alive():
            return
        for rel in rels:
            self.storage.delete(rel)
        delete_markers(self.storage, self.instant)
        self.check()
