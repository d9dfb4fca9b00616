"""Write an HFile v3 the way HBase 2.4 (shaded in Hudi 0.15) does for Hudi's metadata table
(docs/hudi/hfile.md#writing).

File order: data blocks, meta blocks (by name), root data index, meta index, file info, trailer.
Cells are built in bulk (cells.py); the only Python loops run per block, never per cell.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

import hoodie_sink.table.format.hfile.blocks as blocks
from hoodie_sink.table.format.hfile.cells import as_binary, build_cells, cell_key, index_key
from hoodie_sink.table.format.hfile.compression import CODEC_IDS, check_codec
from hoodie_sink.table.format.hfile.index import IndexEntry, encode_root_index, needs_multi_level
from hoodie_sink.table.format.hfile.trailer import (
    HUDI_COMPARATOR,
    TRAILER_SIZE,
    Trailer,
    encode_file_info,
    encode_trailer,
    int32,
    int64,
)

DEFAULT_BLOCK_SIZE = 1 << 20  # hoodie.hfile.block.size and the log block's HFile

# HBase's own file-info keys (HFileWriterImpl.finishFileInfo, HFileInfo)
KEY_VALUE_VERSION = b"KEY_VALUE_VERSION"
MAX_MEMSTORE_TS_KEY = b"MAX_MEMSTORE_TS_KEY"
AVG_KEY_LEN = b"hfile.AVG_KEY_LEN"
AVG_VALUE_LEN = b"hfile.AVG_VALUE_LEN"
CREATE_TIME_TS = b"hfile.CREATE_TIME_TS"
LASTKEY = b"hfile.LASTKEY"
HBASE_FILE_INFO_KEYS = frozenset(
    {KEY_VALUE_VERSION, MAX_MEMSTORE_TS_KEY, AVG_KEY_LEN, AVG_VALUE_LEN, CREATE_TIME_TS, LASTKEY}
)
KEY_VALUE_VERSION_WITH_MEMSTORE = 1


def _check_order(keys: pa.BinaryArray | pa.LargeBinaryArray, unique: bool) -> None:
    """Keys must be non-decreasing bytewise (strictly increasing when `unique`): HBase refuses a
    key below the previous one, Hudi's base-file writer a repeated one."""
    if len(keys) < 2:
        return
    after, before = keys.slice(1), keys.slice(0, len(keys) - 1)
    bad = pc.less_equal(after, before) if unique else pc.less(after, before)
    first = pc.index(bad, True).as_py()
    if first >= 0:
        problem = "repeats" if unique and keys[first + 1] == keys[first] else "is below"
        raise ValueError(
            f"HFile keys must be in {'strictly increasing' if unique else 'non-decreasing'} byte order: "
            f"key {first + 1} {keys[first + 1].as_py()!r} {problem} key {first} {keys[first].as_py()!r}"
        )


def _block_ends(
    keys: pa.BinaryArray | pa.LargeBinaryArray, offsets: npt.NDArray[np.int64], block_size: int
) -> list[int]:
    """Cell index after the last cell of each data block (docs/hudi/hfile.md#data-blocks): HBase
    closes a block before a cell once the block's uncompressed cell bytes reach block_size, but
    never between two cells of the same key."""
    n = len(keys)
    if n == 0:
        return []
    if n > 1:
        same_as_next = pc.equal(keys.slice(0, n - 1), keys.slice(1)).to_numpy(zero_copy_only=False)
        run_ends = np.flatnonzero(~same_as_next) + 1  # cell indexes where a new key starts
        run_ends = np.append(run_ends, n)
    else:
        run_ends = np.array([1])
    ends, start = [], 0
    while start < n:
        # first cell end at which the block is full, then the end of that cell's key run
        full = int(np.searchsorted(offsets[1:], offsets[start] + block_size, side="left")) + 1
        end = n if full > n else int(run_ends[np.searchsorted(run_ends, full, side="left")])
        ends.append(end)
        start = end
    return ends


