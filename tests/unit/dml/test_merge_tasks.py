"""A MERGE cut into tasks (table/dml/merge_tasks.py), as a Spark stage runs it: the source is
shuffled by record key into shares (with WHEN NOT MATCHED BY SOURCE, the stored rows those clauses
may change join them, read by scan tasks of their own), each share's changes are decided on its own
(in any order), and their union is written as one instant.  The result must equal the one-process merge of the same
source on a copy of the same table (itself checked against delta-rs in test_merge_model.py), and
the two must fail on the same calls.  Random sequences, several seeds, COW and MOR."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieKeyError
from hoodie_sink.table.client import write_read_changes
from hoodie_sink.table.client.table import Table
from hoodie_sink.table.dml.merge_plan import MergeSpec
from hoodie_sink.table.dml.merge_tasks import MergeTaskPlan, changes_of, record_keys, stored_rows_of
from hoodie_sink.table.dml.table_merger import DmlTarget
from tests.support.tables import assert_table_matches, data_rows
from tests.unit.dml.test_merge_model import options, random_merge, rows

TASKS = 3


def spec_of(table: Table, source: pa.Table, on: str, clauses) -> MergeSpec:
    merger = table.merge(source, on, source_alias="s", target_alias="t")
    for method, args in clauses:
        merger = getattr(merger, method)(*args)
    return MergeSpec(merger.predicate, merger.source_alias, merger.target_alias, tuple(merger.clauses))


def merge_in_tasks(table: Table, source: pa.Table, spec: MergeSpec, rng: random.Random) -> None:
    target = DmlTarget.open(table.write_config(), write_read_changes)  # the driver
    plan = MergeTaskPlan.of(target, spec, source.schema)
    keys = record_keys(plan, source)
    stored, stored_share = None, np.array([], np.int64)
    if plan.stored_slices is not None:  # two scan tasks, each a share of the slices
        scans = [stored_rows_of(plan, list(plan.stored_slices[i::2])) for i in range(2)]
        stored = pa.concat_tables([r for r, _ in scans])
        stored_keys = pa.chunked_array([k for _, k in scans], pa.string()).combine_chunks()
        keys = pa.chunked_array([keys, stored_keys], pa.string()).combine_chunks()
    share = shares(keys)  # the shuffle: by record key, the source's rows and the stored rows alike
    share, stored_share = share[: source.num_rows], share[source.num_rows :]
    order = list(range(TASKS))
    rng.shuffle(order)
    changes = [
        changes_of(
            plan,
            source.filter(pa.array(share == i)),
            None if stored is None else stored.filter(pa.array(stored_share == i)),
        )[0]
        for i in order
    ]
    target.write_changes(pa.concat_tables(changes))


def shares(keys: pa.Array) -> np.ndarray:
    """A stand-in for Spark's hash partitioning: every row of one key in one share (null keys in
    share 0)."""
    codes = pc.fill_null(pc.dictionary_encode(keys).indices, 0)
    return np.asarray(codes.to_numpy(zero_copy_only=False)) * 7919 % TASKS


@pytest.mark.parametrize("table_type,index", [("COPY_ON_WRITE", "BLOOM"), ("MERGE_ON_READ", "GLOBAL_BLOOM")])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_merge_in_tasks_equals_the_merge_in_one_process(tmp_path, table_type, index, seed):
    rng = random.Random(seed)
    global_keys = index == "GLOBAL_BLOOM"
    opts = options(table_type, index)
    first = rows(rng, list(range(40)), 1)
    for name in ("one", "tasks"):
        hoodie_sink.write(
            first, str(tmp_path / name), {**opts, "hoodie.datasource.write.operation": "upsert"}
        )
    one, tasks = Table(str(tmp_path / "one"), opts), Table(str(tmp_path / "tasks"), opts)
    compared = 0
    for round_ in range(8):
        ids = [rng.randrange(60) for _ in range(rng.randint(3, 25))]
        source = rows(rng, ids, rng.choice([0, 5]) + round_)
        on, clauses = random_merge(rng, global_keys)
        spec = spec_of(one, source, on, clauses)
        errors = []
        try:
            merger = one.merge(source, on, source_alias="s", target_alias="t")
            merger.clauses.extend(spec.clauses)
            merger.execute()
        except HoodieKeyError as e:
            errors.append(("one", str(e).split(",")[0]))
        try:
            merge_in_tasks(tasks, source, spec, rng)
        except HoodieKeyError as e:
            errors.append(("tasks", str(e).split(",")[0]))
        kinds = {k for k, _ in errors}
        assert kinds in (set(), {"one", "tasks"}), (round_, errors)
        assert_table_matches(tasks.path, data_rows(hoodie_sink.read(one.path)))
        compared += 1
    assert compared == 8


def test_an_insert_under_another_key_is_refused_in_tasks(tmp_path):
    opts = options("COPY_ON_WRITE", "BLOOM")
    hoodie_sink.write(rows(random.Random(1), list(range(5)), 1), str(tmp_path / "t"), opts)
    table = Table(str(tmp_path / "t"), opts)
    source = rows(random.Random(2), [1, 2], 2)
    spec = spec_of(
        table, source, "t.id = s.id", [("when_not_matched_insert", ({"id": "s.id + 100", "p": "s.p"},))]
    )
    with pytest.raises(HoodieConfigError, match="inserts record key field 'id'"):
        MergeTaskPlan.of(DmlTarget.open(table.write_config(), None), spec, source.schema)


def test_by_source_scans_only_the_slices_its_condition_may_select(tmp_path):
    """One WHEN NOT MATCHED BY SOURCE clause: its condition prunes the slices the scan tasks read
    (the partition 'b' here); a matched row elsewhere is still found by the index."""
    opts = options("COPY_ON_WRITE", "BLOOM")
    hoodie_sink.write(rows(random.Random(1), list(range(30)), 1), str(tmp_path / "t"), opts)
    table = Table(str(tmp_path / "t"), opts)
    source = rows(random.Random(2), [1, 2], 2)
    target = DmlTarget.open(table.write_config(), None)
    spec = spec_of(table, source, "t.id = s.id", [("when_not_matched_by_source_delete", ("t.p = 'b'",))])
    plan = MergeTaskPlan.of(target, spec, source.schema)
    assert plan.stored_slices and not plan.every_slice
    assert all(ref.startswith("b/") for ref in plan.stored_slices) and len(plan.stored_slices) < len(
        target.refs_where(None)
    )
    everything = spec_of(table, source, "t.id = s.id", [("when_not_matched_by_source_delete", (None,))])
    plan = MergeTaskPlan.of(target, everything, source.schema)
    assert plan.every_slice and plan.stored_slices == tuple(target.refs_where(None))
