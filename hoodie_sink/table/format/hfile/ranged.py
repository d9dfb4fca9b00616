"""An HFile read by byte ranges (docs/hudi/hfile.md#reading): the trailer and the load-on-open
section once, then only the data blocks a caller asks for.  What point look-ups in a large base
file need (the record index, docs/design/metadata-table.md#record-index-look-ups): `HFileReader`
(reader.py) holds the whole file in memory, this reads a few hundred KiB of index and then one
block per range of keys looked up.

`read_at(offset, length)` is the caller's: a storage file handle, or a slice of bytes in memory.
Every block read has its magic, sizes and CRC32Cs checked, as in reader.py.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import hoodie_sink.table.format.hfile.blocks as blocks
from hoodie_sink.table.format.hfile.cells import ParsedCells, parse_cell_rows
from hoodie_sink.table.format.hfile.compression import CODEC_IDS, SUPPORTED
from hoodie_sink.table.format.hfile.errors import CorruptHFile
from hoodie_sink.table.format.hfile.index import IndexEntry, decode_non_root_index, decode_root_index
from hoodie_sink.table.format.hfile.trailer import TRAILER_SIZE, decode_trailer

ReadAt = Callable[[int, int], bytes]
_CODEC_NAMES = {v: k for k, v in CODEC_IDS.items()}


@dataclass(frozen=True)
class BlockIndex:
    """Where an HFile's data blocks are, and the row each starts at (its index key's row: a real
    first row or HBase's shorter midpoint, never above the block's first row nor at or below the
    previous block's last)."""

    name: str
    codec: str
    entries: tuple[IndexEntry, ...]
    first_rows: pa.BinaryArray  # ascending
    entry_count: int  # cells in the file (the trailer's count)
    bytes_read: int  # what reading the index took (trailer and load-on-open section)

    @property
    def nbytes(self) -> int:
        return 64 * len(self.entries) + int(self.first_rows.nbytes)


def _row(cell_key: bytes) -> bytes:
    (length,) = struct.unpack_from(">h", cell_key, 0) if len(cell_key) >= 2 else (0,)
    return cell_key[2 : 2 + length]


def _checked_block(
    data: bytes, magic: bytes, size: int | None, codec: str, name: str, offset: int
) -> tuple[blocks.BlockHeader, bytes]:
    """The header and payload of the block that `data` (read from file `offset`) starts with."""
    try:
        header = blocks.read_header(data, 0, name)
        if header.magic != magic:
            raise CorruptHFile(f"block at offset {offset} is {header.magic!r}, expected {magic!r}", name)
        if size is not None and header.on_disk_size != size:
            raise CorruptHFile(
                f"block at offset {offset} is {header.on_disk_size} bytes, its index says {size}", name
            )
        blocks.verify_checksums(data, [(0, header)], name)
        return header, blocks.read_payload(data, 0, header, codec, name)
    except CorruptHFile as e:  # offsets in the message are relative to `data`: name the file's
        raise CorruptHFile(f"{e.what} (block read at file offset {offset})", name) from None


def read_block_index(read_at: ReadAt, size: int, name: str) -> BlockIndex:
    """The data block index of an HFile of `size` bytes, read by ranges (trailer, then the
    load-on-open section; the leaf index blocks of a multi-level index one by one)."""
    if size < TRAILER_SIZE:
        raise CorruptHFile(f"{size} bytes, shorter than the {TRAILER_SIZE}-byte trailer", name)
    try:
        trailer = decode_trailer(read_at(size - TRAILER_SIZE, TRAILER_SIZE))
    except CorruptHFile as e:
        raise CorruptHFile(e.what, name) from None
    codec = _CODEC_NAMES.get(trailer.compression_codec, str(trailer.compression_codec))
    if codec not in SUPPORTED:
        raise CorruptHFile(f"compression {codec} is not supported (only {', '.join(SUPPORTED)})", name)
    start = trailer.load_on_open_data_offset
    if not 0 <= start <= trailer.file_info_offset < size - TRAILER_SIZE:
        raise CorruptHFile("trailer offsets point outside the file", name)
    section = read_at(start, size - TRAILER_SIZE - start)
    bytes_read = TRAILER_SIZE + len(section)
    _, root = _checked_block(section, blocks.ROOT_INDEX, None, codec, name, start)
    entries = decode_root_index(root, trailer.data_index_count, f"{name}: root data index")
    for level in range(trailer.num_data_index_levels - 1):
        leaf = level == trailer.num_data_index_levels - 2
        magic = blocks.LEAF_INDEX if leaf else blocks.INTERMEDIATE_INDEX
        deeper: list[IndexEntry] = []
        for entry in entries:
            raw = read_at(entry.offset, entry.on_disk_size)
            bytes_read += len(raw)
            _, payload = _checked_block(raw, magic, entry.on_disk_size, codec, name, entry.offset)
            deeper += decode_non_root_index(payload, f"{name}: index block at offset {entry.offset}")
        entries = deeper
    first_rows = pa.array([_row(e.key) for e in entries], pa.binary())
    return BlockIndex(name, codec, tuple(entries), first_rows, trailer.entry_count, bytes_read)


def candidate_blocks(index: BlockIndex, sorted_keys: pa.BinaryArray) -> np.ndarray:
    """The data blocks that can hold one of `sorted_keys` (ascending bytes), ascending: for a key,
    the last block starting at or below it, and the one before when the key equals a block's
    start (equal keys may run on from the previous block in a file with duplicate keys)."""
    n_blocks = len(index.entries)
    if not n_blocks or not len(sorted_keys):
        return np.zeros(0, np.int64)
    right = _search_sorted(index.first_rows, sorted_keys, "right")
    left = _search_sorted(index.first_rows, sorted_keys, "left")
    wanted = np.concatenate([right - 1, left - 1])
    return np.unique(wanted[wanted >= 0])


def _search_sorted(haystack: pa.BinaryArray, needles: pa.BinaryArray, side: str) -> np.ndarray:
    """Insertion points of `needles` in ascending `haystack`, bytewise (Arrow's binary order)."""
    if hasattr(pc, "search_sorted"):  # pyarrow >= 21
        return np.asarray(pc.search_sorted(haystack, needles, side=side), np.int64)
    rows = np.array(haystack.to_pylist(), dtype=object)
    found = np.searchsorted(
        rows, np.array(needles.to_pylist(), dtype=object), side="right" if side == "right" else "left"
    )
    return np.asarray(found, np.int64)


def read_data_block(read_at: ReadAt, index: BlockIndex, block: int) -> tuple[ParsedCells, int]:
    """(the cells, bytes read) of data block number `block`: rows parsed, values cut on demand."""
    entry = index.entries[block]
    raw = read_at(entry.offset, entry.on_disk_size)
    header, payload = _checked_block(
        raw, blocks.DATA, entry.on_disk_size, index.codec, index.name, entry.offset
    )
    try:
        cells = parse_cell_rows(payload, f"DATABLK* block at offset {entry.offset}")
    except CorruptHFile as e:
        raise CorruptHFile(e.what, index.name) from None
    return cells, len(raw)


def bytes_reader(data: bytes | memoryview) -> ReadAt:
    """`read_at` over an HFile held in memory (an HFILE_DATA block's content)."""
    view = memoryview(data)

    def read_at(offset: int, length: int) -> bytes:
        if offset < 0 or offset + length > len(view):
            raise CorruptHFile(
                f"a read of {length} bytes at offset {offset} runs past the file's {len(view)}"
            )
        return bytes(view[offset : offset + length])

    return read_at
