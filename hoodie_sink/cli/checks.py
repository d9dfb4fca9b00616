"""`validate` (the table's invariants; exit 1 on a violation) and `rollback <instant>` (undo a
pending write whose writer is gone)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from hoodie_sink.cli.render import add_output_flags, emit, emit_one
from hoodie_sink.cli.timeline import open_table
from hoodie_sink.config import WriteConfig
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.heartbeat import is_alive
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.services.validation import validate_table
from hoodie_sink.table.write.rollback import rollback_instant


def add_commands(sub: Any) -> None:
    p = sub.add_parser("validate", help="check the table's invariants (exit 1 on a violation)")
    p.add_argument("path", help="table base path or URI")
    p.add_argument("--global-keys", action="store_true", help="keys unique table-wide (GLOBAL_BLOOM index)")
    add_output_flags(p)
    p.set_defaults(run=run_validate)
    p = sub.add_parser("rollback", help="roll back a pending write instant whose writer is gone")
    p.add_argument("path", help="table base path or URI")
    p.add_argument("instant", help="the pending instant's time")
    add_output_flags(p)
    p.set_defaults(run=run_rollback)


def run_validate(args: argparse.Namespace) -> int:
    violations = validate_table(open_table(args.path), global_keys=args.global_keys)
    emit(args, [asdict(v) for v in violations], ["check", "subject", "detail"],
         title="" if args.json else f"{len(violations)} violation(s) in {args.path}")  # fmt: skip
    return 1 if violations else 0


def run_rollback(args: argparse.Namespace) -> int:
    storage = open_table(args.path)
    timeline = ActiveTimeline.load(storage)
    states = timeline.states_of(args.instant)
    if not states:
        raise HoodieTableError(f"no instant {args.instant} on the active timeline of {args.path}")
    if any(s.is_completed for s in states):
        raise HoodieTableError(
            f"{states[0].action} {args.instant} is completed: only pending instants are rolled back here. Help: "
            "to undo completed commits, restore a savepoint (hoodie-sink savepoint / restore)"
        )
    cfg = WriteConfig(path=args.path)
    if is_alive(storage, args.instant, cfg.heartbeat_interval_ms / 1000, cfg.heartbeat_misses):
        raise HoodieTableError(
            f"{states[0].action} {args.instant} has a live heartbeat: its writer is still at work"
        )
    pending = max(states, key=lambda s: s.state == "inflight")
    deleted = rollback_instant(storage, pending, after=timeline.last_instant_time())
    emit_one(args, {"rolled_back": args.instant, "action": pending.action, "files_deleted": deleted})
    return 0
