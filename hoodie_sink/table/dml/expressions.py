"""SQL expression strings, as delta-rs's `TableMerger`, `update` and `delete` take them, compiled to
pyarrow compute expressions and evaluated over Arrow tables (vectorised: Acero's project node).

The string is parsed by sqlglot (its own SQL grammar, Spark's dialect where the two differ), then
each node is mapped to an Arrow compute function.  What is not mapped is refused with an error
naming the part of the expression, never guessed (docs/design/table-dml.md#expressions).

Columns are resolved against a `Scope`: the columns of the table being evaluated, each known by
its qualified name (`t.id`) and, where no other side has the same name, by its bare name (`id`).

SQL's three-valued logic: a predicate that is null is not true (a row whose condition is null is
not deleted, updated nor matched), as in SQL and Delta.  CASE treats a null condition as false.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from hoodie_sink.errors import HoodieConfigError

_DIALECT = "spark"


@dataclass(frozen=True)
class Scope:
    """The columns an expression may name: `{qualified name: type}` of the table it runs on, and
    the aliases it may qualify them with.  `sides` maps an alias to its columns' bare names."""

    types: Mapping[str, pa.DataType]
    sides: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @staticmethod
    def of_table(schema: pa.Schema, alias: str | None = None) -> Scope:
        """One table: its columns by bare name (and `alias.name` when an alias is given)."""
        if alias is None:
            return Scope({f.name: f.type for f in schema})
        return Scope({f"{alias}.{f.name}": f.type for f in schema}, {alias: schema.names})

    @staticmethod
    def of_sides(sides: Mapping[str, pa.Schema]) -> Scope:
        """Several aliased tables side by side (a merge's target and source)."""
        types = {f"{a}.{f.name}": f.type for a, s in sides.items() for f in s}
        return Scope(types, {a: s.names for a, s in sides.items()})

    def resolve(self, name: str, qualifier: str | None, text: str) -> str:
        """The evaluated table's column for `qualifier.name` (or a bare `name`)."""
        if not self.sides:
            if qualifier is not None or name not in self.types:
                raise _error(text, f"unknown column '{_dotted(qualifier, name)}'", self)
            return name
        if qualifier is not None:
            if qualifier not in self.sides:
                raise _error(
                    text, f"unknown table alias '{qualifier}' (aliases: {', '.join(self.sides)})", self
                )
            if name not in self.sides[qualifier]:
                raise _error(text, f"unknown column '{qualifier}.{name}'", self)
            return f"{qualifier}.{name}"
        owners = [a for a, names in self.sides.items() if name in names]
        if len(owners) > 1:
            raise _error(
                text,
                f"column '{name}' is ambiguous: qualify it ({', '.join(a + '.' + name for a in owners)})",
                self,
            )
        if not owners:
            raise _error(text, f"unknown column '{name}'", self)
        return f"{owners[0]}.{name}"


@dataclass(frozen=True)
class Compiled:
    """A compiled expression: the Arrow expression, the columns it reads, and its SQL text."""

    expression: pc.Expression
    columns: frozenset[str]
    text: str


def compile_expression(text: str, scope: Scope) -> Compiled:
    """Parse and compile one SQL expression; refuses what it cannot map, naming it."""
    if not isinstance(text, str) or not text.strip():
        raise HoodieConfigError(f"Expected a SQL expression string, got {text!r}.")
    try:
        tree = sqlglot.parse_one(text, read=_DIALECT)
    except sqlglot.errors.ParseError as e:
        raise HoodieConfigError(f"Cannot parse SQL expression {text!r}: {e}") from e
    compiler = _Compiler(scope, text)
    return Compiled(compiler.compile(tree), frozenset(compiler.columns), text)  # type: ignore[arg-type]


def conjuncts(text: str) -> list[str]:
    """The AND-ed parts of a predicate, each as SQL text (a merge's ON is split into its key
    equalities and the rest)."""
    tree = sqlglot.parse_one(text, read=_DIALECT)
    while isinstance(tree, exp.Paren):
        tree = tree.this
    parts = list(tree.flatten()) if isinstance(tree, exp.And) else [tree]
    return [p.sql(dialect=_DIALECT) for p in parts]


