"""Insert buckets of a routed write (hoodie_sink/table/write/insert_buckets.py), checked against a
model: each bucket's planned records, and the records that a lookup sends to it."""

from __future__ import annotations

import random
import re
from collections import Counter

import pyarrow as pa
import pytest

from hoodie_sink.table.write.insert_buckets import (
    SmallFile,
    new_file_id,
    plan_insert_buckets,
)
from hoodie_sink.table.write.plan import FileSizing
from tests.support.routing import spark_xxhash64

MB = 1024 * 1024
# 120 MB files at 1 KB a record: a new file group takes 122,880 records; small below 100 MB
SIZING = FileSizing(max_file_size=120 * MB, small_file_limit=100 * MB, small_file_candidates_limit=1,
                    avg_record_size=1024)  # fmt: skip
PER_GROUP = 120 * 1024


def test_small_files_fill_first_smallest_first_then_sized_new_file_groups():
    small = {"p": [SmallFile("big", 110 * MB), SmallFile("b", 90 * MB), SmallFile("a", 60 * MB)]}
    plan = plan_insert_buckets({"p": 400_000}, small, SIZING, nonce="n1")
    p = plan.by_partition["p"]
    # "big" is above the small-file limit; "a" (60 MB, room 61,440) before "b" (90 MB, room 30,720)
    assert p.file_ids[:2] == ("a", "b") and p.records[:2] == (61_440, 30_720)
    rest = 400_000 - 61_440 - 30_720
    assert p.records[2:] == (PER_GROUP, PER_GROUP, rest - 2 * PER_GROUP)
    assert p.new == (False, False, True, True, True)
    assert p.inserts == 400_000


def test_a_partition_whose_inserts_fit_its_small_files_gets_no_new_file_group():
    small = {"p": [SmallFile("a", 60 * MB), SmallFile("b", 90 * MB)]}
    p = plan_insert_buckets({"p": 1000, "q": 0}, small, SIZING, nonce="n1").by_partition
    assert p["p"].file_ids == ("a",) and p["p"].records == (1000,)
    assert "q" not in p


def test_new_file_ids_are_hudi_shaped_deterministic_and_never_shared_between_writes():
    fid = new_file_id("n1", "p=1", 0)
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-0", fid)
    assert fid == new_file_id("n1", "p=1", 0)  # a retried task names the same file group
    others = {new_file_id("n2", "p=1", 0), new_file_id("n1", "p=2", 0), new_file_id("n1", "p=1", 1)}
    assert fid not in others and len(others) == 3


def _keys(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(['order', 'trip'])}-{i:09d}" for i in rng.sample(range(10 * n), n)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_insert_lands_in_a_bucket_of_its_partition_about_as_planned(seed):
    rng = random.Random(seed)
    parts = [f"city={c}" for c in "abcde"]
    counts = {p: rng.randrange(1, 40_000) for p in parts}
    small = {p: [SmallFile(f"{p}-s{i}", rng.randrange(1, 100) * MB) for i in range(rng.randrange(0, 3))]
             for p in parts}  # fmt: skip
    sizing = FileSizing(120 * MB, 100 * MB, 1, avg_record_size=rng.choice([2048, 8192, 65536]))
    plan = plan_insert_buckets(counts, small, sizing, nonce=f"n{seed}")
    part_of_row = [p for p in parts for _ in range(counts[p])]
    rng.shuffle(part_of_row)
    keys = _keys(len(part_of_row), seed)
    fids = plan.file_ids_of(pa.array(part_of_row), spark_xxhash64(keys)).to_pylist()
    landed = Counter(zip(part_of_row, fids, strict=True))
    for p in parts:
        buckets = plan.by_partition[p]
        assert {f for (q, f) in landed if q == p} <= set(buckets.file_ids)
        for fid, planned in zip(buckets.file_ids, buckets.records, strict=True):
            got = landed[(p, fid)]
            # a hash share, not a count: within 5 sigma of the planned share (binomial)
            share = planned / counts[p]
            sigma = (counts[p] * share * (1 - share)) ** 0.5
            assert abs(got - planned) <= 5 * sigma + 1, (p, fid, got, planned)
    # the lookup depends on the key alone: any order, any split into tasks, the same file ids
    order = list(range(len(keys)))
    rng.shuffle(order)
    half = len(order) // 2
    again = {}
    for chunk in (order[:half], order[half:]):
        got = plan.file_ids_of(
            pa.array([part_of_row[i] for i in chunk]), spark_xxhash64([keys[i] for i in chunk])
        )
        again.update(zip(chunk, got.to_pylist(), strict=True))
    assert [again[i] for i in range(len(keys))] == fids


def test_keys_that_differ_in_one_character_spread_over_the_buckets():
    keys = [f"key-{i}" for i in range(100_000)]
    plan = plan_insert_buckets({"p": 100_000}, {}, FileSizing(MB, 0, 1, 100), "n")
    sizes = Counter(plan.file_ids_of(pa.array(["p"] * len(keys)), spark_xxhash64(keys)).to_pylist())
    # ten new file groups of 10,485 records (the last one 5,635): none empty, none twice its share
    assert len(sizes) == 10
    buckets = plan.by_partition["p"]
    for fid, planned in zip(buckets.file_ids, buckets.records, strict=True):
        assert 0.8 * planned <= sizes[fid] <= 1.2 * planned
    assert len(set(spark_xxhash64(keys).tolist())) == len(keys)


def test_refusals_name_the_cause():
    plan = plan_insert_buckets({"p": 10}, {}, SIZING, nonce="n")
    with pytest.raises(KeyError, match="'q'"):
        plan.file_ids_of(pa.array(["q"]), spark_xxhash64(["k"]))
    with pytest.raises(ValueError, match="without a partition path"):
        plan.file_ids_of(pa.array([None], pa.string()), spark_xxhash64(["k"]))
    with pytest.raises(ValueError, match="2 partition paths for 1 spreads"):
        plan.file_ids_of(pa.array(["p", "p"]), spark_xxhash64(["k"]))
    assert plan.file_ids_of(pa.array([], pa.string()), spark_xxhash64([])).to_pylist() == []
