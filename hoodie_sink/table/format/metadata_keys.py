"""What names a metadata-table record: its partition, its type code, its key, and the file group
its key hashes to (docs/hudi/metadata-table.md#record-keys and #file-groups).

Keys of the `files` partition are partition paths (and `__all_partitions__`); column-stats and
bloom-filter keys are Base64 of hashes of the column, partition and file names; record-index keys
are the data table's record keys.  A key goes to file group `|String.hashCode(key)| % n`, Java's
hash of its UTF-16 code units: `file_group_indexes` computes it for a whole Arrow array at once.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import xxhash

# MDT partitions (MetadataPartitionType in Hudi 0.15: exactly these four)
FILES = "files"
COLUMN_STATS = "column_stats"
BLOOM_FILTERS = "bloom_filters"
RECORD_INDEX = "record_index"

# HoodieMetadataRecord.type
TYPE_PARTITION_LIST = 1
TYPE_FILE_LIST = 2
TYPE_COLUMN_STATS = 3
TYPE_BLOOM_FILTER = 4
TYPE_RECORD_INDEX = 5

ALL_PARTITIONS_KEY = "__all_partitions__"
NON_PARTITIONED_NAME = "."  # the key and identifier of the data table's one unnamed partition


@dataclass(frozen=True)
class MetadataPartition:
    name: str  # the folder under .hoodie/metadata and the value in hoodie.table.metadata.partitions
    file_id_prefix: str  # file ids are <prefix><index %04d>-0
    record_types: tuple[int, ...]


METADATA_PARTITIONS = {
    p.name: p
    for p in (
        MetadataPartition(FILES, "files-", (TYPE_PARTITION_LIST, TYPE_FILE_LIST)),
        MetadataPartition(COLUMN_STATS, "col-stats-", (TYPE_COLUMN_STATS,)),
        MetadataPartition(BLOOM_FILTERS, "bloom-filters-", (TYPE_BLOOM_FILTER,)),
        MetadataPartition(RECORD_INDEX, "record-index-", (TYPE_RECORD_INDEX,)),
    )
}


def partition_identifier(partition_path: str) -> str:
    """The name a data partition has in the metadata table: its path, `.` for the unnamed one."""
    return partition_path or NON_PARTITIONED_NAME


def file_list_key(partition_path: str) -> str:
    """Key of a partition's file list (type 2)."""
    return partition_identifier(partition_path)


# ------------------------------------------------------------------------------------ hashed keys

# HashID's seed is the int 0xdabadaba passed where a long is expected: Java sign-extends it, and
# the unsigned 0xdabadaba gives other keys (docs/hudi/metadata-table.md#record-keys).
XXHASH_SEED = 0xDABADABA | 0xFFFFFFFF00000000


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")  # padded, as java.util.Base64.getEncoder()


def _xx64_id(name: str) -> str:
    return _b64(xxhash.xxh64_digest(name.encode("utf-8"), seed=XXHASH_SEED))  # big-endian 8 bytes


def _md5_id(name: str) -> str:
    return _b64(hashlib.md5(name.encode("utf-8")).digest())


def bloom_filter_key(partition_path: str, file_name: str) -> str:
    """Key of a base file's bloom filter (36 characters); `file_name` without its folder."""
    return _xx64_id(partition_identifier(partition_path)) + _md5_id(file_name)


def column_stats_key(partition_path: str, file_name: str, column: str) -> str:
    """Key of one column's statistics in one file (48 characters)."""
    return _xx64_id(column) + _xx64_id(partition_identifier(partition_path)) + _md5_id(file_name)


# ------------------------------------------------------------------------------------ file groups


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: h = 31*h + unit over the UTF-16 code units, as a signed int32."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def file_group_index(key: str, file_groups: int) -> int:
    """The file group a key goes to (HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex):
    Java's `abs(abs(h) % n)`, which is |h| % n with |Integer.MIN_VALUE| read as 2**31."""
    if file_groups < 1:
        raise ValueError(f"a metadata partition has at least one file group, not {file_groups}")
    return abs(java_string_hash(key)) % file_groups


