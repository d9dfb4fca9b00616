"""Heartbeats of running instants: `.hoodie/.heartbeat/<instant>` (Hudi's layout).

A clustering or a data write runs for minutes next to other writers that, at every write, roll
back what a failed writer left pending.  The heartbeat tells the two apart: whoever runs an
instant rewrites the file every `interval` seconds with the current time; an instant whose
heartbeat is older than `interval * (misses + 1)` (or absent) has lost its runner and may be
rolled back.  The time is read from the file's content, not its modification time, because
object stores do not let a writer set that (an empty file, as Apache Hudi writes, falls back
to the modification time).

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

from hoodie_sink.table.format.timeline.timeline import META_DIR
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
HEARTBEAT_DIR = f"{META_DIR}/.heartbeat"


def heartbeat_path(instant: str) -> str:
    return f"{HEARTBEAT_DIR}/{instant}"


def last_beat(storage: Storage, instant: str) -> float | None:
    """Seconds since the epoch of the instant's last heartbeat, or None if it has none."""
    try:
        raw = storage.read_bytes(heartbeat_path(instant))
    except (FileNotFoundError, OSError):
        return None
    text = raw.decode("ascii", "replace").strip()
    if not text:  # Apache Hudi's heartbeat: an empty file whose modification time is the beat
        try:
            mtime = storage.fs.get_file_info(storage.full(heartbeat_path(instant))).mtime
        except OSError:
            return None
        return mtime.timestamp() if mtime is not None else None
    try:
        return float(text)
    except ValueError:
        return None


def is_alive(
    storage: Storage, instant: str, interval_s: float, misses: int, now: float | None = None
) -> bool:
    return beat_is_alive(last_beat(storage, instant), interval_s, misses, now)


def beat_is_alive(beat: float | None, interval_s: float, misses: int, now: float | None = None) -> bool:
    """Whether a runner whose last beat is `beat` may still be at work.  A caller that decides on
    the beat and then claims it (a takeover) must read it once and pass it here, or a beat landing
    between two reads would be claimed as dead."""
    if beat is None or math.isnan(beat):  # absent or unreadable
        return False
    return (now if now is not None else time.time()) - beat <= interval_s * (misses + 1)


class Heartbeat:
    """Beats for one instant from a daemon thread while the `with` block runs.

    `owner=False`: a helper (a task of a data write) that beats while it works but leaves the
    file in place at the end, for the other tasks and the commit."""

    def __init__(self, storage: Storage, instant: str, interval_s: float, owner: bool = True):
        self.storage = storage
        self.instant = instant
        self.interval_s = max(0.05, interval_s)
        self.owner = owner
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        self.storage.write_atomic(heartbeat_path(self.instant), repr(time.time()).encode("ascii"))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.beat()
            except Exception as e:  # noqa: BLE001 - a missed beat is tolerated; the next one may succeed
                log.warning("hoodie: heartbeat of %s failed: %s", self.instant, e)

    def __enter__(self) -> Heartbeat:  # noqa: PYI034
        self.beat()
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
        for name in self.storage.list_names(HEARTBEAT_DIR):  # takeover claims of this instant
            if name.startswith(f"{self.instant}.takeover-"):
                self.storage.delete(f"{HEARTBEAT_DIR}/{name}")


def stop_heartbeat(storage: Storage, instant: str) -> None:
    """The instant is over (completed or rolled back): nobody beats for it any more."""
    storage.delete(heartbeat_path(instant))
