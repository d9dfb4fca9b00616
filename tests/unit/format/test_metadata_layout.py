"""The metadata table's layout: properties, names, instant times and the placeholder log, against
what Hudi 0.15.0 wrote (tests/fixtures/metadata-tables)."""

from __future__ import annotations

import pytest

from hoodie_sink.table.format.file_group import LogFile
from hoodie_sink.table.format.log_format import DELETE_BLOCK, INSTANT_TIME, deleted_keys, read_blocks
from hoodie_sink.table.format.metadata_keys import BLOOM_FILTERS, COLUMN_STATS, FILES, RECORD_INDEX
from hoodie_sink.table.format.metadata_layout import (
    DEFAULT_FILE_GROUPS,
    DEFAULT_WRITE_TOKEN,
    init_instant,
    metadata_base_file_name,
    metadata_file_id,
    metadata_log_file_name,
    metadata_partition_metadata,
    metadata_partitions_value,
    metadata_table_properties,
    parse_metadata_base_file_name,
    placeholder_log_bytes,
    record_index_file_groups,
    suffixed,
)
from hoodie_sink.table.format.metadata_table import K_METADATA_PARTITIONS, K_METADATA_PARTITIONS_INFLIGHT
from hoodie_sink.table.format.properties import K_NAME, parse_properties
from tests.support.tables import METADATA_FIXTURE_NAMES as MDT_TABLES
from tests.support.tables import unzip_metadata_fixture as unzip_mdt_table

META = ".hoodie/metadata"


@pytest.fixture(scope="module", params=MDT_TABLES)
def table(request, tmp_path_factory):
    return unzip_mdt_table(request.param, tmp_path_factory.mktemp(request.param))


def test_the_metadata_properties_are_javas(table):
    java = parse_properties((table / META / ".hoodie/hoodie.properties").read_text())
    ours = metadata_table_properties(table.name)
    # every key and value, the name and its checksum included: nothing differs but the comments
    assert ours == java


def test_the_data_table_lists_its_metadata_partitions_sorted(table):
    props = parse_properties((table / ".hoodie/hoodie.properties").read_text())
    built = [p.name for p in (table / META).iterdir() if p.name != ".hoodie"]
    assert props[K_METADATA_PARTITIONS] == metadata_partitions_value(built)
    assert props[K_METADATA_PARTITIONS_INFLIGHT] == ""
    with pytest.raises(ValueError, match="partition_stats"):
        metadata_partitions_value(["files", "partition_stats"])


def test_file_ids_and_names_are_the_fixtures(table):
    for part in (table / META).iterdir():
        if part.name == ".hoodie":
            continue
        ids = {metadata_file_id(part.name, i) for i in range(DEFAULT_FILE_GROUPS[part.name])}
        for f in part.iterdir():
            if f.name == ".hoodie_partition_metadata":
                continue
            if f.name.endswith(".hfile"):
                fid, token, instant = parse_metadata_base_file_name(f.name)
                assert metadata_base_file_name(fid, token, instant) == f.name
            else:
                log = LogFile.parse(part.name, f.name)
                assert log is not None, f.name
                fid = log.file_id
                assert metadata_log_file_name(fid, log.base_instant, log.version, log.write_token) == f.name
            assert fid in ids, f


def test_every_file_group_starts_with_the_80_byte_placeholder(table):
    inits = {FILES: init_instant(None, 0)}
    if (table / META / RECORD_INDEX).exists():  # bloom 011, column stats 012, record index 013
        inits.update({BLOOM_FILTERS: init_instant(None, 1), COLUMN_STATS: init_instant(None, 2)})
        inits[RECORD_INDEX] = init_instant(None, 3)
    for partition, instant in inits.items():
        for i in range(DEFAULT_FILE_GROUPS[partition]):
            name = metadata_log_file_name(metadata_file_id(partition, i), instant, 1, DEFAULT_WRITE_TOKEN)
            java = (table / META / partition / name).read_bytes()
            assert placeholder_log_bytes(instant) == java
            (block,) = read_blocks(java)
            assert block.block_type == DELETE_BLOCK and block.header == {INSTANT_TIME: instant}
            assert deleted_keys(block) == []


def test_partition_metadata_of_a_metadata_partition(table):
    java = parse_properties((table / META / FILES / ".hoodie_partition_metadata").read_text())
    ours = parse_properties(metadata_partition_metadata(init_instant(None)))
    assert ours == java == {"commitTime": "00000000000000010", "partitionDepth": "1"}


def test_instant_suffixes_and_the_readers_rule():
    assert init_instant(None) == "00000000000000010"
    assert init_instant("20261126214153707", 3) == "20261126214153707013"
    assert suffixed("20261126214205674", "001") == "20261126214205674001"
    # which instants a reader trusts: tests/unit/metadata/test_metadata_pure.py (format/metadata_instants.py)


def test_record_index_file_group_estimate():
    assert record_index_file_groups(5) == 10
    assert record_index_file_groups(10**8) == 10  # 2e8 // (1 GiB // 48) = 8, raised to the minimum
    assert record_index_file_groups(10**10) == 894
    assert record_index_file_groups(10**12) == 10000
    assert record_index_file_groups(10**9, min_groups=4, max_groups=4) == 4


def test_the_metadata_table_is_named_after_the_data_table(table):
    assert metadata_table_properties(table.name)[K_NAME] == f"{table.name}_metadata"
