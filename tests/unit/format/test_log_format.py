"""HoodieLogFormat v1 blocks: a block Java wrote decodes and re-encodes byte for byte."""

from __future__ import annotations

import json
import struct

import pytest

from hoodie_sink.table.format.log_format import (
    AVRO_DATA_BLOCK,
    COMMAND_BLOCK,
    SCHEMA,
    CorruptLogBlock,
    LogBlock,
    avro_data_content,
    avro_records,
    delete_block,
    deleted_keys,
    encode_block,
    read_blocks,
    rollback_command_block,
)
from tests.support.tables import unzip_fixture


def test_a_java_avro_data_block_re_encodes_byte_for_byte(tmp_path):
    table = unzip_fixture("mor_avro_v6_trips_8i1u", tmp_path)
    log = next(p for p in table.rglob(".*.log.*") if "__MACOSX" not in p.parts)
    data = log.read_bytes()
    [block] = list(read_blocks(data, str(log)))
    # docs/hudi/services.md#log-block-framing
    assert block.block_type == AVRO_DATA_BLOCK and len(data) == 1148
    records = avro_records(block)
    assert records[0]["_hoodie_record_key"] == "9909a8b1-2d15-4d3d-8ec9-efc48c536a00"
    content = avro_data_content(json.loads(block.header[SCHEMA]), records)
    assert content == block.content
    assert encode_block(LogBlock(block.block_type, block.header, content, block.footer)) == data


def test_rollback_command_block_frames_as_java_writes_it():
    raw = encode_block(rollback_command_block("20250101000000000", "20241231000000000"))
    [block] = list(read_blocks(raw))
    assert block.block_type == COMMAND_BLOCK and block.content == b""
    assert block.header == {0: "20250101000000000", 1: "20241231000000000", 3: "0"}


def test_damaged_blocks_are_named_not_skipped():
    raw = encode_block(rollback_command_block("20250101000000000", "20241231000000000"))
    with pytest.raises(CorruptLogBlock, match="my.log: block at offset 0"):
        list(read_blocks(raw[:-3], "my.log"))
    with pytest.raises(CorruptLogBlock, match="which do not frame"):
        list(read_blocks(raw + b"garbage", "my.log"))  # what follows a block must be a block
    with pytest.raises(CorruptLogBlock, match="no block magic at offset 0"):
        list(read_blocks(b"garbage" + raw, "my.log"))


def test_delete_block_encodes_the_wrapper_union_as_java():
    """docs/hudi/services.md#delete-blocks: a SQL DELETE of 3 keys: array count 3 (zig-zag 06),
    recordKey branch 1 (02), a 36-byte key (48), ... and every ordering value IntWrapper(0) = branch
    2, value 0 (04 00)."""
    keys = [(f"{i:036d}", "city=sf", ("IntWrapper", 0)) for i in range(3)]
    block = delete_block(keys, "20250101000000000", {"type": "record", "name": "r", "fields": []})
    version, size = struct.unpack_from(">ii", block.content, 0)
    datum = block.content[8:]
    assert version == 3 and size == len(datum) and datum[:3] == bytes([0x06, 0x02, 0x48])
    assert datum.count(bytes([0x04, 0x00])) >= 3 and datum.endswith(bytes([0x04, 0x00, 0x00]))
    [back] = list(read_blocks(encode_block(block)))
    got = deleted_keys(back)
    assert [(r["recordKey"], r["partitionPath"]) for r in got] == [(k, p) for k, p, _ in keys]
    assert got[0]["orderingVal"] == {"value": 0}
