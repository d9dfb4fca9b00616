"""`hoodie-sink compact P [--option k=v ...]`: finish pending compactions of a merge-on-read
table, then schedule and execute one, in a local thread pool or (--spark) as a Spark job; safe next
to a streaming writer of the table (its writes go to the new file slices)."""

from __future__ import annotations

import argparse
from typing import Any

from hoodie_sink.cli.args import options_of
from hoodie_sink.cli.render import emit, emit_one, seconds
from hoodie_sink.cli.services import add_job_parser, spark_session, table_of

COLUMNS = ["instant", "file_slices", "rows", "log_files", "log_bytes", "seconds"]


def add_commands(sub: Any) -> None:
    cp = add_job_parser(sub, "compact", "compact a merge-on-read table (pending plans first)",
                        "hoodie.parquet.max.file.size=134217728")  # fmt: skip
    cp.add_argument("--schedule-only", action="store_true", help="write the plan, do not execute it")
    cp.add_argument("--spark", action="store_true", help="execute as a Spark job (one task per file slice)")
    cp.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    table = table_of(args)  # checks every KEY=VALUE and option name before any work starts
    if args.schedule_only:
        instant = table.schedule_compaction()
        emit_one(args, {"scheduled": instant} if instant else {"result": "nothing to compact"})
        return 0
    if args.spark:
        from hoodie_sink.datasource.compaction import run_compaction

        with spark_session(args.master, "hoodie-sink compact") as spark:
            results = run_compaction(spark, args.path, options_of(args))
    else:
        results = table.compact()
    rows = [{"instant": r.instant, "file_slices": r.file_groups, "rows": r.rows, "log_files": r.log_files,
             "log_bytes": r.log_bytes, "seconds": seconds(r.duration_ms / 1000)} for r in results]  # fmt: skip
    emit(args, rows, COLUMNS, empty="nothing to compact")
    return 0
