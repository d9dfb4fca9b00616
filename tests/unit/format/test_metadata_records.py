"""Records of the metadata table: schema, keys, file-group hashing, cells and merge rules,
checked against what Hudi 0.15.0 wrote (tests/fixtures/metadata-tables)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from hoodie_sink.table.format.log_format import HFILE_DATA_BLOCK, SCHEMA, read_blocks
from hoodie_sink.table.format.metadata_keys import (
    ALL_PARTITIONS_KEY,
    TYPE_COLUMN_STATS,
    bloom_filter_key,
    column_stats_key,
    file_group_index,
    file_group_indexes,
    file_list_key,
    java_string_hash,
)
from hoodie_sink.table.format.metadata_merge import (
    live_files,
    merge_column_stats,
    merge_file_infos,
    merge_records,
    merge_slice,
)
from hoodie_sink.table.format.metadata_records import (
    TOMBSTONE,
    ColumnStatsInfo,
    FileInfo,
    MetadataRecord,
    RecordIndexInfo,
    bloom_filter_record,
    bloom_filter_tombstone,
    column_stats_record,
    decode_record,
    encode_record,
    file_list_record,
    instant_epoch_ms,
    partition_list_record,
    record_index_record,
    split_file_id,
)
from hoodie_sink.table.format.metadata_schema import METADATA_RECORD_SCHEMA_JSON
from tests.support.tables import METADATA_FIXTURE_NAMES as MDT_TABLES
from tests.support.tables import unzip_metadata_fixture as unzip_mdt_table


@pytest.fixture(scope="module", params=MDT_TABLES)
def table(request, tmp_path_factory):
    return unzip_mdt_table(request.param, tmp_path_factory.mktemp(request.param))


def test_the_schema_is_the_header_hudi_wrote_byte_for_byte(table):
    logs = [p for p in (table / ".hoodie/metadata").rglob(".*.log.*")]
    headers = {
        block.header[SCHEMA]
        for log in logs
        for block in read_blocks(log.read_bytes(), str(log))
        if block.block_type == HFILE_DATA_BLOCK
    }
    assert headers == {METADATA_RECORD_SCHEMA_JSON}
    assert len(METADATA_RECORD_SCHEMA_JSON) == 7156


# ------------------------------------------------------------------------------------ keys


def test_the_documented_column_stats_key():
    # docs/hudi/metadata-table.md#record-keys: column _hoodie_file_name, partition nyc
    name = "1eb5263c-bd0e-4fcb-a7be-a1a3c09b5e04-0_1-82-213_20261126002402699.parquet"
    key = column_stats_key("nyc", name, "_hoodie_file_name")
    assert key.startswith("8pE2wroWa9I=9oCa+jrtye4=") and len(key) == 48
    assert (
        bloom_filter_key("nyc", name).startswith("9oCa+jrtye4=") and len(bloom_filter_key("nyc", name)) == 36
    )
    assert file_list_key("") == "." and file_list_key("city=sf") == "city=sf"
    # a key of cow_mdt_v6's column_stats base file, whole
    name = "12a73618-2441-4831-b74e-76ffd284a4da-0_1-54-142_20261126214203594.parquet"
    assert (
        column_stats_key("nyc", name, "_hoodie_file_name")
        == "8pE2wroWa9I=9oCa+jrtye4=5K/8tny+ABM8yYRgvY49Cw=="
    )


def test_java_string_hash():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert file_group_index("polygenelubricants", 10) == 2**31 % 10  # Java's abs(abs(h) % n)
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # a surrogate pair: two units


def _random_key(rng: random.Random) -> str:
    chars = []
    for _ in range(rng.randint(0, 14)):
        r = rng.random()
        if r < 0.5:
            chars.append(chr(rng.randint(0x20, 0x7E)))
        elif r < 0.7:
            chars.append(chr(rng.randint(0x80, 0x7FF)))
        elif r < 0.85:
            c = rng.randint(0x800, 0xFFFD)
            chars.append("x" if 0xD800 <= c < 0xE000 else chr(c))
        else:
            chars.append(chr(rng.randint(0x10000, 0x10FFFF)))
    return "".join(chars)


@pytest.mark.parametrize("groups", [1, 2, 10, 9973])
def test_the_vectorised_file_group_index_is_the_scalar_one(groups):
    rng = random.Random(groups)
    keys = [_random_key(rng) for _ in range(5000)] + ["polygenelubricants", "", "a1"]
    expected = [file_group_index(k, groups) for k in keys]
    assert file_group_indexes(pa.array(keys), groups).tolist() == expected
    assert file_group_indexes(pa.array(keys, pa.large_string()), groups).tolist() == expected
    assert file_group_indexes(pa.chunked_array([keys[:7], keys[7:]]), groups).tolist() == expected
    assert file_group_indexes(pa.array(keys).slice(3, 100), groups).tolist() == expected[3:103]
    ascii_keys = [f"key-{i}" for i in range(200_000)]  # more than one slice of keys
    assert file_group_indexes(pa.array(ascii_keys), groups).tolist()[-5:] == [
        file_group_index(k, groups) for k in ascii_keys[-5:]
    ]


def test_the_vectorised_index_refuses_nulls():
    with pytest.raises(ValueError, match="null"):
        file_group_indexes(pa.array(["a", None]), 10)


# ------------------------------------------------------------------------------------ records


def test_record_index_entry_as_hudi_wrote_it():
    # record a1 of cow_mdt_v6, inserted by 20261126214153707 into 74e20dc8-...-0 in sf
    fid = "74e20dc8-5028-4a2a-8547-fc240e10949d-0"
    record = record_index_record("a1", "sf", fid, "20261126214153707")
    info = record.record_index
    assert (info.file_id_high_bits, info.file_id_low_bits, info.file_index) == (
        8422309407125686826,
        -8842822111533689699,
        0,
    )
    assert info.instant_time_ms == 1795729313707 and info.file_id == "" and info.file_id_encoding == 0
    assert info.location_file_id() == fid and info.instant() == "20261126214153707"
    assert instant_epoch_ms("20261126002326297") == 1795652606297
    assert split_file_id(fid[:36]) == (8422309407125686826, -8842822111533689699, -1)
    assert RecordIndexInfo("sf", 1, 2, -1, "", 0).location_file_id() == "00000000-0000-0001-0000-000000000002"
    with pytest.raises(ValueError, match="not <uuid>"):
        split_file_id("file-1")


@pytest.mark.parametrize(
    "record",
    [
        partition_list_record(["sf", ""], deleted=["la"]),
        file_list_record("sf", {"a.parquet": 10, ".b.log.1_0-1-2": 3}, deleted=["c.parquet"]),
        bloom_filter_record("sf", "a.parquet", "20261126214153707", b"\x00\x01"),
        bloom_filter_tombstone("sf", "a.parquet", "20261126214153707"),
        column_stats_record(
            "sf", ColumnStatsInfo("a.parquet", "ts", ("LongWrapper", 5), ("LongWrapper", 9), 2, 0, 10, 12)
        ),
        record_index_record("k", "sf", "74e20dc8-5028-4a2a-8547-fc240e10949d-3", "20261126214153707"),
    ],
)
def test_records_round_trip_through_cells(record):
    key, value = encode_record(record, "files-0000-0_0-1-2_00000000000000010.hfile")
    back = decode_record(key, value)
    assert back == record and back.meta["_hoodie_file_name"] == "files-0000-0_0-1-2_00000000000000010.hfile"
    assert encode_record(back, "files-0000-0_0-1-2_00000000000000010.hfile") == (key, value)
    assert decode_record(*encode_record(record)).meta["_hoodie_file_name"] is None


def test_a_long_statistic_stays_a_long_wrapper():
    stats = ColumnStatsInfo("a.parquet", "n", ("LongWrapper", 1), ("IntWrapper", 1), 1, 0, 1, 1)
    back = decode_record(*encode_record(column_stats_record("", stats)))
    assert back.column_stats.min_value == ("LongWrapper", 1) and back.column_stats.max_value == (
        "IntWrapper",
        1,
    )


def test_an_empty_file_is_refused():
    with pytest.raises(ValueError, match="size 0"):
        file_list_record("sf", {"a.parquet": 0})


# ------------------------------------------------------------------------------------ merge rules

A, B, C = "a.parquet", "b.parquet", "c.parquet"


@pytest.mark.parametrize(
    ("older", "newer", "merged"),
    [
        ({A: FileInfo(5)}, {B: FileInfo(3)}, {A: FileInfo(5), B: FileInfo(3)}),  # union
        ({A: FileInfo(5)}, {A: FileInfo(3)}, {A: FileInfo(5)}),  # sizes only grow
        ({A: FileInfo(3)}, {A: FileInfo(5)}, {A: FileInfo(5)}),
        ({A: FileInfo(5)}, {A: TOMBSTONE}, {}),  # a tombstone drops the entry, and itself
        ({}, {A: TOMBSTONE}, {A: TOMBSTONE}),  # kept to cancel the base file's entry later
        ({A: TOMBSTONE}, {A: TOMBSTONE}, {A: TOMBSTONE}),
        ({A: TOMBSTONE}, {A: FileInfo(4)}, {A: FileInfo(4)}),  # re-added after a delete
    ],
)
def test_file_list_merge(older, newer, merged):
    assert merge_file_infos(older, newer) == merged
    for kind in (1, 2):
        key = ALL_PARTITIONS_KEY if kind == 1 else "sf"
        r = merge_records(MetadataRecord(key, kind, older), MetadataRecord(key, kind, newer))
        assert r.files == merged


def test_a_slice_merges_logs_first_then_onto_the_base():
    base = file_list_record("sf", {A: 10, B: 20})
    logs = [file_list_record("sf", {C: 5}), file_list_record("sf", {}, deleted=[A]), None]
    assert merge_slice(base, logs) is None  # an MDT delete last: the key is gone
    logs = [file_list_record("sf", {C: 5}), file_list_record("sf", {}, deleted=[A])]
    assert live_files(merge_slice(base, logs)) == {B: 20, C: 5}
    assert live_files(merge_slice(None, logs)) == {C: 5}  # the tombstone of A stays, not live
    assert merge_slice(None, logs).files[A] == TOMBSTONE
    assert merge_slice(base, []) == base
    assert live_files(merge_slice(base, [None, file_list_record("sf", {C: 1})])) == {A: 10, B: 20, C: 1}


def test_column_stats_merge():
    old = ColumnStatsInfo(A, "ts", ("LongWrapper", 5), ("LongWrapper", 9), 2, 1, 10, 12)
    new = ColumnStatsInfo(A, "ts", ("LongWrapper", 3), ("LongWrapper", 7), 3, 0, 5, 6)
    assert merge_column_stats(old, new) == ColumnStatsInfo(
        A, "ts", ("LongWrapper", 3), ("LongWrapper", 9), 5, 1, 15, 18
    )
    gone = ColumnStatsInfo(A, "ts", None, None, -1, -1, -1, -1, True)
    assert merge_column_stats(old, gone) == gone and merge_column_stats(gone, new) == new
    with pytest.raises(ValueError, match="share a key"):
        merge_column_stats(old, ColumnStatsInfo(B, "ts", None, None, 0, 0, 0, 0))
    r = merge_records(column_stats_record("sf", old), column_stats_record("sf", new))
    assert r.type == TYPE_COLUMN_STATS and r.column_stats.value_count == 5


def test_bloom_filters_and_record_index_take_the_newer_version():
    old = bloom_filter_record("sf", A, "1", b"x")
    gone = bloom_filter_tombstone("sf", A, "2")
    assert merge_records(old, gone) == gone
    assert merge_slice(old, [gone]) == gone
    rli = record_index_record("k", "sf", "74e20dc8-5028-4a2a-8547-fc240e10949d-0", "20261126214153707")
    assert merge_slice(rli, [None]) is None and merge_slice(None, [None, rli]) == rli


def test_keys_or_types_that_differ_do_not_merge():
    with pytest.raises(ValueError, match="do not merge"):
        merge_records(file_list_record("sf", {A: 1}), file_list_record("la", {A: 1}))
    with pytest.raises(ValueError, match="do not merge"):
        merge_records(MetadataRecord("sf", 1, {}), MetadataRecord("sf", 2, {}))
