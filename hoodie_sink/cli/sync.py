"""`hoodie-sink sync P -o hoodie.datasource.hive_sync.metastore.uris=thrift://host:9083 [-o ...]`:
register the table in a Hive metastore, or bring its registration up to date, as the sync after a
commit does (docs/hudi/hive-sync.md#what-our-sync-does); mode hms is implied."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from hoodie_sink.cli.args import add_option_flags, add_path, options_of
from hoodie_sink.cli.render import add_output_flags, emit, emit_one
from hoodie_sink.table.catalog.hive_sync import sync_table

COLUMNS = [
    "name",
    "created",
    "altered",
    "full",
    "partitions_added",
    "partitions_altered",
    "partitions_dropped",
]


def add_commands(sub: Any) -> None:
    p = sub.add_parser("sync", help="register the table in a Hive metastore, or update its registration")
    add_path(p)
    add_option_flags(p, "hoodie.datasource.hive_sync.metastore.uris=thrift://localhost:9083")
    add_output_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    result = sync_table(args.path, options_of(args))
    tables = [asdict(t) for t in result.tables]
    if args.json:
        emit_one(args, {"database": result.database, "last_commit": result.last_commit,
                        "elapsed_ms": result.elapsed_ms, "tables": tables})  # fmt: skip
    else:
        emit(args, tables, COLUMNS, title=f"{result.database}, synced up to {result.last_commit}")
    return 0
