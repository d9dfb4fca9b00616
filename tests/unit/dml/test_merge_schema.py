"""A merge that brings new columns (`merge_schema=True`, delta-rs's name) against delta-rs doing
the same on a Delta copy: the `*_all` clauses add the source's new columns (null in the rows the
merge does not write), the others leave them out (every matched row here meets a clause: delta-rs
1.6.6 also fills the new columns of a matched row no clause changes, and of one a clause naming its
columns updates, where a row keeps what it stores); copy-on-write and merge-on-read (with a
compaction after), read by hudi-rs and our reader; without `merge_schema` the new columns are
left out, as Delta leaves them (docs/design/table-dml.md#merge-schema)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import hoodie_sink
from hoodie_sink.table.client.table import Table
from tests.support.tables import assert_table_matches
from tests.unit.dml.test_merge_model import options, rows

WIDER = pa.schema([*rows(random.Random(0), [1], 1).schema, ("note", pa.string()), ("score", pa.float64())])


def wider(rng: random.Random, ids: list[int], ts: int, stored: pa.Table) -> pa.Table:
    """Rows of `ids` with two new columns; a stored key keeps its stored partition."""
    base = rows(rng, ids, ts)
    part = dict(zip(stored.column("id").to_pylist(), stored.column("p").to_pylist(), strict=True))
    parts = [part.get(i, p) for i, p in zip(ids, base.column("p").to_pylist(), strict=True)]
    base = base.set_column(base.schema.get_field_index("p"), "p", pa.array(parts, pa.string()))
    notes = pa.array([None if rng.random() < 0.3 else f"n{rng.randrange(9)}" for _ in ids])
    scores = pa.array([rng.random() for _ in ids])
    return base.append_column("note", notes).append_column("score", scores).cast(WIDER)


def delta_rows(path, schema: pa.Schema) -> list[dict]:
    return DeltaTable(str(path)).to_pyarrow_table().select(schema.names).cast(schema).to_pylist()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_merge_schema_adds_the_sources_new_columns_as_delta_rs_does(tmp_path, table_type):
    rng = random.Random(5)
    opts = options(table_type, "BLOOM")
    hudi_path, delta_path = tmp_path / "hudi", tmp_path / "delta"
    first = rows(rng, list(range(30)), 1)
    hoodie_sink.write(first, str(hudi_path), {**opts, "hoodie.datasource.write.operation": "upsert"})
    write_deltalake(str(delta_path), first)
    table = Table(str(hudi_path), opts)
    source = wider(rng, [*range(0, 30, 3), 40, 41], 5, first)

    def merge(target, **kw):
        return (
            target.merge(source, "t.id = s.id", source_alias="s", target_alias="t", merge_schema=True, **kw)
            .when_matched_update_all("s.v > 20")
            .when_matched_delete()
            .when_not_matched_insert_all()
            .execute()
        )

    ours = merge(table)
    theirs = merge(DeltaTable(str(delta_path)))
    for name in ("num_target_rows_updated", "num_target_rows_deleted"):
        assert ours[name] == theirs[name]
    assert ours["num_target_rows_inserted"] == theirs["num_target_rows_inserted"] == 2
    assert_table_matches(hudi_path, delta_rows(delta_path, WIDER))
    assert {"note", "score"} <= set(Table(str(hudi_path), opts).schema().names)
    # the next merge, with the table's own schema, keeps the new columns of the rows it does not touch
    later = wider(rng, [1, 2, 50], 9, first).select(first.schema.names)
    for target in (Table(str(hudi_path), opts), DeltaTable(str(delta_path))):
        target.merge(later, "t.id = s.id", source_alias="s", target_alias="t").when_matched_update(
            {"v": "s.v"}
        ).when_not_matched_insert_all().execute()
    assert_table_matches(hudi_path, delta_rows(delta_path, WIDER))
    if table_type == "MERGE_ON_READ":
        hoodie_sink.compact(str(hudi_path), opts)
        assert_table_matches(hudi_path, delta_rows(delta_path, WIDER))


def test_without_merge_schema_new_columns_are_left_out(tmp_path):
    rng = random.Random(6)
    opts = options("COPY_ON_WRITE", "BLOOM")
    path = tmp_path / "t"
    first = rows(rng, list(range(10)), 1)
    hoodie_sink.write(first, str(path), opts)
    source = wider(rng, [1, 20], 5, first)
    Table(str(path), opts).merge(
        source, "t.id = s.id", "s", "t"
    ).when_matched_update_all().when_not_matched_insert_all().execute()
    assert Table(str(path), opts).schema().names[-5:] == first.schema.names
    # a clause naming its columns keeps every other column as stored; a column added by this very
    # merge is null in the rows such a clause updates (delta-rs 1.6.6 copies the source's value
    # there: docs/design/table-dml.md#merge-schema)
    source = wider(rng, [2, 3], 6, first)
    Table(str(path), opts).merge(source, "t.id = s.id", "s", "t", merge_schema=True).when_matched_update_all(
        "t.id = 2"
    ).when_matched_update({"v": "s.v"}).execute()
    got = {r["id"]: r for r in hoodie_sink.read(str(path)).to_pylist()}
    assert got[2]["note"] == source.column("note")[0].as_py() and got[3]["note"] is None
    assert got[3]["v"] == source.column("v")[1].as_py()
    # with only named assignments there is nothing to add, merge_schema or not
    Table(str(path), opts).merge(source, "t.id = s.id", "s", "t", merge_schema=True).when_matched_update(
        {"v": "s.v"}
    ).execute()
    assert Table(str(path), opts).schema().names[-2:] == ["note", "score"]
