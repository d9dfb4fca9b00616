"""Apache Hudi (Java 0.15, and 1.x at table version 6) reads what our MERGE, UPDATE and DELETE wrote
(issue 30): copy-on-write and merge-on-read (logs, then compaction); after every call Java's snapshot
equals hudi-rs's and ours, and all equal delta-rs running the same calls on a Delta copy (the
independent model, as in tests/unit/dml/test_merge_model.py).  Then Java upserts into the table and
our next merge runs on Java's commit, and a last merge adds a column (merge_schema)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import hoodie_sink
from hoodie_sink.table.client.table import Table
from tests.interop.compare import assert_readers_agree

pytestmark = [pytest.mark.compat, pytest.mark.interop]

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("s", pa.string()),
                    ("ts", pa.int64())])  # fmt: skip


def rows(ids, ts: int, v_of=lambda i: i) -> pa.Table:
    ids = list(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()), "p": [("a", "b", "c")[i % 3] for i in ids],
        "v": pa.array([v_of(i) for i in ids], pa.int64()), "s": [f"s{i}" for i in ids],
        "ts": pa.array([ts] * len(ids), pa.int64()),
    }, schema=SCHEMA)  # fmt: skip


def delta_rows(path, schema: pa.Schema = SCHEMA) -> list[dict]:
    return DeltaTable(str(path)).to_pyarrow_table().select(schema.names).cast(schema).to_pylist()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_java_reads_what_merge_update_and_delete_wrote(any_java_hudi, tmp_path, table_type):
    java = any_java_hudi
    hudi_path, delta_path = tmp_path / "hudi", tmp_path / "delta"
    opts = {
        "hoodie.table.name": "dml", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p", "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type, "hoodie.index.type": "GLOBAL_BLOOM",
        "hoodie.parquet.small.file.limit": "0",  # merge-on-read updates go to log files
    }  # fmt: skip
    first = rows(range(60), 1)
    hoodie_sink.write(first, str(hudi_path), {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    write_deltalake(str(delta_path), first)
    table = Table(str(hudi_path), opts)

    def both(call) -> None:
        call(table, "ours")
        call(DeltaTable(str(delta_path)), "delta")
        assert_readers_agree(java.read(hudi_path), hudi_path, delta_rows(delta_path))

    source = pa.concat_tables([rows(range(0, 60, 5), 2, v_of=lambda i: i * 10), rows(range(100, 110), 2)])

    def merge(t, who):
        m = t.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        m = m.when_matched_delete("s.v > 400").when_matched_update({"v": "s.v", "p": "s.p", "ts": "t.ts + 1"})
        m.when_not_matched_insert_all().when_not_matched_by_source_delete("t.v = 7").execute()

    both(merge)
    both(lambda t, who: t.update(updates={"s": "upper(s)", "ts": "ts + 1"}, predicate="p = 'b' AND v < 30"))
    both(lambda t, who: t.delete(predicate="id IN (1, 2, 3) OR s = 's104'"))
    if table_type == "MERGE_ON_READ":
        table.compact()
        assert_readers_agree(java.read(hudi_path), hudi_path, delta_rows(delta_path))
    # Java writes next, then our merge runs on Java's commit
    javas = {**opts, "hoodie.datasource.write.operation": "upsert"}
    if not java.version.startswith("0."):
        javas.update({"hoodie.write.auto.upgrade": "false", "hoodie.write.table.version": "6"})
    java_batch = rows(range(40, 50), 9)
    java.write(hudi_path, java_batch, javas)
    DeltaTable(str(delta_path)).merge(java_batch, "t.id = s.id", source_alias="s", target_alias="t") \
        .when_matched_update_all().when_not_matched_insert_all().execute()  # fmt: skip
    both(lambda t, who: t.update(updates={"v": "v + 1000", "ts": "ts + 1"}, predicate="ts = 9"))
    # a merge that adds a column: Java reads the older rows with it null
    wider = pa.schema([*SCHEMA, ("note", pa.string())])
    added = rows([10, 11, 200], 20)
    added = added.append_column("note", pa.array(["x", None, "z"])).cast(wider)
    for target in (table, DeltaTable(str(delta_path))):
        target.merge(added, "t.id = s.id", source_alias="s", target_alias="t", merge_schema=True) \
            .when_matched_update_all().when_not_matched_insert_all().execute()  # fmt: skip
    assert_readers_agree(java.read(hudi_path), hudi_path, delta_rows(delta_path, wider))
