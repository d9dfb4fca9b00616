"""Apache Hudi 0.15 (Java) and the record index we keep (issue 29): Java's RECORD_INDEX tags its
upsert through our record index (a key it missed would be inserted a second time), keeps it, and
we continue after Java, our record index equal to the live keys at every turn."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.services.validation import record_index_mismatches
from hoodie_sink.table.storage import Storage
from tests.interop.test_metadata_table_interop import READ_THROUGH_METADATA, trips
from tests.support.tables import assert_table_matches

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
