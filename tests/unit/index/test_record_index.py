"""RECORD_INDEX behind the Index protocol: its locator answers what the write path asks of
GLOBAL_BLOOM's (tag, locate, stored_values) with the same answers, on a table of ours whose
record index is built from its base files; and writes are refused with the options that work."""

from __future__ import annotations

import pickle
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.index import key_index, record_index_lookup
from hoodie_sink.table.index.key_index import KeyIndex, TagResult
from hoodie_sink.table.index.record_index import RecordIndexLocator
from hoodie_sink.table.index.registry import index_of
from hoodie_sink.table.storage import Storage
from tests.support.record_index import Location, RecordIndexBuilder

OPTIONS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.index.type": "GLOBAL_BLOOM",
    "hoodie.metadata.enable": "false",
    "hoodie.parquet.max.file.size": str(64 * 1024),  # several file groups per partition
    "hoodie.parquet.small.file.limit": "0",
}
COMPACTION = "00000000000000010001"


@pytest.fixture(autouse=True)
def _fresh_caches():
    record_index_lookup.clear_caches()
    key_index.clear_caches()
    yield


def _rows(ids: list[int], ts: int) -> pa.Table:
    return pa.table({
        "id": pa.array([f"id-{i:06d}" for i in ids]),
        "city": pa.array([("sf", "nyc", "la")[i % 3] for i in ids]),
        "ts": pa.array([ts + i % 7 for i in ids], pa.int64()),
        "fare": pa.array([float(i) for i in ids]),
    })  # fmt: skip


def _table_with_record_index(
    tmp_path, groups: int = 4
) -> tuple[Storage, dict[str, Location], list[BaseFile]]:
    """A table of ours, its record index (listed with a `files` partition it lacks: take the
    base files from the returned list, not a view) and its latest base files."""
    path = tmp_path / "t"
    hoodie_sink.write(
        _rows(list(range(0, 3000)), 1), str(path), {**OPTIONS, "hoodie.datasource.write.operation": "insert"}
    )
    hoodie_sink.write(
        _rows(list(range(2000, 5000)), 2),
        str(path),
        {**OPTIONS, "hoodie.datasource.write.operation": "upsert"},
    )
    storage = Storage(str(path))
    entries: dict[str, Location] = {}
    base_files = FileSystemView.load(storage).latest_base_files()
    for bf in base_files:
        t = pq.read_table(path / bf.path, columns=["_hoodie_record_key", "_hoodie_commit_time"])
        for key, commit in zip(t.column(0).to_pylist(), t.column(1).to_pylist(), strict=True):
            entries[key] = (bf.partition_path, bf.file_id, commit)
    b = RecordIndexBuilder(path, groups, block_size=4096)
    of = dict(zip(entries, b.group_of(entries).tolist(), strict=True))
    for g in range(groups):
        b.base_file(g, COMPACTION, {k: v for k, v in entries.items() if of[k] == g})
    return storage, entries, base_files


def _rows_of(t: TagResult) -> list[tuple]:
    return list(
        zip(t.file_id.to_pylist(), t.partition_path.to_pylist(), t.base_instant.to_pylist(), strict=True)
    )


def test_the_locator_answers_as_global_bloom_does(tmp_path):
    storage, entries, base_files = _table_with_record_index(tmp_path)
    rng = random.Random(5)
    keys = pa.array(rng.sample(sorted(entries), 500) + [f"id-{i:06d}" for i in range(9000, 9050)])
    parts = pa.array(["sf"] * len(keys))
    ours = index_of("record_index").locator(storage, base_files, None)
    assert isinstance(ours, RecordIndexLocator)
    theirs = KeyIndex(storage, base_files, global_index=True)
    assert _rows_of(ours.tag(keys, parts)) == _rows_of(theirs.tag(keys, parts))
    a, b = ours.locate(keys, parts), theirs.locate(keys, parts)
    assert a.record.tolist() == b.record.tolist() and _rows_of(a.tags) == _rows_of(b.tags)
    found = ours.tag(keys)
    hit = found.file_id.is_valid()
    got = ours.stored_values(keys.filter(hit), found.file_id.filter(hit), "ts", pa.int64())
    assert got == theirs.stored_values(keys.filter(hit), found.file_id.filter(hit), "ts", pa.int64())
    # shipped to a task: pickled without its record-index snapshot, listed again there
    shipped = pickle.loads(pickle.dumps(ours))
    assert _rows_of(shipped.tag(keys)) == _rows_of(found)
    assert record_index_lookup.cache_stats()["keys_found"] == 4 * 500  # tag, locate, tag, the shipped tag


def test_a_key_placed_outside_the_latest_file_groups_is_refused(tmp_path):
    storage, entries, base_files = _table_with_record_index(tmp_path)
    key = sorted(entries)[0]
    gone = [bf for bf in base_files if bf.file_id != entries[key][1]]
    with pytest.raises(HoodieTableError, match="out of date"):
        RecordIndexLocator(storage, gone).tag(pa.array([key]))


def test_writes_with_the_record_index_build_it_keep_it_and_tag_by_it(tmp_path):
    """RECORD_INDEX needs the partition kept (refused without it, naming the options); with it, the
    first write builds it from the table, and upserts tag by it: an update changes the stored row,
    a new key is inserted once, a delete removes the key, as GLOBAL_BLOOM would do."""
    from tests.support.tables import assert_table_matches

    path = tmp_path / "t"
    hoodie_sink.write(_rows(list(range(40)), 1), str(path), OPTIONS)
    upsert = {**OPTIONS, "hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.enable": "true"}
    with pytest.raises(HoodieConfigError, match="hoodie.metadata.record.index.enable=true"):
        hoodie_sink.write(_rows([1], 2), str(path), upsert)
    with pytest.raises(HoodieConfigError, match="hoodie.metadata.enable=true"):
        hoodie_sink.write(_rows([1], 2), str(path), {**upsert, "hoodie.metadata.enable": "false"})
    upsert["hoodie.metadata.record.index.enable"] = "true"
    model = {r["id"]: r for r in _rows(list(range(40)), 1).to_pylist()}
    batch = _rows([1, 5, 40, 41], 20)  # two updates, two inserts
    hoodie_sink.write(batch, str(path), upsert)  # builds the index, then tags by it
    assert record_index_lookup.cache_stats()["keys_looked_up"] >= 4
    model.update({r["id"]: r for r in batch.to_pylist()})
    gone = _rows([2, 41], 30)
    hoodie_sink.write(gone, str(path), {**upsert, "hoodie.datasource.write.operation": "delete"})
    for r in gone.to_pylist():
        del model[r["id"]]
    assert_table_matches(str(path), list(model.values()))  # its record index equals the live keys too
