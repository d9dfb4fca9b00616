"""A key that Java's bulk_insert stored twice in one file group (partition a, ordering values 2 and
8), then upserted under GLOBAL_BLOOM with update.partition.path=true by a record for partition b
whose ordering value loses to both copies, ties or beats one, or beats both: once by Java, once by
us on a copy of the same table.  Java, hudi-rs and we read each result alike; the two results differ
where Java's own write loses or duplicates a copy (docs/hudi/duplicate-keys.md, "Moving a key stored
twice"): we delete exactly the copies the record beats and insert it once."""

from __future__ import annotations

import pytest

import hoodie_sink
from tests.interop.compare import assert_readers_agree
from tests.interop.test_duplicate_keys_interop import _rows, _table
from tests.support.tables import copy_table, data_rows, sort_rows

pytestmark = [pytest.mark.compat, pytest.mark.interop]


OLD, NEW, OTHER = (1, "a", 1.0, 2), (1, "a", 2.0, 8), (2, "a", 3.0, 1)


def _moved(ts: int) -> tuple:
    return (1, "b", 9.0, ts)


# incoming ordering value -> what we leave (besides key 2): each copy compared with the record on
# its own, the copies it beats (ties included) deleted, the record inserted once in b if it beat one
OURS = {
    1: [OLD, NEW],
    2: [NEW, _moved(2)],
    5: [NEW, _moved(5)],
    8: [_moved(8)],
    9: [_moved(9)],
}

# what Java 0.15 leaves (besides key 2), read by Java, hudi-rs and us alike.  Copy-on-write: the
# merge handle keeps one change per key for the file group (the last of the delete of a beaten copy
# and the unchanged value of a copy that won), so the newer copy's values overwrite the older copy,
# and every beaten copy inserts the record in b.  Merge-on-read: the file group's log holds the
# changes; its delete reaches the first base copy (the older one) only, the newer copy stays.
JAVA = {
    ("COPY_ON_WRITE", 1): [NEW, NEW],
    ("COPY_ON_WRITE", 2): [NEW, NEW, _moved(2)],
    ("COPY_ON_WRITE", 5): [NEW, NEW, _moved(5)],
    ("COPY_ON_WRITE", 8): [_moved(8), _moved(8)],
    ("COPY_ON_WRITE", 9): [_moved(9), _moved(9)],
    ("MERGE_ON_READ", 1): [NEW, NEW],
    ("MERGE_ON_READ", 2): [NEW, _moved(2)],
    ("MERGE_ON_READ", 5): [NEW, _moved(5)],
    ("MERGE_ON_READ", 8): [NEW, _moved(8), _moved(8)],
    ("MERGE_ON_READ", 9): [NEW, _moved(9), _moved(9)],
}


def _opts(table_type: str) -> dict[str, str]:
    return {
        "hoodie.table.name": "dups",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        # event-time ordering (Java's default payload, OverwriteWithLatestAvroPayload, compares nothing)
        "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.index.type": "GLOBAL_BLOOM",
        "hoodie.bloom.index.update.partition.path": "true",
        "hoodie.table.timeline.timezone": "UTC",  # the java_hudi JVM serves UTC tables
    }


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("ts", sorted(OURS))
def test_moving_a_key_stored_twice_in_one_file_group(java_hudi, tmp_path, table_type, ts):
    opts = _opts(table_type)
    path = tmp_path / "ours"
    java_hudi.write(
        path, _table(_rows(OLD, OTHER, NEW)), {**opts, "hoodie.datasource.write.operation": "bulk_insert"}
    )
    stored = assert_readers_agree(java_hudi.read(path), path, _rows(OLD, NEW, OTHER))
    assert len(set(stored.column("_hoodie_file_name").to_pylist())) == 1, "both copies in one file group"
    theirs = copy_table(path, tmp_path / "theirs")
    upsert = {**opts, "hoodie.datasource.write.operation": "upsert"}

    hoodie_sink.write(_table(_rows(_moved(ts))), str(path), upsert)
    assert_readers_agree(java_hudi.read(path), path, _rows(*OURS[ts], OTHER))

    java_hudi.write(theirs, _table(_rows(_moved(ts))), upsert)
    java_result = assert_readers_agree(java_hudi.read(theirs), theirs)  # hudi-rs and we read it as Java does
    assert data_rows(java_result) == sort_rows(_rows(*JAVA[(table_type, ts)], OTHER))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("ts_b", [3, 8])
def test_moving_into_a_partition_that_holds_a_copy(java_hudi, tmp_path, table_type, ts_b):
    """Key 1 stored in a (ts 2) and in b (ts 3 or 8) by two Java bulk_inserts; the record (b, ts 5)
    beats the copy in a, which goes.  The copy in b takes the record, or beats it and stays; the
    record is not inserted beside it, by us nor by Java (whose insert is packed into the small file
    group holding that copy, where its merge keeps one row of the key)."""
    opts = _opts(table_type)
    bulk = {**opts, "hoodie.datasource.write.operation": "bulk_insert"}
    path = tmp_path / "ours"
    java_hudi.write(path, _table(_rows(OLD, OTHER)), bulk)
    in_b = (1, "b", 2.0, ts_b)
    java_hudi.write(path, _table(_rows(in_b)), bulk)
    assert_readers_agree(java_hudi.read(path), path, _rows(OLD, in_b, OTHER))
    theirs = copy_table(path, tmp_path / "theirs")
    upsert = {**opts, "hoodie.datasource.write.operation": "upsert"}
    expected = _rows(_moved(5) if ts_b < 5 else in_b, OTHER)

    hoodie_sink.write(_table(_rows(_moved(5))), str(path), upsert)
    assert_readers_agree(java_hudi.read(path), path, expected)

    java_hudi.write(theirs, _table(_rows(_moved(5))), upsert)
    assert_readers_agree(java_hudi.read(theirs), theirs, expected)
