"""`timeline` (every instant with its states, `--archived` for the archived timeline) and
`commits` (completed writes with their totals; `commits <instant>`, or `commits show <instant>`:
its write stats)."""

from __future__ import annotations

import argparse
from typing import Any

from hoodie_sink.cli.args import add_path
from hoodie_sink.cli.render import add_output_flags, emit
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.client.table import Table


def add_commands(sub: Any) -> None:
    p = sub.add_parser("timeline", help="instants of the table with their states")
    add_path(p)
    p.add_argument("--archived", action="store_true", help="the archived timeline instead of the active one")
    add_output_flags(p)
    p.set_defaults(run=run_timeline)
    p = sub.add_parser("commits", help="completed writes (commits P <instant>: its write stats)",
                       usage="%(prog)s [-h] [--json] path [[show] instant]")  # fmt: skip
    add_path(p)
    p.add_argument("rest", nargs="*", metavar="[show] instant", help="the instant whose write stats to list")
    add_output_flags(p)
    p.set_defaults(run=run_commits)


def open_table(path: str) -> Table:
    return Table(path)  # a clear error when there is no table here


def run_timeline(args: argparse.Namespace) -> int:
    rows = [
        {"instant": h.instant, "action": h.action, "state": h.state,
         "requested": h.requested, "inflight": h.inflight, "completed": h.completed}
        for h in open_table(args.path).history(archived=args.archived)
    ]  # fmt: skip
    emit(args, rows, ["instant", "action", "state"])
    return 0


def _instant_asked(args: argparse.Namespace) -> str | None:
    rest = list(args.rest)
    if rest and rest[0] == "show":
        rest.pop(0)
        if not rest:
            raise HoodieTableError("commits show needs an instant time")
    if len(rest) > 1:
        args.path_parser.error(f"commits takes one instant, got {' '.join(rest)}")
    return rest[0] if rest else None


def run_commits(args: argparse.Namespace) -> int:
    instant = _instant_asked(args)
    table = open_table(args.path)
    if instant is not None:
        md = table.commit(instant).metadata
        rows = [
            {"partition": s.partition_path, "file_id": s.file_id, "path": s.path, "prev_commit": s.prev_commit,
             "rows": s.num_writes, "inserts": s.num_inserts, "updates": s.num_update_writes,
             "deletes": s.num_deletes, "bytes": s.file_size_in_bytes}
            for s in md.write_stats
        ]  # fmt: skip
        emit(args, rows)
        return 0
    rows = []
    for commit in table.commits():
        md = commit.metadata
        t = md.totals()
        rows.append({
            "instant": commit.instant.timestamp, "action": commit.instant.action, "operation": md.operation_type,
            "partitions": len(md.partition_to_write_stats()), "files": t["numFiles"],
            "files_added": sum(1 for s in md.write_stats if s.prev_commit in ("null", "")),
            "inserts": t["numInserts"], "updates": t["numUpdateWrites"], "deletes": t["numDeletes"],
            "bytes": t["totalWriteBytes"],
        })  # fmt: skip
    emit(args, rows)
    return 0
