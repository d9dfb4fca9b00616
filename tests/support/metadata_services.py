"""A metadata index partition (column_stats, bloom_filters) through cleans and compactions: the
write sequence and the checks its tests share (tests/unit/metadata/test_*_tables.py)."""

from __future__ import annotations

from pathlib import Path

import hoodie_sink
from hoodie_sink.table.format.metadata_blocks import read_metadata_hfile
from hoodie_sink.table.format.metadata_listing import read_partition
from hoodie_sink.table.format.metadata_table import metadata_storage
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.storage import Storage
from tests.support.tables import assert_table_matches
from tests.unit.metadata.test_metadata_table import trips


def upserts_with_cleans_and_compactions(path: Path, opts: dict, table_type: str) -> None:
    """Nine overlapping upserts with a clean after each (one commit retained), a data compaction
    every 2 deltacommits (merge-on-read) and a metadata compaction every 3; the table equals the
    model after each (assert_table_matches runs the partitions' validation too)."""
    opts = {
        **opts,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.metadata.compact.max.delta.commits": "3",
        "hoodie.cleaner.commits.retained": "1",
        "hoodie.compact.inline.max.delta.commits": "2",
    }
    model: dict[int, dict] = {}
    for r in range(9):
        batch = trips(range(r * 4, r * 4 + 12), ts=r + 1)
        hoodie_sink.write(batch, str(path), {**opts, "hoodie.datasource.write.operation": "upsert"})
        model |= {row["id"]: row for row in batch.to_pylist()}
        assert_table_matches(path, list(model.values()))


def assert_tombstoned_then_compacted(path: Path, partition: str, field: str) -> None:
    """The partition holds tombstones of cleaned files (`field`: the record's payload, column_stats
    or bloom_filter), and its compacted HFile base files hold none."""
    storage = Storage(str(path))
    records = read_partition(storage, ActiveTimeline.load(storage), partition) or {}
    assert any(r is not None and getattr(r, field).is_deleted for r in records.values())  # cleaned files
    mdt = metadata_storage(storage)
    bases = [f.base_name for f in mdt.list_dir(partition) if f.base_name.endswith(".hfile")]
    assert bases  # compacted
    for name in bases:
        assert not any(
            getattr(r, field).is_deleted for r in read_metadata_hfile(mdt.read_bytes(f"{partition}/{name}"))
        )
