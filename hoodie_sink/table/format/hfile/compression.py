"""Block payload compression: NONE and GZ, the two codecs hudi-rs reads
(docs/hudi/hfile.md#compression).

A GZ payload is one gzip member whose header is the one HBase's gzip codec writes
(`1f8b 0800 00000000 00ff`: no flags, no mtime, OS "unknown"), then raw deflate, then CRC32 and
input size (little-endian).  Building the member ourselves (not `gzip`'s module, which writes mtime
and OS bytes) keeps every byte but the deflate stream equal to Java's.

The deflate stream is ISA-L's level 1 (the `isal` package), not zlib's level 6 as Java's: every
reader inflates any valid stream (HBase's gzip codec, hudi-rs's flate2, ours), and on the metadata
table's blocks (record keys, bloom filters) ISA-L's level 1 deflates about 10x faster than zlib's
level 6 for a size within a few percent, and inflates about 2x faster; deflating was most of the
time of a commit that writes record-index or bloom-filter blocks (docs/hudi/hfile.md#compression).
The tests that compare our files with Java's byte for byte switch to `JAVA_DEFLATE`.
"""

from __future__ import annotations

import struct
import zlib
from types import ModuleType

from isal import isal_zlib

from hoodie_sink.table.format.hfile.errors import CorruptHFile

# trailer compression_codec ids (HBase Compression.Algorithm ordinals)
CODEC_IDS = {"LZO": 0, "GZ": 1, "NONE": 2, "SNAPPY": 3, "LZ4": 4, "BZIP2": 5, "ZSTD": 6}
SUPPORTED = ("GZ", "NONE")
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# (library, level): Java's Deflater(-1) is zlib's level 6
JAVA_DEFLATE: tuple[ModuleType, int] = (zlib, 6)
FAST_DEFLATE: tuple[ModuleType, int] = (isal_zlib, 1)
deflate = FAST_DEFLATE
# isal's stubs declare its error an instance, not a class
_INFLATE_ERROR: type[Exception] = isal_zlib.error  # type: ignore[assignment]


def check_codec(compression: str) -> None:
    if compression not in SUPPORTED:
        raise ValueError(
            f"HFile compression {compression!r} is not supported (use one of {', '.join(SUPPORTED)})"
        )


def compress(payload: bytes | memoryview, compression: str) -> bytes:
    if compression == "NONE":
        return bytes(payload)
    lib, level = deflate
    deflater = lib.compressobj(level, lib.DEFLATED, -15)
    body: bytes = deflater.compress(payload) + deflater.flush()
    tail = struct.pack("<II", isal_zlib.crc32(payload), len(payload) & 0xFFFFFFFF)
    return GZIP_HEADER + body + tail


def decompress(data: bytes | memoryview, compression: str, expected_size: int, what: str) -> bytes:
    """Payload of a block; `what` names the block in the error of a payload that does not inflate
    to its header's uncompressed size."""
    if compression == "NONE":
        out = bytes(data)
    else:
        try:
            out = isal_zlib.decompress(data, 16 + 15)  # checks the member's CRC32 and size
        except _INFLATE_ERROR as e:
            raise CorruptHFile(f"{what}: gzip payload does not inflate ({e})") from None
    if len(out) != expected_size:
        raise CorruptHFile(f"{what}: payload is {len(out)} bytes, its header says {expected_size}")
    return out
