"""What a MERGE changes, decided on Arrow tables (pure: no I/O), with Delta Lake's semantics
(docs/design/table-dml.md#merge-semantics):

- a source row matches the target rows for which the ON predicate is true;
- a target row matched by several source rows is an error naming its key, unless the only WHEN
  MATCHED clause is an unconditional delete (Delta's one exception);
- each matched pair, each unmatched source row and each target row matched by no source row takes
  the first clause of its kind (in the order given) whose predicate is true; none: unchanged;
- a null predicate is not true.

What a Hudi table adds, refused with the key named rather than written wrong: the ON predicate must
equate every record key field of the target with a source expression (the keyed look-up); an
update may not change a record key; an insert must not meet a stored record of the same identity
(Delta would keep both rows, a Hudi table keeps one per key); two inserts may not share one; an
update that lowers the ordering field on an event-time table would be undone by every reader.

The target rows given are those the key look-up found (`target`), and, when a WHEN NOT MATCHED BY
SOURCE clause exists, every row of the table (`whole_target`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieConfigError, HoodieKeyError
from hoodie_sink.table.dml.expressions import (
    Compiled,
    Scope,
    column_sides,
    compile_expression,
    conjuncts,
    equality_sides,
    evaluate,
    is_true,
)

MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE = "matched", "not matched", "not matched by source"
UPDATE, DELETE, INSERT = "update", "delete", "insert"
_TID, _SID = "__target_row", "__source_row"


@dataclass(frozen=True)
class Clause:
    when: str  # MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE
    action: str  # UPDATE, DELETE, INSERT
    predicate: str | None = None
    assignments: Mapping[str, str] | None = None  # column -> SQL; None with UPDATE/INSERT: "all"

    def describe(self) -> str:
        what = f"WHEN {self.when.upper()} THEN {self.action.upper()}"
        return what + (f" IF {self.predicate}" if self.predicate else "")


@dataclass(frozen=True)
class MergeSpec:
    predicate: str
    source_alias: str
    target_alias: str
    clauses: tuple[Clause, ...]

    @property
    def needs_whole_target(self) -> bool:
        return any(c.when == NOT_MATCHED_BY_SOURCE for c in self.clauses)

    @property
    def by_source_pruning(self) -> str | None:
        """The condition that prunes the stored rows a WHEN NOT MATCHED BY SOURCE clause reads: with
        one such clause only the rows its condition selects can change (every stored row is still
        matched by key first); with several, none prunes."""
        by_source = [c for c in self.clauses if c.when == NOT_MATCHED_BY_SOURCE]
        return by_source[0].predicate if len(by_source) == 1 else None


@dataclass(frozen=True)
class TableShape:
    """What the planner needs of the table: its data columns, record key fields, partition fields,
    whether a record is its key alone (a global index), whether a key may move partition, and the
    ordering field when the table keeps the higher one (event time)."""

    schema: pa.Schema
    key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    global_keys: bool = True
    moves_partitions: bool = True
    event_time_field: str | None = None
    # PartialUpdateAvroPayload: a null in a written row keeps the stored value (every reader)
    nulls_keep_stored: bool = False

    @property
    def identity_fields(self) -> tuple[str, ...]:
        return self.key_fields if self.global_keys else self.key_fields + self.partition_fields


@dataclass
class MergeOutcome:
    upserts: pa.Table  # rows written (table schema): updated and inserted
    deletes: pa.Table  # stored rows removed (table schema)
    metrics: dict[str, int] = field(default_factory=dict)
    inserted_identities: pa.Table | None = None  # to check against the table (executor)


@dataclass(frozen=True)
class KeyJoin:
    """The ON predicate cut into the key look-up and the rest: per record key field the source
    expression it equals, and the other conjuncts, checked on each pair."""

    source_keys: Mapping[str, Compiled]  # key field -> expression over the source
    residual: Compiled | None  # over target and source columns

    @staticmethod
    def of(spec: MergeSpec, shape: TableShape, source_schema: pa.Schema) -> KeyJoin:
        t, s = spec.target_alias, spec.source_alias
        source_scope = Scope.of_table(source_schema, s)
        pair_scope = Scope.of_sides({t: shape.schema, s: source_schema})
        keys: dict[str, Compiled] = {}
        rest: list[str] = []
        for part in conjuncts(spec.predicate):
            found = _key_equality(part, t, shape, source_scope)
            if found is not None and found[0] not in keys:
                keys[found[0]] = found[1]
            else:
                rest.append(part)
        missing = [k for k in shape.key_fields if k not in keys]
        if missing:
            raise HoodieConfigError(
                f"The merge predicate {spec.predicate!r} does not equate record key field(s) "
                f"{', '.join(missing)} of the target with a source expression. A Hudi table is merged by "
                f"its record key (hoodie.datasource.write.recordkey.field = {','.join(shape.key_fields)}): "
                f"write it as {' AND '.join(f'{t}.{k} = {s}.{k}' for k in shape.key_fields)}, plus any "
                "other condition."
            )
        residual = compile_expression(" AND ".join(f"({r})" for r in rest), pair_scope) if rest else None
        return KeyJoin(keys, residual)

    def source_key_table(self, source: pa.Table, alias: str, shape: TableShape) -> pa.Table:
        """The source rows' key values, in the target's key types."""
        named = _aliased(source, alias)
        got = evaluate(named, {k: self.source_keys[k].expression for k in shape.key_fields})
        cols = [_cast(got.column(k), shape.schema.field(k).type, k) for k in shape.key_fields]
        return pa.Table.from_arrays(cols, names=list(shape.key_fields))


def needed_target_columns(spec: MergeSpec, shape: TableShape, source_schema: pa.Schema) -> list[str]:
    """The target columns a merge reads, in table order: the identity and ordering fields, every
    column an expression names on the target side, and the columns an update keeps as stored.
    A column left out cannot be used by mistake: an expression naming it fails to compile (the
    scope does not have it), never reads null."""
    need = set(shape.key_fields) | set(shape.partition_fields)
    if shape.event_time_field:
        need.add(shape.event_time_field)
    texts = [spec.predicate] + [c.predicate for c in spec.clauses if c.predicate]
    texts += [v for c in spec.clauses for v in (c.assignments or {}).values()]
    for text in texts:
        for qualifier, name in column_sides(text):
            # a bare name is read whenever the target has it, so that one both sides have is
            # still refused as ambiguous
            if qualifier == spec.target_alias or qualifier is None:
                need.add(name)
    for c in spec.clauses:
        if c.action != UPDATE:
            continue
        if c.assignments is None:  # update_all: what the source does not have stays as stored
            need |= {n for n in shape.schema.names if n not in source_schema.names}
        else:
            need |= {n for n in shape.schema.names if n not in c.assignments}
    return [n for n in shape.schema.names if n in need]


def plan_merge(
    spec: MergeSpec,
    shape: TableShape,
    source: pa.Table,
    target: pa.Table,
    whole_target: pa.Table | None = None,
    join: KeyJoin | None = None,
) -> MergeOutcome:
    """The rows a merge upserts and deletes.  `target`: the stored rows whose keys the source
    looked up (data columns, table schema); `whole_target`: every stored row, needed only with a
    WHEN NOT MATCHED BY SOURCE clause; `join`: the spec's KeyJoin, when the caller has it."""
    t, s = spec.target_alias, spec.source_alias
    if t == s:
        raise HoodieConfigError(f"The source and target aliases must differ, both are '{t}'.")
    _check_clauses(spec, shape, source.schema)
    join = join if join is not None else KeyJoin.of(spec, shape, source.schema)
    if spec.needs_whole_target:
        if whole_target is None:
            raise ValueError("a WHEN NOT MATCHED BY SOURCE clause needs the whole target")
        target = whole_target
    target = target.select([n for n in shape.schema.names if n in target.column_names])
    pairs = _pairs(join, shape, source, target, t, s)
    matched = [c for c in spec.clauses if c.when == MATCHED]
    pair_choice = _first_true(pairs, matched)
    _refuse_multiple_matches(pairs, pair_choice, matched, shape, t)

    upserts: list[pa.Table] = []
    deletes: list[pa.Table] = []
    metrics = {"num_source_rows": source.num_rows, "num_target_rows_updated": 0,
               "num_target_rows_inserted": 0, "num_target_rows_deleted": 0}  # fmt: skip
    tids_done: list[np.ndarray] = []
    for i, clause in enumerate(matched):
        rows = pairs.filter(pa.array(pair_choice == i))
        if not rows.num_rows:
            continue
        tid = np.unique(rows.column(_TID).to_numpy())
        tids_done.append(tid)
        if clause.action == DELETE:
            deletes.append(target.take(pa.array(tid)))
            metrics["num_target_rows_deleted"] += len(tid)
        else:
            upserts.append(_updated(clause, rows, target, shape, spec, source.schema))
            metrics["num_target_rows_updated"] += rows.num_rows

    # source rows matched by no pair: the WHEN NOT MATCHED clauses
    matched_sids = np.unique(pairs.column(_SID).to_numpy()) if pairs.num_rows else np.array([], np.int64)
    unmatched = np.setdiff1d(np.arange(source.num_rows), matched_sids)
    not_matched = [c for c in spec.clauses if c.when == NOT_MATCHED]
    inserted: list[pa.Table] = []
    if not_matched and len(unmatched):
        rows = _aliased(source.take(pa.array(unmatched)), s)
        choice = _first_true(rows, not_matched)
        for i, clause in enumerate(not_matched):
            chosen = rows.filter(pa.array(choice == i))
            if chosen.num_rows:
                inserted.append(_inserted(clause, chosen, shape, spec, source.schema))
    if inserted:
        ins = pa.concat_tables(inserted)
        _refuse_bad_inserts(ins, target, shape)
        upserts.append(ins)
        metrics["num_target_rows_inserted"] = ins.num_rows

    # target rows matched by no source row: the WHEN NOT MATCHED BY SOURCE clauses
    by_source = [c for c in spec.clauses if c.when == NOT_MATCHED_BY_SOURCE]
    if by_source:
        matched_tids = np.unique(pairs.column(_TID).to_numpy()) if pairs.num_rows else np.array([], np.int64)
        alone = np.setdiff1d(np.arange(target.num_rows), matched_tids)
        rows = _aliased(target.take(pa.array(alone)), t).append_column(_TID, pa.array(alone, pa.int64()))
        choice = _first_true(rows, by_source)
        for i, clause in enumerate(by_source):
            chosen = rows.filter(pa.array(choice == i))
            if not chosen.num_rows:
                continue
            if clause.action == DELETE:
                deletes.append(target.take(chosen.column(_TID)))
                metrics["num_target_rows_deleted"] += chosen.num_rows
            else:
                upserts.append(_updated(clause, chosen, target, shape, spec, source.schema))
                metrics["num_target_rows_updated"] += chosen.num_rows

    schema = shape.schema
    return MergeOutcome(
        upserts=pa.concat_tables(upserts) if upserts else schema.empty_table(),
        deletes=pa.concat_tables(deletes) if deletes else schema.empty_table(),
        metrics=metrics,
        inserted_identities=(
            pa.concat_tables(inserted).select(list(shape.identity_fields)) if inserted else None
        ),
    )


