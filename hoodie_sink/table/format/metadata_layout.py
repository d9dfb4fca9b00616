"""Where the metadata table keeps what (docs/hudi/metadata-table.md#layout): its
hoodie.properties, its partitions and file groups, its file names and instant times, the
`.hoodie_partition_metadata` of its partitions and the empty log each file group starts with.

The metadata table is a Hudi table of its own at `.hoodie/metadata`, MERGE_ON_READ, HFile base
files, one flat folder per partition (`files`, `column_stats`, `bloom_filters`, `record_index`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from hoodie_sink.table.format.file_group import log_file_name
from hoodie_sink.table.format.log_format import (
    DELETE_BLOCK,
    INSTANT_TIME,
    LogBlock,
    delete_block_content,
    encode_block,
)
from hoodie_sink.table.format.metadata_keys import (
    BLOOM_FILTERS,
    COLUMN_STATS,
    FILES,
    METADATA_PARTITIONS,
    RECORD_INDEX,
)
from hoodie_sink.table.format.partition_metadata import partition_metadata_text
from hoodie_sink.table.format.properties import (
    EVENT_TIME_STRATEGY,
    K_ARCHIVE_FOLDER,
    K_BASE_FORMAT,
    K_CHECKSUM,
    K_DROP_PARTITION_COLUMNS,
    K_KEYGEN_CLASS,
    K_LAYOUT,
    K_NAME,
    K_PAYLOAD,
    K_POPULATE_META,
    K_RECORD_KEYS,
    K_TYPE,
    K_VERSION,
    MERGE_ON_READ,
    MERGER_STRATEGY_KEY,
    table_checksum,
)

METADATA_TABLE_NAME_SUFFIX = "_metadata"
METADATA_PAYLOAD_CLASS = "org.apache.hudi.metadata.HoodieMetadataPayload"
METADATA_KEYGEN_CLASS = "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator"
HFILE_EXT = ".hfile"
DEFAULT_WRITE_TOKEN = "0-0-0"  # HoodieLogFormat.DEFAULT_WRITE_TOKEN: the init placeholder logs'

# ------------------------------------------------------------------------------------ properties


def metadata_table_properties(data_table_name: str) -> dict[str, str]:
    """The metadata table's hoodie.properties (HoodieBackedTableMetadataWriter.initializeMetaClient):
    no database, partition fields nor precombine field; the checksum is of ".<name>_metadata"."""
    name = data_table_name + METADATA_TABLE_NAME_SUFFIX
    return {
        K_NAME: name,
        K_TYPE: MERGE_ON_READ,
        K_VERSION: "6",
        K_BASE_FORMAT: "HFILE",
        K_RECORD_KEYS: "key",
        K_KEYGEN_CLASS: METADATA_KEYGEN_CLASS,
        K_PAYLOAD: METADATA_PAYLOAD_CLASS,
        MERGER_STRATEGY_KEY: EVENT_TIME_STRATEGY,
        K_POPULATE_META: "false",
        K_ARCHIVE_FOLDER: "archived",
        K_LAYOUT: "1",
        K_DROP_PARTITION_COLUMNS: "false",
        K_CHECKSUM: str(table_checksum(None, name)),
    }


def metadata_partitions_value(partitions: Iterable[str]) -> str:
    """The data table's `hoodie.table.metadata.partitions`: the built partitions, sorted."""
    names = sorted(set(partitions))
    unknown = [p for p in names if p not in METADATA_PARTITIONS]
    if unknown:
        raise ValueError(f"not metadata-table partitions at table version 6: {', '.join(unknown)}")
    return ",".join(names)


# ------------------------------------------------------------------------------------ file groups

# file groups per partition by default (hoodie.metadata.index.*.file.group.count; the record
# index's is estimated at initialization, at least 10)
DEFAULT_FILE_GROUPS = {FILES: 1, COLUMN_STATS: 2, BLOOM_FILTERS: 4, RECORD_INDEX: 10}


def record_index_file_groups(
    records: int,
    min_groups: int = 10,
    max_groups: int = 10000,
    growth: float = 2.0,
    max_file_bytes: int = 1 << 30,
    record_bytes: int = 48,
) -> int:
    """HoodieTableMetadataUtil.estimateFileGroupCount with the record index's defaults."""
    if min_groups == max_groups:
        return min_groups
    estimate = math.ceil(records * growth) // (max_file_bytes // record_bytes)
    return max(min_groups, min(max_groups, estimate))


def metadata_file_id(partition: str, index: int) -> str:
    """`files-0000-0`, `record-index-0007-0`, ... (HoodieTableMetadataUtil.getFileIDForFileGroup)."""
    return f"{METADATA_PARTITIONS[partition].file_id_prefix}{index:04d}-0"


def metadata_base_file_name(file_id: str, write_token: str, instant: str) -> str:
    return f"{file_id}_{write_token}_{instant}{HFILE_EXT}"


_BASE_NAME = re.compile(r"^([^._][^_]*)_(\d+-\d+-\d+)_(\d+)\.hfile$")


def parse_metadata_base_file_name(name: str) -> tuple[str, str, str] | None:
    """(file id, write token, instant) of an HFile base file's name; None for other names."""
    m = _BASE_NAME.match(name)
    return (m.group(1), m.group(2), m.group(3)) if m else None


def metadata_log_file_name(file_id: str, base_instant: str, version: int, write_token: str) -> str:
    return log_file_name(file_id, base_instant, version, write_token)


# ------------------------------------------------------------------------------------ instant times

# HoodieTableMetadataUtil's suffixes: an MDT action of its own runs at <instant><suffix>, which
# sorts after <instant> and before any later 17-digit data instant
COMPACTION_SUFFIX = "001"
CLEAN_SUFFIX = "002"
RESTORE_SUFFIX = "003"
INDEXER_SUFFIX = "004"
LOG_COMPACTION_SUFFIX = "005"
ROLLBACK_SUFFIX = "006"
PARTITION_INIT_SUFFIX = 10  # partitions initialized together get 010, 011, ...
NO_INSTANT = "00000000000000"  # <t0> of a table without a completed instant
_SUFFIX_LEN = 3


def suffixed(instant: str, suffix: str) -> str:
    return instant + suffix


def init_instant(latest_completed: str | None, offset: int = 0) -> str:
    """Instant of the initialization of the `offset`-th partition initialized together
    (createIndexInitTimestamp): files first, then bloom_filters, column_stats, record_index."""
    return f"{latest_completed or NO_INSTANT}{PARTITION_INIT_SUFFIX + offset:03d}"


# ------------------------------------------------------------------------------------ files


def metadata_partition_metadata(instant: str) -> str:
    """`.hoodie_partition_metadata` of a metadata partition: its init instant, depth 1."""
    return partition_metadata_text("files", instant)


def placeholder_log_block(init_instant_time: str) -> LogBlock:
    """The block of the empty log every file group starts with at initialization: a DELETE block
    with no keys and only the INSTANT_TIME header."""
    return LogBlock(DELETE_BLOCK, {INSTANT_TIME: init_instant_time}, delete_block_content(b"\x00"))


def placeholder_log_bytes(init_instant_time: str) -> bytes:
    """The 80 bytes of `.<fileId>_<init>.log.1_0-0-0`."""
    return encode_block(placeholder_log_block(init_instant_time))
