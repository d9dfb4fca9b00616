"""`clean` and `archive`: the table services as jobs of their own (they take the table's service
lock, so they can run next to a streaming writer)."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from hoodie_sink.cli.render import add_output_flags, emit_one
from hoodie_sink.cli.timeline import open_table
from hoodie_sink.config import WriteConfig
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


def _options(p: Any) -> None:
    p.add_argument("--option", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help="Hudi option, e.g. hoodie.cleaner.commits.retained=20")  # fmt: skip
    add_output_flags(p)


def config_of(args: argparse.Namespace) -> WriteConfig:
    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--option takes KEY=VALUE, got {item!r}")
        options[key.strip()] = value
    return WriteConfig.from_options(options, path=args.path)


def run_clean_command(args: argparse.Namespace) -> int:
    cfg = config_of(args)
    emit_one(args, asdict(run_clean(open_table(args.path), CleanConfig.of(cfg))))
    return 0


def run_archive_command(args: argparse.Namespace) -> int:
    cfg = config_of(args)
    emit_one(args, asdict(run_archival(open_table(args.path), ArchivalConfig.of(cfg))))
    return 0
