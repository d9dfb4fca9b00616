"""`files` (latest file slices), `file-groups` (every slice of every file group) and `stats`
(per partition: file groups, live rows, bytes, small files)."""

from __future__ import annotations

import argparse
from typing import Any

from hoodie_sink.cli.args import add_path
from hoodie_sink.cli.render import add_output_flags, emit
from hoodie_sink.cli.timeline import open_table

SMALL_FILE_LIMIT = 100 * 1024 * 1024  # hoodie.parquet.small.file.limit's default


def add_commands(sub: Any) -> None:
    for name, fn, text in (("files", run_files, "latest file slices (rows: of the base file)"),
                           ("file-groups", run_file_groups, "every slice of every file group"),
                           ("stats", run_stats,
                            "per partition: file groups, rows (live: logs merged), bytes, small files")):  # fmt: skip
        p = sub.add_parser(name, help=text)
        add_path(p)
        if name == "stats":
            p.add_argument("--small-file-limit", type=int, default=SMALL_FILE_LIMIT, metavar="BYTES")
        add_output_flags(p)
        p.set_defaults(run=fn)


def run_files(args: argparse.Namespace) -> int:
    table = open_table(args.path)
    rows = []
    for sl in table.latest_file_slices():
        base = sl.base_file
        rows.append({
            "partition": sl.partition_path, "file_id": sl.file_id, "instant": sl.base_instant,
            "base_file": base.name if base else None, "bytes": base.size if base else 0,
            "rows": table.base_file_rows(sl), "log_files": [lf.name for lf in sl.log_files],
        })  # fmt: skip
    emit(args, rows, ["partition", "file_id", "instant", "base_file", "bytes", "rows", "log_files"])
    return 0


def run_file_groups(args: argparse.Namespace) -> int:
    table = open_table(args.path)
    replaced = table.replaced_file_groups()
    rows = []
    for fg in table.file_groups():
        for n, sl in enumerate(fg.slices):
            rows.append({
                "partition": fg.partition_path, "file_id": fg.file_id, "slice": n + 1, "instant": sl.base_instant,
                "base_file": sl.base_file.name if sl.base_file else None,
                "bytes": sl.base_file.size if sl.base_file else 0,
                "log_files": [lf.name for lf in sl.log_files],
                "latest": n == len(fg.slices) - 1,
                "replaced_by": replaced.get((fg.partition_path, fg.file_id)),
            })  # fmt: skip
    emit(args, rows)
    return 0


def run_stats(args: argparse.Namespace) -> int:
    """Rows are what a reader sees: a merge-on-read slice's logs merged into its base rows."""
    per: dict[str, dict[str, Any]] = {}
    for counted in open_table(args.path).live_rows():
        sl, base = counted.slice, counted.slice.base_file
        p = per.setdefault(sl.partition_path, {"partition": sl.partition_path, "file_groups": 0, "rows": 0,
                                               "bytes": 0, "small_files": 0})  # fmt: skip
        p["file_groups"] += 1
        p["rows"] += counted.rows
        p["bytes"] += base.size if base else 0
        p["small_files"] += int(base is not None and base.size < args.small_file_limit)
    emit(args, [per[k] for k in sorted(per)])
    return 0