def equality_sides(text: str) -> list[tuple[tuple[str | None, str], str]]:
    """For `a = b`: each side that is a bare column, as ((qualifier, name), the other side's SQL);
    [] for anything but an equality."""
    tree = sqlglot.parse_one(text, read=_DIALECT)
    while isinstance(tree, exp.Paren):
        tree = tree.this
    if not isinstance(tree, exp.EQ):
        return []
    left, right = tree.this, tree.expression
    return [
        ((col.table or None, col.name), other.sql(dialect=_DIALECT))
        for col, other in ((left, right), (right, left))
        if isinstance(col, exp.Column)
    ]


def column_sides(text: str) -> list[tuple[str | None, str]]:
    """Every (qualifier, name) column an expression names."""
    tree = sqlglot.parse_one(text, read=_DIALECT)
    return [(c.table or None, c.name) for c in tree.find_all(exp.Column)]


def evaluate(table: pa.Table, outputs: Mapping[str, pc.Expression]) -> pa.Table:
    """The columns `outputs` computed over `table`, row for row (Acero's project node, in order)."""
    if not outputs:
        return pa.table({})
    decl = acero.Declaration.from_sequence([
        acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
        acero.Declaration("project", acero.ProjectNodeOptions(list(outputs.values()), list(outputs))),
    ])  # fmt: skip
    try:
        out = decl.to_table(use_threads=False)  # one thread: rows stay in input order
    except (pa.ArrowException, ValueError, TypeError) as e:
        raise HoodieConfigError(f"Cannot evaluate {list(outputs)}: {e}") from e
    return out.combine_chunks() if out.num_rows else out


def is_true(table: pa.Table, predicate: Compiled | None) -> pa.Array:
    """Per row: the predicate is true (null counts as false); all true without a predicate."""
    if predicate is None:
        return pa.array([True] * table.num_rows, pa.bool_()) if table.num_rows else pa.array([], pa.bool_())
    got = evaluate(table, {"p": predicate.expression}).column("p")
    if not pa.types.is_boolean(got.type):
        raise HoodieConfigError(f"Predicate {predicate.text!r} is of type {got.type}, not boolean.")
    return (
        pc.fill_null(got, False).combine_chunks()
        if isinstance(got, pa.ChunkedArray)
        else pc.fill_null(got, False)
    )


# ------------------------------------------------------------------------------------- compiler

_COMPARISONS: dict[type, Callable] = {
    exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.GT: pc.greater, exp.GTE: pc.greater_equal,
    exp.LT: pc.less, exp.LTE: pc.less_equal,
}  # fmt: skip
# checked arithmetic: an overflow is an error, never a wrapped value
_ARITHMETIC: dict[type, Callable] = {
    exp.Add: pc.add_checked, exp.Sub: pc.subtract_checked, exp.Mul: pc.multiply_checked,
    exp.Div: pc.divide_checked,
}  # fmt: skip
_FUNCTIONS: dict[type, Callable] = {
    exp.Upper: pc.utf8_upper, exp.Lower: pc.utf8_lower, exp.Abs: pc.abs_checked,
    exp.Length: pc.utf8_length,
}  # fmt: skip
_TYPES: dict[object, pa.DataType] = {
    exp.DataType.Type.BOOLEAN: pa.bool_(), exp.DataType.Type.TINYINT: pa.int8(),
    exp.DataType.Type.SMALLINT: pa.int16(), exp.DataType.Type.INT: pa.int32(),
    exp.DataType.Type.BIGINT: pa.int64(), exp.DataType.Type.FLOAT: pa.float32(),
    exp.DataType.Type.DOUBLE: pa.float64(), exp.DataType.Type.VARCHAR: pa.string(),
    exp.DataType.Type.TEXT: pa.string(), exp.DataType.Type.DATE: pa.date32(),
    exp.DataType.Type.TIMESTAMP: pa.timestamp("us", tz="UTC"),
}  # fmt: skip


