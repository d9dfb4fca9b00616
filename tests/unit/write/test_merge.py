"""Vectorised merging: the ordering rule, deletes, meta fields of copied and written rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from hoodie_sink.table.format.merge_rule import MergeRule
from hoodie_sink.table.write.merge import (
    CONTROL,
    DELETE,
    SOFT_DELETE,
    UPSERT,
    merge_file_group,
    reduce_changes,
)

EVENT_TIME = MergeRule("ts", base_ordering=True)  # the precombine field "ts", DefaultHoodieRecordPayload
LATEST = MergeRule()  # no precombine field: the latest record wins


def changes(keys, vals, ts, kinds=None, order=None):
    n = len(keys)
    return pa.Table.from_arrays(
        [pa.array(vals, pa.string()), pa.array(ts, pa.int64()), pa.array(keys), pa.array(["p"] * n),
         pa.array(order if order is not None else list(range(n)), pa.int64()),
         pa.array(kinds if kinds is not None else [UPSERT] * n, pa.int8())],
        names=["v", "ts", *CONTROL],
    )  # fmt: skip


def base(keys, vals, ts, instant="1"):
    n = len(keys)
    return pa.table({
        "_hoodie_commit_time": [instant] * n, "_hoodie_commit_seqno": [f"{instant}_0_{i}" for i in range(n)],
        "_hoodie_record_key": keys, "_hoodie_partition_path": ["p"] * n, "_hoodie_file_name": ["f"] * n,
        "v": pa.array(vals, pa.string()), "ts": pa.array(ts, pa.int64()),
    })  # fmt: skip


def test_reduce_keeps_highest_precombine_then_latest():
    c = changes(
        ["a", "a", "b", "b", "c"], ["a1", "a2", "b1", "b2", "c1"], [5, 3, 1, 1, None], order=[0, 1, 2, 3, 4]
    )
    r = reduce_changes(c, EVENT_TIME)
    got = dict(zip(r.column("_hk").to_pylist(), r.column("v").to_pylist(), strict=True))
    assert got == {"a": "a1", "b": "b2", "c": "c1"}  # a: higher ts; b: tie -> later
    r = reduce_changes(c, LATEST)
    got = dict(zip(r.column("_hk").to_pylist(), r.column("v").to_pylist(), strict=True))
    assert got == {"a": "a2", "b": "b2", "c": "c1"}  # latest wins


def test_reduce_per_partition_keeps_one_change_per_key_and_partition():
    """Partition-scoped indexes: (key, partition) is the record; a delete of k in d4 and a later
    insert of k in d0 both survive.  A global index combines per key."""
    c = changes(["k", "k", "k", "j"], ["del", "ins", "ins2", "j1"], [1, 2, 3, 1],
                kinds=[SOFT_DELETE, UPSERT, UPSERT, UPSERT])  # fmt: skip
    c = c.set_column(c.schema.get_field_index("_hp"), "_hp", pa.array(["d4", "d0", "d0", "d0"]))
    r = reduce_changes(c, EVENT_TIME, per_partition=True)
    got = sorted(
        zip(r.column("_hk").to_pylist(), r.column("_hp").to_pylist(), r.column("v").to_pylist(), strict=True)
    )
    assert got == [("j", "d0", "j1"), ("k", "d0", "ins2"), ("k", "d4", "del")]
    r = reduce_changes(c, EVENT_TIME)
    assert sorted(r.column("v").to_pylist()) == ["ins2", "j1"]


def test_merge_updates_in_place_inserts_last_deletes_and_ordering():
    old = base(["k1", "k2", "k3", "k4"], ["o1", "o2", "o3", "o4"], [10, 10, 10, 10])
    c = changes(
        ["k2", "k3", "k4", "k5", "k9", "k1"], ["n2", "n3", "n4", "n5", "n9", "n1"], [11, 9, 10, 1, 1, 5],
        kinds=[UPSERT, UPSERT, SOFT_DELETE, UPSERT, DELETE, DELETE],
    )  # fmt: skip
    m = merge_file_group(old, c, EVENT_TIME, "2", 0)
    # k1: delete op always wins; k2: higher ts -> update; k3: lower ts -> stored stays;
    # k4: soft delete with equal ts -> incoming wins -> deleted; k5 insert; k9 missing delete
    assert m.keys.to_pylist() == ["k2", "k3", "k5"]
    assert m.data.column("v").to_pylist() == ["n2", "o3", "n5"]
    assert m.commit_times.to_pylist() == ["2", "1", "2"]
    assert m.seqnos.to_pylist() == ["2_0_0", "1_0_2", "2_0_2"]
    assert (m.num_updates, m.num_inserts, m.num_deletes, m.num_missing_deletes) == (1, 1, 2, 1)


def test_merge_without_precombine_latest_wins_and_append_only():
    old = base(["k1"], ["o1"], [10])
    m = merge_file_group(old, changes(["k1"], ["n1"], [1]), LATEST, "2", 3)
    assert m.data.column("v").to_pylist() == ["n1"] and m.seqnos.to_pylist() == ["2_3_0"]
    m = merge_file_group(old, changes(["k1"], ["n1"], [1]), LATEST, "2", 3, append_only=True)
    assert m.keys.to_pylist() == ["k1", "k1"] and m.num_inserts == 1


def test_merge_large_is_vectorised():
    n = 300_000
    keys = [f"k{i:07d}" for i in range(n)]
    old = base(keys, ["o"] * n, list(range(n)))
    idx = np.random.default_rng(1).choice(n, 50_000, replace=False)
    c = changes([keys[i] for i in idx] + [f"x{i}" for i in range(1000)], ["n"] * 51_000, [n] * 51_000)
    m = merge_file_group(old, c, EVENT_TIME, "2", 0)
    assert m.data.num_rows == n + 1000 and m.num_updates == 50_000
