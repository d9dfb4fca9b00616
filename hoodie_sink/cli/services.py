"""`clean`, `archive`, `savepoint` and `restore`: the table services as jobs of their own (they take the table's service
lock, so they can run next to a streaming writer)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from hoodie_sink.cli.args import add_option_flags, add_path, options_of
from hoodie_sink.cli.render import add_output_flags, emit, emit_one, seconds
from hoodie_sink.table.client.table import Table


def add_commands(sub: Any) -> None:
    p = sub.add_parser("clean", help="delete file slices the retention no longer needs (a clean instant)")
    add_path(p)
    _options(p)
    p.set_defaults(run=run_clean_command)
    p = sub.add_parser("archive", help="move old instants to the archived timeline")
    add_path(p)
    _options(p)
    p.set_defaults(run=run_archive_command)
    add_savepoint_commands(sub)


def add_savepoint_commands(sub: Any) -> None:
    p = sub.add_parser(
        "savepoint", help="pin the table as of a commit (default: the latest); --list, --delete"
    )
    add_path(p)
    p.add_argument("--instant", help="the completed commit to savepoint (default: the latest)")
    p.add_argument("--user", help="recorded as savepointedBy (default: the login name)")
    p.add_argument("--comments", default="", help="recorded with the savepoint")
    p.add_argument("--list", action="store_true", help="list the savepoints instead")
    p.add_argument("--delete", metavar="INSTANT", help="delete this savepoint instead")
    add_output_flags(p)
    p.set_defaults(run=run_savepoint_command)
    p = sub.add_parser("restore", help="roll the table back to a savepoint (stop its writers first)")
    add_path(p)
    p.add_argument("savepoint", help="the savepoint's instant")
    add_output_flags(p)
    p.set_defaults(run=run_restore_command)


def run_savepoint_command(args: argparse.Namespace) -> int:
    table = Table(args.path)
    if args.list:
        emit(args, [asdict(s) for s in table.savepoints()])
    elif args.delete:
        table.delete_savepoint(args.delete)
        emit_one(args, {"deleted": args.delete})
    else:
        emit_one(args, asdict(table.savepoint(args.instant, args.user, args.comments)))
    return 0


def run_restore_command(args: argparse.Namespace) -> int:
    undone = Table(args.path).restore(args.savepoint)
    emit_one(args, {"restored_to": args.savepoint, "rolled_back": undone})
    return 0


def _options(p: Any) -> None:
    add_option_flags(p)
    add_output_flags(p)


def table_of(args: argparse.Namespace) -> Table:
    """The command's table with its -o options; every option is checked before any work starts."""
    table = Table(args.path, options_of(args))
    table.write_config()
    return table


def add_job_parser(sub: Any, name: str, help_: str, option_example: str) -> argparse.ArgumentParser:
    """A table-service job's command (cluster, compact): the table, its options, a Spark master."""
    p = sub.add_parser(name, help=help_)
    add_path(p)
    add_option_flags(p, option_example)
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
    done = table_of(args).clean()
    emit_one(args, {**asdict(done), "resumed": list(done.resumed), "seconds": seconds(done.seconds)})
    return 0


def run_archive_command(args: argparse.Namespace) -> int:
    done = table_of(args).archive()
    emit_one(args, {**asdict(done), "seconds": seconds(done.seconds)})
    return 0
