"""The metadata table kept by our writes, read back by our listing (no Spark, no JVM): Java's own
metadata tables list what storage holds; ours do after every kind of write, clean, compaction,
rollback and restore; a crash between the two deltacommits is harmless in both directions."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.fs_view import list_storage_files, list_table_files
from hoodie_sink.table.format.metadata_listing import metadata_listing
from hoodie_sink.table.format.metadata_table import is_metadata_storage, metadata_storage
from hoodie_sink.table.format.properties import parse_properties
from hoodie_sink.table.format.timeline.instant import COMMIT, DELTA_COMMIT
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.services.validation import validate_table
from hoodie_sink.table.storage import Storage
from tests.support.tables import METADATA_FIXTURE_NAMES, assert_table_matches, unzip_metadata_fixture

UTC = dt.timezone.utc
OPTS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.metadata.enable": "true",
}


def trips(ids, ts: int = 1, cities=("sf", "nyc", "chennai")) -> pa.Table:
    ids = list(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "city": pa.array([cities[i % len(cities)] for i in ids]),
        "ts": pa.array([ts] * len(ids), pa.int64()),
        "fare": pa.array([i * 1.5 + ts for i in ids]),
    })  # fmt: skip


def files_of(listing) -> dict[str, int]:
    return {f.path: f.size for f in listing.base_files} | {f.path: f.size for f in listing.log_files}


def assert_listing_matches_storage(path: Path) -> None:
    storage = Storage(str(path))
    timeline = Timeline.load(storage)
    listed = files_of(metadata_listing(storage, timeline))
    stored = list_storage_files(storage)
    committed = {f.path: f.size for f in stored.base_files if timeline.is_committed(f.instant)}
    committed |= {f.path: f.size for f in stored.log_files}
    assert listed == committed
    assert not [v for v in validate_table(storage) if v.check == "metadata-table"]


def metadata_timeline(path: Path) -> Timeline:
    return Timeline.load(metadata_storage(Storage(str(path))))


@pytest.mark.parametrize("name", METADATA_FIXTURE_NAMES)
def test_javas_metadata_tables_list_what_storage_holds(tmp_path, name):
    path = unzip_metadata_fixture(name, tmp_path)
    assert_listing_matches_storage(path)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_our_writes_keep_the_metadata_table(tmp_path, table_type):
    path = tmp_path / "t"
    opts = {
        **OPTS,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.metadata.compact.max.delta.commits": "3",
        "hoodie.cleaner.commits.retained": "1",
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
    }
    model: dict[int, dict] = {}

    def write(data: pa.Table, op: str) -> None:
        hoodie_sink.write(data, str(path), {**opts, "hoodie.datasource.write.operation": op})
        for r in data.to_pylist():
            if op == "delete":
                model.pop(r["id"], None)
            else:
                model[r["id"]] = r
        assert_listing_matches_storage(path)
        assert_table_matches(path, list(model.values()))

    write(trips(range(30)), "insert")
    props = parse_properties((path / ".hoodie" / "hoodie.properties").read_text())
    assert props["hoodie.table.metadata.partitions"] == "files"
    init = metadata_timeline(path).completed((DELTA_COMMIT,))[0].timestamp
    assert init == "00000000000000010"  # built when the table was created
    write(trips(range(20, 40), ts=2), "upsert")
    write(trips(range(0, 10, 2), ts=3), "delete")
    write(trips(range(40, 50), ts=4), "insert")
    write(trips(range(5, 45, 3), ts=5), "upsert")
    write(trips(range(50, 60), ts=6), "bulk_insert")
    mdt = metadata_timeline(path)
    assert mdt.completed((COMMIT,)), "the metadata table compacted (every 3 deltacommits here)"
    data = Timeline.load(Storage(str(path)))
    # every data write has its metadata deltacommit of the same time
    assert {i.timestamp for i in data.completed()} <= {i.timestamp for i in mdt.completed((DELTA_COMMIT,))}
    # the listing through the metadata table is what the table's readers use
    storage = Storage(str(path))
    assert files_of(list_table_files(storage)) == files_of(metadata_listing(storage, data))


def test_disabling_removes_it_and_enabling_builds_it_again(tmp_path):
    path = tmp_path / "t"
    hoodie_sink.write(trips(range(10)), str(path), OPTS)
    hoodie_sink.write(trips(range(10, 20)), str(path), {**OPTS, "hoodie.metadata.enable": "false"})
    assert not (path / ".hoodie" / "metadata").exists()
    props = parse_properties((path / ".hoodie" / "hoodie.properties").read_text())
    assert props.get("hoodie.table.metadata.partitions", "") == ""
    hoodie_sink.write(trips(range(20, 30)), str(path), OPTS)
    init = metadata_timeline(path).completed((DELTA_COMMIT,))[0].timestamp
    assert init.endswith("010") and not init.startswith("0000")  # built from the listing, after the commits
    assert_listing_matches_storage(path)
    assert_table_matches(path, trips(range(30)).to_pylist())


def test_partitions_we_do_not_keep_are_dropped_from_javas_table(tmp_path):
    path = unzip_metadata_fixture("cow_mdt_v6", tmp_path)
    hoodie_sink.write(
        pa.table(
            {"id": ["z1"], "city": ["sf"], "ts": pa.array([9], pa.int64()), "fare": [1.0], "tag": ["o1"]}
        ),
        str(path),
        {**OPTS, "hoodie.table.name": "cow_mdt_v6", "hoodie.datasource.write.operation": "upsert"},
    )
    props = parse_properties((path / ".hoodie" / "hoodie.properties").read_text())
    assert props["hoodie.table.metadata.partitions"] == "files"
    assert sorted(p.name for p in (path / ".hoodie" / "metadata").iterdir()) == [".hoodie", "files"]
    assert_listing_matches_storage(path)


# -- a write killed between the two tables -------------------------------------------------------
def _kill_after_metadata(monkeypatch, stage: str):
    """Make the next data commit die at `stage`: "metadata-complete" (the metadata deltacommit is
    complete, the data instant is not) or "metadata-inflight" (the metadata log file is written, its
    deltacommit is not complete)."""
    from hoodie_sink.table.format.timeline.timeline import TimelineStore
    from hoodie_sink.table.metadata import writer

    class Killed(Exception):
        pass

    if stage == "metadata-complete":
        real = writer.write_deltacommit

        def write_then_die(storage, instant, *changes):
            real(storage, instant, *changes)
            raise Killed(f"killed after metadata deltacommit {instant}")

        monkeypatch.setattr("hoodie_sink.table.metadata.sync.write_deltacommit", write_then_die)
    else:
        real_complete = TimelineStore.complete

        def die_on_metadata(self, inflight, content):
            if is_metadata_storage(self.storage) and inflight.action == DELTA_COMMIT:
                raise Killed(f"killed before completing metadata deltacommit {inflight.timestamp}")
            return real_complete(self, inflight, content)

        monkeypatch.setattr(TimelineStore, "complete", die_on_metadata)
    return Killed


RECORD_INDEX_OPTS = {"hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "GLOBAL_BLOOM"}
COLUMN_STATS_OPTS = {"hoodie.metadata.index.column.stats.enable": "true"}


@pytest.mark.parametrize(
    "record_index", [False, True, "column-stats"], ids=["files", "record-index", "column-stats"]
)
@pytest.mark.parametrize("stage", ["metadata-complete", "metadata-inflight"])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_write_killed_between_the_two_tables_leaves_both_consistent(
    tmp_path, monkeypatch, stage, table_type, record_index
):
    """With the record index (or column statistics) too: its log files of the killed write go with
    the rollback of the metadata deltacommit, and assert_table_matches checks it against the live
    keys (the files' statistics)."""
    path = tmp_path / "t"
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    if record_index == "column-stats":
        opts |= COLUMN_STATS_OPTS
    elif record_index:
        opts |= RECORD_INDEX_OPTS
    hoodie_sink.write(trips(range(20)), str(path), opts)
    killed = _kill_after_metadata(monkeypatch, stage)
    with pytest.raises(Exception, match="killed"):
        hoodie_sink.write(trips(range(10, 30), ts=2), str(path), opts)
    monkeypatch.undo()
    # whatever the failed write left (the abort may have rolled it back already), readers see the
    # table as before it, through the metadata table and through storage alike
    assert_table_matches(path, trips(range(20)).to_pylist())
    assert_listing_matches_storage(path)
    hoodie_sink.write(trips(range(25, 35), ts=3), str(path), opts)
    assert_listing_matches_storage(path)
    expected = {r["id"]: r for r in trips(range(20)).to_pylist()} | {
        r["id"]: r for r in trips(range(25, 35), ts=3).to_pylist()
    }
    assert_table_matches(path, list(expected.values()))
    data = {i.timestamp for i in Timeline.load(Storage(str(path))).instants}
    for inst in metadata_timeline(path).instants:  # no metadata deltacommit of a data instant that is gone
        assert inst.timestamp in data or len(inst.timestamp) == 20 or inst.timestamp.startswith("0000"), inst
    del killed


def test_a_metadata_deltacommit_ahead_of_its_data_instant_is_not_read(tmp_path):
    """A crash after the metadata deltacommit completed and before the data instant did, with no
    abort: readers skip the deltacommit's blocks, and the next writer's rollback removes them."""
    from hoodie_sink.table.metadata.files_change import FilesChange
    from hoodie_sink.table.metadata.writer import write_deltacommit
    from hoodie_sink.table.options.write_config import WriteConfig
    from hoodie_sink.table.write import coordinator

    path = tmp_path / "t"
    beat = {"hoodie.client.heartbeat.interval_in_ms": "200", "hoodie.client.heartbeat.tolerable.misses": "0"}
    hoodie_sink.write(trips(range(20)), str(path), {**OPTS, **beat})
    ctx = coordinator.begin(WriteConfig.from_options({**OPTS, **beat}, path=str(path)), trips([1]).schema)
    fake = FilesChange()
    fake.add("sf", f"ghost-0_0-1-1_{ctx.instant}.parquet", 123)  # what the dying write said it wrote
    write_deltacommit(Storage(str(path)), ctx.instant, fake)
    assert any(s.is_completed for s in metadata_timeline(path).states_of(ctx.instant))
    assert_listing_matches_storage(path)  # the ghost is not listed: its data instant is pending
    import time

    time.sleep(0.3)  # its heartbeat expires
    hoodie_sink.write(trips(range(20, 25)), str(path), {**OPTS, **beat})
    assert not metadata_timeline(path).states_of(ctx.instant)
    assert_listing_matches_storage(path)
    assert_table_matches(path, trips(range(25)).to_pylist())


def test_a_long_run_of_writes_keeps_the_metadata_table_bounded(tmp_path):
    """Compaction, clean and archival of the metadata table: after 40 writes it holds a bounded
    number of files and timeline entries, and still lists what storage holds."""
    path = tmp_path / "t"
    opts = {
        **OPTS,
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.metadata.compact.max.delta.commits": "4",
        "hoodie.cleaner.commits.retained": "2",
        "hoodie.keep.min.commits": "3",
        "hoodie.keep.max.commits": "4",
        "hoodie.datasource.write.operation": "upsert",
    }
    model: dict[int, dict] = {}
    for i in range(40):
        data = trips(range(i * 3, i * 3 + 6), ts=i)
        hoodie_sink.write(data, str(path), opts)
        model.update({r["id"]: r for r in data.to_pylist()})
    assert_listing_matches_storage(path)
    assert_table_matches(path, list(model.values()))
    files = list((path / ".hoodie" / "metadata" / "files").iterdir())
    timeline_files = [p for p in (path / ".hoodie" / "metadata" / ".hoodie").iterdir() if p.is_file()]
    assert len(files) <= 2 * 5 + 2, sorted(f.name for f in files)  # two slices of base + up to 4 logs
    assert len(timeline_files) <= 60, len(timeline_files)  # ~45 from the 20th write to the 100th
    assert list((path / ".hoodie" / "metadata" / ".hoodie" / "archived").iterdir())


def test_a_base_file_hudi_1_1_wrote_reads():
    from hoodie_sink.table.format.metadata_blocks import read_metadata_hfile
    from tests.support.tables import METADATA_FIXTURES

    data = (METADATA_FIXTURES / "hudi-1.1.1-files-base.hfile").read_bytes()
    records = read_metadata_hfile(data, "hudi-1.1.1-files-base.hfile")
    assert [r.key for r in records] == ["__all_partitions__", "la", "nyc", "sf"]
    assert all(info.size > 0 for r in records[1:] for info in (r.files or {}).values())


def test_a_metadata_compaction_killed_before_its_commit_is_redone(tmp_path, monkeypatch):
    """The compaction's base file is written, its commit is not: nobody reads the base file (its
    instant is not complete), and the next write removes it and compacts again."""
    from hoodie_sink.table.format.timeline.timeline import TimelineStore

    path = tmp_path / "t"
    opts = {
        **OPTS,
        "hoodie.metadata.compact.max.delta.commits": "2",
        "hoodie.datasource.write.operation": "upsert",
    }
    hoodie_sink.write(trips(range(10)), str(path), opts)  # the initialisation and one deltacommit
    real = TimelineStore.complete

    def die_on_compaction(self, inflight, content):
        if is_metadata_storage(self.storage) and inflight.action == COMMIT:
            raise RuntimeError("killed before the metadata compaction's commit")
        return real(self, inflight, content)

    monkeypatch.setattr(TimelineStore, "complete", die_on_compaction)
    with pytest.raises(RuntimeError, match="killed before the metadata compaction"):
        hoodie_sink.write(trips(range(5, 15), ts=2), str(path), opts)  # compacts at its begin
    monkeypatch.undo()
    assert not metadata_timeline(path).completed((COMMIT,))
    assert list((path / ".hoodie" / "metadata" / "files").glob("*.hfile"))  # the orphan base file
    assert_listing_matches_storage(path)
    assert_table_matches(path, trips(range(10)).to_pylist())
    hoodie_sink.write(trips(range(5, 15), ts=2), str(path), opts)
    assert metadata_timeline(path).completed((COMMIT,))
    assert_listing_matches_storage(path)
    expected = {r["id"]: r for r in trips(range(10)).to_pylist()}
    expected |= {r["id"]: r for r in trips(range(5, 15), ts=2).to_pylist()}
    assert_table_matches(path, list(expected.values()))
