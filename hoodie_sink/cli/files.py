"""`files` (latest file slices), `file-groups` (every slice of every file group) and `stats`
(per partition: file groups, rows, bytes, small files)."""

from __future__ import annotations

import argparse
from typing import Any

import pyarrow.parquet as pq

from hoodie_sink.cli.render import add_output_flags, emit
from hoodie_sink.cli.timeline import open_table
from hoodie_sink.table.format.fs_view import FileSystemView, replacing_instants
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.services.cleaning import committed_file_groups
from hoodie_sink.table.storage import Storage

SMALL_FILE_LIMIT = 100 * 1024 * 1024  # hoodie.parquet.small.file.limit's default


def add_commands(sub: Any) -> None:
    for name, fn, text in (("files", run_files, "latest file slices"),
                           ("file-groups", run_file_groups, "every slice of every file group"),
                           ("stats", run_stats, "per partition: file groups, rows, bytes, small files")):  # fmt: skip
        p = sub.add_parser(name, help=text)
        p.add_argument("path", help="table base path or URI")
        if name == "stats":
            p.add_argument("--small-file-limit", type=int, default=SMALL_FILE_LIMIT, metavar="BYTES")
        add_output_flags(p)
        p.set_defaults(run=fn)


def _rows(storage: Storage, rel: str) -> int:
    with storage.open_input_file(rel) as f:
        return int(pq.ParquetFile(f).metadata.num_rows)


def _latest(storage: Storage) -> list[dict[str, Any]]:
    view = FileSystemView.load(storage, ActiveTimeline.load(storage))
    out = []
    for fg in view.file_groups():
        sl = fg.latest_slice
        if sl is None:
            continue
        base = sl.base_file
        out.append({
            "partition": fg.partition_path, "file_id": fg.file_id, "instant": sl.base_instant,
            "base_file": base.name if base else None, "bytes": base.size if base else 0,
            "rows": _rows(storage, base.path) if base else 0,
            "log_files": [lf.name for lf in sl.log_files],
        })  # fmt: skip
    return out


def run_files(args: argparse.Namespace) -> int:
    emit(
        args,
        _latest(open_table(args.path)),
        ["partition", "file_id", "instant", "base_file", "bytes", "rows", "log_files"],
    )
    return 0


def run_file_groups(args: argparse.Namespace) -> int:
    storage = open_table(args.path)
    timeline = ActiveTimeline.load(storage)
    view = FileSystemView.load(storage, timeline)
    replaced = replacing_instants(storage, timeline)
    rows = []
    for fg in committed_file_groups(view.listing, timeline):
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
    per: dict[str, dict[str, Any]] = {}
    for f in _latest(open_table(args.path)):
        p = per.setdefault(f["partition"], {"partition": f["partition"], "file_groups": 0, "rows": 0, "bytes": 0,
                                             "small_files": 0})  # fmt: skip
        p["file_groups"] += 1
        p["rows"] += f["rows"]
        p["bytes"] += f["bytes"]
        p["small_files"] += int(f["base_file"] is not None and f["bytes"] < args.small_file_limit)
    emit(args, [per[k] for k in sorted(per)])
    return 0
