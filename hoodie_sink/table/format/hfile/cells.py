"""Cells (HBase KeyValues) of a data block, built and parsed in bulk
(docs/hudi/hfile.md#cells).

A Hudi cell, big-endian:
    int32 keyLength (= rowLength + 12) | int32 valueLength | int16 rowLength | row |
    byte familyLength 0 | int64 timestamp 0x7FFFFFFFFFFFFFFF | byte type 4 (Put) | value |
    Hadoop VLong memstore timestamp 0 (one byte 0x00)
Building is vectorised: the fixed-width prefix of every cell is one numpy record array and pyarrow
joins prefix, row, the constant middle, value and the memstore byte element-wise, so the joined
array's data buffer *is* the cell stream and its offsets are the cell boundaries.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.hfile.errors import CorruptHFile
from hoodie_sink.table.format.hfile.varints import HADOOP_VLONG_SIZE

LATEST_TIMESTAMP = 0x7FFFFFFFFFFFFFFF  # HConstants.LATEST_TIMESTAMP
PUT = 4  # KeyValue.Type.Put
KEY_INFRASTRUCTURE = 12  # family length (1) + timestamp (8) + type (1) + row length (2)
# what follows the row in a cell's key: family length 0, the timestamp, the type
KEY_TAIL = b"\x00" + struct.pack(">q", LATEST_TIMESTAMP) + bytes([PUT])
MEMSTORE_TS = b"\x00"  # Hadoop VLong 0
_PREFIX = np.dtype([("key_length", ">i4"), ("value_length", ">i4"), ("row_length", ">i2")])
MAX_ROW_LENGTH = 0x7FFF  # rowLength is an int16


def as_binary(
    values: Sequence[bytes] | pa.Array | pa.ChunkedArray, what: str
) -> pa.BinaryArray | pa.LargeBinaryArray:
    """`values` as one (large) binary array without nulls."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(values, pa.binary())
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        values = values.cast(pa.large_binary() if pa.types.is_large_string(values.type) else pa.binary())
    if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        raise TypeError(f"HFile {what} must be bytes or a pyarrow binary array, not {values.type}")
    if values.null_count:
        raise ValueError(f"HFile {what} must not be null")
    return values


def cell_key(row: bytes) -> bytes:
    """The full key of a Hudi cell with this row: what the index and hfile.LASTKEY hold."""
    return struct.pack(">h", len(row)) + row + KEY_TAIL


MAXIMUM = 255  # KeyValue.Type.Maximum: the type of a "first on row" key


def index_key(previous_last_row: bytes | None, first_row: bytes) -> bytes:
    """The data-index key of a block (docs/hudi/hfile.md#block-index): HBase's `getMidpoint` of the
    previous block's last row and this block's first, i.e. the shortest row that sorts after the
    one and not after the other, as a "first on row" key (type Maximum); the first block's real key.
    The byte test mirrors Java's signed `byte + 1` exactly."""
    if previous_last_row is None or previous_last_row == first_row:
        return cell_key(first_row)
    left, right = previous_last_row, first_row
    common = min(len(left), len(right))
    diff = 0
    while diff < common and left[diff] == right[diff]:
        diff += 1
    if diff >= common:  # left is a prefix of right
        mid = right[: diff + 1]
    else:
        signed = left[diff] - 256 if left[diff] >= 128 else left[diff]
        if left[diff] < 0xFF and signed + 1 < right[diff]:
            mid = left[:diff] + bytes([(signed + 1) & 0xFF])
        else:
            mid = right[: diff + 1]
    return struct.pack(">h", len(mid)) + mid + KEY_TAIL[:-1] + bytes([MAXIMUM])


