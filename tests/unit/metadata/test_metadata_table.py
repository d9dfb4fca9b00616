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
from hoodie_sink.table.format.metadata_table import metadata_storage
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
