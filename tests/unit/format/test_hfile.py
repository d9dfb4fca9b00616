"""The HFile v3 writer and reader (docs/hudi/hfile.md): Java's HFiles from the metadata-table
fixtures read back and rewritten byte for byte, then round trips and damaged files of our own."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie_sink.table.format.hfile import HBASE_FILE_INFO_KEYS, CorruptHFile, HFileReader, write_hfile
from hoodie_sink.table.format.hfile.blocks import HEADER_SIZE
from hoodie_sink.table.format.hfile.checksum import chunk_crc32c, crc32c
from hoodie_sink.table.format.hfile.trailer import TRAILER_SIZE
from hoodie_sink.table.format.log_format import HFILE_DATA_BLOCK, read_blocks
from tests.support.tables import METADATA_FIXTURE_NAMES, unzip_metadata_fixture


def java_hfiles(root: Path) -> list[tuple[str, bytes, bool]]:
    """(name, bytes, is a base file) of every HFile of the metadata tables under `root`: base files
    and the HFiles inside HFILE_DATA log blocks."""
    found = []
    for path in sorted(root.glob("*/.hoodie/metadata/*/*")):
        name = str(path.relative_to(root))
        if path.name.endswith(".hfile"):
            found.append((name, path.read_bytes(), True))
        elif ".log." in path.name:
            for i, block in enumerate(read_blocks(path.read_bytes())):
                if block.block_type == HFILE_DATA_BLOCK:
                    found.append((f"{name}#block{i}", block.content, False))
    return found


@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mdt")
    for name in METADATA_FIXTURE_NAMES:
        unzip_metadata_fixture(name, root)
    return root


@pytest.fixture(scope="module")
def hfiles(fixture_root: Path) -> list[tuple[str, bytes, bool]]:
    found = java_hfiles(fixture_root)
    assert sum(base for _, _, base in found) >= 30 and sum(not base for _, _, base in found) >= 90
    return found


def test_java_hfiles_read(hfiles: list[tuple[str, bytes, bool]]) -> None:
    for name, data, base in hfiles:
        r = HFileReader(data, name=name)
        keys, values = r.keys_and_values()
        assert len(keys) == len(values) == r.entry_count > 0, name
        rows = keys.to_pylist()
        assert rows == sorted(rows), name
        assert b"schema" in r.file_info, name
        assert r.trailer.comparator_class_name == "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
        assert r.get(rows[0]) == [values[0].as_py()] or rows.count(rows[0]) > 1, name
        assert r.get(rows[-1] + b"\x00") == []
        if base:
            assert len(set(rows)) == len(rows), name
            assert r.meta_block("bloomFilter"), name
            assert r.file_info[b"minRecordKey"] == rows[0] and r.file_info[b"maxRecordKey"] == rows[-1]
        else:
            assert r.meta_block("bloomFilter") is None and r.trailer.meta_index_count == 0


def test_java_hfiles_rewritten_byte_for_byte(hfiles: list[tuple[str, bytes, bool]], java_deflate) -> None:
    """Cells, caller file info and meta blocks of each of Java's HFiles, written again, give
    Java's bytes exactly (docs/hudi/hfile.md#byte-check)."""
    differing = []
    for name, data, base in hfiles:
        r = HFileReader(data, name=name)
        keys, values = r.keys_and_values()
        info = {k: v for k, v in r.file_info.items() if k not in HBASE_FILE_INFO_KEYS}
        meta = {"bloomFilter": r.meta_block("bloomFilter") or b""} if base else None
        ours = write_hfile(keys, values, file_info=info, meta_blocks=meta, unique=base)
        if ours != data:
            differing.append(name)
    assert not differing, f"{len(differing)} of {len(hfiles)} differ: {differing[:5]}"


def test_a_multi_block_java_file_is_among_them(hfiles: list[tuple[str, bytes, bool]]) -> None:
    """The byte check covers a second block's index key (HBase's shortened midpoint)."""
    multi = [HFileReader(d) for _, d, _ in hfiles if HFileReader(d).trailer.data_index_count > 1]
    assert multi
    assert any(e.key.endswith(b"\xff") for r in multi for e in r._data_index[1:])


