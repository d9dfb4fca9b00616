"""CRC32C (Castagnoli), the checksum HBase writes after every HFile block, one per 16 KiB chunk
(docs/hudi/hfile.md#checksums).

No maintained CRC32C library is a dependency, so this is our own.  A chunk's CRC is computed for
many chunks at once with numpy: the CRC without its initial value and final inversion ("raw") is
linear over GF(2), so

* leading zero bytes do not change a raw CRC: chunks of different lengths are right-aligned in one
  zero-padded matrix;
* the initial value 0xFFFFFFFF acts as 0xFF xored into a chunk's first four bytes;
* a chunk is cut into 256-byte pieces whose raw CRCs are computed side by side (slicing by 8, 32
  steps), then folded left to right: crc(A || B) = shift256(crc(A)) ^ crc(B).

So the Python-level work is ~100 numpy calls whatever the number of chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np
import numpy.typing as npt

POLY = 0x82F63B78  # reflected Castagnoli polynomial
PIECE = 256  # bytes per piece computed side by side


def _byte_table() -> list[int]:
    table = []
    for b in range(256):
        crc = b
        for _ in range(8):
            crc = (crc >> 1) ^ (POLY if crc & 1 else 0)
        table.append(crc)
    return table


_TABLE = _byte_table()


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """Plain CRC32C of `data` (continuing from `crc`), one byte at a time: the reference the fast
    path is tested against, and what serves chunks of under four bytes."""
    table = _TABLE
    crc ^= 0xFFFFFFFF
    for b in bytes(data):
        crc = (crc >> 8) ^ table[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


@cache
def _tables() -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """(slice tables T[0..7], shift tables S[0..3]).  T[k][b] is the raw CRC of byte b followed by
    k zero bytes; S[j][b] is the raw CRC that register bits (b << 8j) become after PIECE zero bytes."""
    t = np.zeros((8, 256), dtype=np.uint32)
    t[0] = np.array(_TABLE, dtype=np.uint32)
    for k in range(1, 8):
        prev = t[k - 1]
        t[k] = (prev >> np.uint32(8)) ^ t[0][prev & np.uint32(0xFF)]
    s = np.zeros((4, 256), dtype=np.uint32)
    for j in range(4):
        reg = np.arange(256, dtype=np.uint32) << np.uint32(8 * j)
        for _ in range(PIECE):
            reg = (reg >> np.uint32(8)) ^ t[0][reg & np.uint32(0xFF)]
        s[j] = reg
    return t, s


def _shift_piece(crc: npt.NDArray[np.uint32], s: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    m = np.uint32(0xFF)
    out: npt.NDArray[np.uint32] = (
        s[0][crc & m]
        ^ s[1][(crc >> np.uint32(8)) & m]
        ^ s[2][(crc >> np.uint32(16)) & m]
        ^ s[3][crc >> np.uint32(24)]
    )
    return out


def chunk_crc32c(chunks: Sequence[bytes | bytearray | memoryview]) -> list[int]:
    """CRC32C of each chunk (each at most a few tens of KiB), computed together."""
    if not chunks:
        return []
    lengths = [len(c) for c in chunks]
    if sum(lengths) < 4096 or min(lengths) < 4:
        return [crc32c(c) for c in chunks]
    t, s = _tables()
    pieces = -(-max(lengths) // PIECE)
    width = pieces * PIECE
    matrix = np.zeros((len(chunks), width), dtype=np.uint8)
    for row, (chunk, n) in enumerate(zip(chunks, lengths, strict=True)):
        matrix[row, width - n :] = np.frombuffer(chunk, dtype=np.uint8)
        matrix[row, width - n : width - n + 4] ^= 0xFF  # the initial value 0xFFFFFFFF
    rows = matrix.reshape(-1, PIECE)  # one row per piece
    words = rows.view("<u4")  # little-endian words: the reflected CRC eats bytes low first
    m, b8, b16, b24 = np.uint32(0xFF), np.uint32(8), np.uint32(16), np.uint32(24)
    crc = np.zeros(len(rows), dtype=np.uint32)
    for i in range(0, PIECE // 4, 2):  # slicing by 8: two words a step
        lo = crc ^ words[:, i]
        hi = words[:, i + 1]
        crc = (
            t[7][lo & m] ^ t[6][(lo >> b8) & m] ^ t[5][(lo >> b16) & m] ^ t[4][lo >> b24]
            ^ t[3][hi & m] ^ t[2][(hi >> b8) & m] ^ t[1][(hi >> b16) & m] ^ t[0][hi >> b24]
        )  # fmt: skip
    per_piece = crc.reshape(len(chunks), pieces)
    folded = per_piece[:, 0].copy()
    for p in range(1, pieces):
        folded = _shift_piece(folded, s) ^ per_piece[:, p]
    return [int(c) ^ 0xFFFFFFFF for c in folded]
