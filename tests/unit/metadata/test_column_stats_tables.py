"""The column_stats partition on real tables (issue 29, item 3; no Spark): Java 0.15's (the
fixtures of tests/fixtures/metadata-tables) equal to what the files give by our rules, ours built on
Java's table equal to Java's, kept and continued by our writes when enabled, dropped when not, and
through cleans (tombstones) and the metadata table's compaction (tombstones gone)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.metadata_keys import COLUMN_STATS, file_group_index
from hoodie_sink.table.format.metadata_listing import read_partition
from hoodie_sink.table.format.metadata_table import listed_partitions, metadata_storage
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.metadata.bootstrap import drop_unkept_partitions, settle
from hoodie_sink.table.metadata.data_properties import read_data_properties
from hoodie_sink.table.metadata.writer import metadata_lock
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.column_stats_files import column_stats_init
from hoodie_sink.table.services.validation import column_stats_mismatches
from hoodie_sink.table.storage import Storage
from tests.support.metadata_services import (
    assert_tombstoned_then_compacted,
    upserts_with_cleans_and_compactions,
)
from tests.support.tables import unzip_metadata_fixture
from tests.unit.metadata.test_metadata_table import OPTS, trips

JAVA_TABLES = ("cow_mdt_v6", "mor_mdt_v6")
STATS_OPTS = {**OPTS, "hoodie.metadata.index.column.stats.enable": "true"}


def _live(storage: Storage) -> dict[tuple[str, str], object]:
    """(file name, column) -> statistics of every live record."""
    records = read_partition(storage, ActiveTimeline.load(storage), COLUMN_STATS) or {}
    return {
        (r.column_stats.file_name, r.column_stats.column_name): r.column_stats
        for r in records.values()
        if r is not None and r.column_stats is not None and not r.column_stats.is_deleted
    }


@pytest.mark.parametrize("name", JAVA_TABLES)
def test_javas_column_stats_equal_what_the_files_give_by_our_rules(tmp_path, name):
    """Every record Java 0.15 wrote for a listed file (base files from footers, log files from the
    rows appended) equals ours computed from the file: the same rules, value for value."""
    storage = Storage(str(unzip_metadata_fixture(name, tmp_path)))
    assert COLUMN_STATS in listed_partitions(read_data_properties(storage))
    assert len(_live(storage)) > 50
    assert column_stats_mismatches(storage, ActiveTimeline.load(storage), limit=100) == []


@pytest.mark.parametrize("name", JAVA_TABLES)
def test_our_build_of_a_java_table_equals_javas_column_stats(tmp_path, name):
    """Java's partition dropped and ours built from the same files: the same records for every listed
    file (and Java's stale records of cleaned files gone), each in the file group its key hashes to."""
    storage = Storage(str(unzip_metadata_fixture(name, tmp_path)))
    timeline = ActiveTimeline.load(storage)
    theirs = _live(storage)
    cfg = WriteConfig.from_options(STATS_OPTS, path=storage.base_uri)
    with metadata_lock(storage):
        drop_unkept_partitions(
            storage,
            [COLUMN_STATS],
            [p for p in listed_partitions(read_data_properties(storage)) if p != COLUMN_STATS],
        )
    settle(storage, timeline, True, 1000, None, column_stats_init(cfg))
    assert COLUMN_STATS in listed_partitions(read_data_properties(storage))
    ours = _live(storage)
    assert ours and all(theirs.get(k) == v for k, v in ours.items() if not k[0].startswith("."))
    assert {k for k in theirs if not k[0].startswith(".")} >= {k for k in ours if not k[0].startswith(".")}
    assert column_stats_mismatches(storage, ActiveTimeline.load(storage)) == []
    mdt = metadata_storage(storage)
    for index in range(2):
        for f in mdt.list_dir(COLUMN_STATS):
            if f.base_name.endswith(".hfile") and f.base_name.startswith(f"col-stats-000{index}"):
                from hoodie_sink.table.format.metadata_blocks import read_metadata_hfile

                keys = [r.key for r in read_metadata_hfile(mdt.read_bytes(f"{COLUMN_STATS}/{f.base_name}"))]
                assert {file_group_index(k, 2) for k in keys} == {index}


def test_our_writes_continue_javas_partition_when_enabled_and_drop_it_when_not(tmp_path):
    path = unzip_metadata_fixture("cow_mdt_v6", tmp_path)
    row = pa.table(
        {"id": ["z1"], "city": ["sf"], "ts": pa.array([9], pa.int64()), "fare": [1.0], "tag": ["o1"]}
    )
    opts = {**STATS_OPTS, "hoodie.table.name": "cow_mdt_v6", "hoodie.datasource.write.operation": "upsert"}
    hoodie_sink.write(row, str(path), opts)
    storage = Storage(str(path))
    assert COLUMN_STATS in listed_partitions(read_data_properties(storage))
    ours = ActiveTimeline.load(storage).completed()[-1].timestamp
    written = [k for k in _live(storage) if k[0].endswith(f"_{ours}.parquet")]
    assert {c for _, c in written} >= {"_hoodie_record_key", "id", "city", "ts", "fare", "tag"}
    assert column_stats_mismatches(storage, ActiveTimeline.load(storage)) == []
    hoodie_sink.write(row, str(path), {**opts, "hoodie.metadata.index.column.stats.enable": "false"})
    assert COLUMN_STATS not in listed_partitions(read_data_properties(storage))
    assert not (path / ".hoodie" / "metadata" / COLUMN_STATS).exists()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_cleans_tombstone_and_compaction_drops_the_tombstones(tmp_path, table_type):
    path = tmp_path / "t"
    upserts_with_cleans_and_compactions(path, STATS_OPTS, table_type)
    assert_tombstoned_then_compacted(path, COLUMN_STATS, "column_stats")
    # data skipping reads them: a point filter opens fewer files than the table has
    got = hoodie_sink.read(str(path), {"hoodie.enable.data.skipping": "true"}, filters=[("id", "=", 5)])
    assert got.num_rows == 1


def test_a_column_list_naming_an_unknown_column_is_refused_before_the_write(tmp_path):
    path = tmp_path / "t"
    opts = {**STATS_OPTS, "hoodie.metadata.index.column.stats.column.list": "id,fair"}
    with pytest.raises(HoodieConfigError, match=r"column\.stats\.column\.list' names fair"):
        hoodie_sink.write(trips(range(10), ts=1), str(path), opts)
    assert not (path / ".hoodie").exists() or not list((path / ".hoodie").glob("*.commit"))