def build_cells(
    keys: pa.BinaryArray | pa.LargeBinaryArray, values: pa.BinaryArray | pa.LargeBinaryArray
) -> tuple[pa.Buffer, npt.NDArray[np.int64]]:
    """(the cell stream, offsets of the n cells' starts plus the end)."""
    n = len(keys)
    key_lengths = pc.binary_length(keys).to_numpy(zero_copy_only=False)
    value_lengths = pc.binary_length(values).to_numpy(zero_copy_only=False)
    if n and int(key_lengths.max()) > MAX_ROW_LENGTH:
        raise ValueError(f"HFile keys are at most {MAX_ROW_LENGTH} bytes (an int16 row length)")
    prefix = np.empty(n, dtype=_PREFIX)
    prefix["key_length"] = key_lengths + KEY_INFRASTRUCTURE
    prefix["value_length"] = value_lengths
    prefix["row_length"] = key_lengths
    prefixes = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(_PREFIX.itemsize), n, [None, pa.py_buffer(prefix.view(np.uint8))]
    )
    large = pa.types.is_large_binary(keys.type) or pa.types.is_large_binary(values.type)
    total = int(key_lengths.sum()) + int(value_lengths.sum()) + n * (_PREFIX.itemsize + len(KEY_TAIL) + 1)
    binary = pa.large_binary() if large or total >= 1 << 31 else pa.binary()
    joined = pc.binary_join_element_wise(
        prefixes.cast(binary),
        keys.cast(binary),
        pa.scalar(KEY_TAIL, binary),
        values.cast(binary),
        pa.scalar(MEMSTORE_TS, binary),
        pa.scalar(b"", binary),
    )
    offset_type = np.int64 if binary == pa.large_binary() else np.int32
    offsets = np.frombuffer(joined.buffers()[1], dtype=offset_type)[joined.offset : joined.offset + n + 1]
    return joined.buffers()[2], offsets.astype(np.int64)


