"""`clean`, `archive`, `savepoint` and `restore`: the table services as jobs of their own (they take the table's service
lock, so they can run next to a streaming writer)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from hoodie_sink.cli.render import add_output_flags, emit, emit_one
from hoodie_sink.cli.timeline import open_table
from hoodie_sink.config import WriteConfig
from hoodie_sink.table.services import savepoint
from hoodie_sink.table.services.archival import ArchivalConfig, run_archival
from hoodie_sink.table.services.cleaning import CleanConfig, run_clean


def add_commands(sub: Any) -> None:
    p = sub.add_parser("clean", help="delete file slices the retention no longer needs (a clean instant)")
    p.add_argument("path", help="table base path or URI")
    _options(p)
    p.set_defaults(run=run_clean_command)
    p = sub.add_parser("archive", help="move old instants to the archived timeline")
    p.add_argument("path", help="table base path or URI")
    _options(p)
    p.set_defaults(run=run_archive_command)
    add_savepoint_commands(sub)


def add_savepoint_commands(sub: Any) -> None:
    p = sub.add_parser(
        "savepoint", help="pin the table as of a commit (default: the latest); --list, --delete"
    )
    p.add_argument("path", help="table base path or URI")
    p.add_argument("--instant", help="the completed commit to savepoint (default: the latest)")
    p.add_argument("--user", help="recorded as savepointedBy (default: the login name)")
    p.add_argument("--comments", default="", help="recorded with the savepoint")
    p.add_argument("--list", action="store_true", help="list the savepoints instead")
    p.add_argument("--delete", metavar="INSTANT", help="delete this savepoint instead")
    add_output_flags(p)
    p.set_defaults(run=run_savepoint_command)
    p = sub.add_parser("restore", help="roll the table back to a savepoint (stop its writers first)")
    p.add_argument("path", help="table base path or URI")
    p.add_argument("savepoint", help="the savepoint's instant")
    add_output_flags(p)
    p.set_defaults(run=run_restore_command)


def run_savepoint_command(args: argparse.Namespace) -> int:
    storage = open_table(args.path)
    if args.list:
        emit(args, [asdict(s) for s in savepoint.list_savepoints(storage)])
    elif args.delete:
        savepoint.delete_savepoint(storage, args.delete)
        emit_one(args, {"deleted": args.delete})
    else:
        emit_one(args, asdict(savepoint.create_savepoint(storage, args.instant, args.user, args.comments)))
    return 0


def run_restore_command(args: argparse.Namespace) -> int:
    undone = savepoint.restore(open_table(args.path), args.savepoint)
    emit_one(args, {"restored_to": args.savepoint, "rolled_back": undone})
    return 0


def _options(p: Any) -> None:
    p.add_argument("--option", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help="Hudi option, e.g. hoodie.cleaner.commits.retained=20")  # fmt: skip
    add_output_flags(p)


def options_of(args: argparse.Namespace) -> dict[str, str]:
    """The -o KEY=VALUE options of a command."""
    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--option takes KEY=VALUE, got {item!r}")
        options[key.strip()] = value
    return options


def config_of(args: argparse.Namespace) -> WriteConfig:
    return WriteConfig.from_options(options_of(args), path=args.path)


def add_job_parser(sub: Any, name: str, help_: str, option_example: str) -> argparse.ArgumentParser:
    """A table-service job's command (cluster, compact): the table, its options, a Spark master."""
    p = sub.add_parser(name, help=help_)
    p.add_argument("--path", required=True, help="table base path (local path or URI)")
    p.add_argument("--option", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help=f"option, e.g. {option_example}")  # fmt: skip
    p.add_argument("--master", default="local[*]", help="Spark master of the job (default local[*])")
    add_output_flags(p)
    return p


@contextmanager
def spark_session(master: str, app: str) -> Iterator[Any]:
    """A Spark session of the command's own, stopped when the job ends."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master(master).appName(app).getOrCreate()
    try:
        yield spark
    finally:
        spark.stop()


def run_clean_command(args: argparse.Namespace) -> int:
    cfg = config_of(args)
    emit_one(args, asdict(run_clean(open_table(args.path), CleanConfig.of(cfg))))
    return 0


def run_archive_command(args: argparse.Namespace) -> int:
    cfg = config_of(args)
    emit_one(args, asdict(run_archival(open_table(args.path), ArchivalConfig.of(cfg))))
    return 0
