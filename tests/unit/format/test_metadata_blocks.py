"""Metadata log blocks against the log files Hudi 0.15.0 wrote (tests/fixtures/metadata-tables)."""

from __future__ import annotations

import pytest

from hoodie_sink.table.format.log_format import DELETE_BLOCK, LogBlock, encode_block, rollback_command_block
from hoodie_sink.table.format.metadata_blocks import metadata_delete_block, read_metadata_log
from tests.support.tables import unzip_metadata_fixture as unzip_mdt_table

RLI_DELETE = ".hoodie/metadata/record_index/.record-index-0007-0_20261126214205674001.log.1_1-153-308"


def test_the_record_index_delete_block_is_javas_byte_for_byte(tmp_path):
    java = (unzip_mdt_table("cow_mdt_v6", tmp_path) / RLI_DELETE).read_bytes()
    block = metadata_delete_block(["a2"], "20261126214208228")
    # docs/hudi/metadata-table.md#log-blocks: version 3, length 22, the one key, record_index, IntWrapper 0
    assert (
        block.content.hex() == "00000003"
        "00000016"
        "0202"
        "04" + b"a2".hex() + "02"
        "18" + (b"record_index".hex()) + "04"
        "00"
        "00"
    )
    assert encode_block(block) == java
    (decoded,) = read_metadata_log(java)
    assert (decoded.instant, decoded.block_type, decoded.deleted_keys) == (
        "20261126214208228",
        DELETE_BLOCK,
        ["a2"],
    )


def test_command_blocks_pass_and_other_blocks_are_refused():
    (rollback,) = read_metadata_log(encode_block(rollback_command_block("t2", "t1")))
    assert rollback.rollback_target == "t1" and rollback.instant == "t2"
    with pytest.raises(ValueError, match="no place in a metadata log"):
        read_metadata_log(encode_block(LogBlock(3, {0: "t"}, b"")), "x.log")