# -------------------------------------------------------------------------------------- steps


def _check_clauses(spec: MergeSpec, shape: TableShape, source_schema: pa.Schema) -> None:
    if not spec.clauses:
        raise HoodieConfigError("The merge has no WHEN clause: add at least one (when_matched_update, ...).")
    for c in spec.clauses:
        for column in c.assignments or {}:
            if column not in shape.schema.names:
                raise HoodieConfigError(
                    f"{c.describe()}: the target has no column '{column}' (columns: {', '.join(shape.schema.names)})."
                )
            if c.action == UPDATE and column in shape.key_fields:
                raise HoodieConfigError(
                    f"{c.describe()} sets record key field '{column}': a record's key cannot change. "
                    "Help: delete the record and insert it with the new key."
                )


def _key_equality(
    part: str, target: str, shape: TableShape, source_scope: Scope
) -> tuple[str, Compiled] | None:
    """`target.k = <source expression>` for a record key field k (either side)."""
    for (qualifier, name), other in equality_sides(part):
        if qualifier == target and name in shape.key_fields:
            try:
                return name, compile_expression(other, source_scope)
            except HoodieConfigError:
                return None  # the other side reads target columns: a condition, not the key
    return None


def _pairs(join: KeyJoin, shape: TableShape, source: pa.Table, target: pa.Table, t: str, s: str) -> pa.Table:
    """The (target row, source row) pairs for which the ON predicate is true, as one table of
    `t.*`, `s.*` columns and the two row numbers."""
    keys = list(shape.key_fields)
    skeys = join.source_key_table(source, s, shape).append_column(_SID, pa.array(np.arange(source.num_rows)))
    tkeys = target.select(keys).append_column(_TID, pa.array(np.arange(target.num_rows)))
    # Arrow's hash join: a null key equals nothing, as SQL's `=`
    joined = tkeys.join(skeys, keys=keys, join_type="inner", use_threads=True)
    joined = joined.sort_by([(_TID, "ascending"), (_SID, "ascending")])
    tid, sid = joined.column(_TID), joined.column(_SID)
    pairs = _aliased(target.take(tid), t)
    src = _aliased(source.take(sid), s)
    for name, col in zip(src.column_names, src.columns, strict=True):
        pairs = pairs.append_column(name, col)
    pairs = pairs.append_column(_TID, tid).append_column(_SID, sid)
    if join.residual is not None and pairs.num_rows:
        pairs = pairs.filter(is_true(pairs, join.residual))
    return pairs


