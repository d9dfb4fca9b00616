"""`hoodie-sink`: look into a Hudi table and run its table services, as a normal Unix tool.

Every command takes the table's path first (or as `--path PATH`).  Tables are aligned for a
person; `--json` prints one JSON document for scripts.  Exit codes:
0 done, 1 a check failed, 2 usage error, 3 the table could not be read or changed (one line on
stderr naming the path or file, no traceback).
"""

from __future__ import annotations

import argparse
import sys

from hoodie_sink import __version__
from hoodie_sink.cli import checks, cluster, compact, files, services, sync, timeline
from hoodie_sink.cli.args import resolve_path
from hoodie_sink.errors import HoodieError

COMMANDS = (timeline, files, checks, services, cluster, compact, sync)  # each module adds its subcommands


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hoodie-sink", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--version", action="version", version=f"hoodie-sink {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_commands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    resolve_path(args.path_parser, args)
    try:
        return int(args.run(args))
    except (HoodieError, OSError, ValueError) as e:
        print(f"hoodie-sink {args.command}: {e}", file=sys.stderr)
        return 3
