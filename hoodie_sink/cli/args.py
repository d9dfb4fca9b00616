"""The arguments every command shares: the table path (positional, or `--path`, the form the
`cluster` and `compact` commands once required, kept so that scripts keep working) and the
`-o KEY=VALUE` options."""

from __future__ import annotations

import argparse
from typing import Any


def add_path(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", help="table base path or URI")
    p.add_argument("--path", dest="path_flag", metavar="PATH", help="the table path, as an option")
    p.set_defaults(path_parser=p)


def resolve_path(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Settle `args.path` from the positional or `--path`; a usage error if neither or both.
    With `--path`, argparse may give the positional slot to the next argument (`commits --path P
    <instant>`): a command with further positionals (`rest`) takes it back."""
    flag = getattr(args, "path_flag", None)
    if flag is not None:
        if args.path is not None:
            if not hasattr(args, "rest"):
                p.error("the table path is given twice (positional and --path)")
            args.rest = [args.path, *args.rest]
        args.path = flag
    if args.path is None:
        p.error("the table path is required (positional, or --path)")


def add_option_flags(p: Any, example: str = "hoodie.cleaner.commits.retained=20") -> None:
    p.add_argument("--option", "-o", action="append", default=[], metavar="KEY=VALUE",
                   help=f"Hudi option, e.g. {example}")  # fmt: skip


def options_of(args: argparse.Namespace) -> dict[str, str]:
    """The -o KEY=VALUE options of a command."""
    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--option takes KEY=VALUE, got {item!r}")
        options[key.strip()] = value
    return options