def _first_true(rows: pa.Table, clauses: Sequence[Clause]) -> np.ndarray:
    """Per row, the index of the first clause whose predicate is true; -1: none."""
    choice = np.full(rows.num_rows, -1, np.int64)
    if not rows.num_rows:
        return choice
    scope = _scope_of(rows)
    for i, clause in enumerate(clauses):
        open_rows = choice < 0
        if not open_rows.any():
            break
        pred = compile_expression(clause.predicate, scope) if clause.predicate else None
        hit = is_true(rows, pred).to_numpy(zero_copy_only=False)
        choice[open_rows & hit] = i
    return choice


def _refuse_multiple_matches(
    pairs: pa.Table, choice: np.ndarray, matched: Sequence[Clause], shape: TableShape, t: str
) -> None:
    if not pairs.num_rows:
        return
    if len(matched) == 1 and matched[0].action == DELETE and matched[0].predicate is None:
        return  # Delta's exception: an unconditional delete may meet its target row many times
    tids = pairs.column(_TID).to_numpy()[choice >= 0]
    uniq, counts = np.unique(tids, return_counts=True)
    if (counts > 1).any():
        first = int(np.flatnonzero(pairs.column(_TID).to_numpy() == uniq[counts > 1][0])[0])
        key = {k: pairs.column(f"{t}.{k}")[first].as_py() for k in shape.key_fields}
        raise HoodieKeyError(
            f"The merge matched {int((counts > 1).sum())} target row(s) with several source rows each, "
            f"e.g. the row with key {key} ({int(counts[counts > 1][0])} source rows), and a WHEN MATCHED "
            "clause applies to each: which one wins is undefined, so nothing was written (Delta's rule). "
            "Help: de-duplicate the source by key first."
        )


