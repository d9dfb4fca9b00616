"""The routed write's placement of file groups on write tasks (routing/write_tasks.py)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.write.routing.write_tasks import assign_write_tasks


def _ctx(base_sizes: dict[str, int], merge_on_read: bool = False):
    plan = SimpleNamespace(sizing=SimpleNamespace(avg_record_size=100), merge_on_read=merge_on_read)
    files = tuple(BaseFile("p", fid, "001", "1-0-1", size) for fid, size in base_sizes.items())
    return SimpleNamespace(plan=plan, base_files=files)


@pytest.mark.parametrize("seed", range(5))
def test_the_longest_task_is_within_four_thirds_of_the_best(seed):
    rng = random.Random(seed)
    records = {f"f{i}": rng.randrange(1, 200_000) for i in range(rng.randrange(1, 60))}
    tasks = rng.randrange(1, 9)
    placed = assign_write_tasks(_ctx({}), records, tasks)
    assert set(placed) == set(records) and set(placed.values()) <= set(range(tasks))
    loads = [sum(n for f, n in records.items() if placed[f] == t) for t in range(tasks)]
    best = max(max(records.values()), -(-sum(records.values()) // tasks))  # a lower bound
    assert max(loads) <= 4 / 3 * best + 1
    assert placed == assign_write_tasks(_ctx({}), dict(reversed(list(records.items()))), tasks)


def test_20_equal_file_groups_split_evenly_over_2_tasks():
    placed = assign_write_tasks(_ctx({}), {f"f{i:02d}": 10_000 for i in range(20)}, 2)
    assert sorted(list(placed.values()).count(t) for t in (0, 1)) == [10, 10]


def test_a_copy_on_write_merge_counts_the_base_file_it_rewrites():
    # one update into a 100 MB file outweighs 1,000 inserts of 100 bytes elsewhere
    ctx = _ctx({"big": 100_000_000})
    placed = assign_write_tasks(ctx, {"big": 1, "a": 1_000, "b": 1_000}, 2)
    assert placed["a"] == placed["b"] != placed["big"]
    mor = assign_write_tasks(
        _ctx({"big": 100_000_000}, merge_on_read=True), {"big": 1, "a": 1_000, "b": 1_000}, 2
    )
    assert mor["a"] != mor["b"]
