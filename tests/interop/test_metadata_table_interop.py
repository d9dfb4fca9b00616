"""Apache Hudi (Java) and the metadata table we keep: Java 0.15 and 1.1 (at table version 6) read
our tables through it, their next write continues it (no re-initialisation), we continue theirs,
several rounds in turn.  A write of ours killed between the metadata deltacommit and the data
commit: tests/interop/test_metadata_kill_interop.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.metadata_table import metadata_storage
from hoodie_sink.table.format.timeline.instant import DELTA_COMMIT
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write import coordinator, write_path
from hoodie_sink.table.write.context import TaskIdentity
from tests.support.tables import assert_table_matches, unzip_metadata_fixture
from tests.unit.metadata.test_metadata_table import assert_listing_matches_storage

pytestmark = [pytest.mark.compat, pytest.mark.interop]

OURS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.compact.max.delta.commits": "3",
}
READ_THROUGH_METADATA = {"hoodie.metadata.enable": "true"}


def trips(ids, ts: int) -> pa.Table:
    ids = list(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "city": pa.array([("sf", "nyc", "la")[i % 3] for i in ids]),
        "ts": pa.array([ts] * len(ids), pa.int64()),
        "fare": pa.array([i * 1.5 + ts for i in ids]),
    })  # fmt: skip


def init_instants(path: Path) -> list[str]:
    """The initialisations of the `files` partition on the metadata timeline (20-digit times with
    an initialisation suffix whose deltacommit wrote `files`, or the empty table's).  Java 1.x also
    initialises column_stats on a table without it (its default), which we drop again: that is not
    a rebuild of the listing."""
    mdt_storage = metadata_storage(Storage(str(path)))
    mdt = Timeline.load(mdt_storage)
    out = []
    for i in mdt.completed((DELTA_COMMIT,)):
        t = i.timestamp
        if t.startswith("0000") or (len(t) == 20 and int(t[-3:]) >= 10):
            stats = (
                json.loads(mdt_storage.read_bytes(f".hoodie/{i.file_name}")).get("partitionToWriteStats")
                or {}
            )
            if t.startswith("0000") or "files" in stats:
                out.append(t)
    return out


def java_sees(java, path: Path, model: dict[int, dict]) -> None:
    got = {r["id"]: (r["ts"], r["fare"]) for r in java.read(path, **READ_THROUGH_METADATA).to_pylist()}
    assert got == {k: (v["ts"], v["fare"]) for k, v in model.items()}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_java_and_we_take_turns_on_one_metadata_table(any_java_hudi, tmp_path, table_type):
    java = any_java_hudi
    path = tmp_path / "t"
    ours = {
        **OURS,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.operation": "upsert",
    }
    javas = {**ours, "hoodie.write.auto.upgrade": "false", "hoodie.write.table.version": "6"}
    if java.version.startswith("0."):
        javas = {k: v for k, v in javas.items() if not k.startswith("hoodie.write.")}
    model: dict[int, dict] = {}
    ts = 0
    for round_ in range(3):
        for _ in range(2):
            ts += 1
            data = trips(range(ts * 4, ts * 4 + 10), ts)
            hoodie_sink.write(data, str(path), ours)
            model.update({r["id"]: r for r in data.to_pylist()})
        init = init_instants(path)
        java_sees(java, path, model)
        ts += 1
        data = trips(range(ts * 4, ts * 4 + 10), ts)
        java.write(path, data, javas)
        model.update({r["id"]: r for r in data.to_pylist()})
        assert init_instants(path) == init, f"round {round_}: Java re-initialised our metadata table"
        java_lists_as_storage(java, path)
        assert_listing_matches_storage(path)
        assert_table_matches(path, list(model.values()))
    java_sees(java, path, model)


def test_we_continue_a_metadata_table_java_built(java_hudi, tmp_path):
    path = unzip_metadata_fixture("mor_files_only_mdt_v6", tmp_path)
    before = {r["id"]: r for r in java_hudi.read(path, **READ_THROUGH_METADATA).to_pylist()}
    init = init_instants(path)
    data = pa.table({"id": ["z1", "a1"], "city": ["sf", "sf"], "ts": pa.array([50, 50], pa.int64()),
                     "fare": [1.0, 2.0], "tag": ["o1", "o1"]})  # fmt: skip
    opts = {**OURS, "hoodie.table.name": "mor_files_only_mdt_v6", "hoodie.datasource.write.table.type": "MERGE_ON_READ",
            "hoodie.datasource.write.operation": "upsert"}  # fmt: skip
    opts.pop("hoodie.metadata.compact.max.delta.commits")
    hoodie_sink.write(data, str(path), opts)
    assert init_instants(path) == init  # continued, not rebuilt
    java_lists_as_storage(java_hudi, path)
    assert_listing_matches_storage(path)
    expected = {**before, **{r["id"]: r for r in data.to_pylist()}}
    got = {r["id"]: r["fare"] for r in java_hudi.read(path, **READ_THROUGH_METADATA).to_pylist()}
    assert got == {k: v["fare"] for k, v in expected.items()}


def java_lists_as_storage(java, path: Path) -> None:
    """Java's metadata-table reader lists what Java's storage listing finds, file for file, and the
    latest file slices of its metadata-backed view (what its writers use) equal its listing-based
    view's (hudi_server.validate_metadata: the checks of Hudi's metadata-table validator)."""
    java.assert_metadata_valid(path)


def test_services_keep_the_metadata_table_for_java(java_hudi, tmp_path):
    """Clustering, compaction, clean, archival, a write rolled back after it died before its commit,
    and a restore: after each, Java's
    metadata-table listing equals its storage listing, and Java reads the model through it."""
    from hoodie_sink.table.client.table import Table

    path = tmp_path / "t"
    opts = {
        **OURS,
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.cleaner.commits.retained": "2",
        "hoodie.keep.min.commits": "3",
        "hoodie.keep.max.commits": "4",
        "hoodie.clustering.plan.strategy.small.file.limit": str(64 << 20),
    }
    model: dict[int, dict] = {}

    def write(ids, ts: int, operation: str = "upsert", extra: dict | None = None) -> None:
        data = trips(ids, ts)
        hoodie_sink.write(
            data, str(path), {**opts, "hoodie.datasource.write.operation": operation, **(extra or {})}
        )
        model.update({r["id"]: r for r in data.to_pylist()})

    for ts in range(1, 4):  # small file groups, several per partition: something to cluster
        write(range(ts * 100, ts * 100 + 12), ts, "bulk_insert")
    write(range(100, 112, 2), 4)  # updates into logs: something to compact
    java_lists_as_storage(java_hudi, path)
    table = Table(str(path), opts)
    assert table.compact()
    java_lists_as_storage(java_hudi, path)
    java_sees(java_hudi, path, model)
    assert table.cluster() is not None
    java_lists_as_storage(java_hudi, path)
    java_sees(java_hudi, path, model)
    for ts in range(5, 9):
        write(range(ts * 5, ts * 5 + 12), ts)
    table.clean()
    table.archive()
    java_lists_as_storage(java_hudi, path)
    java_sees(java_hudi, path, model)
    # a write that dies after writing its files, before its commit: the next write rolls it back
    beat = {"hoodie.client.heartbeat.interval_in_ms": "200", "hoodie.client.heartbeat.tolerable.misses": "0"}
    dying = coordinator.begin(
        WriteConfig.from_options({**opts, **beat}, path=str(path)), trips([1], 30).schema
    )
    write_path.write_task(dying, TaskIdentity(only_task=True), trips(range(0, 30, 3), 30).to_batches())
    time.sleep(0.5)  # its heartbeat expires
    write(range(200, 205), 31, extra=beat)  # judges the dying write's heartbeat by these settings
    assert not Timeline.load(Storage(str(path))).states_of(dying.instant)  # rolled back
    java_lists_as_storage(java_hudi, path)
    java_sees(java_hudi, path, model)
    saved = dict(model)
    savepoint = table.savepoint()
    write(range(100, 110), 20)
    write(range(0, 10), 21)
    table.restore(savepoint.instant)
    model = saved
    java_lists_as_storage(java_hudi, path)
    java_sees(java_hudi, path, model)
    assert_listing_matches_storage(path)
    assert_table_matches(path, list(model.values()))
