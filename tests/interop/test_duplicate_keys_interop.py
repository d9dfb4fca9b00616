"""A key that Java's bulk_insert stored twice (one file group, two file groups, two partitions), then
upserted and deleted by us: Java reads what hudi-rs and we read, every copy changed (the model); and
Java's own upsert and delete of the same table give the same rows, except where Java's merge-on-read
leaves a copy behind (docs/hudi/duplicate-keys.md)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from tests.interop.compare import assert_readers_agree
from tests.support.tables import copy_table, data_rows, sort_rows

pytestmark = [pytest.mark.compat, pytest.mark.interop]

ARROW = pa.schema([("id", pa.int64()), ("city", pa.string()), ("fare", pa.float64()), ("ts", pa.int64())])


def _rows(*rows: tuple) -> list[dict]:
    return [dict(zip(ARROW.names, r, strict=True)) for r in rows]


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=ARROW)


CASES = [
    ("COPY_ON_WRITE", "BLOOM", "same", "false"),
    ("COPY_ON_WRITE", "BLOOM", "files", "false"),
    ("MERGE_ON_READ", "BLOOM", "same", "false"),
    ("MERGE_ON_READ", "BLOOM", "files", "false"),
    ("COPY_ON_WRITE", "GLOBAL_BLOOM", "partitions", "false"),
    ("MERGE_ON_READ", "GLOBAL_BLOOM", "partitions", "true"),
]


@pytest.mark.parametrize("table_type,index,layout,move", CASES)
def test_our_upsert_and_delete_of_keys_java_stored_twice(
    java_hudi, tmp_path, table_type, index, layout, move
):
    opts = {
        "hoodie.table.name": "dups",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.index.type": index,
        "hoodie.bloom.index.update.partition.path": move,
        "hoodie.table.timeline.timezone": "UTC",  # the java_hudi JVM serves UTC tables
    }
    bulk = {**opts, "hoodie.datasource.write.operation": "bulk_insert"}
    path = tmp_path / "ours"
    first = _rows((1, "a", 1.0, 1), (2, "a", 3.0, 1))
    if layout == "same":
        java_hudi.write(path, _table(first + _rows((1, "a", 2.0, 1))), bulk)
    else:
        java_hudi.write(path, _table(first), bulk)
        java_hudi.write(path, _table(_rows((1, "a" if layout == "files" else "b", 2.0, 1))), bulk)
    stored = assert_readers_agree(java_hudi.read(path), path)
    assert stored.column("id").to_pylist().count(1) == 2, "Java's bulk_insert keeps both copies"
    theirs = copy_table(path, tmp_path / "theirs")

    upsert, delete = _rows((1, "a", 9.0, 5)), _rows((1, "a", 0.0, 6))
    hoodie_sink.write(_table(upsert), str(path), {**opts, "hoodie.datasource.write.operation": "upsert"})
    # every copy takes the new values; with update.partition.path the copy in b is gone
    copies = 1 if move == "true" else 2
    updated = _rows(*[(1, "a", 9.0, 5)] * copies, (2, "a", 3.0, 1))
    # a copy kept in partition b (no update.partition.path): Java takes city from its path
    path_valued = ("city",) if layout == "partitions" else ()
    java_reads_ours = java_hudi.read(path)
    assert_readers_agree(java_reads_ours, path, updated, path_valued)
    java_hudi.write(theirs, _table(upsert), {**opts, "hoodie.datasource.write.operation": "upsert"})
    java_updated = data_rows(java_hudi.read(theirs))

    hoodie_sink.write(_table(delete), str(path), {**opts, "hoodie.datasource.write.operation": "delete"})
    assert_readers_agree(java_hudi.read(path), path, _rows((2, "a", 3.0, 1)))
    java_hudi.write(theirs, _table(delete), {**opts, "hoodie.datasource.write.operation": "delete"})
    java_deleted = data_rows(java_hudi.read(theirs))

    if table_type == "MERGE_ON_READ" and layout == "same":
        # Java logs the change; its reader (like hudi-rs and ours) merges a log record into one
        # base copy only, so the other copy stays old, even after the delete. We rewrite instead.
        assert java_updated == sort_rows(_rows((1, "a", 2.0, 1), (1, "a", 9.0, 5), (2, "a", 3.0, 1)))
        assert java_deleted == sort_rows(_rows((1, "a", 2.0, 1), (2, "a", 3.0, 1)))
    else:  # Java's own writes give the same table
        assert java_updated == data_rows(java_reads_ours)
        assert java_deleted == sort_rows(_rows((2, "a", 3.0, 1)))
