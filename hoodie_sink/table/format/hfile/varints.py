"""The two variable-length integer encodings an HFile uses (docs/hudi/hfile.md#integers):
protobuf's base-128 varint (trailer, file-info length) and Hadoop's `WritableUtils` VInt/VLong
(root index key lengths, the cell's memstore timestamp)."""

from __future__ import annotations

from hoodie_sink.table.format.hfile.errors import CorruptHFile


def encode_varint(value: int) -> bytes:
    """Protobuf varint; a negative int64 is written as its 64-bit two's complement (10 bytes), as
    protobuf does for `-1` in a uint64 field."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(value, position after it)."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise CorruptHFile("protobuf varint runs past its bytes")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def encode_hadoop_vlong(value: int) -> bytes:
    """Hadoop VLong: one byte for -112..127, else a length byte then the big-endian magnitude
    (ones' complement for negatives)."""
    if -112 <= value <= 127:
        return (value & 0xFF).to_bytes(1, "big")
    lead = -112
    if value < 0:
        value = ~value
        lead = -120
    size = (value.bit_length() + 7) // 8
    return ((lead - size) & 0xFF).to_bytes(1, "big") + value.to_bytes(size, "big")


def _vlong_size(first: int) -> int:
    """Total bytes of a Hadoop VLong whose first byte is `first` (signed)."""
    if first >= -112:
        return 1
    return -119 - first if first < -120 else -111 - first


HADOOP_VLONG_SIZE = [_vlong_size(b - 256 if b >= 128 else b) for b in range(256)]  # by unsigned first byte


def decode_hadoop_vlong(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(value, position after it)."""
    if pos >= len(data):
        raise CorruptHFile("Hadoop VInt runs past its bytes")
    first = data[pos] - 256 if data[pos] >= 128 else data[pos]
    if first >= -112:
        return first, pos + 1
    negative = first < -120
    end = pos + _vlong_size(first)
    if end > len(data):
        raise CorruptHFile("Hadoop VInt runs past its bytes")
    value = int.from_bytes(bytes(data[pos + 1 : end]), "big")
    return (~value if negative else value), end
