"""Reads of a `Table` planned in one process and executed in others: a Spark query's driver plans
which files each task reads, its tasks read them (datasource/reader.py, stream_reader.py).

A plan is plain, picklable data (refs are strings, timelines plain `Timeline`s), so it travels to
the tasks inside Spark's input partitions; everything a task needs beyond it is on storage.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.client.table import Table
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline, Timeline
from hoodie_sink.table.read.cdc import CDC_SCHEMA, CdcTask, plan_cdc, read_cdc_task
from hoodie_sink.table.read.incremental import (
    IncrementalPlan,
    open_incremental,
    plan_incremental,
    read_in_range,
    touched_refs,
)
from hoodie_sink.table.read.snapshot import load_timeline, pinned_timeline
from hoodie_sink.table.read.stream_offsets import blocking_write, initial_instant, next_end

__all__ = [
    "CDC_SCHEMA",
    "ChangeRead",
    "IncrementalRead",
    "IncrementalPlan",
    "latest_write",
    "plan_changes",
    "plan_incremental_read",
    "read_changes",
    "read_incremental_refs",
    "stream_blocked_by",
    "stream_end",
    "stream_start",
    "timeline_of",
]


def timeline_of(table: Table, completed_by_ms: int | None = None, pinned: bool = False) -> Timeline:
    """The table's timeline now, or as of a completion cutoff (epoch ms: a commit completed later
    reads as pending); `pinned`: the same in every process that asks with the same cutoff
    (table/read/snapshot.py, `pinned_timeline`)."""
    if completed_by_ms is not None and pinned:
        return pinned_timeline(table.storage, completed_by_ms)
    return load_timeline(table.storage, completed_by_ms)


# ------------------------------------------------------------------------------ incremental


@dataclass(frozen=True)
class IncrementalRead:
    plan: IncrementalPlan
    schema: pa.Schema  # the table's latest: what the tasks return
    refs: tuple[str, ...]  # one per task: a base file path or a file slice ref


def plan_incremental_read(
    table: Table, begin: str, end: str | None, fallback_full_scan: bool = False, path_glob: str | None = None
) -> IncrementalRead:
    """An incremental read of (begin, end] reads the touched file groups as of its end instant,
    resolved now: a snapshot as of an instant does not change when later commits land, so the
    tasks read exactly what was planned (a stream's replayed micro-batch too)."""
    timeline = load_timeline(table.storage)
    plan = plan_incremental(table.storage, timeline, begin, end, fallback_full_scan)
    snap = open_incremental(table.storage, plan, timeline)
    refs = touched_refs(sorted(snap.read_refs()), plan, table.storage, path_glob) if plan.end else []
    return IncrementalRead(plan, snap.schema, tuple(refs))


def read_incremental_refs(
    table: Table, plan: IncrementalPlan, refs: tuple[str, ...], columns: list[str], whole_schema: bool = False
) -> Iterator[pa.RecordBatch]:
    """The planned refs' records in the plan's range.  `whole_schema`: `columns` are all the
    table's columns as a stream saw them when it started, and a column added since fails the read
    (dropping it would lose its values without a word; a restarted query sees it)."""
    snap = open_incremental(table.storage, plan)
    added = [c for c in snap.schema.names if c not in columns]
    if whole_schema and added:
        raise HoodieTableError(
            f"The schema of {table.storage.base_uri} gained column(s) {', '.join(added)} after this streaming query "
            "started (Spark fixes a stream's schema at its start). Help: restart the query; it resumes from its "
            "checkpoint and reads the new columns."
        )
    for ref in refs:
        yield from read_in_range(snap, ref, plan, columns).to_batches()


# ------------------------------------------------------------------------------ change feed


@dataclass(frozen=True)
class ChangeRead:
    """What one task of a change feed reads: a CdcTask, with the schema of the images and the
    timeline the driver planned on (every task sees the same instants)."""

    task: CdcTask
    schema: pa.Schema
    timeline: Timeline


def plan_changes(table: Table, begin: str, end: str | None) -> list[ChangeRead]:
    """A change feed of (begin, end]: one task per write and few file groups (table/read/cdc.py)."""
    timeline = ActiveTimeline.load(table.storage)  # each commit file read once while planning
    plan = plan_cdc(table.storage, timeline, begin, end)
    if not plan.instants:
        return []
    schema = table.open_snapshot(timeline=timeline).schema
    plain = Timeline(timeline.instants)  # pickles small
    return [ChangeRead(t, schema, plain) for t in plan.tasks()]


def read_changes(table: Table, read: ChangeRead, columns: list[str]) -> Iterator[pa.RecordBatch]:
    yield from (
        read_cdc_task(table.storage, read.task, read.schema, read.timeline).select(columns).to_batches()
    )


# ------------------------------------------------------------------------------ stream offsets


def stream_start(table: Table, start_offset: str) -> str:
    """A new stream's exclusive start instant: `earliest`, `latest` or an instant time."""
    return initial_instant(load_timeline(table.storage), start_offset)


def stream_end(
    table: Table, start: str, max_instants: int | None = None, cap: str | None = None, timeline=None
) -> str:
    """The end of the next micro-batch after `start` (table/read/stream_offsets.py)."""
    timeline = timeline if timeline is not None else load_timeline(table.storage)
    return next_end(table.storage, timeline, start, max_instants, cap)


def stream_blocked_by(table: Table, start: str, timeline=None) -> tuple[str | None, str | None]:
    """(the oldest write pending after `start`, the latest completed write) of the timeline."""
    timeline = timeline if timeline is not None else load_timeline(table.storage)
    latest = timeline.latest_completed()
    return blocking_write(table.storage, timeline, start), latest.timestamp if latest else None


def latest_write(table: Table) -> str | None:
    latest = load_timeline(table.storage).latest_completed()
    return latest.timestamp if latest else None
