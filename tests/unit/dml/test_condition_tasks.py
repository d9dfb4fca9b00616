"""UPDATE and DELETE cut into tasks (table/dml/condition_tasks.py), without Spark: the per-rows
change function (condition_changes.ConditionDml), the driver's plan (slices the condition rules
out are in no share), and random sequences run share by share (in random order) against a MODEL of
the rows in plain Python and against the one-process call on a copy of the same table."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieKeyError
from hoodie_sink.table.client import write_read_changes
from hoodie_sink.table.client.table import Table
from hoodie_sink.table.dml.condition_changes import ConditionDml
from hoodie_sink.table.dml.condition_tasks import ConditionTaskPlan, changes_of, shares
from hoodie_sink.table.dml.merge_plan import DELETE, UPDATE, TableShape
from hoodie_sink.table.dml.table_merger import DmlTarget, delete_dml, update_dml
from tests.support.tables import assert_table_matches
from tests.unit.dml.test_merge_model import SCHEMA, options, rows

# (SQL condition, the same in Python with SQL's null logic: a null comparison is not true)
CONDITIONS = [
    ("p = 'a'", lambda r: r["p"] == "a"),
    ("v > 50", lambda r: r["v"] is not None and r["v"] > 50),
    ("v IS NULL OR s = 'x'", lambda r: r["v"] is None or r["s"] == "x"),
    ("s IN ('y', 'z') AND id < 30", lambda r: r["s"] in ("y", "z") and r["id"] < 30),
    ("p = 'b' AND v <= 40", lambda r: r["p"] == "b" and r["v"] is not None and r["v"] <= 40),
    ("id >= 1000", lambda r: False),  # every slice ruled out by its statistics
]


def _plus(v, n):
    return None if v is None else v + n


# (SET, the same in Python); ts never lowered, so no ordering refusal
UPDATES = [
    ({"v": "v + 1", "ts": "ts + 1"}, lambda r: {**r, "v": _plus(r["v"], 1), "ts": r["ts"] + 1}),
    ({"s": "upper(s)"}, lambda r: {**r, "s": None if r["s"] is None else r["s"].upper()}),
    ({"v": "coalesce(v, 0) * 2", "s": "'u'"}, lambda r: {**r, "v": (r["v"] or 0) * 2, "s": "u"}),
]
MOVE = ({"p": "'c'", "ts": "ts + 1"}, lambda r: {**r, "p": "c", "ts": r["ts"] + 1})  # global index only


def random_call(rng: random.Random, global_keys: bool):
    """(action, predicate, updates or None, the model's step: rows -> rows)."""
    cond, test = rng.choice(CONDITIONS)
    if rng.random() < 0.35:
        return DELETE, cond, None, lambda rs: [r for r in rs if not test(r)]
    sets, fn = rng.choice(UPDATES + ([MOVE] if global_keys else []))
    return UPDATE, cond, sets, lambda rs: [fn(r) if test(r) else r for r in rs]


def call(table: Table, action: str, cond: str, sets, spark=None) -> dict[str, int]:
    if action == DELETE:
        return table.delete(cond, spark=spark)
    return table.update(sets, cond, spark=spark)


def model_count(before: list[dict], action: str, cond: str) -> int:
    test = dict(CONDITIONS)[cond]
    return sum(1 for r in before if test(r))


def start_table(path, opts, rng: random.Random) -> list[dict]:
    """40 rows in three partitions (a file slice each), then 20 more keys; the model's rows."""
    first, more = rows(rng, list(range(40)), 1), rows(rng, list(range(40, 60)), 2)
    hoodie_sink.write(first, str(path), {**opts, "hoodie.datasource.write.operation": "upsert"})
    hoodie_sink.write(more, str(path), {**opts, "hoodie.datasource.write.operation": "upsert"})
    return first.to_pylist() + more.to_pylist()


def in_tasks(table: Table, dml: ConditionDml, rng: random.Random) -> dict[str, int]:
    """What the Spark job does, in this process: plan on the driver, shares in any order."""
    target = DmlTarget.open(table.write_config(), write_read_changes)
    plan, share_list = ConditionTaskPlan.of(target, dml, max_tasks=2)
    rng.shuffle(share_list)
    done = [changes_of(plan, share) for share in share_list]
    if done:
        target.write_changes(pa.concat_tables([changes for changes, _ in done]))
    return {dml.metric: sum(m[dml.metric] for _, m in done)}


# ------------------------------------------------------------------------ the per-rows function

SHAPE = TableShape(SCHEMA, ("id",), ("p",), global_keys=False, moves_partitions=False, event_time_field="ts")


def test_the_changes_of_rows_are_the_union_of_their_parts():
    stored = rows(random.Random(3), list(range(30)), 1)
    for dml in (
        ConditionDml(UPDATE, "v > 30", {"v": "v - 1", "ts": "ts + 1"}),
        ConditionDml(DELETE, "s = 'x'"),
    ):
        whole = dml.changes(SHAPE, stored)
        parts = [dml.changes(SHAPE, stored.slice(0, 12)), dml.changes(SHAPE, stored.slice(12))]
        for kind in ("upserts", "deletes"):
            assert pa.concat_tables([getattr(p, kind) for p in parts]).equals(getattr(whole, kind))
        assert sum(p.metrics[dml.metric] for p in parts) == whole.metrics[dml.metric]
    got = ConditionDml(UPDATE, "v > 30", {"v": "v - 1", "ts": "ts + 1"}).changes(SHAPE, stored)
    want = [{**r, "v": r["v"] - 1, "ts": 2} for r in stored.to_pylist() if r["v"] is not None and r["v"] > 30]
    assert got.upserts.to_pylist() == want and got.metrics == {"num_updated_rows": len(want)}
    deleted = ConditionDml(DELETE, None).changes(SHAPE, stored)
    assert deleted.deletes.equals(stored) and deleted.metrics == {"num_deleted_rows": 30}


def test_a_mistake_is_found_on_the_driver_before_any_row_is_read():
    with pytest.raises(HoodieConfigError, match="unknown column 'nope'"):
        ConditionDml(DELETE, "nope = 1").check(SHAPE)
    with pytest.raises(HoodieConfigError, match="unknown column 'nope'"):
        ConditionDml(UPDATE, None, {"v": "nope + 1"}).check(SHAPE)
    with pytest.raises(HoodieConfigError, match="record key field 'id'"):
        ConditionDml(UPDATE, None, {"id": "id + 1"}).check(SHAPE)


def test_a_refusal_of_a_row_is_decided_where_the_row_is():
    stored = rows(random.Random(3), list(range(5)), 7)
    with pytest.raises(HoodieKeyError, match="ordering field"):
        ConditionDml(UPDATE, "id = 2", {"ts": "ts - 1"}).changes(SHAPE, stored)
    # the row lives in another share: this one changes nothing and refuses nothing
    assert ConditionDml(UPDATE, "id = 2", {"ts": "ts - 1"}).changes(SHAPE, stored.slice(3)).metrics == {
        "num_updated_rows": 0
    }


# -------------------------------------------------------------------------------------- the plan


def test_shares_cover_every_slice_once_in_runs():
    refs = [f"p{i}" for i in range(5)]
    assert shares(refs, 8) == [(r,) for r in refs]
    assert shares(list(reversed(refs)), 2) == [("p0", "p1", "p2"), ("p3", "p4")]
    assert shares([], 4) == []


def test_the_plan_leaves_out_the_slices_the_condition_rules_out(tmp_path):
    opts = options("COPY_ON_WRITE", "BLOOM")
    start_table(tmp_path / "t", opts, random.Random(5))
    target = DmlTarget.open(Table(str(tmp_path / "t"), opts).write_config(), None)
    assert len(target.refs_where(None)) == 3  # one slice per partition
    _, only_a = ConditionTaskPlan.of(target, delete_dml("p = 'a' AND v > 0"), max_tasks=8)
    assert len(only_a) == 1 and all("/a/" in f"/{ref}" for ref in only_a[0])
    _, none = ConditionTaskPlan.of(target, update_dml({"v": "0"}, "id >= 1000"), max_tasks=8)
    assert none == []
    plan, every = ConditionTaskPlan.of(target, delete_dml("v > 50"), max_tasks=2)
    assert sorted(r for s in every for r in s) == sorted(target.refs_where(None)) and len(every) == 2
    assert plan.read_instants == tuple(target.snapshot.timeline.instants)


# -------------------------------------------------------------- random sequences: model, one process


@pytest.mark.parametrize("table_type,index", [("COPY_ON_WRITE", "BLOOM"), ("MERGE_ON_READ", "GLOBAL_BLOOM")])
@pytest.mark.parametrize("seed", [1, 2])
def test_updates_and_deletes_in_tasks_equal_the_model_and_the_one_process_call(
    tmp_path, table_type, index, seed
):
    rng = random.Random(seed)
    opts = options(table_type, index)
    model = start_table(tmp_path / "one", opts, random.Random(seed))
    start_table(tmp_path / "tasks", opts, random.Random(seed))
    one, tasks = Table(str(tmp_path / "one"), opts), Table(str(tmp_path / "tasks"), opts)
    for _ in range(6):
        action, cond, sets, step = random_call(rng, index == "GLOBAL_BLOOM")
        dml = delete_dml(cond) if action == DELETE else update_dml(sets, cond)
        want = {dml.metric: model_count(model, action, cond)}
        assert call(one, action, cond, sets) == want
        assert in_tasks(tasks, dml, rng) == want
        model = step(model)
        assert_table_matches(one.path, model)
        assert_table_matches(tasks.path, model)
