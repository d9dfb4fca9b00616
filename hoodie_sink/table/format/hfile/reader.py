"""Read an HFile v3 (docs/hudi/hfile.md#reading): the trailer, the load-on-open blocks (root data
index, meta index, file info), then data blocks as asked.  Every block read has its magic and
CRC32Cs checked; any inconsistency raises `CorruptHFile`."""

from __future__ import annotations

import bisect
import struct
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc

import hoodie_sink.table.format.hfile.blocks as blocks
from hoodie_sink.table.format.hfile.cells import parse_cells
from hoodie_sink.table.format.hfile.compression import CODEC_IDS, SUPPORTED
from hoodie_sink.table.format.hfile.errors import CorruptHFile
from hoodie_sink.table.format.hfile.index import (
    IndexEntry,
    decode_non_root_index,
    decode_root_index,
)
from hoodie_sink.table.format.hfile.trailer import TRAILER_SIZE, Trailer, decode_file_info, decode_trailer

RECENT_BLOCKS = 4
_CODEC_NAMES = {v: k for k, v in CODEC_IDS.items()}


def _row(cell_key: bytes) -> bytes:
    """The row of a full cell key (int16 row length, row, ...): what index keys are compared by."""
    (length,) = struct.unpack_from(">h", cell_key, 0) if len(cell_key) >= 2 else (0,)
    return cell_key[2 : 2 + length]


