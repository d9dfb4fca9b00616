"""The change feed of a key stored several times (duplicates are legal: bulk_insert and insert keep
them; docs/hudi/duplicate-keys.md, docs/hudi/cdc-duplicate-keys.md): one row per copy that
changed, each copy before paired with one copy after.  The expected rows are written by hand."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.read.cdc import read_cdc
from hoodie_sink.table.read.snapshot import read_snapshot
from tests.unit.read.test_incremental import OPTS, completed

TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
GLOBAL = {"hoodie.index.type": "GLOBAL_BLOOM"}


def write(path: str, table_type: str, rows: list[tuple], operation: str, **extra: str) -> str:
    """Writes rows (id, part, ts, v) and returns the instant before the write ("000": none)."""
    before = max(completed(path), default="000") if _exists(path) else "000"
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type,
            "hoodie.datasource.write.operation": operation, **extra}  # fmt: skip
    ids, parts, ts, v = zip(*rows, strict=True) if rows else ((), (), (), ())
    data = pa.table({"id": list(ids), "part": list(parts), "ts": list(ts), "v": list(v)},
                    pa.schema([("id", pa.string()), ("part", pa.string()), ("ts", pa.int64()),
                               ("v", pa.int64())]))  # fmt: skip
    hoodie_sink.write(data, path, opts)
    return before


def _exists(path: str) -> bool:
    return os.path.isdir(os.path.join(path, ".hoodie"))


def last_feed(path: str, before: str) -> list[tuple]:
    """The feed of the writes after `before`, as sorted (op, part, id, before v, after v) rows."""
    out = []
    for r in read_cdc(path, before).to_pylist():
        old = r["before"] and json.loads(r["before"])
        new = r["after"] and json.loads(r["after"])
        row = new or old
        out.append(
            (
                r["op"],
                row["part"],
                row["id"],
                old and (old["part"], old["v"]),
                new and (new["part"], new["v"]),
            )
        )
    return sorted(out, key=str)


def snapshot(path: str) -> list[tuple]:
    rows = read_snapshot(path).select(["part", "id", "v"]).to_pylist()
    return sorted((r["part"], r["id"], r["v"]) for r in rows)


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_an_upsert_of_a_key_stored_three_times_in_one_file_group_is_three_updates(tmp_path, table_type):
    path = str(tmp_path / "t")
    write(path, table_type, [("k", "p0", 1, 1), ("k", "p0", 1, 2), ("k", "p0", 1, 3), ("o", "p0", 1, 0)],
          "bulk_insert")  # fmt: skip
    first = write(path, table_type, [("k", "p0", 2, 9)], "upsert")
    assert snapshot(path) == [("p0", "k", 9)] * 3 + [("p0", "o", 0)]
    assert last_feed(path, first) == sorted(
        [("u", "p0", "k", ("p0", v), ("p0", 9)) for v in (1, 2, 3)], key=str
    )


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_delete_of_a_key_stored_three_times_is_three_deletes(tmp_path, table_type):
    path = str(tmp_path / "t")
    write(path, table_type, [("k", "p0", 1, 1), ("k", "p0", 1, 2), ("k", "p0", 1, 3), ("o", "p0", 1, 0)],
          "bulk_insert")  # fmt: skip
    first = write(path, table_type, [("k", "p0", 2, 0)], "delete")
    assert snapshot(path) == [("p0", "o", 0)]
    assert last_feed(path, first) == sorted([("d", "p0", "k", ("p0", v), None) for v in (1, 2, 3)], key=str)


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_an_upsert_of_a_key_stored_in_two_file_groups_is_two_updates(tmp_path, table_type):
    """Two bulk_inserts: two file groups (merge-on-read: a log file in each)."""
    path = str(tmp_path / "t")
    write(path, table_type, [("k", "p0", 1, 1), ("o", "p0", 1, 0)], "bulk_insert")
    write(path, table_type, [("k", "p0", 1, 2)], "bulk_insert")
    first = write(path, table_type, [("k", "p0", 2, 9)], "upsert")
    assert snapshot(path) == [("p0", "k", 9), ("p0", "k", 9), ("p0", "o", 0)]
    assert last_feed(path, first) == [
        ("u", "p0", "k", ("p0", 1), ("p0", 9)),
        ("u", "p0", "k", ("p0", 2), ("p0", 9)),
    ]
    first = write(path, table_type, [("k", "p0", 3, 0)], "delete")
    assert last_feed(path, first) == [("d", "p0", "k", ("p0", 9), None)] * 2


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_global_index_upsert_of_a_key_in_two_partitions_updates_both_in_place(tmp_path, table_type):
    """With hoodie.bloom.index.update.partition.path=false each copy is updated where it is stored."""
    path = str(tmp_path / "t")
    in_place = {**GLOBAL, "hoodie.bloom.index.update.partition.path": "false"}
    write(path, table_type, [("k", "p0", 1, 1)], "bulk_insert", **in_place)
    write(path, table_type, [("k", "p1", 1, 2)], "bulk_insert", **in_place)
    first = write(path, table_type, [("k", "p0", 2, 9)], "upsert", **in_place)
    # the images hold the data columns: the copy stored in p1 takes the record's values, part "p0"
    assert last_feed(path, first) == [
        ("u", "p0", "k", ("p0", 1), ("p0", 9)),
        ("u", "p0", "k", ("p1", 2), ("p0", 9)),
    ]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_global_index_upsert_with_partition_update_deletes_the_other_copy(tmp_path, table_type):
    path = str(tmp_path / "t")
    opts = {**GLOBAL, "hoodie.bloom.index.update.partition.path": "true"}
    write(path, table_type, [("k", "p0", 1, 1)], "bulk_insert", **opts)
    write(path, table_type, [("k", "p1", 1, 2)], "bulk_insert", **opts)
    first = write(path, table_type, [("k", "p0", 2, 9)], "upsert", **opts)
    assert snapshot(path) == [("p0", "k", 9)]
    assert last_feed(path, first) == [
        ("d", "p1", "k", ("p1", 2), None),
        ("u", "p0", "k", ("p0", 1), ("p0", 9)),
    ]


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize("small_file_limit", ["0", "104857600"])
def test_an_insert_of_a_stored_key_is_one_insert(tmp_path, table_type, small_file_limit):
    """With small-file packing the new copy lands in the file group of the old one, which the write
    rewrites (copy-on-write) with the old copy unchanged: still one insert, no update."""
    path = str(tmp_path / "t")
    limit = {"hoodie.parquet.small.file.limit": small_file_limit}
    write(path, table_type, [("k", "p0", 1, 1), ("o", "p0", 1, 0)], "insert", **limit)
    first = write(path, table_type, [("k", "p0", 2, 2)], "insert", **limit)
    assert snapshot(path) == [("p0", "k", 1), ("p0", "k", 2), ("p0", "o", 0)]
    assert last_feed(path, first) == [("i", "p0", "k", None, ("p0", 2))]
    # the next upsert updates both copies, each once
    first = write(path, table_type, [("k", "p0", 3, 9)], "upsert", **limit)
    assert last_feed(path, first) == [
        ("u", "p0", "k", ("p0", 1), ("p0", 9)),
        ("u", "p0", "k", ("p0", 2), ("p0", 9)),
    ]


def test_merge_on_read_a_log_update_then_a_rewrite_of_a_file_group_holding_the_key_twice(tmp_path):
    """Merge-on-read: a key in one file group gets a log record; an insert of a second copy into the
    same file group (packing), then an upsert rewrites the slice (docs/hudi/duplicate-keys.md)."""
    path = str(tmp_path / "t")
    mor, packing = "MERGE_ON_READ", {"hoodie.parquet.small.file.limit": "104857600"}
    write(path, mor, [("k", "p0", 1, 1), ("o", "p0", 1, 0)], "bulk_insert", **packing)
    first = write(path, mor, [("k", "p0", 2, 2)], "upsert", **packing)
    assert last_feed(path, first) == [("u", "p0", "k", ("p0", 1), ("p0", 2))]
    first = write(path, mor, [("k", "p0", 3, 3)], "insert", **packing)
    assert last_feed(path, first) == [("i", "p0", "k", None, ("p0", 3))]
    first = write(path, mor, [("k", "p0", 4, 9)], "upsert", **packing)
    assert snapshot(path) == [("p0", "k", 9), ("p0", "k", 9), ("p0", "o", 0)]
    assert last_feed(path, first) == [
        ("u", "p0", "k", ("p0", 2), ("p0", 9)),
        ("u", "p0", "k", ("p0", 3), ("p0", 9)),
    ]
