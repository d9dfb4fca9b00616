"""The fence between a compaction's scheduling and a write's choice of file slices.

A compaction plan names the latest slice of each file group with logs; a write appends its
logs to the slice it finds latest when it starts.  A write whose instant appears after the
scheduler checked that no write is pending, but which chose its slices before the plan was
published, appends to a slice the plan compacts without its new log: when the compaction
commits, that update is lost.  Java 0.15 closes this window only with a lock provider (its
scheduling runs in a transaction that is a no-op in single-writer mode): see
docs/hudi/compaction-scheduling.md.

Ours, in any concurrency mode, with two flags on storage and no lock taken by writers:

* the scheduler holds `<aux>/compaction-schedule.lock` (service_lock.py, this name)
  from its check for pending writes until its plan is published;
* a write publishes its instant, then waits while that lock is held, then lists the timeline
  again and chooses its slices from that listing.

Either the scheduler's check sees the write's instant (and plans nothing), or the write's
instant appeared after the lock was taken, so the write's listing comes after the plan was
published (or abandoned) and the plan's file groups get their logs in the slice of the
compaction instant.  The write's instant must then be later than the plan's (Java's rule: no
pending write earlier than a compaction); one stamped before the plan appeared is started
again at a new time (coordinator.begin).
"""

from __future__ import annotations

import logging
import time

from hoodie_sink.table.format.heartbeat import SINK_AUX_DIR
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)

SCHEDULING_LOCK = "compaction-schedule"  # the service_lock name the scheduler holds
# service_lock.py's file for that name and its staleness rule (the holder renews the
# time written in it every STALE_SECONDS / 4; one older than STALE_SECONDS was left by a crash)
SCHEDULING_LOCK_PATH = f"{SINK_AUX_DIR}/{SCHEDULING_LOCK}.lock"
STALE_SECONDS = 60.0
_POLL_SECONDS = 0.02


def wait_while_compaction_is_scheduled(storage: Storage) -> None:
    """Return once no live scheduler holds the scheduling lock (at once, almost always: a
    scheduler holds it for one timeline listing and one listing of the file slices)."""
    waited = False
    while _held(storage):
        if not waited:
            log.info("hoodie: waiting for a compaction being scheduled on %s", storage.base_uri)
            waited = True
        time.sleep(_POLL_SECONDS)


def _held(storage: Storage) -> bool:
    try:
        raw = storage.read_bytes(SCHEDULING_LOCK_PATH)
    except FileNotFoundError:
        return False
    try:
        since = float(raw.decode("utf-8").split()[0])  # service_lock.py: "<time> <host> <pid>"
    except (ValueError, IndexError, UnicodeDecodeError):  # not the holder's time: judged by the file's age instead
        mtime = storage.fs.get_file_info(storage.full(SCHEDULING_LOCK_PATH)).mtime
        since = mtime.timestamp() if mtime is not None else 0.0
    return time.time() - since <= STALE_SECONDS
