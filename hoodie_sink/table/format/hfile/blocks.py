"""HFile blocks on storage: a 33-byte header, the (compressed) payload, then one CRC32C per 16 KiB
chunk of header + payload (docs/hudi/hfile.md#blocks).

Header, big-endian: magic(8) | int32 onDiskSizeWithoutHeader (payload + checksums) |
int32 uncompressedSizeWithoutHeader | int64 prevBlockOffset (previous block of the same type, -1) |
byte checksumType (2 = CRC32C) | int32 bytesPerChecksum (16384) | int32 onDiskDataSizeWithHeader
(33 + payload).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from hoodie_sink.table.format.hfile.checksum import chunk_crc32c
from hoodie_sink.table.format.hfile.compression import compress, decompress
from hoodie_sink.table.format.hfile.errors import CorruptHFile

HEADER = struct.Struct(">8siiqbii")
HEADER_SIZE = HEADER.size  # 33
CRC32C_TYPE = 2
NULL_CHECKSUM_TYPE = 0  # ChecksumType.NULL
BYTES_PER_CHECKSUM = 16384

DATA = b"DATABLK*"
LEAF_INDEX = b"IDXLEAF2"
INTERMEDIATE_INDEX = b"IDXINTE2"
META = b"METABLKc"
ROOT_INDEX = b"IDXROOT2"
FILE_INFO = b"FILEINF2"
MAGICS = {DATA, LEAF_INDEX, INTERMEDIATE_INDEX, META, ROOT_INDEX, FILE_INFO}


@dataclass(frozen=True)
class BlockHeader:
    magic: bytes
    on_disk_size_without_header: int
    uncompressed_size: int
    prev_block_offset: int
    checksum_type: int
    bytes_per_checksum: int
    on_disk_data_size_with_header: int

    @property
    def on_disk_size(self) -> int:
        """The whole block on storage: header, payload and checksums."""
        return HEADER_SIZE + self.on_disk_size_without_header


def _chunks(data: bytes | memoryview) -> list[memoryview]:
    view = memoryview(data)
    return [view[i : i + BYTES_PER_CHECKSUM] for i in range(0, len(view), BYTES_PER_CHECKSUM)]


def checksum_count(data_size_with_header: int) -> int:
    return -(-data_size_with_header // BYTES_PER_CHECKSUM)


def encode_blocks(
    magic: bytes, payloads: Sequence[bytes | memoryview], offset: int, prev_offset: int, compression: str
) -> tuple[bytes, list[int]]:
    """Blocks of one type written back to back from file `offset`, each pointing at the one before
    (the first at `prev_offset`): (their bytes, each block's on-disk size).  The checksums of all of
    them are computed in one pass."""
    framed: list[bytes] = []
    for payload in payloads:
        packed = compress(payload, compression)
        header = HEADER.pack(
            magic,
            len(packed) + 4 * checksum_count(HEADER_SIZE + len(packed)),
            len(payload),
            prev_offset,
            CRC32C_TYPE,
            BYTES_PER_CHECKSUM,
            HEADER_SIZE + len(packed),
        )
        framed.append(header + packed)
        prev_offset = offset
        offset += len(framed[-1]) + 4 * checksum_count(len(framed[-1]))
    chunks = [_chunks(f) for f in framed]
    crcs = iter(chunk_crc32c([c for per_block in chunks for c in per_block]))
    out, sizes = [], []
    for block, per_block in zip(framed, chunks, strict=True):
        checksums = struct.pack(f">{len(per_block)}I", *(next(crcs) for _ in per_block))
        out += [block, checksums]
        sizes.append(len(block) + len(checksums))
    return b"".join(out), sizes


def encode_block(
    magic: bytes, payload: bytes | memoryview, offset: int, prev_offset: int, compression: str
) -> bytes:
    return encode_blocks(magic, [payload], offset, prev_offset, compression)[0]


def read_header(data: bytes | memoryview, offset: int, name: str | None = None) -> BlockHeader:
    if offset < 0 or offset + HEADER_SIZE > len(data):
        raise CorruptHFile(f"block header at offset {offset} runs past the end of the file", name)
    header = BlockHeader(*HEADER.unpack_from(data, offset))
    what = f"block at offset {offset}"
    if header.magic not in MAGICS:
        raise CorruptHFile(f"{what} has magic {header.magic!r}, not an HFile block's", name)
    # Hudi 1.1's own writer (hudi-io) marks its checksums NULL (type 0) and leaves them zero, with
    # the same room for them as CRC32C (docs/hudi/hfile.md#checksums): read, not verified
    if (
        header.checksum_type not in (NULL_CHECKSUM_TYPE, CRC32C_TYPE)
        or header.bytes_per_checksum != BYTES_PER_CHECKSUM
    ):
        raise CorruptHFile(
            f"{what} ({header.magic.decode('ascii', 'replace')}) has checksum type {header.checksum_type} per "
            f"{header.bytes_per_checksum} bytes, not CRC32C (2) per {BYTES_PER_CHECKSUM}",
            name,
        )
    data_size = header.on_disk_data_size_with_header
    expected = data_size - HEADER_SIZE + 4 * checksum_count(data_size)
    if data_size < HEADER_SIZE or header.on_disk_size_without_header != expected:
        raise CorruptHFile(f"{what} has inconsistent sizes in its header", name)
    if offset + header.on_disk_size > len(data):
        raise CorruptHFile(f"{what} runs past the end of the file", name)
    return header


def verify_checksums(
    data: bytes | memoryview, blocks: Sequence[tuple[int, BlockHeader]], name: str | None = None
) -> None:
    """Check the CRC32Cs of the blocks at these offsets (all computed in one pass)."""
    view = memoryview(data)
    chunks, stored = [], []
    blocks = [(offset, header) for offset, header in blocks if header.checksum_type == CRC32C_TYPE]
    for offset, header in blocks:
        end = offset + header.on_disk_data_size_with_header
        per_block = _chunks(view[offset:end])
        chunks += per_block
        stored.append(struct.unpack_from(f">{len(per_block)}I", view, end))
    computed = iter(chunk_crc32c(chunks))
    for (offset, header), expected in zip(blocks, stored, strict=True):
        if tuple(next(computed) for _ in expected) != expected:
            raise CorruptHFile(
                f"checksum mismatch in {header.magic.decode('ascii', 'replace')} block at offset {offset}",
                name,
            )


def read_payload(
    data: bytes | memoryview, offset: int, header: BlockHeader, compression: str, name: str | None = None
) -> bytes:
    """A block's uncompressed payload (checksums are checked by `verify_checksums`)."""
    start = offset + HEADER_SIZE
    what = f"{header.magic.decode('ascii', 'replace')} block at offset {offset}"
    try:
        return decompress(
            memoryview(data)[start : offset + header.on_disk_data_size_with_header],
            compression,
            header.uncompressed_size,
            what,
        )
    except CorruptHFile as e:
        raise CorruptHFile(e.what, name) from None
