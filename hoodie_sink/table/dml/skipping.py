"""The conjuncts of a DML condition that data skipping can use: `column <op> literal`, `column IN
(literals)`, `column IS [NOT] NULL`, on a column of the table, each a read filter
(read/data_skipping.Predicate).  The rest of the condition is not lost: it is evaluated exactly on
the rows read; a conjunct left out only prunes less.  A literal whose type does not fit its column
plainly (a number for a number column, a string for a string column) is left out too, so that no
file is ever skipped on a comparison the exact condition would make differently."""

from __future__ import annotations

import pyarrow as pa
import sqlglot
from sqlglot import exp

from hoodie_sink.table.read.data_skipping import Predicate

_OPS: dict[type, str] = {exp.EQ: "=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
_FLIPPED = {"=": "=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


def skipping_predicates(text: str, schema: pa.Schema, alias: str | None = None) -> list[Predicate]:
    tree = sqlglot.parse_one(text, read="spark")
    while isinstance(tree, exp.Paren):
        tree = tree.this
    parts = list(tree.flatten()) if isinstance(tree, exp.And) else [tree]
    out = []
    for part in parts:
        while isinstance(part, exp.Paren):
            part = part.this
        got = _predicate(part, schema, alias)  # type: ignore[arg-type]
        if got is not None:
            out.append(got)
    return out


def _predicate(node: exp.Expression, schema: pa.Schema, alias: str | None) -> Predicate | None:
    if type(node) in _OPS:
        op = _OPS[type(node)]
        left, right = node.this, node.expression
        if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
            left, right, op = right, left, _FLIPPED[op]
        column = _column(left, schema, alias)
        if column is None:
            return None
        value = _value(right, schema.field(column).type)
        return None if value is _NO else Predicate(column, op, value)
    if isinstance(node, exp.In) and not node.args.get("query"):
        column = _column(node.this, schema, alias)
        if column is None:
            return None
        values = [_value(v, schema.field(column).type) for v in node.expressions]
        return None if any(v is _NO for v in values) else Predicate(column, "in", values)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        column = _column(node.this, schema, alias)
        return Predicate(column, "is_null") if column is not None else None
    if (
        isinstance(node, exp.Not)
        and isinstance(node.this, exp.Is)
        and isinstance(node.this.expression, exp.Null)
    ):
        column = _column(node.this.this, schema, alias)
        return Predicate(column, "is_not_null") if column is not None else None
    return None


_NO = object()


def _column(node: exp.Expression, schema: pa.Schema, alias: str | None) -> str | None:
    if not isinstance(node, exp.Column):
        return None
    if node.table and node.table != alias:
        return None
    return node.name if node.name in schema.names else None


def _value(node: exp.Expression, t: pa.DataType) -> object:
    if not isinstance(node, exp.Literal):
        return _NO
    if node.is_string:
        return node.this if (pa.types.is_string(t) or pa.types.is_large_string(t)) else _NO
    if pa.types.is_integer(t) and not any(c in node.this for c in ".eE"):
        return int(node.this)
    if pa.types.is_floating(t):
        return float(node.this)
    return _NO
