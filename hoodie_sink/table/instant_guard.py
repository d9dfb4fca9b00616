"""Task-side check that the task's instant is still in flight.

A task attempt can outlive its write: Spark calls `abort` while cancelled tasks are still
running, and a speculative or zombie attempt may still be writing when the commit lands.
Such an attempt must not leave a file behind: before it starts a file, and again after it
has closed one, it checks that the instant's inflight file exists and that no completed
file does.  A file finished too late is deleted by the attempt that wrote it.
"""

from __future__ import annotations

from hoodie_sink.errors import HoodieCommitError
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.timeline.instant import COMPLETED, INFLIGHT, Instant
from hoodie_sink.table.timeline.timeline import META_DIR


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