class _Compiler:
    def __init__(self, scope: Scope, text: str):
        self.scope = scope
        self.text = text
        self.columns: set[str] = set()

    def compile(self, node: exp.Expression) -> pc.Expression:
        return self._node(node)[0]

    # Each node compiles to (expression, its type if known): the type of a column lets a string
    # literal compared with a date, timestamp or decimal column take the column's type.
    def _node(self, node: exp.Expression) -> tuple[pc.Expression, pa.DataType | None]:
        if isinstance(node, exp.Paren):
            return self._node(node.this)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise _error(self.text, "'*' is not an expression here", self.scope)
            name = self.scope.resolve(node.name, node.table or None, self.text)
            self.columns.add(name)
            return pc.field(name), self.scope.types[name]
        if isinstance(node, exp.Literal):
            return self._literal(node)
        if isinstance(node, exp.Boolean):
            return pc.scalar(bool(node.this)), pa.bool_()
        if isinstance(node, exp.Null):
            return pc.scalar(None), pa.null()
        if type(node) in _COMPARISONS:
            (a, ta), (b, tb) = self._coerced(node.this, node.expression)
            return _COMPARISONS[type(node)](a, b), pa.bool_()
        if isinstance(node, exp.And):
            return pc.and_kleene(self.compile(node.this), self.compile(node.expression)), pa.bool_()
        if isinstance(node, exp.Or):
            return pc.or_kleene(self.compile(node.this), self.compile(node.expression)), pa.bool_()
        if isinstance(node, exp.Not):
            return pc.invert(self.compile(node.this)), pa.bool_()
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise _error(
                    self.text, f"'{node.sql()}': only IS NULL and IS NOT NULL are supported", self.scope
                )
            return pc.is_null(self.compile(node.this)), pa.bool_()
        if isinstance(node, exp.In):
            return self._in(node)
        if isinstance(node, exp.Between):
            (x, _), (lo, _) = self._coerced(node.this, node.args["low"])
            (x, _), (hi, _) = self._coerced(node.this, node.args["high"])
            return pc.and_kleene(pc.greater_equal(x, lo), pc.less_equal(x, hi)), pa.bool_()
        if type(node) in _ARITHMETIC:
            (a, ta), (b, _) = self._coerced(node.this, node.expression)
            return _ARITHMETIC[type(node)](a, b), ta
        if isinstance(node, exp.Mod):
            raise _error(self.text, "'%' (modulo) is not supported", self.scope)
        if isinstance(node, exp.Neg):
            x, t = self._node(node.this)
            return pc.negate_checked(x), t
        if isinstance(node, exp.Like | exp.ILike):
            pattern = node.expression
            if not (isinstance(pattern, exp.Literal) and pattern.is_string):
                raise _error(self.text, f"'{node.sql()}': LIKE needs a string literal pattern", self.scope)
            return pc.match_like(
                self.compile(node.this), pattern.this, ignore_case=isinstance(node, exp.ILike)
            ), pa.bool_()
        if isinstance(node, exp.DPipe | exp.Concat):
            parts = [node.this, node.expression] if isinstance(node, exp.DPipe) else node.expressions
            args = [self._node(p)[0] for p in parts]
            return pc.binary_join_element_wise(*args, pc.scalar("")), pa.string()
        if type(node) in _FUNCTIONS:
            x, t = self._node(node.this)
            out_t = pa.int32() if isinstance(node, exp.Length) else t
            return _FUNCTIONS[type(node)](x), out_t
        if isinstance(node, exp.Coalesce):
            compiled = [self._node(node.this)] + [self._node(e) for e in node.expressions]
            return pc.coalesce(*[c[0] for c in compiled]), compiled[0][1]
        if isinstance(node, exp.Cast | exp.TryCast):
            to = self._type(node.to)
            return self._node(node.this)[0].cast(to), to
        if isinstance(node, exp.Case):
            return self._case(node)
        if isinstance(node, exp.If):
            cond = pc.coalesce(self.compile(node.this), pc.scalar(False))
            (a, ta), (b, _) = self._node(node.args["true"]), self._node(node.args.get("false") or exp.Null())
            return pc.if_else(cond, a, b), ta
        raise _error(
            self.text, f"'{node.sql(dialect=_DIALECT)}' ({type(node).__name__}) is not supported", self.scope
        )

    def _literal(self, node: exp.Literal) -> tuple[pc.Expression, pa.DataType]:
        if node.is_string:
            return pc.scalar(node.this), pa.string()
        text = node.this
        if any(c in text for c in ".eE"):
            return pc.scalar(float(text)), pa.float64()
        return pc.scalar(int(text)), pa.int64()

    def _coerced(
        self, left: exp.Expression, right: exp.Expression
    ) -> tuple[tuple[pc.Expression, pa.DataType | None], tuple[pc.Expression, pa.DataType | None]]:
        """Both operands; a string literal beside a date, timestamp or decimal takes that type
        (`d = '2024-01-01'`), as SQL engines coerce it."""
        a, b = self._node(left), self._node(right)
        a = self._literal_as(left, a, b[1])
        b = self._literal_as(right, b, a[1])
        return a, b

    def _literal_as(
        self,
        node: exp.Expression,
        compiled: tuple[pc.Expression, pa.DataType | None],
        other: pa.DataType | None,
    ) -> tuple[pc.Expression, pa.DataType | None]:
        if not (isinstance(node, exp.Literal) and node.is_string and other is not None):
            return compiled
        if not (pa.types.is_temporal(other) or pa.types.is_decimal(other)):
            return compiled
        try:
            value = pa.scalar(node.this).cast(other)
        except (pa.ArrowException, ValueError) as e:
            raise _error(self.text, f"'{node.this}' is not a valid {other}: {e}", self.scope) from e
        return pc.scalar(value), other

    def _in(self, node: exp.In) -> tuple[pc.Expression, pa.DataType]:
        if node.args.get("query") is not None:
            raise _error(self.text, "IN (subquery) is not supported", self.scope)
        x, t = self._node(node.this)
        values = []
        for v in node.expressions:
            if isinstance(v, exp.Literal):
                values.append(v.this if v.is_string else (float(v.this) if "." in v.this else int(v.this)))
            elif isinstance(v, exp.Boolean):
                values.append(bool(v.this))
            else:
                raise _error(self.text, f"IN takes literals only, got '{v.sql()}'", self.scope)
        value_set = pa.array(values)
        if t is not None and t != value_set.type:
            try:
                value_set = value_set.cast(t)
            except (pa.ArrowException, ValueError) as e:
                raise _error(
                    self.text, f"IN list {values} does not fit column type {t}: {e}", self.scope
                ) from e
        return x.isin(value_set), pa.bool_()

    def _case(self, node: exp.Case) -> tuple[pc.Expression, pa.DataType | None]:
        if node.this is not None:  # CASE x WHEN v THEN ...: compare x with each v
            conds = [self._node(exp.EQ(this=node.this, expression=i.this))[0] for i in node.args["ifs"]]
        else:
            conds = [self.compile(i.this) for i in node.args["ifs"]]
        values = [self._node(i.args["true"]) for i in node.args["ifs"]]
        default = self._node(node.args.get("default") or exp.Null())
        out = default[0]
        for cond, (value, _) in zip(reversed(conds), reversed(values), strict=True):
            out = pc.if_else(pc.coalesce(cond, pc.scalar(False)), value, out)
        return out, values[0][1]

    def _type(self, node: exp.DataType) -> pa.DataType:
        if node.this == exp.DataType.Type.DECIMAL:
            params = [int(p.name) for p in node.expressions]
            precision, scale = (params + [10, 0])[:2] if params else (10, 0)
            return pa.decimal128(precision, scale)
        t = _TYPES.get(node.this)
        if t is None:
            raise _error(self.text, f"CAST to {node.sql()} is not supported", self.scope)
        return t


def _dotted(qualifier: str | None, name: str) -> str:
    return f"{qualifier}.{name}" if qualifier else name


def _error(text: str, why: str, scope: Scope) -> HoodieConfigError:
    names = sorted(scope.types)
    shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    return HoodieConfigError(f"SQL expression {text!r}: {why}. Columns: {shown}.")