# ------------------------------------------------------------------------------------ our own files


def _keys(n: int, width: int = 36) -> list[bytes]:
    return [f"{i:0{width}d}".encode() for i in range(n)]


def test_empty_file() -> None:
    data = write_hfile([], [], file_info={b"schema": b"{}"})
    r = HFileReader(data)
    assert r.entry_count == 0 and r.trailer.data_index_count == 0
    assert r.trailer.first_data_block_offset == r.trailer.last_data_block_offset == -1
    assert r.trailer.load_on_open_data_offset == 0  # no data block: the root index comes first
    assert b"hfile.LASTKEY" not in r.file_info and r.file_info[b"hfile.AVG_KEY_LEN"] == b"\0\0\0\0"
    keys, values = r.keys_and_values()
    assert len(keys) == len(values) == 0 and r.get(b"a") == []


def test_one_cell_layout() -> None:
    data = write_hfile([b"k1"], [b"value"], compression="NONE")
    cell_size = 4 + 4 + 14 + 5 + 1  # lengths, key (row + 12), value, memstore timestamp
    payload = data[HEADER_SIZE : HEADER_SIZE + cell_size]
    assert data[:8] == b"DATABLK*" and struct.unpack_from(">i", data, 12) == (cell_size,)
    assert payload == (
        struct.pack(">iih", 14, 5, 2) + b"k1" + b"\x00" + b"\x7f" + b"\xff" * 7 + b"\x04" + b"value" + b"\x00"
    )
    assert data[-4:] == bytes.fromhex("03000003") and data[-TRAILER_SIZE:][:8] == b'TRABLK"$'
    r = HFileReader(data)
    assert r.get(b"k1") == [b"value"] and r.get(b"k0") == [] and r.get(b"k2") == []
    assert r.file_info[b"hfile.LASTKEY"] == b"\x00\x02k1\x00" + b"\x7f" + b"\xff" * 7 + b"\x04"


def test_gzip_member_has_hbase_header() -> None:
    data = write_hfile([b"a"], [b"b"])
    assert data[HEADER_SIZE : HEADER_SIZE + 10] == bytes.fromhex("1f8b08000000000000ff")


@pytest.mark.parametrize("compression", ["GZ", "NONE"])
def test_round_trip_many_blocks_with_duplicates(compression: str) -> None:
    keys = sorted(_keys(300) + _keys(300)[::7] * 3)
    values = [os.urandom(i % 50) for i in range(len(keys))]
    data = write_hfile(pa.array(keys, pa.binary()), values, block_size=1000, compression=compression)
    r = HFileReader(data)
    assert r.trailer.data_index_count > 20
    got_keys, got_values = r.keys_and_values()
    assert got_keys.to_pylist() == keys and got_values.to_pylist() == values
    for key in set(keys):
        assert r.get(key) == [v for k, v in zip(keys, values, strict=True) if k == key]


def test_get_at_block_boundaries() -> None:
    keys = _keys(500, 8)
    r = HFileReader(write_hfile(keys, [k[::-1] for k in keys], block_size=256, unique=True))
    index = r._data_index
    assert len(index) > 10
    for i, entry in enumerate(index[1:], 1):
        first = next(k for k in keys if k >= entry.key[2 : 2 + struct.unpack(">h", entry.key[:2])[0]])
        last_before = keys[keys.index(first) - 1]
        assert r.get(first) == [first[::-1]] and r.get(last_before) == [last_before[::-1]], i
        assert r.get(first[:-1] + b"5\x00") == []  # between two keys
    assert r.get(b"") == [] and r.get(b"\xff") == []


def test_equal_keys_never_split_across_blocks() -> None:
    keys = [b"a"] * 50 + [b"b"] * 50
    r = HFileReader(write_hfile(keys, [b"x" * 100] * 100, block_size=200))
    assert r.trailer.data_index_count == 2
    assert r.get(b"a") == [b"x" * 100] * 50


