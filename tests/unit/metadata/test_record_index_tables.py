"""The record index on real tables: Java 0.15's (tests/fixtures/metadata-tables) read by ours and
rebuilt by ours, ours built on an existing table of ours, and a write that dies between its
metadata deltacommit and its commit (no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.metadata_keys import RECORD_INDEX
from hoodie_sink.table.format.metadata_layout import DEFAULT_FILE_GROUPS
from hoodie_sink.table.format.metadata_record_index import read_record_index, record_index_layout
from hoodie_sink.table.format.metadata_table import listed_partitions, metadata_storage
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline, Timeline
from hoodie_sink.table.metadata.bootstrap import drop_unkept_partitions
from hoodie_sink.table.metadata.data_properties import read_data_properties
from hoodie_sink.table.metadata.record_index_init import RecordIndexInit, RecordIndexSizing
from hoodie_sink.table.metadata.writer import metadata_lock
from hoodie_sink.table.read.record_index_keys import live_entries
from hoodie_sink.table.services.validation import record_index_mismatches
from hoodie_sink.table.storage import Storage
from tests.support.tables import unzip_metadata_fixture

JAVA_TABLES = ("cow_mdt_v6", "mor_mdt_v6")


def _locations(table: pa.Table) -> dict[str, tuple[str, str]]:
    return {r["key"]: (r["partition"], r["file_id"]) for r in table.to_pylist()}


@pytest.mark.parametrize("name", JAVA_TABLES)
def test_javas_record_index_reads_as_the_tables_live_keys(tmp_path, name):
    storage = Storage(str(unzip_metadata_fixture(name, tmp_path)))
    timeline = ActiveTimeline.load(storage)
    assert RECORD_INDEX in listed_partitions(read_data_properties(storage))
    theirs = read_record_index(storage, timeline)
    assert theirs.num_rows == live_entries(storage, timeline).num_rows > 0
    assert record_index_mismatches(storage, timeline) == []
    layout = record_index_layout(metadata_storage(storage), Timeline.load(metadata_storage(storage)))
    assert layout.file_groups == DEFAULT_FILE_GROUPS[RECORD_INDEX]


@pytest.mark.parametrize("name", JAVA_TABLES)
def test_our_bootstrap_of_a_java_table_equals_javas_record_index(tmp_path, name):
    """Java's record index dropped, ours built from the same table: the same keys, locations and
    file groups (Java's hashing), at an instant after the files partition's."""
    from hoodie_sink.table.metadata.record_index_init import initialize_record_index

    storage = Storage(str(unzip_metadata_fixture(name, tmp_path)))
    timeline = ActiveTimeline.load(storage)
    theirs = read_record_index(storage, timeline)
    mdt = metadata_storage(storage)
    their_groups = {
        str(sl.file_id): _locations(_slice_entries(storage, timeline, sl.file_id))
        for sl in record_index_layout(mdt, Timeline.load(mdt)).slices
    }
    with metadata_lock(storage):
        drop_unkept_partitions(storage, [RECORD_INDEX])
        instant = initialize_record_index(
            storage, timeline, RecordIndexInit(RecordIndexSizing(), live_entries), 1
        )
    assert instant.endswith("011") or instant.endswith("010")
    ours = read_record_index(storage, ActiveTimeline.load(storage))
    assert _locations(ours) == _locations(theirs)
    our_groups = {
        str(sl.file_id): _locations(_slice_entries(storage, timeline, sl.file_id))
        for sl in record_index_layout(mdt, Timeline.load(mdt)).slices
    }
    assert our_groups == their_groups  # each key in the file group Java put it in
    assert record_index_mismatches(storage, ActiveTimeline.load(storage)) == []


def _slice_entries(storage: Storage, timeline, file_id: str) -> pa.Table:
    from hoodie_sink.table.format.metadata_listing import reader_instants
    from hoodie_sink.table.format.metadata_record_index import read_slice

    mdt = metadata_storage(storage)
    _, valid, latest = reader_instants(storage, timeline)
    layout = record_index_layout(mdt, Timeline.load(mdt))
    (sl,) = [s for s in layout.slices if s.file_id == file_id]
    return read_slice(mdt, sl, valid, latest)


def _write(path: str, rows: list[dict], op: str = "upsert", **extra: str) -> None:
    import hoodie_sink

    options = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.index.type": "GLOBAL_BLOOM",
        "hoodie.datasource.write.operation": op,
        **extra,
    }
    hoodie_sink.write(pa.Table.from_pylist(rows), path, options)


def _rows(ids, p="a", ts=1):
    return [{"id": f"k{i:05d}", "p": p, "ts": ts, "v": i, "_hoodie_is_deleted": False} for i in ids]


def test_an_existing_table_of_ours_gets_a_record_index_and_keeps_it(tmp_path):
    path = str(tmp_path / "t")
    _write(path, _rows(range(300)), "bulk_insert", **{"hoodie.metadata.enable": "true"})
    _write(path, _rows(range(290, 310), "b", 2), "upsert")  # moves 290..299 without a record index
    storage = Storage(path)
    assert RECORD_INDEX not in listed_partitions(read_data_properties(storage))
    rli = {"hoodie.metadata.record.index.enable": "true", "hoodie.bloom.index.update.partition.path": "true"}
    _write(path, _rows(range(0, 5), "c", 3), "upsert", **rli)  # built at its begin, then kept
    assert RECORD_INDEX in listed_partitions(read_data_properties(storage))
    got = _locations(read_record_index(storage, ActiveTimeline.load(storage)))
    assert len(got) == 310 and {got[f"k{i:05d}"][0] for i in range(5)} == {"c"}
    assert got["k00295"][0] == "b" and got["k00100"][0] == "a"
    _write(path, [{"id": "k00007", "p": "a", "ts": 9, "v": 0, "_hoodie_is_deleted": True}], "upsert", **rli)
    _write(path, _rows([8]), "delete", **rli)
    got = _locations(read_record_index(storage, ActiveTimeline.load(storage)))
    assert "k00007" not in got and "k00008" not in got and len(got) == 308
    assert record_index_mismatches(storage, ActiveTimeline.load(storage)) == []
    _write(path, _rows([1]), "upsert")  # a write without the option drops it, as Java's does
    assert RECORD_INDEX not in listed_partitions(read_data_properties(storage))
    assert not metadata_storage(storage).is_dir(RECORD_INDEX)


def test_the_record_index_needs_the_metadata_table(tmp_path):
    with pytest.raises(HoodieConfigError, match="needs the metadata table"):
        _write(
            str(tmp_path / "t"),
            _rows(range(3)),
            **{"hoodie.metadata.record.index.enable": "true", "hoodie.metadata.enable": "false"},
        )


def test_file_groups_follow_the_sizing_options(tmp_path):
    path = str(tmp_path / "t")
    sizing = {
        "hoodie.metadata.record.index.enable": "true",
        "hoodie.metadata.record.index.min.filegroup.count": "1",
        "hoodie.metadata.record.index.max.filegroup.count": "4",
        "hoodie.metadata.record.index.max.filegroup.size": "480",  # 10 entries of 48 bytes a group
    }
    _write(path, _rows(range(12)), "bulk_insert", **{"hoodie.metadata.enable": "true"})
    _write(path, _rows(range(12, 14)), "upsert", **sizing)  # built from 12 keys: ceil(24) // 10 = 2
    mdt = metadata_storage(Storage(path))
    assert record_index_layout(mdt, Timeline.load(mdt)).file_groups == 2
    got = read_record_index(Storage(path), ActiveTimeline.load(Storage(path)))
    assert sorted(pc.unique(got.column("key")).to_pylist()) == [f"k{i:05d}" for i in range(14)]


def test_clustering_re_points_every_key_it_moves(tmp_path, caplog):
    import logging

    import hoodie_sink

    path = str(tmp_path / "t")
    rli = {"hoodie.metadata.enable": "true", "hoodie.metadata.record.index.enable": "true"}
    for i in range(4):  # four small file groups in partition a
        _write(path, _rows(range(i * 10, i * 10 + 10)), "bulk_insert", **rli)
    storage = Storage(path)
    before = _locations(read_record_index(storage, ActiveTimeline.load(storage)))
    options = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.index.type": "GLOBAL_BLOOM",
        "hoodie.clustering.plan.strategy.small.file.limit": str(1 << 30),
        **rli,
    }
    with caplog.at_level(logging.INFO, logger="hoodie_sink.table.read.record_index_change"):
        result = hoodie_sink.cluster(path, options)
    assert result is not None and result.output_files >= 1
    after = _locations(read_record_index(storage, ActiveTimeline.load(storage)))
    assert after.keys() == before.keys() and len(after) == 40
    assert not set(after.values()) & set(before.values())  # every key in a new file group
    assert record_index_mismatches(storage, ActiveTimeline.load(storage)) == []
    assert "0 at the commit" in caplog.text  # the clustering tasks read their files, not the commit
