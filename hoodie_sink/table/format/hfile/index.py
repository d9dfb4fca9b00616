"""Block indexes (docs/hudi/hfile.md#block-index).

Root index (`IDXROOT2`) entry: int64 block offset | int32 on-disk size (header and checksums
included) | Hadoop VInt key length | key.  For the data index the key is the full cell key of the
block's first cell; for the meta index it is the meta block's name.  A multi-level data root ends
with 16 bytes of mid-key metadata, ignored here.

Non-root index (`IDXLEAF2`, `IDXINTE2`): int32 n | int32[n + 1] entry offsets from the end of
that array | n entries of int64 offset | int32 on-disk size | key (its length from the offsets).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hoodie_sink.table.format.hfile.errors import CorruptHFile
from hoodie_sink.table.format.hfile.varints import decode_hadoop_vlong, encode_hadoop_vlong

MAX_CHUNK_SIZE = 128 * 1024  # hfile.index.block.max.size
MID_KEY_METADATA_SIZE = 16
_ENTRY = struct.Struct(">qi")


@dataclass(frozen=True)
class IndexEntry:
    offset: int
    on_disk_size: int
    key: bytes


def encode_root_index(entries: list[IndexEntry]) -> bytes:
    return b"".join(
        _ENTRY.pack(e.offset, e.on_disk_size) + encode_hadoop_vlong(len(e.key)) + e.key for e in entries
    )


def decode_root_index(payload: bytes, count: int, what: str) -> list[IndexEntry]:
    """The first `count` entries (the trailer's count: a multi-level root has trailing metadata)."""
    entries, pos = [], 0
    try:
        for _ in range(count):
            offset, size = _ENTRY.unpack_from(payload, pos)
            key_length, pos = decode_hadoop_vlong(payload, pos + _ENTRY.size)
            if key_length < 0 or pos + key_length > len(payload):
                raise CorruptHFile(f"{what}: an entry's key runs past the block")
            entries.append(IndexEntry(offset, size, payload[pos : pos + key_length]))
            pos += key_length
    except struct.error:
        raise CorruptHFile(f"{what}: it has fewer entries than the trailer says ({count})") from None
    return entries


def decode_non_root_index(payload: bytes, what: str) -> list[IndexEntry]:
    try:
        (n,) = struct.unpack_from(">i", payload, 0)
        offsets = struct.unpack_from(f">{n + 1}i", payload, 4)
    except struct.error:
        raise CorruptHFile(f"{what}: its entry count runs past the block") from None
    base = 4 + 4 * (n + 1)
    entries = []
    for i in range(n):
        start, end = base + offsets[i], base + offsets[i + 1]
        if not start + _ENTRY.size <= end <= len(payload):
            raise CorruptHFile(f"{what}: entry {i} runs past the block")
        offset, size = _ENTRY.unpack_from(payload, start)
        entries.append(IndexEntry(offset, size, payload[start + _ENTRY.size : end]))
    return entries


def needs_multi_level(key_lengths: list[int]) -> bool:
    """Whether HBase would have written leaf index blocks for data blocks whose first keys have
    these lengths: it writes one as soon as the pending entries' non-root size reaches 128 KiB
    after a block that is not the last, and splits a root above 128 KiB into levels."""
    n = len(key_lengths)
    non_root_before_last = 4 + 4 * n + sum(_ENTRY.size + k for k in key_lengths[:-1])
    root = sum(_ENTRY.size + len(encode_hadoop_vlong(k)) + k for k in key_lengths)
    return n > 1 and (non_root_before_last >= MAX_CHUNK_SIZE or root > MAX_CHUNK_SIZE)
