"""Which metadata-table log blocks a reader applies (pure, given the two timelines).

Java's rule (HoodieTableMetadataUtil.getValidInstantTimestamps and isValidInstant at
release-0.15.0; docs/hudi/metadata-table-protocol.md#what-readers-trust): a block counts if its instant is
- a completed instant of the data table's active timeline (any action), or
- a completed metadata deltacommit with a 20-digit time whose suffix is one of the operation
  suffixes (001-006) or an initialisation suffix (010 and above), or
- an instant rolled back by a completed data rollback or restore newer than the earliest of the
  above, or
- a completed rollback or restore of the metadata table itself, or
- a completed metadata deltacommit whose time starts with `00000000000000` (initialisation of an
  empty table);
and it is not newer than the latest completed instant of the metadata table.  So a metadata
deltacommit whose data instant has not completed is invisible, and one whose data instant has been
archived from the active timeline is too: hence data archival waits for the metadata table's
compaction.

Java's log scanner adds a gate of the metadata table's own timeline (`committed_in_metadata`): a
block counts only if its metadata deltacommit completed (or is older than the metadata table's
active timeline).
"""

from __future__ import annotations

from collections.abc import Callable

from hoodie_sink.table.format.timeline.instant import COMMIT, DELTA_COMMIT, ROLLBACK, WRITE_ACTIONS, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline

RESTORE = "restore"
NO_INSTANT = "00000000000000"
OPERATION_SUFFIXES = ("001", "002", "003", "004", "005", "006")
INIT_SUFFIX = 10
MILLIS_LENGTH = 17


def is_suffixed_deltacommit(instant: Instant) -> bool:
    """A metadata deltacommit that needs no data instant: an operation or initialisation suffix."""
    ts = instant.timestamp
    if instant.action != DELTA_COMMIT or len(ts) != MILLIS_LENGTH + 3:
        return False
    suffix = ts[-3:]
    return suffix in OPERATION_SUFFIXES or int(suffix) >= INIT_SUFFIX


def valid_instants(
    data: Timeline, metadata: Timeline, rolled_back_by: Callable[[Instant], list[str]]
) -> set[str]:
    """The instant times whose blocks a reader applies.  `rolled_back_by(i)`: the instants a
    completed data rollback or restore `i` undid (read from its metadata by the caller)."""
    valid = {i.timestamp for i in data.instants if i.is_completed}
    valid.update(i.timestamp for i in metadata.instants if i.is_completed and is_suffixed_deltacommit(i))
    earliest = min(valid, default=NO_INSTANT)
    for inst in data.instants:
        if inst.is_completed and inst.action in (ROLLBACK, RESTORE) and inst.timestamp > earliest:
            valid.update(rolled_back_by(inst))
    valid.update(i.timestamp for i in metadata.instants if i.is_completed and i.action in (ROLLBACK, RESTORE))
    valid.update(
        i.timestamp
        for i in metadata.instants
        if i.is_completed and i.action == DELTA_COMMIT and i.timestamp.startswith(NO_INSTANT)
    )
    return valid


def committed_in_metadata(metadata: Timeline) -> Callable[[str], bool]:
    """Whether a block of instant `t` is committed in the metadata table itself: Java's log scanner
    (AbstractHoodieLogRecordReader.scanInternalV1 at release-0.15.0, table version 6) skips a data
    block unless its instant is a completed commit, deltacommit or replacecommit of the metadata
    timeline, or older than its first one (archived), and not pending there.
    valid_instants alone is not enough: it counts an instant that a completed data rollback rolled
    back, and Java's rollback of a metadata deltacommit that never completed (a writer killed after
    the metadata log file and before its deltacommit completed) removes the deltacommit but leaves
    the log file, finding no markers: without this gate our listing took that block's files
    (deleted by the data rollback) as live, where Java's did not (issue 28's kill -9 interop test)."""
    completed = metadata.completed_times()
    first = min(completed, default=None)
    pending = {i.timestamp for i in metadata.instants if i.action in WRITE_ACTIONS and not i.is_completed}
    pending -= completed

    def committed(instant: str) -> bool:
        if instant in pending:
            return False
        return instant in completed or (first is not None and instant < first)

    return committed


def latest_completed_time(metadata: Timeline) -> str | None:
    """Blocks newer than this are ignored (Java scans up to the latest completed metadata instant)."""
    return max((i.timestamp for i in metadata.instants if i.is_completed), default=None)


def latest_compaction_time(metadata: Timeline) -> str | None:
    """The latest completed compaction of the metadata table (it completes as a `commit`): data
    instants older than it may be archived (Java's HoodieTimelineArchiver)."""
    return max(
        (i.timestamp for i in metadata.instants if i.is_completed and i.action == COMMIT), default=None
    )
