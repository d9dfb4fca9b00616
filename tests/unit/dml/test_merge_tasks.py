"""A MERGE cut into tasks (table/dml/merge_tasks.py), as a Spark stage runs it: the source is
shuffled by record key into shares, each share's changes are decided on its own (in any order), and
their union is written as one instant.  The result must equal the one-process merge of the same
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
from hoodie_sink.table.dml.merge_tasks import MergeTaskPlan, changes_of, record_keys
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
    share = shares(record_keys(plan, source))  # the shuffle: by record key
    order = list(range(TASKS))
    rng.shuffle(order)
    changes = [changes_of(plan, source.filter(pa.array(share == i)))[0] for i in order]
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
        clauses = [c for c in clauses if "by_source" not in c[0]] or [("when_matched_delete", (None,))]
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


def test_by_source_clauses_are_refused_in_tasks(tmp_path):
    opts = options("COPY_ON_WRITE", "BLOOM")
    hoodie_sink.write(rows(random.Random(1), list(range(5)), 1), str(tmp_path / "t"), opts)
    table = Table(str(tmp_path / "t"), opts)
    source = rows(random.Random(2), [1, 2], 2)
    spec = spec_of(table, source, "t.id = s.id", [("when_not_matched_by_source_delete", (None,))])
    with pytest.raises(HoodieConfigError, match="WHEN NOT MATCHED BY SOURCE"):
        MergeTaskPlan.of(DmlTarget.open(table.write_config(), None), spec, source.schema)
    spec = spec_of(
        table, source, "t.id = s.id", [("when_not_matched_insert", ({"id": "s.id + 100", "p": "s.p"},))]
    )
    with pytest.raises(HoodieConfigError, match="inserts record key field 'id'"):
        MergeTaskPlan.of(DmlTarget.open(table.write_config(), None), spec, source.schema)
