"""Instants: the timeline's file names, their actions and states, and instant times.

Pure: parsing and rendering only (docs/hudi/format.md#instant-times,
docs/hudi/format.md#timeline-file-names).  Layout version 1 keeps every state as its own file in
`.hoodie/`; the one irregular name is a commit's inflight `<t>.inflight`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

COMMIT = "commit"
DELTA_COMMIT = "deltacommit"
REPLACE_COMMIT = "replacecommit"
COMPACTION = "compaction"
LOG_COMPACTION = "logcompaction"
CLEAN = "clean"
ROLLBACK = "rollback"

REQUESTED = "requested"
INFLIGHT = "inflight"
COMPLETED = "completed"

# Actions whose completed instants carry data (what readers treat as commits).
WRITE_ACTIONS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)
_KNOWN_ACTIONS = (
    COMMIT, DELTA_COMMIT, REPLACE_COMMIT, COMPACTION, LOG_COMPACTION, CLEAN, ROLLBACK,
    "savepoint", "restore", "indexing", "schemacommit",
)  # fmt: skip

# 14 digits (seconds, before 0.10), 17 (milliseconds), or 20 and 23: the metadata table's own
# instants carry a 3-digit suffix after the time they follow, twice for a compaction scheduled
# right after an initialisation (`<t>010` + `001`) (docs/hudi/metadata-table-protocol.md#instants)
_NAME = re.compile(r"^(\d{14,17}|\d{20}|\d{23})\.([a-z]+)(?:\.(requested|inflight))?$")
_INSTANT_FMT = "%Y%m%d%H%M%S"


@dataclass(frozen=True, order=True)
class Instant:
    """One state of one action at one instant time.  Orders by (time, state rank)."""

    timestamp: str
    action: str
    state: str = COMPLETED

    @property
    def file_name(self) -> str:
        if self.state == COMPLETED:
            return f"{self.timestamp}.{self.action}"
        if self.action == COMMIT and self.state == INFLIGHT:
            return f"{self.timestamp}.inflight"
        return f"{self.timestamp}.{self.action}.{self.state}"

    @property
    def is_completed(self) -> bool:
        return self.state == COMPLETED

    def with_state(self, state: str) -> Instant:
        return Instant(self.timestamp, self.action, state)

    @staticmethod
    def parse(file_name: str) -> Instant | None:
        """Parse a timeline file name; None for files that are not instants."""
        m = _NAME.match(file_name)
        if not m:
            return None
        ts, action, state = m.group(1), m.group(2), m.group(3)
        if action == "inflight" and state is None:  # `<t>.inflight` is a commit's inflight
            return Instant(ts, COMMIT, INFLIGHT)
        if action not in _KNOWN_ACTIONS:
            return None
        return Instant(ts, action, state or COMPLETED)


# hoodie.table.timeline.timezone (Java's HoodieTimelineTimeZone): UTC, or LOCAL, the writing
# process's zone, which is also what a table without the property means (Java's default).
UTC_ZONE = "UTC"
LOCAL_ZONE = "LOCAL"
TIMELINE_ZONES = (UTC_ZONE, LOCAL_ZONE)


def format_instant(moment: datetime, zone: str = UTC_ZONE) -> str:
    """17-digit instant time, yyyyMMddHHmmssSSS, as wall time of the timeline's zone: UTC, or
    LOCAL (this process's zone, `TZ` honoured), as Java stamps instants of such a table."""
    moment = moment.astimezone(timezone.utc if zone == UTC_ZONE else None)
    return moment.strftime(_INSTANT_FMT) + f"{moment.microsecond // 1000:03d}"


def parse_instant(ts: str) -> datetime:
    """The instant time as a UTC moment (of a UTC timeline; a LOCAL one's wall time as if UTC)."""
    base = datetime.strptime(ts[:14], _INSTANT_FMT).replace(tzinfo=timezone.utc)
    millis = int(ts[14:17] or 0) if len(ts) > 14 else 0
    return base + timedelta(milliseconds=millis)


def next_instant_time(after: str | None, now: datetime | None = None, zone: str = UTC_ZONE) -> str:
    """An instant time later than `after` (every instant on the timeline) and close to now in the
    timeline's zone.  Writers of a LOCAL timeline must share a zone, as Java's must: a writer
    east of another would stamp its instants after the other's later ones."""
    now = now or datetime.now(timezone.utc)
    candidate = format_instant(now, zone)
    if after is not None and candidate <= after.ljust(17, "0"):
        # one millisecond after `after`, as wall time: the same in any zone
        candidate = format_instant(parse_instant(after.ljust(17, "0")) + timedelta(milliseconds=1))
    return candidate
