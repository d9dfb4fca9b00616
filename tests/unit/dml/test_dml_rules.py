"""MERGE, UPDATE and DELETE: what a keyed table refuses (each error names the key, column or
expression, and nothing is written), ties and moves, the OCC check from the read, expressions.
docs/design/table-dml.md."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieKeyError, HoodieWriteConflictError
from hoodie_sink.table.client import write_read_changes
from hoodie_sink.table.client.table import Table
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.storage import Storage
from tests.support.tables import OCC_OPTS, assert_table_matches

BASE = {
    "hoodie.table.name": "r",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
}
ROWS = [
    {"id": 1, "p": "a", "v": 10, "ts": 5, "d": dt.date(2024, 1, 1)},
    {"id": 2, "p": "a", "v": 20, "ts": 5, "d": dt.date(2024, 2, 1)},
    {"id": 3, "p": "b", "v": 30, "ts": 5, "d": dt.date(2024, 3, 1)},
]
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("ts", pa.int64()),
                    ("d", pa.date32())])  # fmt: skip


def table(tmp_path, table_type="COPY_ON_WRITE", index="BLOOM", extra=None) -> Table:
    opts = {
        **BASE,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.index.type": index,
        **(extra or {}),
    }
    path = str(tmp_path / "t")
    hoodie_sink.write(pa.Table.from_pylist(ROWS, schema=SCHEMA), path, opts)
    return Table(path, opts)


def source(rows) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def instants(t: Table) -> list[str]:
    return [i.timestamp for i in ActiveTimeline.load(Storage(t.path)).completed()]


def test_the_on_predicate_must_equate_the_record_key(tmp_path):
    t = table(tmp_path)
    with pytest.raises(HoodieConfigError, match="record key field.*id.*t.id = s.id"):
        t.merge(source(ROWS[:1]), "t.v = s.v", "s", "t").when_matched_update_all().execute()


def test_an_update_of_the_record_key_is_refused(tmp_path):
    t = table(tmp_path)
    with pytest.raises(HoodieConfigError, match="sets record key field 'id'"):
        t.merge(source(ROWS[:1]), "t.id = s.id", "s", "t").when_matched_update({"id": "s.id + 100"}).execute()
    with pytest.raises(HoodieConfigError, match="sets record key field 'id'"):
        t.update({"id": "id + 1"})


@pytest.mark.parametrize(
    "expr,named",
    [
        ("s.nope > 1", "unknown column 's.nope'"),
        ("x.v > 1", "unknown table alias 'x'"),
        ("v > 1", "column 'v' is ambiguous"),
        ("sqrt(s.v) > 1", "is not supported"),
        ("s.v IN (SELECT 1)", "subquery"),
    ],
)
def test_expressions_we_cannot_evaluate_are_refused_by_name(tmp_path, expr, named):
    t = table(tmp_path)
    before = instants(t)
    with pytest.raises(HoodieConfigError, match=named):
        t.merge(source(ROWS[:1]), "t.id = s.id", "s", "t").when_matched_update_all(expr).execute()
    assert instants(t) == before


def test_an_insert_of_a_key_twice_or_of_a_stored_key_is_refused_and_nothing_written(tmp_path):
    t = table(tmp_path)
    before = instants(t)
    twice = source([{**ROWS[0], "id": 9}, {**ROWS[0], "id": 9, "v": 1}])
    with pytest.raises(HoodieKeyError, match="inserts 1 key.*more than once.*9"):
        t.merge(twice, "t.id = s.id", "s", "t").when_not_matched_insert_all().execute()
    # the extra condition leaves key 1 unmatched: inserting it would replace the stored record
    with pytest.raises(HoodieKeyError, match="already stored.*'id': 1"):
        t.merge(
            source(ROWS[:1]), "t.id = s.id AND t.v > 100", "s", "t"
        ).when_not_matched_insert_all().execute()
    assert instants(t) == before
    assert_table_matches(t.path, ROWS)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_ordering_field_lowered_is_refused_equal_is_applied(tmp_path, table_type):
    t = table(tmp_path, table_type)
    with pytest.raises(HoodieKeyError, match="ordering field 'ts'.*'id': 1.*below the stored 5"):
        t.merge(source([{**ROWS[0], "ts": 4}]), "t.id = s.id", "s", "t").when_matched_update_all().execute()
    # an update that keeps the stored ordering value wins, as Hudi's payload lets an equal one win
    t.update({"v": "v + 1"}, "id = 1")
    t.merge(source([{**ROWS[1], "v": 99}]), "t.id = s.id", "s", "t").when_matched_update(
        {"v": "s.v"}
    ).execute()
    expected = [{**ROWS[0], "v": 11}, {**ROWS[1], "v": 99}, ROWS[2]]
    assert_table_matches(t.path, expected)
    if table_type == "MERGE_ON_READ":
        t.compact()
        assert_table_matches(t.path, expected)


def test_a_delete_wins_whatever_the_ordering_value(tmp_path):
    t = table(tmp_path, "MERGE_ON_READ")
    t.merge(source([{**ROWS[0], "ts": 0}]), "t.id = s.id", "s", "t").when_matched_delete().execute()
    assert_table_matches(t.path, ROWS[1:])


def test_a_move_to_another_partition_is_refused_by_a_partition_scoped_index(tmp_path):
    t = table(tmp_path, index="BLOOM")
    with pytest.raises(HoodieKeyError, match="partition field 'p'.*'id': 1.*'a' to 'b'"):
        t.update({"p": "'b'", "ts": "ts + 1"}, "id = 1")


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_global_index_moves_the_record(tmp_path, table_type):
    t = table(tmp_path, table_type, index="GLOBAL_BLOOM")
    t.update({"p": "'b'", "ts": "ts + 1"}, "id = 1")
    got = assert_table_matches(t.path, [{**ROWS[0], "p": "b", "ts": 6}, *ROWS[1:]])
    parts = dict(
        zip(got.column("id").to_pylist(), got.column("_hoodie_partition_path").to_pylist(), strict=True)
    )
    assert parts[1] == "b"


def test_nothing_to_change_writes_no_instant(tmp_path):
    t = table(tmp_path)
    before = instants(t)
    assert t.delete("v > 1000") == {"num_deleted_rows": 0}
    assert t.update({"v": "0"}, "id = 42") == {"num_updated_rows": 0}
    m = t.merge(source([{**ROWS[0], "id": 50}]), "t.id = s.id", "s", "t").when_matched_delete().execute()
    assert m["num_target_rows_deleted"] == 0
    assert instants(t) == before


def test_a_write_between_the_read_and_the_commit_is_a_conflict_under_occ(tmp_path):
    t = table(tmp_path, extra=OCC_OPTS)

    def another_writer_first(cfg, data, read_on, extra=None):
        hoodie_sink.write(source([{**ROWS[0], "v": 77, "ts": 9}]), t.path, t.options)  # same file group
        return write_read_changes(cfg, data, read_on, extra)

    from hoodie_sink.table.dml.table_merger import update

    with pytest.raises(HoodieWriteConflictError, match="conflicts with commit"):
        update(t.write_config(), another_writer_first, {"v": "v + 1", "ts": "ts + 1"}, "id = 1")
    assert_table_matches(t.path, [{**ROWS[0], "v": 77, "ts": 9}, *ROWS[1:]])


def test_conditions_and_assignments_evaluate_as_sql(tmp_path):
    t = table(tmp_path)
    t.update({"v": "CASE WHEN d >= '2024-02-01' THEN v * 2 ELSE -v END", "ts": "ts + 1"}, "d < '2024-03-01'")
    t.delete("p = 'b' AND NOT (v IS NULL)")
    assert_table_matches(t.path, [{**ROWS[0], "v": -10, "ts": 6}, {**ROWS[1], "v": 40, "ts": 6}])


def test_a_virtual_key_table_is_merged_by_its_key_columns(tmp_path):
    t = table(tmp_path, extra={"hoodie.populate.meta.fields": "false"})
    t.merge(source([{**ROWS[2], "v": 31, "ts": 6}, {**ROWS[0], "id": 4}]), "t.id = s.id", "s", "t") \
        .when_matched_update_all().when_not_matched_insert_all().execute()  # fmt: skip
    assert_table_matches(t.path, [*ROWS[:2], {**ROWS[2], "v": 31, "ts": 6}, {**ROWS[0], "id": 4}])


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_on_a_partial_update_table_a_merge_of_some_columns_updates_those_and_a_null_is_refused(
    tmp_path, table_type
):
    """A merge that sets a subset of columns is a partial update (the others stay as stored); on a
    PartialUpdateAvroPayload table a NULL written over a stored value would be filled back by
    every reader, so the DML refuses it by key and column."""
    partial = {
        "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.PartialUpdateAvroPayload"
    }
    t = table(tmp_path, table_type, extra=partial)
    t.merge(source([{**ROWS[0], "v": 11, "ts": 6}]), "t.id = s.id", "s", "t") \
        .when_matched_update({"v": "s.v", "ts": "s.ts"}).execute()  # fmt: skip
    with pytest.raises(HoodieKeyError, match="column 'v' of the record with key \\{'id': 2\\} to NULL"):
        t.update({"v": "NULL", "ts": "ts + 1"}, "id = 2")
    expected = [{**ROWS[0], "v": 11, "ts": 6}, *ROWS[1:]]
    if table_type == "MERGE_ON_READ":
        t.compact()  # hudi-rs 0.5.0 reads a partial-update slice only without logs (docs/hudi/partial-update.md)
    assert_table_matches(t.path, expected)


def test_the_dml_delete_marker_is_refused_in_any_other_write(tmp_path):
    """Only the DML's own write takes its delete marker: in a user's input it is a reserved column."""
    from hoodie_sink.errors import HoodieSchemaError

    t = table(tmp_path)
    marked = source(ROWS[:1]).append_column("_hoodie_dml_delete", pa.array([True]))
    with pytest.raises(HoodieSchemaError, match="_hoodie_dml_delete.*reserved prefix"):
        hoodie_sink.write(marked, t.path, t.options)
    assert_table_matches(t.path, ROWS)
