"""`validate` (the table's invariants; exit 1 on a violation) and `rollback <instant>` (undo a
pending write whose writer is gone)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from hoodie_sink.cli.args import add_path
from hoodie_sink.cli.render import add_output_flags, emit, emit_one
from hoodie_sink.cli.timeline import open_table


def add_commands(sub: Any) -> None:
    p = sub.add_parser("validate", help="check the table's invariants (exit 1 on a violation)")
    add_path(p)
    p.add_argument("--global-keys", action="store_true", help="keys unique table-wide (GLOBAL_BLOOM index)")
    add_output_flags(p)
    p.set_defaults(run=run_validate)
    p = sub.add_parser("rollback", help="roll back a pending write instant whose writer is gone")
    add_path(p)
    p.add_argument("instant", help="the pending instant's time")
    add_output_flags(p)
    p.set_defaults(run=run_rollback)


def run_validate(args: argparse.Namespace) -> int:
    violations = open_table(args.path).validate(global_keys=args.global_keys)
    emit(args, [asdict(v) for v in violations], ["check", "subject", "detail"],
         title="" if args.json else f"{len(violations)} violation(s) in {args.path}")  # fmt: skip
    return 1 if violations else 0


def run_rollback(args: argparse.Namespace) -> int:
    done = open_table(args.path).rollback(args.instant)
    emit_one(args, {"rolled_back": done.instant, "action": done.action, "files_deleted": done.files_deleted})
    return 0
