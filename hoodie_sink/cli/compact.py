"""`hoodie-sink compact --path P [--option k=v ...]`: finish pending compactions of a merge-on-read
table, then schedule and execute one, in a local thread pool or (--spark) as a Spark job; safe next
to a streaming writer of the table (its writes go to the new file slices)."""

from __future__ import annotations

import argparse
from typing import Any

from hoodie_sink.cli.render import add_output_flags, emit_one
from hoodie_sink.cli.services import config_of, options_of


def add_commands(sub: Any) -> None:
    cp = sub.add_parser("compact", help="compact a merge-on-read table (pending plans first)")
    cp.add_argument("--path", required=True, help="table base path (local path or URI)")
    cp.add_argument("--option", "-o", action="append", default=[], metavar="KEY=VALUE",
                    help="write option, e.g. hoodie.parquet.max.file.size=134217728")  # fmt: skip
    cp.add_argument("--schedule-only", action="store_true", help="write the plan, do not execute it")
    cp.add_argument("--spark", action="store_true", help="execute as a Spark job (one task per file slice)")
    cp.add_argument("--master", default="local[*]", help="Spark master with --spark (default local[*])")
    add_output_flags(cp)
    cp.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_of(args)  # checks every KEY=VALUE and option name before any work starts
    from hoodie_sink.table.services import compaction
    from hoodie_sink.table.storage import Storage

    if args.schedule_only:
        instant = compaction.schedule(Storage(args.path), cfg, force=True)
        emit_one(args, {"scheduled": instant} if instant else {"result": "nothing to compact"})
        return 0
    if args.spark:
        from pyspark.sql import SparkSession

        from hoodie_sink.datasource.compaction import run_compaction

        spark = SparkSession.builder.master(args.master).appName("hoodie-sink compact").getOrCreate()
        try:
            results = run_compaction(spark, args.path, options_of(args))
        finally:
            spark.stop()
    else:
        results = compaction.run(args.path, cfg)
    rows = [{"instant": r.instant, "fileSlices": r.file_groups, "rows": r.rows, "logFiles": r.log_files,
             "logBytes": r.log_bytes, "seconds": round(r.duration_ms / 1000, 3)} for r in results]  # fmt: skip
    emit_one(args, {"compactions": rows} if rows else {"result": "nothing to compact"})
    return 0