def test_out_of_order_keys_refused() -> None:
    with pytest.raises(ValueError, match=r"key 2 b'a' is below key 1 b'c'"):
        write_hfile([b"a", b"c", b"a"], [b"", b"", b""])


def test_duplicate_keys_refused_when_unique() -> None:
    write_hfile([b"a", b"a"], [b"1", b"2"])
    with pytest.raises(ValueError, match=r"key 2 b'b' repeats key 1"):
        write_hfile([b"a", b"b", b"b"], [b"1", b"2", b"3"], unique=True)


def test_hbase_keys_refused_in_file_info() -> None:
    with pytest.raises(ValueError, match="hfile.LASTKEY"):
        write_hfile([b"a"], [b"1"], file_info={b"hfile.LASTKEY": b""})


def test_multi_level_index_refused() -> None:
    keys = _keys(3000, 60)
    with pytest.raises(ValueError, match="multi-level block index"):
        write_hfile(keys, [b""] * len(keys), block_size=1)


def test_flipped_byte_fails_its_blocks_checksum() -> None:
    data = bytearray(write_hfile(_keys(200), [b"v" * 40] * 200, block_size=2000))
    data[HEADER_SIZE + 50] ^= 0x01
    r = HFileReader(bytes(data), name="x.hfile")
    with pytest.raises(
        CorruptHFile, match=r"corrupt HFile x.hfile: checksum mismatch in DATABLK\* block at offset 0"
    ):
        r.keys_and_values()
    assert r.get(_keys(200)[-1])  # the last block is intact


def test_flipped_byte_in_file_info_fails_on_open() -> None:
    data = bytearray(write_hfile([b"a"], [b"1"]))
    r = HFileReader(bytes(data))
    data[r.trailer.file_info_offset + HEADER_SIZE + 3] ^= 0xFF
    with pytest.raises(CorruptHFile, match="FILEINF2 block at offset"):
        HFileReader(bytes(data), name="f")


@pytest.mark.parametrize("cut", [1, 100, TRAILER_SIZE + 10])
def test_truncated_file(cut: int) -> None:
    data = write_hfile(_keys(50), [b"v"] * 50)
    with pytest.raises(CorruptHFile, match="corrupt HFile t.hfile"):
        HFileReader(data[:-cut], name="t.hfile").keys_and_values()
    with pytest.raises(CorruptHFile):
        HFileReader(data[cut:]).keys_and_values()


def test_unsupported_compression() -> None:
    with pytest.raises(ValueError, match="SNAPPY"):
        write_hfile([b"a"], [b"1"], compression="SNAPPY")


def test_crc32c_paths_agree() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    chunks = [os.urandom(n) for n in (4, 5, 255, 256, 257, 4097, 16384)]
    assert chunk_crc32c(chunks) == [crc32c(c) for c in chunks]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_cells_are_parsed_as_a_walk_would_parse_them(seed: int) -> None:
    """parse_cells' bulk paths against the cells built: rows of one length (the tail-split path)
    and of many (the walk), rows and values short enough to sit inline in a view, and values that
    hold a key tail of their own (the split's checks must send such a block to the walk)."""
    import random

    from hoodie_sink.table.format.hfile.cells import KEY_TAIL, build_cells, parse_cells

    rng = random.Random(seed)
    n = rng.randint(1, 400)
    uniform = seed % 2 == 1
    length = rng.randint(1, 40)
    rows = sorted(
        bytes(rng.randrange(256) for _ in range(length if uniform else rng.randint(0, 40))) for _ in range(n)
    )
    values = [
        (KEY_TAIL if rng.random() < 0.1 else b"")
        + bytes(rng.randrange(256) for _ in range(rng.randint(0, 30)))
        for _ in range(n)
    ]
    buf, offsets = build_cells(pa.array(rows, pa.binary()), pa.array(values, pa.binary()))
    got_rows, got_values = parse_cells(buf.to_pybytes()[: offsets[-1]])
    assert got_rows.to_pylist() == rows
    assert got_values.to_pylist() == values
