"""`timeline` (every instant with its states, `--archived` for the archived timeline) and
`commits` (completed writes with their totals; `commits show <instant>`: its write stats)."""

from __future__ import annotations

import argparse
from typing import Any

from hoodie_sink.cli.render import add_output_flags, emit
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.properties import read_table_config
from hoodie_sink.table.format.timeline.instant import COMPLETED, INFLIGHT, REQUESTED
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.services.archival import load_archived_timeline
from hoodie_sink.table.storage import Storage


def add_commands(sub: Any) -> None:
    p = sub.add_parser("timeline", help="instants of the table with their states")
    p.add_argument("path", help="table base path or URI")
    p.add_argument("--archived", action="store_true", help="the archived timeline instead of the active one")
    add_output_flags(p)
    p.set_defaults(run=run_timeline)
    p = sub.add_parser("commits", help="completed writes (commits show <instant>: its write stats)")
    p.add_argument("path", help="table base path or URI")
    p.add_argument("show", nargs="?", choices=["show"], help=argparse.SUPPRESS)
    p.add_argument("instant", nargs="?", help="with show: the instant whose write stats to list")
    add_output_flags(p)
    p.set_defaults(run=run_commits)


def open_table(path: str) -> Storage:
    storage = Storage(path)
    read_table_config(storage)  # a clear error when there is no table here
    return storage


def run_timeline(args: argparse.Namespace) -> int:
    storage = open_table(args.path)
    by_time: dict[tuple[str, str], set[str]] = {}
    if args.archived:
        for e in load_archived_timeline(storage):
            by_time.setdefault((e.instant.timestamp, e.instant.action), set()).add(e.instant.state)
    else:
        for i in ActiveTimeline.load(storage).instants:
            by_time.setdefault((i.timestamp, i.action), set()).add(i.state)
    rows = [
        {"instant": ts, "action": action, "state": _state(states),
         "requested": REQUESTED in states, "inflight": INFLIGHT in states, "completed": COMPLETED in states}
        for (ts, action), states in sorted(by_time.items())
    ]  # fmt: skip
    emit(args, rows, ["instant", "action", "state"])
    return 0


def _state(states: set[str]) -> str:
    return COMPLETED if COMPLETED in states else INFLIGHT if INFLIGHT in states else REQUESTED


def run_commits(args: argparse.Namespace) -> int:
    storage = open_table(args.path)
    timeline = ActiveTimeline.load(storage)
    if args.show:
        if not args.instant:
            raise HoodieTableError("commits show needs an instant time")
        match = [i for i in timeline.completed() if i.timestamp == args.instant]
        if not match:
            raise HoodieTableError(
                f"no completed write instant {args.instant} on the active timeline of {args.path}"
            )
        md = timeline.commit_metadata(match[0])
        rows = [
            {"partition": s.partition_path, "file_id": s.file_id, "path": s.path, "prev_commit": s.prev_commit,
             "rows": s.num_writes, "inserts": s.num_inserts, "updates": s.num_update_writes,
             "deletes": s.num_deletes, "bytes": s.file_size_in_bytes}
            for s in md.write_stats
        ]  # fmt: skip
        emit(args, rows)
        return 0
    rows = []
    for inst in timeline.completed():
        md = timeline.commit_metadata(inst)
        t = md.totals()
        rows.append({
            "instant": inst.timestamp, "action": inst.action, "operation": md.operation_type,
            "partitions": len(md.partition_to_write_stats()), "files": t["numFiles"],
            "files_added": sum(1 for s in md.write_stats if s.prev_commit in ("null", "")),
            "inserts": t["numInserts"], "updates": t["numUpdateWrites"], "deletes": t["numDeletes"],
            "bytes": t["totalWriteBytes"],
        })  # fmt: skip
    emit(args, rows)
    return 0
