"""Block payload compression: NONE and GZ, the two codecs hudi-rs reads
(docs/hudi/hfile.md#compression).

A GZ payload is one gzip member whose header is the one HBase's gzip codec writes
(`1f8b 0800 00000000 00ff`: no flags, no mtime, OS "unknown"), then raw deflate at zlib's default
level, then CRC32 and input size (little-endian).  Building the member ourselves (not `gzip`'s
module, which writes mtime and OS bytes) keeps our bytes equal to Java's.
"""

from __future__ import annotations

import struct
import zlib

from hoodie_sink.table.format.hfile.errors import CorruptHFile

# trailer compression_codec ids (HBase Compression.Algorithm ordinals)
CODEC_IDS = {"LZO": 0, "GZ": 1, "NONE": 2, "SNAPPY": 3, "LZ4": 4, "BZIP2": 5, "ZSTD": 6}
SUPPORTED = ("GZ", "NONE")
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
DEFLATE_LEVEL = 6  # zlib's default, which Java's Deflater(-1) also means


def check_codec(compression: str) -> None:
    if compression not in SUPPORTED:
        raise ValueError(
            f"HFile compression {compression!r} is not supported (use one of {', '.join(SUPPORTED)})"
        )


def compress(payload: bytes | memoryview, compression: str) -> bytes:
    if compression == "NONE":
        return bytes(payload)
    deflater = zlib.compressobj(DEFLATE_LEVEL, zlib.DEFLATED, -15)
    body = deflater.compress(payload) + deflater.flush()
    tail = struct.pack("<II", zlib.crc32(payload), len(payload) & 0xFFFFFFFF)
    return GZIP_HEADER + body + tail


def decompress(data: bytes | memoryview, compression: str, expected_size: int, what: str) -> bytes:
    """Payload of a block; `what` names the block in the error of a payload that does not inflate
    to its header's uncompressed size."""
    if compression == "NONE":
        out = bytes(data)
    else:
        try:
            out = zlib.decompress(data, 16 + 15)
        except zlib.error as e:
            raise CorruptHFile(f"{what}: gzip payload does not inflate ({e})") from None
    if len(out) != expected_size:
        raise CorruptHFile(f"{what}: payload is {len(out)} bytes, its header says {expected_size}")
    return out
