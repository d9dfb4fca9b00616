"""Where a streaming read of a table stands: its offsets are completed write instants (Hudi's
HoodieStreamSource, docs/hudi/services.md#streaming-source), and each micro-batch is the incremental
query of the range between two of them.  Pure planning over a timeline; the Spark adapter keeps the
offsets in Spark's checkpoint, which is what makes a restarted query resume exactly where it
stopped.

A range may only end where nothing older can still appear: a write pending at an instant older
than a completed one (a "hole") would later add rows with a commit time the stream has passed,
so the end stops before the oldest pending write (Hudi's streaming default, BLOCK).  A pending
clustering adds no commit time (its rows keep theirs) and does not block.
"""

from __future__ import annotations

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.timeline.instant import WRITE_ACTIONS
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.read.incremental import oldest_pending_write
from hoodie_sink.table.storage import Storage

EARLIEST = "000"
START_OFFSET = "hoodie.datasource.streaming.startOffset"


def initial_instant(timeline: Timeline, start_offset: str) -> str:
    """The exclusive start of a new stream: `earliest` (every write), `latest` (only writes that
    complete from now on) or an instant time (writes after it)."""
    value = start_offset.strip().lower()
    if value == "earliest":
        return EARLIEST
    if value == "latest":
        latest = timeline.latest_completed()
        return latest.timestamp if latest else EARLIEST
    if value.isdigit() and len(value) in (14, 17):
        return value
    raise HoodieConfigError(
        f"Option '{START_OFFSET}' got '{start_offset}'; accepted: earliest, latest or an instant time "
        "(yyyyMMddHHmmss or yyyyMMddHHmmssSSS)."
    )


def blocking_write(storage: Storage, timeline: Timeline, after: str) -> str | None:
    """The instant of the oldest write pending after `after` that may still add rows."""
    inst = oldest_pending_write(storage, timeline, after)
    return inst.timestamp if inst is not None else None


def next_end(
    storage: Storage, timeline: Timeline, start: str, max_instants: int | None = None, cap: str | None = None
) -> str:
    """The end of the next micro-batch after `start`: the newest completed write that has no
    pending write before it, at most `max_instants` writes on and not past `cap` (a
    Trigger.AvailableNow query's target); `start` itself when there is nothing to read."""
    block = blocking_write(storage, timeline, start)
    ready = [
        i.timestamp
        for i in timeline.completed(WRITE_ACTIONS)
        if i.timestamp > start
        and (block is None or i.timestamp < block)
        and (cap is None or i.timestamp <= cap)
    ]
    if max_instants is not None:
        ready = ready[:max_instants]
    return ready[-1] if ready else start
