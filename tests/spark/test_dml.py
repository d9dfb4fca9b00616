"""MERGE with a Spark DataFrame source (datasource/dml.py): one Spark job, the source shuffled by
record key into tasks, one instant.  Random sequences against delta-rs running the same merges
on a Delta copy (the model of tests/unit/dml/test_merge_model.py); both tables read by hudi-rs and
our reader.  A source row that matches nothing the driver never sees."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError
from tests.support.tables import assert_table_matches, data_rows
from tests.unit.dml.test_merge_model import apply, delta_rows, first_of_each_key, options, random_merge, rows


@pytest.mark.parametrize("table_type,index", [("COPY_ON_WRITE", "BLOOM"), ("MERGE_ON_READ", "GLOBAL_BLOOM")])
def test_a_dataframe_merge_matches_delta_rs(spark, tmp_path, table_type, index):
    rng = random.Random(11)
    global_keys = index == "GLOBAL_BLOOM"
    hudi_path, delta_path = tmp_path / "hudi", tmp_path / "delta"
    opts = options(table_type, index)
    first = rows(rng, list(range(40)), 1)
    hoodie_sink.write(first, str(hudi_path), {**opts, "hoodie.datasource.write.operation": "upsert"})
    write_deltalake(str(delta_path), first)
    table = hoodie_sink.Table(str(hudi_path), opts)
    applied = 0
    for round_ in range(5):
        ids = [rng.randrange(60) for _ in range(rng.randint(3, 25))]
        source = rows(rng, ids, 10 + round_)  # later than any stored ts: no ordering refusal
        on, clauses = random_merge(rng, global_keys)
        if not any(method.startswith("when_matched") for method, _ in clauses):
            source = first_of_each_key(source)
        df = spark.createDataFrame(source.to_pandas()).repartition(3)
        ours = theirs = None
        try:
            apply(table.merge(df, on, source_alias="s", target_alias="t"), clauses)
        except Exception as e:  # noqa: BLE001 - a task's error reaches the driver wrapped by Spark
            ours = e
        try:
            apply(DeltaTable(str(delta_path)).merge(source, on, source_alias="s", target_alias="t"), clauses)
        except Exception as e:  # noqa: BLE001
            theirs = e
        if ours is not None or theirs is not None:
            assert ours is not None and theirs is not None, (round_, ours, theirs)
            assert (
                "several source rows" in str(ours)
                or "already stored" in str(ours)
                or "more than once" in str(ours)
            )
            if theirs is None:
                continue
        else:
            applied += 1
        assert_table_matches(hudi_path, delta_rows(delta_path))
    assert applied >= 2
    assert data_rows(hoodie_sink.read(str(hudi_path)))


def test_a_dataframe_merge_refuses_what_tasks_cannot_decide(spark, tmp_path):
    opts = options("COPY_ON_WRITE", "BLOOM")
    hoodie_sink.write(rows(random.Random(1), list(range(5)), 1), str(tmp_path / "t"), opts)
    table = hoodie_sink.Table(str(tmp_path / "t"), opts)
    df = spark.createDataFrame(rows(random.Random(2), [1, 2], 2).to_pandas())
    with pytest.raises(HoodieConfigError, match="inserts record key field 'id'"):
        table.merge(df, "t.id = s.id", "s", "t").when_not_matched_insert(
            {"id": "s.id + 100", "p": "s.p"}
        ).execute()


def test_not_matched_by_source_runs_in_tasks(spark, tmp_path):
    """The stored rows no source row matches, in tasks: pruned by the clause's condition (a
    partition), joined with the source by key; a matched row outside the pruned slices stays."""
    opts = options("MERGE_ON_READ", "BLOOM")
    path = str(tmp_path / "t")
    first = rows(random.Random(1), list(range(30)), 1)
    hoodie_sink.write(first, path, opts)
    table = hoodie_sink.Table(path, opts)
    kept = [r["id"] for r in first.to_pylist() if r["p"] == "b"][:2]
    df = spark.createDataFrame(
        first.filter(pc.is_in(first.column("id"), value_set=pa.array(kept))).to_pandas()
    )
    got = (
        table.merge(df.repartition(2), "t.id = s.id", "s", "t")
        .when_matched_update({"v": "s.v + 1000"})
        .when_not_matched_by_source_delete("t.p = 'b'")
        .execute()
    )
    expected = [
        {**r, "v": None if r["v"] is None else r["v"] + 1000} if r["id"] in kept else r
        for r in first.to_pylist()
        if r["p"] != "b" or r["id"] in kept
    ]
    assert got["num_target_rows_updated"] == 2
    assert got["num_target_rows_deleted"] == sum(r["p"] == "b" for r in first.to_pylist()) - 2
    assert_table_matches(path, expected)


def test_a_dataframe_merge_that_changes_nothing_commits_nothing_and_counts(spark, tmp_path):
    from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
    from hoodie_sink.table.storage import Storage

    opts = options("MERGE_ON_READ", "BLOOM")
    path = str(tmp_path / "t")
    hoodie_sink.write(rows(random.Random(1), list(range(10)), 1), path, opts)
    table = hoodie_sink.Table(path, opts)

    def writes() -> list[str]:
        timeline = ActiveTimeline.load(Storage(path))
        return [i.timestamp for i in timeline.completed(("commit", "deltacommit"))]

    before = writes()
    df = spark.createDataFrame(rows(random.Random(2), [50, 51], 2).to_pandas())
    got = table.merge(df, "t.id = s.id", "s", "t").when_matched_delete().execute()
    assert got == {"num_source_rows": 2, "num_target_rows_updated": 0, "num_target_rows_inserted": 0,
                   "num_target_rows_deleted": 0}  # fmt: skip
    assert writes() == before
    df = spark.createDataFrame(rows(random.Random(3), [1, 2, 70], 2).to_pandas())
    got = (
        table.merge(df, "t.id = s.id", "s", "t").when_matched_delete().when_not_matched_insert_all().execute()
    )
    assert (got["num_target_rows_deleted"], got["num_target_rows_inserted"]) == (2, 1)
    assert len(writes()) == len(before) + 1
    assert sorted(r["id"] for r in data_rows(hoodie_sink.read(path))) == [0, *range(3, 10), 70]


def test_a_dataframe_merge_adds_new_columns_with_merge_schema(spark, tmp_path):
    """merge_schema through Spark: the deciding tasks and the route see the evolved schema; rows
    the merge does not write read the new column as null."""
    opts = options("MERGE_ON_READ", "BLOOM")
    path = str(tmp_path / "t")
    first = rows(random.Random(1), list(range(8)), 1)
    hoodie_sink.write(first, path, opts)
    stored = {r["id"]: r for r in first.to_pylist()}
    changed = [{**stored[1], "v": 5, "ts": 2, "note": "a"}, {**stored[4], "v": 6, "ts": 2, "note": None},
               {"id": 30, "p": "a", "v": 7, "s": "x", "ts": 2, "note": "c"}]  # fmt: skip
    df = spark.createDataFrame(pa.Table.from_pylist(changed).to_pandas())
    got = (
        hoodie_sink.Table(path, opts)
        .merge(df, "t.id = s.id", "s", "t", merge_schema=True)
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (got["num_target_rows_updated"], got["num_target_rows_inserted"]) == (2, 1)
    expected = {i: {**r, "note": None} for i, r in stored.items()}
    expected.update({r["id"]: r for r in changed})
    assert_table_matches(path, list(expected.values()))
