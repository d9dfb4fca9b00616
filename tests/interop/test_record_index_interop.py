"""Apache Hudi (Java) and the record index we keep (issue 29): Java's RECORD_INDEX tags its upserts
through our record index (a key it missed would be inserted a second time) and keeps it; our
RECORD_INDEX tags through the record index Java built and kept; Hudi 0.15 and Hudi 1.1 at table
version 6, both table types.  At every turn our record index equals the live keys
(record_index_mismatches) and Hudi's metadata-table validator's record-index checks pass on Java's
side (JavaHudi.validate_record_index, docs/hudi/metadata-table-oracle.md#the-record-index-check)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.services.validation import record_index_mismatches
from hoodie_sink.table.storage import Storage
from tests.interop.test_metadata_table_interop import READ_THROUGH_METADATA, trips
from tests.support.tables import assert_table_matches, unzip_metadata_fixture

pytestmark = [pytest.mark.compat, pytest.mark.interop]

OURS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.record.index.enable": "true",
    "hoodie.metadata.compact.max.delta.commits": "3",
    "hoodie.index.type": "GLOBAL_BLOOM",
    "hoodie.bloom.index.update.partition.path": "true",
    "hoodie.datasource.write.operation": "upsert",
}
JAVAS = {
    **OURS,
    "hoodie.index.type": "RECORD_INDEX",
    "hoodie.record.index.update.partition.path": "true",
}


def moved(ids, ts: int) -> pa.Table:
    """Rows of `ids` in the next city over: a partition move for each existing key."""
    t = trips(ids, ts)
    cities = [("nyc", "la", "sf")[i % 3] for i in t.column("id").to_pylist()]
    return t.set_column(t.schema.get_field_index("city"), "city", pa.array(cities))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_java_tags_through_our_record_index_and_we_continue(java_hudi, tmp_path, table_type):
    path = tmp_path / "t"
    ours = {**OURS, "hoodie.datasource.write.table.type": table_type}
    javas = {**JAVAS, "hoodie.datasource.write.table.type": table_type}
    model: dict[int, dict] = {}

    def ours_write(data: pa.Table) -> None:
        hoodie_sink.write(data, str(path), ours)
        model.update({r["id"]: r for r in data.to_pylist()})
        java_validates_record_index(java_hudi, path)  # after every write of ours (issue 29 acceptance)

    ts = 0
    for round_ in range(2):
        ts += 1
        ours_write(trips(range(ts * 10, ts * 10 + 20), ts))  # inserts and updates
        ts += 1
        ours_write(moved(range(ts * 10 - 5, ts * 10 + 5), ts))  # partition moves
        ts += 1
        gone = list(range(ts * 10 - 8, ts * 10 - 6))
        hoodie_sink.write(trips(gone, ts), str(path), {**ours, "hoodie.datasource.write.operation": "delete"})
        for k in gone:
            model.pop(k, None)
        java_validates_record_index(java_hudi, path)
        storage = Storage(str(path))
        assert record_index_mismatches(storage, ActiveTimeline.load(storage)) == []
        # Java: updates of existing keys (some moved), through its RECORD_INDEX on our index
        ts += 1
        data = moved(range(ts * 10 - 30, ts * 10 - 20), ts)
        java_hudi.write(path, data, javas)
        model.update({r["id"]: r for r in data.to_pylist()})
        got = java_hudi.read(path, **READ_THROUGH_METADATA).to_pylist()
        ids = [r["id"] for r in got]
        assert len(ids) == len(set(ids)), f"round {round_}: Java inserted a key a second time"
        assert {r["id"]: (r["city"], r["ts"]) for r in got} == {
            k: (v["city"], v["ts"]) for k, v in model.items()
        }
        java_hudi.assert_metadata_valid(path)
        assert record_index_mismatches(storage, ActiveTimeline.load(storage)) == []  # Java kept it
        assert_table_matches(path, list(model.values()))


def java_validates_record_index(java, path) -> dict:
    """Java's record-index checks (Hudi's validator's) pass: every live key at its partition and
    file group through Java's reader, no entry for a key that is not live."""
    r = java.validate_record_index(path)
    assert r["ok"], f"Java Hudi {java.version} rejects the record index of {path}:\n" + "\n".join(r["errors"])
    return r["checked"]


