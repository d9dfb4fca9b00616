"""File group rewrites: the bloom filter a merge carries over, the merge thread pool, and the
per-file choice of dictionary encoding."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.table.index.key_index import read_footer
from hoodie_sink.table.read.snapshot import Snapshot
from hoodie_sink.table.write.base_file_writer import dictionary_columns
from tests.support.tables import assert_table_matches, read_both
from tests.unit.test_client import OPTS, trips


def _latest_footers(path):
    snap = Snapshot.open(str(path))
    return {bf.file_id: read_footer(snap.storage, bf.path) for bf in snap.base_files()}


def _rows(t: pa.Table) -> dict:
    return {r["id"]: r for r in t.to_pylist()}


def test_merge_keeps_the_old_bloom_filter_and_adds_only_new_keys(tmp_path):
    path = tmp_path / "t"
    hoodie_sink.write(trips(300), str(path), {**OPTS, "hoodie.datasource.write.operation": "upsert"})
    first = _latest_footers(path)
    # updates of old keys plus new keys that fill the same (small) file groups
    hoodie_sink.write(
        trips(200, start=200), str(path), {**OPTS, "hoodie.datasource.write.operation": "upsert"}
    )
    second = _latest_footers(path)
    assert set(first) <= set(second)
    grown = [fid for fid in first if second[fid].bloom_text != first[fid].bloom_text]
    assert grown, "the inserts should have gone into the existing small file groups"
    for fid in first:  # every bit of the old filter is still set
        old, new = first[fid].bloom(), second[fid].bloom()
        assert (new._bits[: old.num_rows] >= old._bits).all()
    want = _rows(trips(200)) | _rows(trips(200, start=200))
    assert_table_matches(path, list(want.values()))  # checks every key is in its file's bloom


def test_bloom_settings_changed_between_commits_rebuild_the_filter(tmp_path):
    path = tmp_path / "t"
    hoodie_sink.write(trips(300), str(path), {**OPTS, "hoodie.datasource.write.operation": "upsert"})
    opts = {**OPTS, "hoodie.datasource.write.operation": "upsert", "hoodie.index.bloom.num_entries": "1000"}
    hoodie_sink.write(trips(100, start=250), str(path), opts)
    for ft in _latest_footers(path).values():
        assert ft.bloom().vector_size == hoodie_sink.table.format.bloom.bit_size(1000, 1e-9)
    want = _rows(trips(250)) | _rows(trips(100, start=250))
    assert_table_matches(path, list(want.values()))


@pytest.mark.parametrize("threads", ["1", "4"])
def test_merge_threads_give_the_same_table(tmp_path, threads):
    opts = {**OPTS, "hoodie.datasource.write.operation": "upsert", "hoodie.write.merge.threads": threads}
    path = tmp_path / "t"
    hoodie_sink.write(trips(900, cities=tuple("abcdefgh")), str(path), opts)
    meta = hoodie_sink.write(trips(600, start=600, cities=tuple("abcdefgh")), str(path), opts)
    assert len(meta.write_stats) == 8  # one file group per partition, each merged once
    assert all(s.prev_commit != "null" for s in meta.write_stats)
    want = _rows(trips(900, cities=tuple("abcdefgh"))) | _rows(
        trips(600, start=600, cities=tuple("abcdefgh"))
    )
    assert_table_matches(path, list(want.values()))


def test_dictionary_only_for_repetitive_columns(tmp_path):
    n = 10_000
    t = pa.table({
        "_hoodie_record_key": [f"k{i}" for i in range(n)],
        "unique_double": [i * 0.5 for i in range(n)],
        "few_strings": [("a", "b", "c")[i % 3] for i in range(n)],
        "half_distinct": [i // 2 for i in range(n)],
        "flag": [i % 2 == 0 for i in range(n)],
    })  # fmt: skip
    cols = dictionary_columns(t, t.schema)
    assert cols == ["few_strings", "half_distinct", "flag"]
    assert dictionary_columns(None, t.schema) == [c for c in t.column_names if c != "_hoodie_record_key"]
    # and the files say so: a written base file uses dictionaries only where chosen
    path = tmp_path / "t"
    data = trips(5000).append_column("label", pa.array([("x", "y")[i % 2] for i in range(5000)]))
    hoodie_sink.write(data, str(path), {**OPTS, "hoodie.datasource.write.operation": "bulk_insert"})
    snap = Snapshot.open(str(path))
    md = pq.read_metadata(os.path.join(snap.storage.base_uri, snap.base_files()[0].path))
    enc = {
        md.row_group(0).column(i).path_in_schema: md.row_group(0).column(i).encodings
        for i in range(md.num_columns)
    }
    assert any("DICTIONARY" in e for e in enc["label"])
    assert not any("DICTIONARY" in e for e in enc["fare"])
    read_both(path)


def test_insert_fills_small_files_before_opening_new_file_groups(tmp_path):
    path = tmp_path / "t"
    opts = {**OPTS, "hoodie.datasource.write.operation": "insert"}
    hoodie_sink.write(trips(300), str(path), opts)
    first = _latest_footers(path)
    meta = hoodie_sink.write(trips(90, start=300), str(path), opts)
    # every insert went into an existing (small) file group: no new file group, no dedup
    assert {s.file_id for s in meta.write_stats} <= set(first)
    assert all(s.prev_commit != "null" for s in meta.write_stats)
    assert sum(s.num_inserts for s in meta.write_stats) == 90
    assert_table_matches(path, trips(390).to_pylist())
    # below the limit nothing is small: new file groups
    meta = hoodie_sink.write(
        trips(30, start=390), str(path), {**opts, "hoodie.parquet.small.file.limit": "0"}
    )
    assert all(s.prev_commit == "null" for s in meta.write_stats)
    assert_table_matches(path, trips(420).to_pylist())
