"""Issue 25 item 8: a null ordering (precombine) value (docs/hudi/null-ordering.md).

An upsert holding one is refused naming the column, COW and MOR, within a batch and against the
stored record, and leaves the table as it was (Java 0.15 refuses it too); so is a merge-on-read
insert (Java's readers fail on such a record in a log file).  A copy-on-write insert and
bulk_insert store nulls, as Java's; a stored null then counts as the smallest value everywhere:
in the copy-on-write merge, the merge-on-read log write and both readers (ours and hudi-rs).
Expected rows come from the model below, not from another reader.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieSchemaError
from hoodie_sink.table.read.file_slice import MergeRule, merge_with_base
from hoodie_sink.table.read.file_slice import _fold as fold_logs
from tests.support.tables import assert_table_matches, without_rollback_records
from tests.unit.test_options import snapshot

SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


def opts(table_type: str, operation: str = "upsert") -> dict[str, str]:
    return {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.operation": operation,
    }


def rows(*tuples) -> list[dict]:
    return [dict(zip(SCHEMA.names, t, strict=True)) for t in tuples]


def write(path: Path, batch: list[dict], table_type: str, operation: str = "upsert"):
    return hoodie_sink.write(
        pa.Table.from_pylist(batch, schema=SCHEMA), str(path), opts(table_type, operation)
    )


STORED = rows((1, "a", 5, "five"), (2, "a", 5, "five"), (3, "b", 5, "five"))


@pytest.mark.parametrize("table_type", TABLE_TYPES)
@pytest.mark.parametrize(
    "batch",
    [
        # within a batch: a key twice, once without ordering value (new keys and a stored one)
        rows((4, "a", None, "null"), (4, "a", 7, "seven"), (1, "a", 9, "nine")),
        # against the stored record
        rows((1, "a", None, "null"), (2, "a", 6, "six")),
    ],
    ids=["within-a-batch", "against-stored"],
)
def test_upsert_with_a_null_ordering_value_is_refused_and_changes_nothing(tmp_path, table_type, batch):
    path = tmp_path / "t"
    write(path, STORED, table_type)
    before = snapshot(path)
    with pytest.raises(HoodieSchemaError, match=r"Column 'ts' \(option 'hoodie.datasource.write.precombine"):
        write(path, batch, table_type)
    assert without_rollback_records(snapshot(path)) == without_rollback_records(before)
    assert_table_matches(path, STORED)  # ours and hudi-rs


def test_soft_delete_with_a_null_ordering_value_is_refused(tmp_path):
    path = tmp_path / "t"
    write(path, STORED, "MERGE_ON_READ")
    schema = SCHEMA.append(pa.field("_hoodie_is_deleted", pa.bool_()))
    batch = pa.Table.from_pylist([{"id": 1, "city": "a", "ts": None, "v": "x", "_hoodie_is_deleted": True}],
                                 schema=schema)  # fmt: skip
    with pytest.raises(HoodieSchemaError, match="Column 'ts'"):
        hoodie_sink.write(batch, str(path), opts("MERGE_ON_READ"))
    assert_table_matches(path, STORED)


def test_the_delete_operation_ignores_the_ordering_column(tmp_path):
    path = tmp_path / "t"
    write(path, STORED, "MERGE_ON_READ")
    write(path, rows((1, "a", None, None)), "MERGE_ON_READ", "delete")
    assert_table_matches(path, STORED[1:])


@pytest.mark.parametrize("operation", ["insert", "bulk_insert"])
def test_merge_on_read_insert_with_a_null_ordering_value_is_refused(tmp_path, operation):
    """On merge-on-read the readers compare ordering values: Java's fail on a null in a log file,
    and hudi-rs reads a stored null as 0 where Java's merge takes it as the smallest value."""
    path = tmp_path / "t"
    write(path, STORED, "MERGE_ON_READ")
    with pytest.raises(HoodieSchemaError, match=f"Column 'ts'.*the {operation} operation"):
        write(path, rows((9, "a", None, "null")), "MERGE_ON_READ", operation)
    assert_table_matches(path, STORED)


def test_copy_on_write_stores_nulls_and_a_stored_null_loses_to_any_incoming_value(tmp_path):
    """bulk_insert and insert into a copy-on-write table store null ordering values, as Java's do;
    the next upsert of the key wins whatever its value (Java's merge: a stored record without an
    ordering value is replaced), then the ordering rule applies as usual."""
    path = tmp_path / "t"
    stored = rows((1, "a", None, "null"), (2, "a", None, "null"), (3, "b", 5, "five"))
    write(path, stored, "COPY_ON_WRITE", "bulk_insert")
    write(path, rows((4, "b", None, "inserted")), "COPY_ON_WRITE", "insert")
    stored += rows((4, "b", None, "inserted"))
    assert_table_matches(path, stored)
    write(path, rows((1, "a", -(2**62), "lowest"), (2, "a", 0, "zero")), "COPY_ON_WRITE")
    write(path, rows((1, "a", -(2**63), "lower still"), (2, "a", 1, "one")), "COPY_ON_WRITE")
    model = {r["id"]: r for r in stored}
    model[1] = rows((1, "a", -(2**62), "lowest"))[0]
    model[2] = rows((2, "a", 1, "one"))[0]
    assert_table_matches(path, list(model.values()))


# -- our merge-on-read reader, on a table another writer left with null ordering values ------------
# (Java's merge-on-read insert writes them into log files, e.g. with the BUCKET index, and its
# bulk_insert into base files; Java's own readers then fail on a null in a log, Java's merge takes
# a stored null as the smallest value, and so do we; hudi-rs 0.5.0 reads a null as 0)


def _base(keys, ts) -> pa.Table:
    return pa.table(
        {"_hoodie_record_key": keys, "ts": pa.array(ts, pa.int64()), "v": [f"base-{k}" for k in keys]}
    )


def _log(keys, ts, position=0) -> pa.Table:
    n = len(keys)
    return pa.table({
        "_hoodie_record_key": keys, "ts": pa.array(ts, pa.int64()), "v": [f"log{position}-{k}" for k in keys],
        "_hoodie_sink_deleted": [False] * n, "_hoodie_sink_ordering": pa.array(ts, pa.int64()),
        "_hoodie_sink_position": pa.array(range(position, position + n), pa.int64()),
    })  # fmt: skip


def test_reader_counts_a_null_ordering_value_below_every_value():
    rule = MergeRule("ts", base_ordering=True)
    schema = _base([], []).schema
    # base vs log: a log record without ordering value loses to a base row with one; a log
    # record with one beats a base row without; two nulls: the log (later) record wins
    merged = merge_with_base(_base(["a", "b", "c"], [5, None, None]), _log(["a", "b", "c"], [None, 1, None]),
                             schema, rule)  # fmt: skip
    assert dict(zip(merged.column("_hoodie_record_key").to_pylist(), merged.column("v").to_pylist(),
                    strict=True)) == {"a": "base-a", "b": "log0-b", "c": "log0-c"}  # fmt: skip
    # log vs log, in scan order: the same rule
    state = fold_logs(None, _log(["a", "b", "c"], [5, None, None], 0), rule)
    state = fold_logs(state, _log(["a", "b", "c"], [None, 1, None], 10), rule)
    assert dict(zip(state.column("_hoodie_record_key").to_pylist(), state.column("v").to_pylist(),
                    strict=True)) == {"a": "log0-a", "b": "log10-b", "c": "log10-c"}  # fmt: skip