def java_options(java, table_type: str) -> dict[str, str]:
    """Java's RECORD_INDEX writes of a table Java creates: in UTC (the java_hudi JVMs serve UTC
    tables, tests/interop/conftest.py), with column_stats off (Hudi 1.x's default is on; we drop
    partitions we do not keep, docs/design/metadata-table.md, and column_stats is not under test
    here), 1.x held at table version 6 as in test_metadata_table_interop.py."""
    opts = {
        **JAVAS,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.table.timeline.timezone": "UTC",
        "hoodie.metadata.index.column.stats.enable": "false",
    }
    if not java.version.startswith("0."):
        opts |= {"hoodie.write.auto.upgrade": "false", "hoodie.write.table.version": "6"}
    return opts


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_we_tag_through_the_record_index_java_built_and_java_continues(any_java_hudi, tmp_path, table_type):
    """Java (0.15, or 1.1 at table version 6) creates the table with RECORD_INDEX and inserts,
    moves and deletes; we upsert (inserts, updates, moves) and delete with RECORD_INDEX through the
    record index it built and kept; Java's RECORD_INDEX then tags through ours.  No key twice, the
    model everywhere, both sides' record-index checks at every turn."""
    java = any_java_hudi
    path = tmp_path / "t"
    javas = java_options(java, table_type)
    ours = {**JAVAS, "hoodie.datasource.write.table.type": table_type}
    model: dict[int, dict] = {}
    storage = Storage(str(path))

    def turn(who: str, data: pa.Table, operation: str = "upsert", check: bool = True) -> None:
        if who == "java":
            java.write(path, data, {**javas, "hoodie.datasource.write.operation": operation})
        else:
            hoodie_sink.write(data, str(path), {**ours, "hoodie.datasource.write.operation": operation})
        if operation == "delete":
            for k in data.column("id").to_pylist():
                model.pop(k, None)
        else:
            model.update({r["id"]: r for r in data.to_pylist()})
        if check:
            java_validates_record_index(java, path)
        assert record_index_mismatches(storage, ActiveTimeline.load(storage)) == [], who

    def live(ids) -> pa.Table:  # deletes name each key where it lives
        return pa.Table.from_pylist([model[k] for k in ids], schema=trips([0], 0).schema)

    # Java's own writes checked once it has built the index (a check is ~5 s: the tier's budget)
    turn("java", trips(range(0, 24), 1), check=False)
    turn("java", moved(range(18, 30), 2), check=False)  # moves of 18..23, inserts of 24..29
    turn("java", live([3, 4, 20]), "delete")  # 20 after its move
    assert "record_index" in java.call("properties", path=str(path))["hoodie.table.metadata.partitions"]
    turn("ours", pa.concat_tables([moved(range(0, 12), 4), trips(range(30, 36), 4)]))  # 3, 4 come back
    turn("ours", live([5, 21, 31]), "delete")
    turn("java", moved(range(6, 18), 6), check=False)  # moves again: keys we wrote, some we moved
    got = java.read(path, **READ_THROUGH_METADATA).to_pylist()
    ids = [r["id"] for r in got]
    assert len(ids) == len(set(ids)), "a key was inserted a second time"
    assert {r["id"]: (r["city"], r["ts"]) for r in got} == {k: (v["city"], v["ts"]) for k, v in model.items()}
    java.assert_metadata_valid(path)  # files, slices and the record index, after Java's last write
    assert_table_matches(path, list(model.values()))


def test_java_record_index_check_names_keys_that_are_not_live(java_hudi, tmp_path):
    """Negative control on a Java-written table with a record index (tests/fixtures/metadata-tables):
    the check passes, then a partition's base files go from storage (as after a writer that drops
    files without telling the metadata table); every key of them is named, and the count differs."""
    path = unzip_metadata_fixture("cow_mdt_v6", tmp_path)
    before = java_validates_record_index(java_hudi, path)
    part = sorted(p for p in path.iterdir() if not p.name.startswith("."))[0]
    gone = {r["id"] for r in java_hudi.read(path).to_pylist() if r["city"] == part.name}
    for f in part.glob("*.parquet"):
        f.unlink()
    r = java_hudi.validate_record_index(path)
    assert not r["ok"] and r["checked"]["keys"] == before["keys"] - len(gone)
    named = {e.split("'")[1] for e in r["errors"] if e.endswith("is in the record index, not live")}
    assert named == {str(k) for k in gone}
    assert f"record index count: {before['index_entries']} entries, {r['checked']['keys']} keys" in "\n".join(
        r["errors"]
    )