def write_hfile(
    keys: Sequence[bytes] | pa.Array | pa.ChunkedArray,
    values: Sequence[bytes] | pa.Array | pa.ChunkedArray,
    *,
    file_info: dict[bytes, bytes] | None = None,
    meta_blocks: dict[str, bytes] | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    compression: str = "GZ",
    comparator: str = HUDI_COMPARATOR,
    unique: bool = False,
) -> bytes:
    """The bytes of an HFile holding one cell per (key, value), keys in non-decreasing byte order
    (strictly increasing with `unique=True`, as for base files).  `file_info` adds the caller's
    entries (e.g. b"schema") to HBase's own; `meta_blocks` are named raw blocks (e.g. "bloomFilter")."""
    check_codec(compression)
    if block_size <= 0:
        raise ValueError("HFile block_size must be positive")
    key_array, value_array = as_binary(keys, "keys"), as_binary(values, "values")
    if len(key_array) != len(value_array):
        raise ValueError(f"HFile keys and values differ in length ({len(key_array)} and {len(value_array)})")
    clash = HBASE_FILE_INFO_KEYS & set(file_info or {})
    if clash:
        raise ValueError(f"HFile file_info must not set HBase's own keys: {sorted(clash)}")
    _check_order(key_array, unique)
    n = len(key_array)
    stream, offsets = build_cells(key_array, value_array)
    ends = _block_ends(key_array, offsets, block_size)
    starts = [0, *ends[:-1]] if ends else []
    first_keys = [index_key(key_array[s - 1].as_py() if s else None, key_array[s].as_py()) for s in starts]
    if needs_multi_level([len(k) for k in first_keys]):
        raise ValueError(
            f"HFile of {len(ends)} data blocks needs a multi-level block index, which is not implemented "
            "(docs/hudi/hfile.md#not-implemented): raise block_size or split the file"
        )
    view = memoryview(stream)
    payloads = [view[offsets[s] : offsets[e]] for s, e in zip(starts, ends, strict=True)]

    out: list[bytes] = []
    pos = 0
    uncompressed_total = 0  # HBase's totalUncompressedBytes (docs/hudi/hfile.md#trailer)

    data, sizes = blocks.encode_blocks(blocks.DATA, payloads, 0, -1, compression)
    out.append(data)
    data_index = []
    for first_key, payload, size in zip(first_keys, payloads, sizes, strict=True):
        data_index.append(IndexEntry(pos, size, first_key))
        uncompressed_total += blocks.HEADER_SIZE + len(payload)
        pos += size
    last_data_block_offset = data_index[-1].offset if data_index else -1

    meta_index = []
    prev_meta = -1
    for name in sorted(meta_blocks or {}, key=lambda m: m.encode("utf-8")):
        meta = (meta_blocks or {})[name]
        block = blocks.encode_block(blocks.META, meta, pos, prev_meta, compression)
        meta_index.append(IndexEntry(pos, len(block), name.encode("utf-8")))
        out.append(block)
        uncompressed_total += blocks.HEADER_SIZE + len(meta)
        prev_meta, pos = pos, pos + len(block)

    load_on_open = pos
    root_payload = encode_root_index(data_index)
    root = blocks.encode_block(blocks.ROOT_INDEX, root_payload, pos, -1, compression)
    out.append(root)
    pos += len(root)
    meta_payload = encode_root_index(meta_index)
    out.append(blocks.encode_block(blocks.ROOT_INDEX, meta_payload, pos, load_on_open, compression))
    uncompressed_total += blocks.HEADER_SIZE + len(meta_payload)
    pos += len(out[-1])

    info = _hbase_file_info(key_array, value_array)
    info.update(file_info or {})
    info_payload = encode_file_info(info)
    file_info_offset = pos
    out.append(blocks.encode_block(blocks.FILE_INFO, info_payload, pos, -1, compression))
    uncompressed_total += blocks.HEADER_SIZE + len(info_payload) + TRAILER_SIZE

    out.append(
        encode_trailer(
            Trailer(
                file_info_offset=file_info_offset,
                load_on_open_data_offset=load_on_open,
                uncompressed_data_index_size=len(root_payload),
                total_uncompressed_bytes=uncompressed_total,
                data_index_count=len(data_index),
                meta_index_count=len(meta_index),
                entry_count=n,
                num_data_index_levels=1,
                first_data_block_offset=0 if data_index else -1,
                last_data_block_offset=last_data_block_offset,
                comparator_class_name=comparator,
                compression_codec=CODEC_IDS[compression],
            )
        )
    )
    return b"".join(out)


def _hbase_file_info(
    keys: pa.BinaryArray | pa.LargeBinaryArray,
    values: pa.BinaryArray | pa.LargeBinaryArray,
) -> dict[bytes, bytes]:
    """HBase's own entries (docs/hudi/hfile.md#file-info): integer averages of the key length
    (row + 12) and value length, a create time of 0 (Hudi never sets one) and the last cell's key."""
    n = len(keys)
    key_bytes = int(pc.sum(pc.binary_length(keys)).as_py() or 0) + n * 12
    value_bytes = int(pc.sum(pc.binary_length(values)).as_py() or 0)
    info = {
        KEY_VALUE_VERSION: int32(KEY_VALUE_VERSION_WITH_MEMSTORE),
        MAX_MEMSTORE_TS_KEY: int64(0),
        AVG_KEY_LEN: int32(key_bytes // n if n else 0),
        AVG_VALUE_LEN: int32(value_bytes // n if n else 0),
        CREATE_TIME_TS: int64(0),
    }
    if n:
        info[LASTKEY] = cell_key(keys[n - 1].as_py())
    return info
