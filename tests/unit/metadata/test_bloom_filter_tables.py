"""The bloom_filters partition on real tables (issue 29, item 3; no Spark): Java 0.15's holds the
footers' filters, ours built on Java's table equals Java's, our writes keep and continue it, cleans
tombstone and the metadata compaction drops the tombstones, and the bloom index tagging with the
metadata table's ranges and filters (hoodie.bloom.index.use.metadata) finds what the footers find."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.format.metadata_blocks import read_metadata_hfile
from hoodie_sink.table.format.metadata_keys import BLOOM_FILTERS, file_group_index
from hoodie_sink.table.format.metadata_listing import read_partition
from hoodie_sink.table.format.metadata_table import listed_partitions, metadata_storage
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.index import key_index
from hoodie_sink.table.index.key_index import KeyIndex
from hoodie_sink.table.metadata.bootstrap import drop_unkept_partitions, settle
from hoodie_sink.table.metadata.data_properties import read_data_properties
from hoodie_sink.table.metadata.writer import metadata_lock
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.bloom_filter_files import bloom_filters_init
from hoodie_sink.table.services.validation import bloom_filter_mismatches
from hoodie_sink.table.storage import Storage
from tests.support.metadata_services import (
    assert_tombstoned_then_compacted,
    upserts_with_cleans_and_compactions,
)
from tests.support.tables import unzip_metadata_fixture
from tests.unit.metadata.test_metadata_table import OPTS, trips

JAVA_TABLES = ("cow_mdt_v6", "mor_mdt_v6")
BLOOM_OPTS = {
    **OPTS,
    "hoodie.metadata.index.bloom.filter.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.bloom.index.use.metadata": "true",
}


def _live(storage: Storage) -> dict[str, tuple[str, bytes]]:
    """key -> (type, filter bytes) of every live record."""
    records = read_partition(storage, ActiveTimeline.load(storage), BLOOM_FILTERS) or {}
    return {
        k: (r.bloom_filter.bloom_type, r.bloom_filter.bloom_filter)
        for k, r in records.items()
        if r is not None and r.bloom_filter is not None and not r.bloom_filter.is_deleted
    }


@pytest.mark.parametrize("name", JAVA_TABLES)
def test_javas_bloom_filters_are_the_footers_filters(tmp_path, name):
    storage = Storage(str(unzip_metadata_fixture(name, tmp_path)))
    assert BLOOM_FILTERS in listed_partitions(read_data_properties(storage))
    assert _live(storage)
    assert bloom_filter_mismatches(storage, ActiveTimeline.load(storage), limit=100) == []


@pytest.mark.parametrize("name", JAVA_TABLES)
def test_our_build_of_a_java_table_equals_javas_bloom_filters(tmp_path, name):
    storage = Storage(str(unzip_metadata_fixture(name, tmp_path)))
    theirs = _live(storage)
    cfg = WriteConfig.from_options(BLOOM_OPTS, path=storage.base_uri)
    listed = listed_partitions(read_data_properties(storage))
    with metadata_lock(storage):
        drop_unkept_partitions(storage, [BLOOM_FILTERS], [p for p in listed if p != BLOOM_FILTERS])
    settle(storage, ActiveTimeline.load(storage), True, 1000, None, None, bloom_filters_init(cfg))
    ours = _live(storage)
    assert ours and all(
        theirs.get(k) == v for k, v in ours.items()
    )  # Java's stale records of cleaned files gone
    assert bloom_filter_mismatches(storage, ActiveTimeline.load(storage)) == []
    mdt = metadata_storage(storage)
    for f in mdt.list_dir(BLOOM_FILTERS):
        if f.base_name.endswith(".hfile"):
            index = int(f.base_name.split("-")[2])
            keys = [r.key for r in read_metadata_hfile(mdt.read_bytes(f"{BLOOM_FILTERS}/{f.base_name}"))]
            assert {file_group_index(k, 4) for k in keys} == {index}


def test_use_metadata_needs_the_partition_kept(tmp_path):
    with pytest.raises(HoodieConfigError, match="hoodie.bloom.index.use.metadata"):
        WriteConfig.from_options(
            {**OPTS, "hoodie.bloom.index.use.metadata": "true"}, path=str(tmp_path / "t")
        )
    with pytest.raises(HoodieConfigError, match="hoodie.bloom.index.use.metadata"):
        WriteConfig.from_options({**BLOOM_OPTS, "hoodie.index.type": "BUCKET"}, path=str(tmp_path / "t"))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_our_writes_keep_bloom_filters_through_cleans_and_compactions(tmp_path, table_type):
    path = tmp_path / "t"
    upserts_with_cleans_and_compactions(path, BLOOM_OPTS, table_type)
    assert_tombstoned_then_compacted(path, BLOOM_FILTERS, "bloom_filter")


@pytest.mark.parametrize("global_index", [False, True])
def test_the_bloom_index_from_the_metadata_table_equals_the_one_from_footers(
    tmp_path, monkeypatch, global_index
):
    """Every key tagged the same (existing keys in their file groups, new ones untagged), with no
    footer read: ranges from column_stats, filters from bloom_filters."""
    path = tmp_path / "t"
    cities = tuple(f"c{i}" for i in range(6))
    for r in range(5):
        hoodie_sink.write(trips(range(r * 200, r * 200 + 200), ts=1, cities=cities), str(path), BLOOM_OPTS)
    storage = Storage(str(path))
    files = FileSystemView.load(storage).latest_base_files()
    assert len(files) >= 6
    rng = random.Random(3)
    ids = rng.sample(range(1200), 60)  # 1000..1199 do not exist; few keys: the filters are probed
    keys = pa.array([str(i) for i in ids])
    parts = pa.array([cities[i % len(cities)] for i in ids])
    key_index.clear_caches()
    from_footers = KeyIndex(storage, files, global_index=global_index).tag(keys, parts)
    key_index.clear_caches()
    footers_read: list[str] = []
    real = key_index.read_footer
    monkeypatch.setattr(key_index, "read_footer", lambda s, p: footers_read.append(p) or real(s, p))
    from_metadata = KeyIndex(storage, files, global_index=global_index, use_metadata=True).tag(keys, parts)
    assert from_metadata == from_footers
    assert sum(x is not None for x in from_footers.file_id.to_pylist()) == sum(i < 1000 for i in ids)
    stats = key_index.cache_stats()
    assert stats["files_ranged_from_metadata"] == len(files) and stats["blooms_from_metadata"] > 0
    assert footers_read == []
