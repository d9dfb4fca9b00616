"""The record index's entries, file-group hashing, sizing and merge (pure, no storage)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.hfile import HFileReader
from hoodie_sink.table.format.log_format import encode_block, read_blocks
from hoodie_sink.table.format.metadata_blocks import read_metadata_hfile, read_metadata_log
from hoodie_sink.table.format.metadata_keys import file_group_index, java_string_hash
from hoodie_sink.table.format.metadata_layout import record_index_file_groups
from hoodie_sink.table.format.metadata_records import encode_record, instant_epoch_ms, record_index_record
from hoodie_sink.table.format.record_index import (
    KEY,
    as_layer,
    by_file_group,
    decode_hfile,
    delete_block,
    entries,
    entries_hfile,
    merge_layers,
    upsert_block,
)
from hoodie_sink.table.options.write_config import WriteConfig

FID_A = "5d9c1733-10b2-4b91-9b1f-f348b4d76f71-0"
FID_B = f"{uuid.UUID(int=2**127 + 5)}-3"
T1, T2 = "20261126002326297", "20261126002402699"


def _table(keys, parts, fids, instant=T1):
    return entries(pa.array(keys), pa.array(parts), pa.array(fids), instant_epoch_ms(instant))


def test_values_are_the_records_java_writes_one_per_key():
    t = _table(["b", "a", "c"], ["sf", "sf", "nyc"], [FID_A, FID_A, FID_B])
    hfile = entries_hfile(t)
    records = read_metadata_hfile(hfile)
    assert [r.key for r in records] == ["a", "b", "c"]  # sorted by key bytes
    expected = [
        record_index_record("a", "sf", FID_A, T1),
        record_index_record("b", "sf", FID_A, T1),
        record_index_record("c", "nyc", FID_B, T1),
    ]
    assert records == expected
    keys, values = HFileReader(hfile).keys_and_values()
    assert values.to_pylist() == [encode_record(r)[1] for r in expected]  # byte for byte
    assert decode_hfile(hfile, "x").to_pylist() == sorted_rows(t)


def sorted_rows(t):
    return sorted(t.to_pylist(), key=lambda r: r[KEY].encode())


def test_base_file_carries_its_name_bloom_filter_and_key_range():
    t = _table(["k2", "k1"], ["p", "p"], [FID_A, FID_B])
    data = entries_hfile(t, "record-index-0000-0_0-1-0_x.hfile", base=True)
    reader = HFileReader(data)
    assert reader.meta_block("bloomFilter")
    records = read_metadata_hfile(data)
    assert {r.meta.get("_hoodie_file_name") for r in records} == {"record-index-0000-0_0-1-0_x.hfile"}
    assert decode_hfile(data, "x").to_pylist() == sorted_rows(t)


def test_keys_go_to_the_file_group_of_java_string_hash():
    keys = [f"key-{i}" for i in range(200)] + ["ünïcode-☃", "𝄞clef", ""]
    t = _table(keys, ["p"] * len(keys), [FID_A] * len(keys))
    groups = by_file_group(t, 10)
    for index, part in groups.items():
        for k in part.column(KEY).to_pylist():
            assert file_group_index(k, 10) == index
            assert index == abs(abs(java_string_hash(k)) % 10)
    assert sum(p.num_rows for p in groups.values()) == len(keys)


def test_file_group_count_follows_hudis_estimate():
    assert record_index_file_groups(0) == 10
    assert record_index_file_groups(5_000_000) == 10
    per_group = (1 << 30) // 48
    assert record_index_file_groups(per_group * 50) == 100  # 2.0 growth: records * 2 / per group
    assert record_index_file_groups(10**12) == 10000
    assert record_index_file_groups(10**9, min_groups=4, max_groups=4) == 4


def test_options_accept_the_sizing_and_refuse_the_rest():
    cfg = WriteConfig.from_options(
        {
            "path": "/tmp/x",
            "hoodie.table.name": "t",
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.metadata.record.index.enable": "true",
            "hoodie.index.type": "GLOBAL_BLOOM",
            "hoodie.metadata.record.index.min.filegroup.count": "2",
            "hoodie.metadata.record.index.max.filegroup.count": "4",
            "hoodie.metadata.record.index.growth.factor": "1.5",
            "hoodie.metadata.record.index.max.filegroup.size": "1000",
        }
    )
    assert cfg.record_index_enable and cfg.record_index_min_file_groups == 2
    assert cfg.record_index_max_file_groups == 4 and cfg.record_index_growth_factor == 1.5
    with pytest.raises(HoodieConfigError, match=r"hoodie\.metadata\.record\.index\.max\.parallelism"):
        WriteConfig.from_options(
            {
                "path": "/tmp/x",
                "hoodie.table.name": "t",
                "hoodie.datasource.write.recordkey.field": "id",
                "hoodie.metadata.record.index.max.parallelism": "8",
            }
        )


def test_blocks_round_trip_and_merge_newest_wins_deletes_drop():
    base = _table(["a", "b", "c"], ["p", "p", "p"], [FID_A, FID_A, FID_A])
    moved = _table(["b", "d"], ["q", "q"], [FID_B, FID_B], T2)
    (up,) = read_blocks(encode_block(upsert_block(moved, T2)))
    (gone,) = read_blocks(encode_block(delete_block(pa.array(["a", "d"]), T2)))
    blocks = read_metadata_log(
        encode_block(upsert_block(moved, T2)) + encode_block(delete_block(pa.array(["a"]), T2))
    )
    assert blocks[1].deleted_keys == ["a"]
    assert up.header and gone.header
    layers = [
        as_layer(base, False),
        as_layer(decode_hfile(up.content, "blk"), False),
        as_layer(pa.table({KEY: pa.array(["a"])}), True),
    ]
    merged = merge_layers(layers)
    got = {r["key"]: (r["partition"], r["file_id"]) for r in merged.to_pylist()}
    assert got == {"b": ("q", FID_B), "c": ("p", FID_A), "d": ("q", FID_B)}
    # a key deleted then inserted again comes back
    again = merge_layers([*layers, as_layer(_table(["a"], ["p"], [FID_A], T2), False)])
    assert "a" in again.column(KEY).to_pylist()


def test_a_partition_scoped_index_is_refused_with_the_record_index():
    with pytest.raises(HoodieConfigError, match="needs a global index"):
        WriteConfig.from_options(
            {
                "path": "/tmp/x",
                "hoodie.table.name": "t",
                "hoodie.datasource.write.recordkey.field": "id",
                "hoodie.metadata.record.index.enable": "true",
            }
        )


def test_virtual_keys_are_refused_with_the_record_index():
    with pytest.raises(HoodieConfigError, match="populate.meta.fields=false"):
        WriteConfig.from_options(
            {
                "path": "/tmp/x",
                "hoodie.table.name": "t",
                "hoodie.datasource.write.recordkey.field": "id",
                "hoodie.index.type": "GLOBAL_BLOOM",
                "hoodie.populate.meta.fields": "false",
                "hoodie.metadata.record.index.enable": "true",
            }
        )
