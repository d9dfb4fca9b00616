"""Apache Hudi 0.15 (Java) and the bloom_filters partition we keep (issue 29, item 3): Java's BLOOM
index with hoodie.bloom.index.use.metadata=true tags its upserts through our bloom filters and
column statistics (a key it missed would be inserted a second time), Java's view of our filters is
ours, and we continue after Java's writes, tagging through the filters it wrote."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hoodie_sink
from hoodie_sink.table.format.metadata_keys import BLOOM_FILTERS
from hoodie_sink.table.format.metadata_listing import metadata_listing, read_partition
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.services.validation import bloom_filter_mismatches, column_stats_mismatches
from hoodie_sink.table.storage import Storage
from tests.interop.test_metadata_table_interop import trips
from tests.support.tables import assert_table_matches

pytestmark = [pytest.mark.compat, pytest.mark.interop]

OURS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.index.bloom.filter.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.bloom.index.use.metadata": "true",
    "hoodie.metadata.compact.max.delta.commits": "3",
    "hoodie.index.type": "BLOOM",
    "hoodie.datasource.write.operation": "upsert",
    # the java_hudi JVM serves UTC tables (tests/interop/test_column_stats_interop.py says why)
    "hoodie.table.timeline.timezone": "UTC",
}
JAVAS = {**OURS, "hoodie.compact.inline": "false"}


def _javas_view_is_ours(java_hudi, path) -> int:
    """Java's bloom filters of every listed base file (HoodieTableMetadata.getBloomFilters) are the
    ones we read, and both are the footers' (our validation); the number compared."""
    storage = Storage(str(path))
    timeline = ActiveTimeline.load(storage)
    assert bloom_filter_mismatches(storage, timeline, limit=50) == []
    assert column_stats_mismatches(storage, timeline, limit=50) == []
    listing = metadata_listing(storage, timeline)
    files = [(bf.partition_path, bf.name) for bf in listing.base_files]
    theirs = java_hudi.bloom_filters(path, files)
    records = read_partition(storage, timeline, BLOOM_FILTERS) or {}
    ours = {}
    from hoodie_sink.table.format.metadata_keys import bloom_filter_key

    for partition, name in files:
        r = records.get(bloom_filter_key(partition, name))
        if r is not None and not r.bloom_filter.is_deleted:
            ours[f"{partition}/{name}"] = r.bloom_filter.bloom_filter.decode("utf-8")
    assert theirs == ours
    return len(ours)


def _no_key_twice(path, model: dict) -> None:
    rows = hoodie_sink.read(str(path))
    ids = rows.column("id")
    assert len(ids) == pc.count_distinct(ids).as_py() == len(model), "a key is stored twice"
    assert_table_matches(path, list(model.values()))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_java_tags_through_our_bloom_filters_and_we_continue(java_hudi, tmp_path, table_type):
    path = tmp_path / "t"
    ours = {**OURS, "hoodie.datasource.write.table.type": table_type}
    javas = {**JAVAS, "hoodie.datasource.write.table.type": table_type}
    model: dict[int, dict] = {}

    def write(data: pa.Table, java: bool) -> None:
        if java:
            java_hudi.write(path, data, javas)
        else:
            hoodie_sink.write(data, str(path), ours)
        model.update({r["id"]: r for r in data.to_pylist()})

    for b in range(3):
        write(trips(range(b * 30, b * 30 + 40), b + 1), java=False)  # inserts and updates
    java_hudi.assert_metadata_valid(path)
    assert _javas_view_is_ours(java_hudi, path) > 0
    write(trips(range(20, 100), 10), java=True)  # Java's BLOOM index through our filters: updates mostly
    _no_key_twice(path, model)
    java_hudi.assert_metadata_valid(path)
    assert _javas_view_is_ours(java_hudi, path) > 0
    write(trips(range(50, 130), 11), java=False)  # ours through the filters Java wrote
    _no_key_twice(path, model)
    write(trips(range(0, 140, 3), 12), java=True)
    _no_key_twice(path, model)
    java_hudi.assert_metadata_valid(path)
    assert _javas_view_is_ours(java_hudi, path) > 0
