"""The fixed 4096-byte trailer and the file-info block's protobuf payload
(docs/hudi/hfile.md#trailer, docs/hudi/hfile.md#file-info).

Both are tiny protobuf messages; their codec is written here (varints and length-delimited bytes
are all they use), so the package needs no protobuf runtime.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, fields

from hoodie_sink.table.format.hfile.errors import CorruptHFile
from hoodie_sink.table.format.hfile.varints import decode_varint, encode_varint

TRAILER_SIZE = 4096
TRAILER_MAGIC = b'TRABLK"$'
VERSION = bytes.fromhex("03000003")  # minor 3, major 3: the last 4 bytes of the file
PBUF_MAGIC = b"PBUF"
HUDI_COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"

_VARINT, _LENGTH_DELIMITED = 0, 2


@dataclass(frozen=True)
class Trailer:
    """FileTrailerProto fields 1-12, in tag order (field 13, encryption_key, is never written)."""

    file_info_offset: int
    load_on_open_data_offset: int
    uncompressed_data_index_size: int
    total_uncompressed_bytes: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    num_data_index_levels: int
    first_data_block_offset: int
    last_data_block_offset: int
    comparator_class_name: str
    compression_codec: int


_FIELDS = [f.name for f in fields(Trailer)]


def _key(tag: int, wire_type: int) -> bytes:
    return encode_varint(tag << 3 | wire_type)


def _delimited(tag: int, value: bytes) -> bytes:
    return _key(tag, _LENGTH_DELIMITED) + encode_varint(len(value)) + value


def _parse(data: bytes | memoryview) -> list[tuple[int, int | bytes]]:
    """(tag, value) of each field of a protobuf message: int for varints, bytes for delimited."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = decode_varint(data, pos)
        tag, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            value, pos = decode_varint(data, pos)
            out.append((tag, value))
        elif wire_type == _LENGTH_DELIMITED:
            size, pos = decode_varint(data, pos)
            if pos + size > len(data):
                raise CorruptHFile(f"protobuf field {tag} runs past its message")
            out.append((tag, bytes(data[pos : pos + size])))
            pos += size
        else:
            raise CorruptHFile(f"protobuf field {tag} has wire type {wire_type}, not varint or bytes")
    return out


def encode_trailer(trailer: Trailer) -> bytes:
    body = bytearray()
    for tag, name in enumerate(_FIELDS, 1):
        value = getattr(trailer, name)
        if isinstance(value, str):
            body += _delimited(tag, value.encode("utf-8"))
        else:
            body += _key(tag, _VARINT) + encode_varint(value)
    message = TRAILER_MAGIC + encode_varint(len(body)) + body
    if len(message) > TRAILER_SIZE - len(VERSION):
        raise ValueError("HFile trailer does not fit its 4096 bytes")
    return message + bytes(TRAILER_SIZE - len(VERSION) - len(message)) + VERSION


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def decode_trailer(data: bytes | memoryview) -> Trailer:
    """The trailer from the file's last 4096 bytes."""
    if len(data) != TRAILER_SIZE:
        raise CorruptHFile(f"file is shorter than its {TRAILER_SIZE}-byte trailer")
    # major version 3 in the low 3 bytes; HBase writes minor 3, Hudi 1.x's own writer (hudi-io)
    # minor 0 (docs/hudi/hfile.md#trailer): both lay the file out alike
    if bytes(data[-3:]) != VERSION[1:]:
        raise CorruptHFile(f"version bytes are {bytes(data[-4:]).hex()}, not HFile v3 (xx000003)")
    if bytes(data[:8]) != TRAILER_MAGIC:
        raise CorruptHFile(f"trailer magic is {bytes(data[:8])!r}, not {TRAILER_MAGIC!r}")
    size, pos = decode_varint(data, 8)
    if pos + size > TRAILER_SIZE - len(VERSION):
        raise CorruptHFile("trailer protobuf runs past the trailer")
    # an absent field has protobuf's default (0, ""): Hudi 1.1's own writer leaves out the sizes
    # no reader needs (docs/hudi/hfile.md#trailer); a wrong offset fails the block checks later
    values: dict[str, int | str] = {name: 0 for name in _FIELDS} | {"comparator_class_name": ""}
    for tag, value in _parse(data[pos : pos + size]):
        if 1 <= tag <= len(_FIELDS):
            name = _FIELDS[tag - 1]
            values[name] = value.decode("utf-8") if isinstance(value, bytes) else _signed64(value)
    return Trailer(**values)  # type: ignore[arg-type]


def encode_file_info(entries: dict[bytes, bytes]) -> bytes:
    """FILEINF2 payload: `PBUF`, then a length-delimited InfoProto whose BytesBytesPair entries
    are sorted by key bytes (HBase keeps them in a byte-ordered TreeMap)."""
    body = b"".join(
        _delimited(1, _delimited(1, key) + _delimited(2, entries[key])) for key in sorted(entries)
    )
    return PBUF_MAGIC + encode_varint(len(body)) + body


def decode_file_info(payload: bytes | memoryview) -> dict[bytes, bytes]:
    if bytes(payload[:4]) != PBUF_MAGIC:
        raise CorruptHFile(f"file info starts {bytes(payload[:4])!r}, not {PBUF_MAGIC!r}")
    size, pos = decode_varint(payload, 4)
    if pos + size > len(payload):
        raise CorruptHFile("file info protobuf runs past its block")
    out: dict[bytes, bytes] = {}
    for tag, entry in _parse(payload[pos : pos + size]):
        if tag != 1 or not isinstance(entry, bytes):
            continue
        pair = dict(_parse(entry))
        first, second = pair.get(1, b""), pair.get(2, b"")
        if not isinstance(first, bytes) or not isinstance(second, bytes):
            raise CorruptHFile("file info entry is not a pair of byte strings")
        out[first] = second
    return out


def int32(value: int) -> bytes:
    return struct.pack(">i", value)


def int64(value: int) -> bytes:
    return struct.pack(">q", value)
