"""Output of the commands: aligned columns for a person, JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any


def add_output_flags(p: Any) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def emit(
    args: Any,
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str] | None = None,
    title: str = "",
    empty: str = "(none)",
) -> None:
    """Rows as aligned columns (numbers right-aligned), or with --json as a JSON list."""
    if getattr(args, "json", False):
        json.dump(list(rows), sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return
    if title:
        print(title)
    if not rows:
        print(empty)
        return
    cols = list(columns or rows[0].keys())
    cells = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    numeric = [all(_is_number(r.get(c)) for r in rows) for c in cols]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric, strict=True)
        )

    print(line(cols).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print(line(row).rstrip())


def seconds(value: float) -> float:
    """A duration as the commands show it: seconds, to the millisecond."""
    return round(value, 3)


def emit_one(args: Any, result: dict[str, Any]) -> None:
    """One result as aligned `key  value` lines, or with --json as a JSON object."""
    if getattr(args, "json", False):
        json.dump(result, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return
    width = max((len(k) for k in result), default=0)
    for k, v in result.items():
        print(f"{k.ljust(width)}  {_cell(v)}")


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, list | tuple):
        return ",".join(str(x) for x in v) or "-"
    return str(v)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)