def _updated(
    clause: Clause,
    rows: pa.Table,
    target: pa.Table,
    shape: TableShape,
    spec: MergeSpec,
    source_schema: pa.Schema,
) -> pa.Table:
    """The new rows of an UPDATE clause: the assignments over the pairs (or the target row alone,
    WHEN NOT MATCHED BY SOURCE), every other column as stored."""
    t, s = spec.target_alias, spec.source_alias
    scope = _scope_of(rows)
    outputs = {}
    for f in shape.schema:
        if clause.assignments is None:  # update_all: each column from the source's of that name
            text = f"{s}.`{f.name}`" if f.name in source_schema.names else f"{t}.`{f.name}`"
        else:
            text = clause.assignments.get(f.name, f"{t}.`{f.name}`")
        outputs[f.name] = compile_expression(text, scope).expression
    new = evaluate(rows, outputs)
    new = pa.Table.from_arrays(
        [_cast(new.column(f.name), f.type, f.name) for f in shape.schema], schema=shape.schema
    )
    old = target.take(rows.column(_TID))
    _refuse_changed_identity(old, new, shape)
    _refuse_lower_ordering(old, new, shape)
    _refuse_nulls_that_would_not_stick(old, new, shape)
    return new


def _inserted(
    clause: Clause, rows: pa.Table, shape: TableShape, spec: MergeSpec, source_schema: pa.Schema
) -> pa.Table:
    s = spec.source_alias
    scope = _scope_of(rows)
    outputs = {}
    for f in shape.schema:
        if clause.assignments is None:
            text = f"{s}.`{f.name}`" if f.name in source_schema.names else "NULL"
        else:
            text = clause.assignments.get(f.name, "NULL")
        outputs[f.name] = compile_expression(text, scope).expression
    new = evaluate(rows, outputs)
    return pa.Table.from_arrays(
        [_cast(new.column(f.name), f.type, f.name) for f in shape.schema], schema=shape.schema
    )


_KEY_HELP = "a record's key cannot change: delete it and insert it with the new key"
_PARTITION_HELP = (
    "this table's index keeps a record in its partition (a partition-scoped index, or "
    "hoodie.index.global.update.partition.path=false): delete the record and insert it"
)


def _refuse_changed_identity(old: pa.Table, new: pa.Table, shape: TableShape) -> None:
    for names, why in ((shape.key_fields, "record key"),
                       (() if shape.moves_partitions else shape.partition_fields, "partition")):  # fmt: skip
        for name in names:
            same = pc.fill_null(pc.equal(old.column(name), new.column(name)), False)
            both_null = pc.and_(pc.is_null(old.column(name)), pc.is_null(new.column(name)))
            bad = pc.invert(pc.or_(same, both_null))
            if pc.any(bad).as_py():
                i = pc.index(bad, True).as_py()
                key = {k: old.column(k)[i].as_py() for k in shape.key_fields}
                help_ = _KEY_HELP if why == "record key" else _PARTITION_HELP
                raise HoodieKeyError(
                    f"The update changes {why} field '{name}' of the record with key {key} from "
                    f"{old.column(name)[i].as_py()!r} to {new.column(name)[i].as_py()!r}. Help: {help_}."
                )


