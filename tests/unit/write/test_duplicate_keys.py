"""A key stored more than once (bulk_insert and insert keep duplicate keys, as Hudi's do): an upsert
changes every copy and a delete removes every copy, as Hudi's bloom indexes tag every file group
holding the key (docs/hudi/duplicate-keys.md).  Checked against a model, read with hudi-rs and ours."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.services.validation import validate_table
from tests.support.tables import assert_table_matches

SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("fare", pa.float64()), ("ts", pa.int64())])


def _rows(*rows: tuple) -> list[dict]:
    return [dict(zip(SCHEMA.names, r, strict=True)) for r in rows]


def _opts(table_type: str, index: str, **extra: str) -> dict[str, str]:
    return {
        "hoodie.table.name": "dups",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.index.type": index,
        **extra,
    }


def _write(path, rows: list[dict], opts: dict, operation: str) -> None:
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    hoodie_sink.write(table, str(path), {**opts, "hoodie.datasource.write.operation": operation})


def _store_duplicates(path, opts: dict, layout: str, operation: str = "bulk_insert") -> list[dict]:
    """Key 1 stored twice: in one file group ('same'), in two file groups of partition a ('files'),
    or in partitions a and b ('partitions'); key 2 once.  Returns the stored rows."""
    first = _rows((1, "a", 1.0, 1), (2, "a", 3.0, 1))
    if layout == "same":
        first.append(_rows((1, "a", 2.0, 1))[0])
        _write(path, first, opts, operation)
        return first
    second = _rows((1, "a" if layout == "files" else "b", 2.0, 1))
    _write(path, first, opts, operation)
    _write(path, second, {**opts, "hoodie.parquet.small.file.limit": "0"}, operation)
    return first + second


LAYOUTS = [
    (table_type, index, layout)
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ")
    for index, layouts in (("BLOOM", ("same", "files")), ("GLOBAL_BLOOM", ("same", "files", "partitions")))
    for layout in layouts
]


@pytest.mark.parametrize("table_type,index,layout", LAYOUTS)
def test_upsert_changes_every_copy_and_delete_removes_every_copy(tmp_path, table_type, index, layout):
    path = tmp_path / "t"
    opts = _opts(table_type, index, **{"hoodie.bloom.index.update.partition.path": "false"})
    stored = _store_duplicates(path, opts, layout)
    assert_table_matches(path, stored)  # bulk_insert keeps both copies of key 1

    _write(path, _rows((1, "a", 9.0, 5)), opts, "upsert")
    # every copy takes the new values; a global index (without update.partition.path) keeps
    # each copy in the partition where it is stored
    updated = [{**r, "fare": 9.0, "ts": 5, "city": "a"} if r["id"] == 1 else r for r in stored]
    assert_table_matches(path, updated)

    _write(path, _rows((1, "a", 0.0, 6)), opts, "delete")
    assert_table_matches(path, [r for r in stored if r["id"] != 1])
    assert validate_table(str(path), global_keys=index == "GLOBAL_BLOOM") == []


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_insert_duplicates_then_upsert_and_delete(tmp_path, table_type):
    """`insert` keeps duplicates too (packing the second copy into the small file group)."""
    path = tmp_path / "t"
    opts = _opts(table_type, "BLOOM")
    stored = _store_duplicates(path, opts, "files", operation="insert")
    _write(path, _rows((1, "a", 9.0, 5), (2, "a", 4.0, 5)), opts, "upsert")
    assert_table_matches(path, _rows((1, "a", 9.0, 5), (1, "a", 9.0, 5), (2, "a", 4.0, 5)))
    assert len(stored) == 3
    _write(path, _rows((1, "a", 0.0, 6)), opts, "delete")
    assert_table_matches(path, _rows((2, "a", 4.0, 5)))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_an_older_record_leaves_the_copies_it_does_not_beat(tmp_path, table_type):
    """Event-time ordering decides per stored copy, as Java's merge handle compares the incoming
    record with each stored record of the key."""
    path = tmp_path / "t"
    opts = _opts(table_type, "BLOOM", **{"hoodie.datasource.write.payload.class":
                                         "org.apache.hudi.common.model.DefaultHoodieRecordPayload"})  # fmt: skip
    _write(path, _rows((1, "a", 1.0, 1), (1, "a", 2.0, 10), (2, "a", 3.0, 1)), opts, "bulk_insert")
    _write(path, _rows((1, "a", 9.0, 5)), opts, "upsert")
    assert_table_matches(path, _rows((1, "a", 9.0, 5), (1, "a", 2.0, 10), (2, "a", 3.0, 1)))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("target", ["a", "c"])
def test_global_index_moving_a_duplicated_key_leaves_one_copy(tmp_path, table_type, target):
    """update.partition.path: a key stored in partitions a and b, upserted into a (the copy there is
    updated, the other deleted) or into c (both deleted, one inserted in c)."""
    path = tmp_path / "t"
    opts = _opts(table_type, "GLOBAL_BLOOM", **{"hoodie.bloom.index.update.partition.path": "true"})
    _store_duplicates(path, opts, "partitions")
    _write(path, _rows((1, target, 9.0, 5)), opts, "upsert")
    assert_table_matches(path, _rows((1, target, 9.0, 5), (2, "a", 3.0, 1)))
    assert validate_table(str(path), global_keys=True) == []
    _write(path, _rows((1, target, 0.0, 6)), opts, "delete")
    assert_table_matches(path, _rows((2, "a", 3.0, 1)))


def test_validate_reports_stored_duplicates(tmp_path):
    path = tmp_path / "t"
    _store_duplicates(path, _opts("COPY_ON_WRITE", "BLOOM"), "files")
    found = validate_table(str(path))
    assert [(v.check, v.subject) for v in found] == [("duplicate-key", "1")]
    assert "bulk_insert" in found[0].detail  # says where such duplicates come from


def test_bucket_index_refuses_two_file_groups_in_one_bucket(tmp_path):
    """Java's bulk_insert into a BUCKET table can add a second file group to a bucket (ours refuses
    bulk_insert there); an upsert would then change one copy of a key only: refused, as Java does."""
    path = tmp_path / "t"
    # the second file group is copied in by hand, standing in for Java's write: listed from storage
    # (a metadata table would not list a file no commit added)
    listed_from_storage = {"hoodie.bucket.index.num.buckets": "2", "hoodie.metadata.enable": "false"}
    opts = _opts("COPY_ON_WRITE", "BUCKET", **listed_from_storage)
    _write(path, _rows((1, "a", 1.0, 1), (2, "a", 3.0, 1)), opts, "upsert")
    victim = next((path / "a").glob("*.parquet"))
    fid = victim.name.split("_")[0]
    twin = victim.with_name(victim.name.replace(fid, fid[:8] + "-dupd-0000-0000-000000000000-0"))
    twin.write_bytes(victim.read_bytes())
    with pytest.raises(HoodieTableError, match=r"two file groups in hash bucket \d .*rollback_to_instant"):
        _write(path, _rows((1, "a", 9.0, 5)), opts, "upsert")


# key 1 stored twice in one file group of partition a, ts 2 and 8; upserted into b with ts:
# each copy is compared with the record on its own (docs/hudi/duplicate-keys.md, "Moving a key")
MOVES = [
    (1, [(1, "a", 1.0, 2), (1, "a", 2.0, 8)]),  # loses to both: nothing changes
    (2, [(1, "a", 2.0, 8), (1, "b", 9.0, 2)]),  # ties the older copy: that one moves, once
    (5, [(1, "a", 2.0, 8), (1, "b", 9.0, 5)]),  # between: the older copy moves
    (8, [(1, "b", 9.0, 8)]),  # ties the newer, beats the older: both go, one row in b
    (9, [(1, "b", 9.0, 9)]),  # beats both
]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("ts,expected", MOVES)
def test_a_move_deletes_the_copies_the_record_beats(tmp_path, table_type, ts, expected):
    path = tmp_path / "t"
    opts = _opts(table_type, "GLOBAL_BLOOM", **{"hoodie.bloom.index.update.partition.path": "true"})
    _write(path, _rows((1, "a", 1.0, 2), (2, "a", 3.0, 1), (1, "a", 2.0, 8)), opts, "bulk_insert")
    _write(path, _rows((1, "b", 9.0, ts)), opts, "upsert")
    assert_table_matches(path, _rows(*expected, (2, "a", 3.0, 1)))
    _write(path, _rows((1, "c", 0.0, 0)), opts, "delete")
    assert_table_matches(path, _rows((2, "a", 3.0, 1)))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("ts_b,expected_b", [(3, (1, "b", 9.0, 5)), (8, (1, "b", 2.0, 8))])
def test_a_move_into_a_partition_that_holds_a_copy_merges_with_it_there(
    tmp_path, table_type, ts_b, expected_b
):
    """Key 1 stored in a (ts 2) and in b: a record for b beats the copy in a, which goes; the copy
    in b takes the record, or beats it and stays; the record is never inserted beside it (not even
    in a new file group: no small file packing here, which would merge it with the copy anyway)."""
    path = tmp_path / "t"
    opts = _opts(table_type, "GLOBAL_BLOOM", **{"hoodie.bloom.index.update.partition.path": "true",
                                                "hoodie.parquet.small.file.limit": "0"})  # fmt: skip
    _write(path, _rows((1, "a", 1.0, 2), (2, "a", 3.0, 1)), opts, "bulk_insert")
    _write(path, _rows((1, "b", 2.0, ts_b)), opts, "bulk_insert")
    _write(path, _rows((1, "b", 9.0, 5)), opts, "upsert")
    assert_table_matches(path, _rows(expected_b, (2, "a", 3.0, 1)))