def _gather(
    buf: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> pa.BinaryArray:
    """A binary array of the byte ranges (start, length) of `buf`, copied with one numpy gather."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    index = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
    data = buf[index]
    return pa.BinaryArray.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )


@dataclass(frozen=True)
class ParsedCells:
    """The cells of one data block: their rows, and where each value lies in the payload.  Values
    are cut out on demand (`values`): a point look-up needs the values of a few rows only."""

    payload: pa.Buffer
    rows: pa.BinaryArray
    value_starts: npt.NDArray[np.int64]
    value_lengths: npt.NDArray[np.int64]

    @property
    def nbytes(self) -> int:
        return int(self.payload.size) + int(self.rows.nbytes) + 16 * len(self.value_starts)

    def values(self, at: npt.NDArray[np.int64] | None = None) -> pa.BinaryArray:
        """The values of the cells numbered `at` (all cells if None), in that order."""
        starts, lengths = self.value_starts, self.value_lengths
        if at is not None:
            starts, lengths = starts[at], lengths[at]
        return _slices(np.frombuffer(self.payload, dtype=np.uint8), self.payload, starts, lengths)


def parse_cells(payload: bytes, what: str = "data block") -> tuple[pa.BinaryArray, pa.BinaryArray]:
    """(rows, values) of the cells of one data block payload (see `parse_cell_rows`)."""
    parsed = parse_cell_rows(payload, what)
    return parsed.rows, parsed.values()


def parse_cell_rows(payload: bytes, what: str = "data block") -> ParsedCells:
    """The rows of the cells of one data block payload, and where their values lie.

    Cells have variable lengths, so their starts depend on one another.  When every row has the
    first cell's length (UUIDs, padded numbers: the usual record keys) the starts are found at
    once: each cell's key ends in the same 10-byte tail (empty family, latest timestamp, Put), so
    the tails give the starts, and the whole chain of lengths is then checked from the first cell
    to the block's end.  Otherwise, or if any check fails, the block is walked one cell at a time.
    Rows are then cut out in bulk (binary views over the payload, one copy in C).
    """
    buf = np.frombuffer(payload, dtype=np.uint8)
    at = _uniform_starts(buf)
    if at is None:
        at = _walk(payload, what)
    key_lengths = _read_be(buf, at, 4)
    value_lengths = _read_be(buf, at + 4, 4)
    row_lengths = _read_be(buf, at + 8, 2)
    if len(at) and (np.any(row_lengths + KEY_INFRASTRUCTURE != key_lengths) or np.any(value_lengths < 0)):
        raise CorruptHFile(f"{what}: a cell's key is not a row with an empty family and qualifier")
    data = pa.py_buffer(payload)
    rows = _slices(buf, data, at + 10, row_lengths)
    return ParsedCells(data, rows, at + 8 + key_lengths, value_lengths)


def _walk(payload: bytes, what: str) -> npt.NDArray[np.int64]:
    """The cell starts, found one cell after the other."""
    starts = []
    pos, end = 0, len(payload)
    unpack = struct.Struct(">ii").unpack_from
    vlong_size = HADOOP_VLONG_SIZE
    try:
        while pos < end:
            starts.append(pos)
            key_length, value_length = unpack(payload, pos)
            pos += 8 + key_length + value_length
            pos += vlong_size[payload[pos]]  # the memstore timestamp
    except (struct.error, IndexError):
        raise CorruptHFile(f"{what}: cell at payload offset {starts[-1]} runs past the block") from None
    if pos != end:
        raise CorruptHFile(f"{what}: last cell runs past the block")
    return np.array(starts, dtype=np.int64)


_TAIL = np.frombuffer(KEY_TAIL, dtype=np.uint8)
_FOUR = np.arange(4, dtype=np.int64)
_TWELVE = np.arange(12, dtype=np.int64)


def _uniform_starts(buf: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64] | None:
    """The cell starts of a block whose rows all have the first row's length, every one checked;
    None when the block is not such a block (the caller walks it)."""
    n = len(buf)
    if n < 10 + len(KEY_TAIL) + 1:
        return None
    row = int(buf[8]) << 8 | int(buf[9])
    key_length = row + KEY_INFRASTRUCTURE
    # where each cell's key tail starts: the tail's 0x7F byte, then the other nine bytes checked
    hits = np.flatnonzero(buf[1 : n - len(KEY_TAIL) + 2] == _TAIL[1])  # offset by one: tail[0] precedes
    if not len(hits):
        return None
    tails = hits  # position of tail[0] = (hit + 1) - 1
    for i, byte in enumerate(_TAIL):
        if i == 1:
            continue
        tails = tails[buf[tails + i] == byte]
    at = tails - 10 - row
    if not len(at) or at[0] != 0 or np.any(at < 0):
        return None
    if np.any(_read_be(buf, at, 4) != key_length) or np.any(_read_be(buf, at + 8, 2) != row):
        return None
    ends = at + 8 + key_length + _read_be(buf, at + 4, 4) + 1  # one memstore byte: 0
    if ends[-1] != n or np.any(ends[:-1] != at[1:]) or np.any(buf[ends - 1] != 0):
        return None
    return at.astype(np.int64)


def _slices(
    buf: npt.NDArray[np.uint8], data: pa.Buffer, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> pa.BinaryArray:
    """A binary array of the byte ranges (start, length) of `buf` (`data`: the same bytes as an
    Arrow buffer): binary views over it (Arrow's 16-byte view: length, then the bytes themselves
    up to 12, else a 4-byte prefix, buffer 0 and the offset), cast to binary in one copy."""
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    if len(buf) >= 1 << 31:
        return _gather(buf, starts, lengths)
    last = len(buf) - 1
    words = np.zeros((n, 4), dtype="<u4")  # a view: length | prefix or inline bytes | buffer | offset
    words[:, 0] = lengths
    words[:, 1] = buf[np.minimum(starts[:, None] + _FOUR, last)].view("<u4")[:, 0]
    words[:, 3] = starts
    short = np.flatnonzero(lengths <= 12)
    if len(short):  # up to 12 bytes inline, zero-padded
        inline = buf[np.minimum(starts[short, None] + _TWELVE, last)]
        inline[_TWELVE[None, :] >= lengths[short, None]] = 0
        words[short, 1:4] = inline.view("<u4")
    views = words.view(np.uint8)
    array = pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views), data])
    return array.cast(pa.binary())


_BIG_ENDIAN = {2: np.dtype(">i2"), 4: np.dtype(">i4")}


def _read_be(buf: npt.NDArray[np.uint8], at: npt.NDArray[np.int64], width: int) -> npt.NDArray[np.int64]:
    """Signed big-endian integers of `width` (2 or 4) bytes at positions `at`: one gather of the
    bytes, viewed as big-endian integers."""
    if not len(at):
        return np.zeros(0, np.int64)
    raw = buf[at[:, None] + np.arange(width, dtype=np.int64)]  # (n, width), C-contiguous
    out: npt.NDArray[np.int64] = raw.view(_BIG_ENDIAN[width])[:, 0].astype(np.int64)
    return out