def _refuse_lower_ordering(old: pa.Table, new: pa.Table, shape: TableShape) -> None:
    """On an event-time table (DefaultHoodieRecordPayload) every reader keeps the stored record
    when its ordering value is higher: an update stating a lower one would be written and never
    seen.  Equal values: the update wins, as in Hudi (docs/design/table-dml.md#ordering)."""
    f = shape.event_time_field
    if f is None or f not in shape.schema.names:
        return
    lower = pc.fill_null(pc.less(new.column(f), old.column(f)), False)
    if pc.any(lower).as_py():
        i = pc.index(lower, True).as_py()
        key = {k: old.column(k)[i].as_py() for k in shape.key_fields}
        raise HoodieKeyError(
            f"The update sets ordering field '{f}' of the record with key {key} to {new.column(f)[i].as_py()!r}, "
            f"below the stored {old.column(f)[i].as_py()!r}: the table keeps the record with the higher "
            f"value (hoodie.datasource.write.precombine.field = {f}), so the update would be lost. Nothing "
            f"was written. Help: set '{f}' to at least the stored value (e.g. greatest(t.{f}, s.{f}))."
        )


def _refuse_nulls_that_would_not_stick(old: pa.Table, new: pa.Table, shape: TableShape) -> None:
    """On a partial-update table (PartialUpdateAvroPayload) every reader fills a written null from
    the stored record: an update setting a stored value to NULL would be written and never seen."""
    if not shape.nulls_keep_stored:
        return
    for name in old.column_names:
        lost = pc.and_(pc.is_null(new.column(name)), pc.is_valid(old.column(name)))
        if pc.any(lost).as_py():
            i = pc.index(lost, True).as_py()
            key = {k: old.column(k)[i].as_py() for k in shape.key_fields}
            raise HoodieKeyError(
                f"The update sets column '{name}' of the record with key {key} to NULL, but the table merges "
                "partially (PartialUpdateAvroPayload): readers keep the stored value where a record has a "
                "null, so the update would be lost. Nothing was written."
            )


def _refuse_bad_inserts(inserts: pa.Table, target: pa.Table, shape: TableShape) -> None:
    ident = list(shape.identity_fields)
    for k in shape.key_fields:
        if inserts.column(k).null_count:
            raise HoodieKeyError(
                f"The merge inserts {inserts.column(k).null_count} row(s) with a null record key field '{k}'."
            )
    counts = inserts.group_by(ident).aggregate([([], "count_all")])
    dup = counts.filter(pc.greater(counts.column("count_all"), 1))
    if dup.num_rows:
        raise HoodieKeyError(
            f"The merge inserts {dup.num_rows} key(s) more than once, e.g. "
            f"{dup.select(ident).slice(0, 1).to_pylist()[0]}: "
            "a Hudi table keeps one record per key. Nothing was written. Help: de-duplicate the source by key."
        )
    clash = inserts.select(ident).join(target.select(ident), keys=ident, join_type="inner")
    if clash.num_rows:
        raise HoodieKeyError(
            f"The merge inserts {clash.num_rows} row(s) whose key is already stored, e.g. "
            f"{clash.slice(0, 1).to_pylist()[0]} (the ON predicate did not match it): the insert would replace "
            "the stored record. Nothing was written. Help: match on the record key alone, or update it."
        )


# ------------------------------------------------------------------------------------- helpers


def _aliased(table: pa.Table, alias: str) -> pa.Table:
    return table.rename_columns([f"{alias}.{n}" for n in table.column_names])


def _scope_of(rows: pa.Table) -> Scope:
    sides: dict[str, list[str]] = {}
    for name in rows.column_names:
        if "." in name and not name.startswith("__"):
            alias, col = name.split(".", 1)
            sides.setdefault(alias, []).append(col)
    types = {f.name: f.type for f in rows.schema if not f.name.startswith("__")}
    return Scope(types, sides)


def _cast(col: pa.ChunkedArray | pa.Array, to: pa.DataType, name: str) -> pa.ChunkedArray | pa.Array:
    if col.type == to:
        return col
    try:
        return col.cast(to)
    except (pa.ArrowException, ValueError) as e:
        raise HoodieConfigError(f"A value for column '{name}' is of type {col.type}, not {to}: {e}") from e