class HFileReader:
    """An HFile held in memory.  `name` (e.g. the file's path) only labels errors."""

    def __init__(self, data: bytes | memoryview, *, name: str | None = None) -> None:
        self._data = memoryview(data)
        self._name = name
        # the last few data blocks `get` opened, parsed: lookups in key order hit the same block
        self._recent: dict[int, tuple[pa.BinaryArray, pa.BinaryArray]] = {}
        if len(self._data) < TRAILER_SIZE:
            self._fail(f"{len(self._data)} bytes, shorter than the {TRAILER_SIZE}-byte trailer")
        try:
            self.trailer: Trailer = decode_trailer(self._data[-TRAILER_SIZE:])
        except CorruptHFile as e:
            raise CorruptHFile(e.what, name) from None
        codec = _CODEC_NAMES.get(self.trailer.compression_codec, str(self.trailer.compression_codec))
        if codec not in SUPPORTED:
            self._fail(f"compression {codec} is not supported (only {', '.join(SUPPORTED)})")
        self._codec = codec
        t = self.trailer
        end_of_blocks = len(self._data) - TRAILER_SIZE
        if not 0 <= t.load_on_open_data_offset <= t.file_info_offset < end_of_blocks:
            self._fail("trailer offsets point outside the file")
        root_offset = t.load_on_open_data_offset
        root_header, root = self._block(root_offset, blocks.ROOT_INDEX)
        meta_offset = root_offset + root_header.on_disk_size
        meta_header, meta = self._block(meta_offset, blocks.ROOT_INDEX)
        _, info = self._block(t.file_info_offset, blocks.FILE_INFO)
        self._root = decode_root_index(root, t.data_index_count, self._what(root_offset, root_header))
        self._meta_index = {
            e.key.decode("utf-8", "replace"): e
            for e in decode_root_index(meta, t.meta_index_count, self._what(meta_offset, meta_header))
        }
        try:
            self.file_info: dict[bytes, bytes] = decode_file_info(info)
        except CorruptHFile as e:
            raise CorruptHFile(e.what, name) from None

    # ------------------------------------------------------------------------------- plumbing

    def _fail(self, what: str) -> None:
        raise CorruptHFile(what, self._name)

    @staticmethod
    def _what(offset: int, header: blocks.BlockHeader) -> str:
        return f"{header.magic.decode('ascii', 'replace')} block at offset {offset}"

    def _header(self, offset: int, magic: bytes | None, size: int | None = None) -> blocks.BlockHeader:
        if offset + blocks.HEADER_SIZE > len(self._data) - TRAILER_SIZE:
            self._fail(f"block at offset {offset} runs into the trailer")
        header = blocks.read_header(self._data, offset, self._name)
        if magic is not None and header.magic != magic:
            self._fail(f"block at offset {offset} is {header.magic!r}, expected {magic!r}")
        if size is not None and header.on_disk_size != size:
            self._fail(f"{self._what(offset, header)} is {header.on_disk_size} bytes, its index says {size}")
        if offset + header.on_disk_size > len(self._data) - TRAILER_SIZE:
            self._fail(f"{self._what(offset, header)} runs into the trailer")
        return header

    def _block(
        self, offset: int, magic: bytes | None, size: int | None = None
    ) -> tuple[blocks.BlockHeader, bytes]:
        header = self._header(offset, magic, size)
        blocks.verify_checksums(self._data, [(offset, header)], self._name)
        return header, blocks.read_payload(self._data, offset, header, self._codec, self._name)

    # ------------------------------------------------------------------------------- the API

    @property
    def entry_count(self) -> int:
        return self.trailer.entry_count

    def meta_block(self, name: str) -> bytes | None:
        entry = self._meta_index.get(name)
        if entry is None:
            return None
        return self._block(entry.offset, blocks.META, entry.on_disk_size)[1]

    @cached_property
    def _data_index(self) -> list[IndexEntry]:
        """Every data block's (offset, size, first key): the root itself for a one-level index,
        else the leaves under it (docs/hudi/hfile.md#block-index)."""
        entries = self._root
        for level in range(self.trailer.num_data_index_levels - 1):
            magic = (
                blocks.LEAF_INDEX
                if level == self.trailer.num_data_index_levels - 2
                else blocks.INTERMEDIATE_INDEX
            )
            deeper: list[IndexEntry] = []
            for e in entries:
                header, payload = self._block(e.offset, magic, e.on_disk_size)
                deeper += decode_non_root_index(payload, self._what(e.offset, header))
            entries = deeper
        return entries

    @cached_property
    def _first_rows(self) -> list[bytes]:
        return [_row(e.key) for e in self._data_index]

    def _cells(self, entries: list[IndexEntry]) -> tuple[pa.BinaryArray, pa.BinaryArray]:
        headers = [(e.offset, self._header(e.offset, blocks.DATA, e.on_disk_size)) for e in entries]
        blocks.verify_checksums(self._data, headers, self._name)
        keys, values = [], []
        for offset, header in headers:
            payload = blocks.read_payload(self._data, offset, header, self._codec, self._name)
            try:
                k, v = parse_cells(payload, self._what(offset, header))
            except CorruptHFile as e:
                raise CorruptHFile(e.what, self._name) from None
            keys.append(k)
            values.append(v)
        if not keys:
            return pa.array([], pa.binary()), pa.array([], pa.binary())
        return pa.concat_arrays(keys), pa.concat_arrays(values)

    def _recent_block(self, entry: IndexEntry) -> tuple[pa.BinaryArray, pa.BinaryArray]:
        parsed = self._recent.get(entry.offset)
        if parsed is None:
            parsed = self._cells([entry])
            if len(self._recent) >= RECENT_BLOCKS:
                del self._recent[next(iter(self._recent))]
            self._recent[entry.offset] = parsed
        return parsed

    def keys_and_values(self) -> tuple[pa.BinaryArray, pa.BinaryArray]:
        """All cells in file order: (row keys, values)."""
        keys, values = self._cells(self._data_index)
        if len(keys) != self.trailer.entry_count:
            self._fail(f"data blocks hold {len(keys)} cells, the trailer says {self.trailer.entry_count}")
        return keys, values

    def get(self, key: bytes) -> list[bytes]:
        """Values of the cells whose row is `key`, in file order, opening only the data blocks
        whose index range can hold it (equal keys may run on into the next blocks)."""
        rows = self._first_rows
        first = max(bisect.bisect_left(rows, key) - 1, 0)
        last = bisect.bisect_right(rows, key)
        if not rows or first >= last:
            return []
        parts = [self._recent_block(e) for e in self._data_index[first:last]]
        keys = pa.concat_arrays([k for k, _ in parts])
        values = pa.concat_arrays([v for _, v in parts])
        hits = pc.equal(keys, pa.scalar(key, pa.binary()))
        return values.filter(hits).to_pylist()  # type: ignore[no-any-return]