def file_group_indexes(keys: pa.Array | pa.ChunkedArray, file_groups: int) -> np.ndarray:
    """`file_group_index` of every key of a string array, as int32, without a Python loop over
    the keys: UTF-8 is decoded to UTF-16 code units (two for a supplementary character) in numpy,
    each unit is weighted by 31**(units after it in its key) mod 2**32, and a cumulative sum gives
    every key's hash."""
    if file_groups < 1:
        raise ValueError(f"a metadata partition has at least one file group, not {file_groups}")
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if keys.null_count:
        raise ValueError(f"{keys.null_count} null record keys: a metadata key is never null")
    if pa.types.is_string(keys.type):
        keys = keys.cast(pa.large_string())
    if not pa.types.is_large_string(keys.type):
        raise TypeError(f"metadata keys are strings, not {keys.type}")
    hashes = _java_string_hashes(keys)
    return (np.abs(hashes.astype(np.int64)) % file_groups).astype(np.int32)


def _java_string_hashes(keys: pa.Array) -> np.ndarray:
    """String.hashCode of every key of a large_string array, as int32."""
    _, offsets_buf, data_buf = keys.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[keys.offset : keys.offset + len(keys) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    out = np.empty(len(keys), dtype=np.uint32)
    # slices of keys keep the temporaries (a few words per byte) in cache and memory small
    for lo in range(0, len(keys), _KEYS_PER_SLICE):
        hi = min(lo + _KEYS_PER_SLICE, len(keys))
        part = offsets[lo : hi + 1]
        units, unit_offsets = _utf16_units(data[part[0] : part[-1]], part - part[0])
        out[lo:hi] = _hash_units(units, unit_offsets)
    return out.view(np.int32)


_KEYS_PER_SLICE = 1 << 16


def _hash_units(units: np.ndarray, unit_offsets: np.ndarray) -> np.ndarray:
    """sum(unit_j * 31**(units after j in its key)) mod 2**32 per key: uint32 arithmetic wraps
    mod 2**32, which is Java's int overflow, and a difference of wrapped running sums is still
    right mod 2**32."""
    lengths = np.diff(unit_offsets)
    longest = int(lengths.max()) if len(lengths) else 0
    powers = np.ones(max(longest, 1), dtype=np.uint32)
    if longest > 1:
        powers[1:] = np.cumprod(np.full(longest - 1, 31, dtype=np.uint32), dtype=np.uint32)
    after = np.repeat(unit_offsets[1:] - 1, lengths) - np.arange(len(units), dtype=np.int64)
    running = np.zeros(len(units) + 1, dtype=np.uint32)
    np.cumsum(units.astype(np.uint32) * powers[after], dtype=np.uint32, out=running[1:])
    sums: np.ndarray = running[unit_offsets[1:]] - running[unit_offsets[:-1]]
    return sums


def _utf16_units(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-16 code units of valid UTF-8 bytes (Arrow guarantees validity) and, per string,
    the offset of its first unit (len(offsets) entries)."""
    if not len(data) or int(data.max()) < 0x80:
        return data, offsets  # ASCII: one unit per byte
    lead = np.flatnonzero((data & 0xC0) != 0x80)  # every byte that starts a character
    code = data[lead].astype(np.uint32)
    wide = np.flatnonzero(code >= 0x80)  # characters of 2 to 4 bytes: decode only these
    padded = np.concatenate([data, np.zeros(3, np.uint8)]).astype(np.uint32)
    at = lead[wide]
    b0, b1, b2, b3 = (padded[at + k] for k in range(4))
    code[wide] = np.where(
        b0 < 0xE0,
        (b0 & 0x1F) << 6 | (b1 & 0x3F),
        np.where(
            b0 < 0xF0,
            (b0 & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F),
            (b0 & 0x07) << 18 | (b1 & 0x3F) << 12 | (b2 & 0x3F) << 6 | (b3 & 0x3F),
        ),
    )
    pair = code >= 0x10000  # a supplementary character: a surrogate pair in Java
    width = np.zeros(len(data) + 1, dtype=np.int64)
    width[lead + 1] = 1 + pair  # units of the character starting at each byte, shifted by one
    units_before = np.cumsum(width)  # units_before[i]: units of the characters before byte i
    first = units_before[lead]
    units = np.empty(int(units_before[-1]), dtype=np.uint32)
    units[first] = code
    supp = code[pair] - 0x10000
    units[first[pair]] = 0xD800 + (supp >> 10)
    units[first[pair] + 1] = 0xDC00 + (supp & 0x3FF)
    return units, units_before[offsets]
