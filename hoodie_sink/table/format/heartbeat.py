"""Heartbeats of running instants: `.hoodie/.heartbeat/<instant>`, as Apache Hudi keeps them.

A clustering or a data write runs for minutes next to other writers that, at every write, roll
back what a failed writer left pending.  The heartbeat tells the two apart, the same way for us
and for Java (HoodieHeartbeatClient, used when hoodie.write.concurrency.mode is optimistic and
failed writes are cleaned LAZY): whoever runs an instant re-creates the file, empty, every
`hoodie.client.heartbeat.interval_in_ms`; the beat is the file's modification time (an object
store's upload time); an instant whose file is absent or older than `interval * misses`
(`hoodie.client.heartbeat.tolerable.misses`, Java's `isHeartbeatExpired`) has lost its runner
and may be rolled back.  The file goes when the instant completes or is rolled back.

Java lists the folder and takes every name in it for an instant (`getAllExistingHeartbeatInstants`,
`cleanExpiredHeartbeats`), so nothing else is written there: a beat is a plain overwrite (no temp
file beside it) and locks and takeover claims live in `SINK_AUX_DIR`, a folder no Java code reads.

A data write has no long-lived process of its own (Spark's driver-side Python workers come and
go): its heartbeat is kept by whoever works on it at the moment -- `begin` beats first, every
task beats while it writes (`owner=False`: a task leaves the file to the others), the commit
beats while it publishes and removes the file when done; `abort` removes it too.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from hoodie_sink.table.format.markers import WORK_ROOT
from hoodie_sink.table.format.timeline.timeline import META_DIR
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
HEARTBEAT_DIR = f"{META_DIR}/.heartbeat"
# Our own coordination files (locks, takeover claims): beside the writes' scratch folders under
# `.aux/`, which Java never lists.
SINK_AUX_DIR = WORK_ROOT
TAKEOVER_DIR = f"{SINK_AUX_DIR}/takeover"  # claims of a dead runner's instant (takeover_claim_path)


def heartbeat_path(instant: str) -> str:
    return f"{HEARTBEAT_DIR}/{instant}"


def takeover_claim_path(instant: str, beat: float | None) -> str:
    """One claim per dead heartbeat: the first runner to create it takes the instant over."""
    return f"{TAKEOVER_DIR}/{instant}-{beat!r}"


def last_beat(storage: Storage, instant: str) -> float | None:
    """Seconds since the epoch of the instant's last heartbeat (the file's modification time,
    as Java reads it), or None if it has none.  Where modification times are coarse (S3: whole
    seconds) the beat may have come up to that much later than it says: the latest such time is
    taken, so a live writer is never judged dead for the rounding (sub-second intervals included)."""
    try:
        mtime = storage.fs.get_file_info(storage.full(heartbeat_path(instant))).mtime
    except (FileNotFoundError, OSError):
        return None
    return mtime.timestamp() + storage.mtime_resolution_s if mtime is not None else None


def is_alive(
    storage: Storage, instant: str, interval_s: float, misses: int, now: float | None = None
) -> bool:
    return beat_is_alive(last_beat(storage, instant), interval_s, misses, now)


def beat_is_alive(beat: float | None, interval_s: float, misses: int, now: float | None = None) -> bool:
    """Whether a runner whose last beat is `beat` may still be at work: Java's rule, expired once
    more than `interval_s * misses` has passed.  A caller that decides on the beat and then claims
    it (a takeover) must read it once and pass it here, or a beat landing between two reads would
    be claimed as dead."""
    if beat is None or math.isnan(beat):  # absent: Java reads time 0, long expired
        return False
    return (now if now is not None else time.time()) - beat <= interval_s * misses


def clustering_runner_gone(storage: Storage, instant: str, interval_s: float, misses: int) -> bool:
    """Whether a writer may roll back a pending clustering.  Our runners beat from the plan to
    the commit, and a dead one leaves its expired heartbeat behind.  Java's (0.15) do not beat
    for a clustering, and Java's writers never roll a pending clustering back (only the next
    clustering run re-executes it): so an absent heartbeat is a Java clustering, perhaps at
    work, or one completed meanwhile, and is left to its runner."""
    beat = last_beat(storage, instant)
    return beat is not None and not beat_is_alive(beat, interval_s, misses)


class Heartbeat:
    """Beats for one instant from a daemon thread while the `with` block runs.

    `owner=False`: a helper (a task of a data write) that beats while it works but leaves the
    file in place at the end, for the other tasks and the commit."""

    def __init__(
        self,
        storage: Storage,
        instant: str,
        interval_s: float,
        owner: bool = True,
        running: Callable[[], bool] | None = None,
    ):
        self.storage = storage
        self.instant = instant
        self.interval_s = max(0.05, interval_s)
        self.owner = owner
        self.running = running  # asked before every beat: False ends the beating for good
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        # Empty, as Java's: the modification time is the beat.  A plain overwrite, not
        # write_atomic, whose temp file Java would list as an instant.
        self.storage.write_bytes(heartbeat_path(self.instant), b"")

    def _beat_if_running(self) -> bool:
        """One beat, unless the instant has ended; False once it has."""
        if self.running is not None and not self.running():
            return False
        self.beat()
        if self.running is not None and not self.running():
            # the instant ended (commit or abort, maybe in another process) between the
            # check and the beat, after its heartbeat was deleted: take the beat back
            self.storage.delete(heartbeat_path(self.instant))
            return False
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                if not self._beat_if_running():
                    return
            except Exception as e:  # noqa: BLE001 - a missed beat is tolerated; the next one may succeed
                log.warning("hoodie: heartbeat of %s failed: %s", self.instant, e)

    def __enter__(self) -> Heartbeat:  # noqa: PYI034
        # the first beat asks `running` too: a task that starts (or is retried) after its write
        # was aborted must not bring back the heartbeat the abort deleted
        if not self._beat_if_running():
            return self
        self._thread = threading.Thread(
            target=self._run, name=f"hoodie-heartbeat-{self.instant}", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self.owner:
            return
        self.storage.delete(heartbeat_path(self.instant))
        for name in self.storage.list_names(TAKEOVER_DIR):  # takeover claims of this instant
            if name.startswith(f"{self.instant}-"):
                self.storage.delete(f"{TAKEOVER_DIR}/{name}")


# Keepers started in this process (keep_beating), by (table, instant).
_KEEPERS: dict[tuple[str, str], Heartbeat] = {}
_KEEPERS_LOCK = threading.Lock()


def keep_beating(storage: Storage, instant: str, interval_s: float, running: Callable[[], bool]) -> None:
    """Beat for the instant from a daemon thread of this process until `stop_heartbeat` (here) or
    until `running()` says it is over (completed or aborted by another process: a Spark batch
    write begins in one driver-side Python worker and commits in another).  `running` is asked
    before and after every beat, and a beat that lands after the instant ended is deleted again."""
    keeper = Heartbeat(storage, instant, interval_s, owner=False, running=running)
    with _KEEPERS_LOCK:
        old = _KEEPERS.pop((storage.base_uri, instant), None)
        _KEEPERS[(storage.base_uri, instant)] = keeper
    if old is not None:
        old.__exit__()
    keeper.__enter__()


def release_heartbeat(storage: Storage, instant: str) -> None:
    """Stop this process's keeper of the instant, if any, and leave its file to expire."""
    with _KEEPERS_LOCK:
        keeper = _KEEPERS.pop((storage.base_uri, instant), None)
    if keeper is not None:
        keeper.__exit__()  # joined: no beat of ours lands after this returns


def stop_heartbeat(storage: Storage, instant: str) -> None:
    """The instant is over (completed or rolled back): nobody beats for it any more (Java's
    HoodieHeartbeatClient.stop deletes the file too)."""
    release_heartbeat(storage, instant)
    storage.delete(heartbeat_path(instant))
