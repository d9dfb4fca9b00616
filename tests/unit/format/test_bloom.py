"""Tests for hoodie_sink.table.format.bloom: byte-exactness with Java-written footers and with slow
scalar references of Hadoop MurmurHash and Hudi's InternalDynamicBloomFilter."""

from __future__ import annotations

import base64
import itertools
import random
import struct
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie_sink.table.format.bloom import (
    BLOOM_FOOTER_KEY,
    BLOOM_TYPE_CODE_KEY,
    MAX_KEY_FOOTER_KEY,
    MIN_KEY_FOOTER_KEY,
    BloomFilter,
    bit_size,
    build_footer_metadata,
    min_max_record_keys,
    murmur_hash,
    num_hashes,
)
from tests.support.tables import fixture_zips

M32 = 0xFFFFFFFF


# ------------------------------------------------------------------------------ scalar references


def ref_murmur(data: bytes, seed: int) -> int:
    """Hadoop MurmurHash.hash(byte[], int) transcribed literally: Java ints, signed tail bytes."""
    m = 0x5BD1E995
    length = len(data)
    h = (seed ^ length) & M32
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & M32
        k ^= k >> 24
        k = (k * m) & M32
        h = (h * m) & M32
        h ^= k
    left = length & 3

    def signed(b: int) -> int:
        return b - 256 if b >= 128 else b

    if left:
        if left >= 3:
            h ^= (signed(data[length - 3]) << 16) & M32
        if left >= 2:
            h ^= (signed(data[length - 2]) << 8) & M32
        h ^= signed(data[length - 1]) & M32
        h = (h * m) & M32
    h ^= h >> 13
    h = (h * m) & M32
    h ^= h >> 15
    return h - 2**32 if h >= 2**31 else h


def java_rem(a: int, b: int) -> int:
    r = abs(a) % b
    return -r if a < 0 else r


def ref_positions(key: str, vector_size: int, nb_hash: int) -> list[int]:
    """HashFunction.hash: each round seeded with the previous result, abs(h % vectorSize)."""
    data = key.encode("utf-8")
    out, seed = [], 0
    for _ in range(nb_hash):
        seed = ref_murmur(data, seed)
        out.append(abs(java_rem(seed, vector_size)))
    return out


def fast_positions(keys: list[str], vector_size: int, nb_hash: int) -> list[list[int]]:
    """Same as ref_positions for many keys, using the (separately tested) vectorised murmur_hash."""
    arr = pa.array(keys, pa.string())
    seeds = np.zeros(len(keys), np.int32)
    cols = []
    for _ in range(nb_hash):
        seeds = murmur_hash(arr, seeds)
        cols.append(np.abs(np.fmod(seeds, np.int32(vector_size))))
    return np.stack(cols, axis=1).tolist()


class RefDynamicFilter:
    """InternalDynamicBloomFilter.add/getActiveStandardBF/write, one key at a time, as in Java."""

    def __init__(self, vector_size: int, nb_hash: int, nr: int, max_nr: int) -> None:
        self.vs, self.nb, self.nr, self.max_nr = vector_size, nb_hash, nr, max_nr
        self.rows = [bytearray((vector_size + 7) // 8)]
        self.cur = 0
        self.reached_max = False
        self.cur_matrix_index = 0

    def _active(self) -> bytearray | None:
        if self.reached_max:
            row = self.rows[self.cur_matrix_index % len(self.rows)]
            self.cur_matrix_index += 1
            return row
        if self.cur >= self.nr and len(self.rows) * self.nr < self.max_nr:
            return None
        if self.cur >= self.nr and len(self.rows) * self.nr >= self.max_nr:
            self.reached_max = True
            return self.rows[0]
        return self.rows[-1]

    def add(self, positions: list[int]) -> None:
        row = self._active()
        if row is None:
            self.rows.append(bytearray((self.vs + 7) // 8))
            row = self.rows[-1]
            self.cur = 0
        for p in positions:
            row[p >> 3] |= 1 << (p & 7)
        self.cur += 1

    def serialize(self) -> bytes:
        header = struct.pack(">iibi", -1, self.nb, 1, self.vs)
        out = [header, struct.pack(">iii", self.nr, self.cur, len(self.rows))]
        for row in self.rows:
            out += [header, bytes(row)]
        return b"".join(out)


# ------------------------------------------------------------------------------ Java-written fixtures


def _fixture_members() -> list:
    params = []
    for zpath in fixture_zips():
        with zipfile.ZipFile(zpath) as zf:
            for name in zf.namelist():
                if name.endswith(".parquet") and "__MACOSX" not in name:
                    params.append(pytest.param(zpath.name, name, id=f"{zpath.stem}:{Path(name).name}"))
    return params


@pytest.fixture(scope="module")
def unzipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hudi-fixtures")
    for zpath in fixture_zips():
        with zipfile.ZipFile(zpath) as zf:
            members = [n for n in zf.namelist() if "__MACOSX" not in n]
            zf.extractall(root / zpath.stem, members=members)
    return root


@pytest.mark.compat
@pytest.mark.parametrize(("zip_name", "member"), _fixture_members())
def test_java_written_footer_reproduced(unzipped: Path, zip_name: str, member: str) -> None:
    path = unzipped / Path(zip_name).stem / member
    pf = pq.ParquetFile(path)
    footer = {k.decode(): v.decode() for k, v in (pf.metadata.metadata or {}).items()}
    keys = pf.read(columns=["_hoodie_record_key"]).column(0)  # file order = Java's add order

    built = build_footer_metadata(keys)
    assert built[BLOOM_FOOTER_KEY] == footer[BLOOM_FOOTER_KEY]
    assert built[BLOOM_TYPE_CODE_KEY] == footer[BLOOM_TYPE_CODE_KEY] == "DYNAMIC_V0"
    assert built[MIN_KEY_FOOTER_KEY] == footer[MIN_KEY_FOOTER_KEY]
    assert built[MAX_KEY_FOOTER_KEY] == footer[MAX_KEY_FOOTER_KEY]

    parsed = BloomFilter.from_footer(footer[BLOOM_FOOTER_KEY], footer.get(BLOOM_TYPE_CODE_KEY))
    assert parsed.type_code == "DYNAMIC_V0"
    assert parsed.might_contain(keys).all()
    assert parsed.to_base64() == footer[BLOOM_FOOTER_KEY]


def test_fixture_tables_have_base_files() -> None:
    assert len(_fixture_members()) >= 10


# ------------------------------------------------------------------------------ MurmurHash

KNOWN = ["", "a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg", "abcdefgh", "abcdefghi",
         "é", "aé", "é€", "€", "x€", "日本語", "\U0001f600", "a\U0001f600", "\x7f\x80", "uuid-ÿÿÿ"]  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, -1, 0x5BD1E995, -(2**31), 2**31 - 1])
def test_murmur_known_vectors(seed: int) -> None:
    arr = pa.array(KNOWN)
    got = murmur_hash(arr, np.full(len(KNOWN), seed, np.int64).astype(np.int32))
    assert got.dtype == np.int32
    assert got.tolist() == [ref_murmur(k.encode(), seed) for k in KNOWN]


def test_murmur_fixed_values_and_sign_extension() -> None:
    # Regression anchors (Hadoop semantics), plus proof that the tail is sign-extended: a textbook
    # MurmurHash2 (unsigned tail) differs for "é" (UTF-8 c3 a9).
    got = murmur_hash(pa.array(["", "a", "é"]), np.zeros(3, np.int32)).tolist()
    assert got == [ref_murmur(b"", 0), ref_murmur(b"a", 0), ref_murmur("é".encode(), 0)]
    assert got[0] == 0  # seed 0, length 0: the finaliser maps 0 to 0

    def unsigned_tail(data: bytes) -> int:
        m, h = 0x5BD1E995, len(data)
        h ^= data[1] << 8
        h ^= data[0]
        h = (h * m) & M32
        h ^= h >> 13
        h = (h * m) & M32
        h ^= h >> 15
        return h - 2**32 if h >= 2**31 else h

    assert got[2] != unsigned_tail("é".encode())


def _random_keys(rng: random.Random, n: int) -> list[str]:
    alphabet = "abcXYZ019-_/:" + "éßø€日本\uffff\ue000" + "\U0001f600\U00010000"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 41))) for _ in range(n)]


def test_murmur_vectorised_equals_reference_on_random_keys() -> None:
    rng = random.Random(7)
    keys = _random_keys(rng, 3000)
    seeds = np.array([rng.randint(-(2**31), 2**31 - 1) for _ in keys], dtype=np.int32)
    expected = [ref_murmur(k.encode(), int(s)) for k, s in zip(keys, seeds, strict=True)]
    assert murmur_hash(pa.array(keys), seeds).tolist() == expected
    # uint32 seeds are the same 32-bit patterns
    assert murmur_hash(pa.array(keys), seeds.view(np.uint32)).tolist() == expected
    # large_string, chunked and sliced inputs hash the same bytes
    assert murmur_hash(pa.array(keys, pa.large_string()), seeds).tolist() == expected
    chunked = pa.chunked_array([pa.array(keys[:1000]), pa.array(keys[1000:])])
    assert murmur_hash(chunked, seeds).tolist() == expected
    sliced = pa.array(["pad"] * 5 + keys + ["pad"])[5 : 5 + len(keys)]
    assert murmur_hash(sliced, seeds).tolist() == expected


def test_murmur_rejects_nulls() -> None:
    with pytest.raises(ValueError, match="null"):
        murmur_hash(pa.array(["a", None]), np.zeros(2, np.int32))


# ------------------------------------------------------------------------------ filter structure


def test_default_sizing_and_two_key_sample_prefix() -> None:
    assert bit_size(60000, 1e-9) == 2587966
    assert num_hashes(2587966, 60000) == 30
    meta = build_footer_metadata(pa.array(["k1", "k2"]))
    # docs/hudi/format.md#bloom-filters: header -1/30/1/2587966, nr 60000, currentNbRecord 2, as in
    # Java-written 2-key files.
    assert meta[BLOOM_FOOTER_KEY].startswith("/////wAAAB4BACd9PgAA6mAAAAAC")
    raw = base64.b64decode(meta[BLOOM_FOOTER_KEY])
    assert len(raw) == 13 + 12 + 13 + (2587966 + 7) // 8
    assert meta[MIN_KEY_FOOTER_KEY] == "k1" and meta[MAX_KEY_FOOTER_KEY] == "k2"


@pytest.mark.parametrize(
    ("num_entries", "fpp", "max_entries", "n_keys"),
    [
        (20, 0.05, 70, 230),  # rows grow to ceil(70/20) = 4, then round-robin
        (20, 0.05, 60, 150),  # max a multiple of nr
        (20, 0.05, 20, 75),  # never grows: round-robin over one row after 20 keys
        (20, 0.05, 5, 40),  # max below nr
        (16, 0.01, 100000, 300),  # keeps growing (bound far away)
        (20, 0.05, 70, 20),  # exactly one full row, no new row yet
    ],
)
def test_dynamic_growth_and_round_robin_equal_scalar_reference(
    num_entries: int, fpp: float, max_entries: int, n_keys: int
) -> None:
    rng = random.Random(num_entries * 1000 + n_keys)
    keys = [k + str(i) for i, k in enumerate(_random_keys(rng, n_keys))]  # non-empty
    vs, nb = bit_size(num_entries, fpp), num_hashes(bit_size(num_entries, fpp), num_entries)
    ref = RefDynamicFilter(vs, nb, num_entries, max_entries)
    for k in keys:
        ref.add(ref_positions(k, vs, nb))  # fully independent pure-Python path

    whole = BloomFilter.new_dynamic(num_entries, fpp, max_entries)
    whole.add_keys(pa.array(keys))
    assert whole.serialize() == ref.serialize()

    # Adding in several batches (split points inside rows and inside the round-robin phase).
    parts = BloomFilter.new_dynamic(num_entries, fpp, max_entries)
    cuts = sorted({0, n_keys, *(rng.randint(0, n_keys) for _ in range(4)), min(n_keys, num_entries)})
    for a, b in itertools.pairwise(cuts):
        parts.add_keys(pa.array(keys[a:b]))
    assert parts.serialize() == ref.serialize()
    assert BloomFilter.from_footer(whole.to_base64(), "DYNAMIC_V0").might_contain(pa.array(keys)).all()


def test_dynamic_defaults_beyond_max_entries_equal_reference() -> None:
    # 125000 keys with the defaults: row 0 takes 0..59999, row 1 60000..119999, key 120000 switches
    # to round-robin starting at row 0 (which gets two keys in a row), then 1, 0, 1, ...
    n = 125_000
    keys = [f"{i:08x}-{(i * 2654435761) % 2**32:08x}" for i in range(n)]
    ref = RefDynamicFilter(2587966, 30, 60000, 100000)
    for pos in fast_positions(keys, 2587966, 30):
        ref.add(pos)
    assert len(ref.rows) == 2 and ref.reached_max and ref.cur == 60000 + 5000

    bloom = BloomFilter.new_dynamic()
    bloom.add_keys(pa.chunked_array([pa.array(keys[:70000]), pa.array(keys[70000:])]))
    assert bloom.num_rows == 2
    assert bloom.serialize() == ref.serialize()
    assert bloom.might_contain(pa.array(keys)).all()


def test_deserialised_filter_keeps_java_state_when_adding() -> None:
    # Java serialises nr and currentNbRecord only: after readFields maxNr = 0, so the next full row
    # triggers round-robin instead of growth.  Our from_footer must behave the same.
    keys = [f"key-{i}" for i in range(90)]
    vs, nb = bit_size(20, 0.05), num_hashes(bit_size(20, 0.05), 20)
    ref = RefDynamicFilter(vs, nb, 20, 70)
    for k in keys[:30]:
        ref.add(ref_positions(k, vs, nb))
    ref.max_nr = 0
    for k in keys[30:]:
        ref.add(ref_positions(k, vs, nb))

    first = BloomFilter.new_dynamic(20, 0.05, 70)
    first.add_keys(pa.array(keys[:30]))
    again = BloomFilter.from_footer(first.to_base64(), "DYNAMIC_V0")
    again.add_keys(pa.array(keys[30:]))
    assert again.serialize() == ref.serialize()


def test_simple_filter_round_trip() -> None:
    keys = pa.array([f"id-{i}" for i in range(500)])
    simple = BloomFilter.new_simple(1000, 0.01)
    simple.add_keys(keys)
    assert simple.type_code == "SIMPLE"
    vs, nb = simple.vector_size, simple.nb_hash
    bits = bytearray((vs + 7) // 8)
    for k in keys.to_pylist():
        for p in ref_positions(k, vs, nb):
            bits[p >> 3] |= 1 << (p & 7)
    assert simple.serialize() == struct.pack(">iibi", -1, nb, 1, vs) + bytes(bits)
    for code in (None, "SIMPLE"):
        parsed = BloomFilter.from_footer(simple.to_base64(), code)
        assert parsed.type_code == "SIMPLE"
        assert parsed.serialize() == simple.serialize()
        assert parsed.might_contain(keys).all()


def test_false_positive_rate() -> None:
    members = pa.array([f"member-{i}" for i in range(60000)])
    others = pa.array([f"other-{i}" for i in range(200000)])
    bloom = BloomFilter.new_dynamic()
    bloom.add_keys(members)
    assert bloom.might_contain(members).all()
    assert bloom.might_contain(others).sum() <= 2  # fpp 1e-9

    small = BloomFilter.new_dynamic(1000, 0.01, 1000)
    small.add_keys(members[:1000])
    rate = small.might_contain(others).mean()
    assert 0.002 < rate < 0.03


def test_might_contain_keeps_input_order_with_mixed_lengths() -> None:
    bloom = BloomFilter.new_dynamic(100, 0.001, 100)
    present = ["a", "bbbbbbbbbbbbbbbbbbbbbb", "cc", "ddddd"]
    bloom.add_keys(pa.array(present))
    probe = ["zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", "ddddd", "nope", "a", "q" * 9, "cc"]
    assert bloom.might_contain(pa.array(probe)).tolist() == [False, True, False, True, False, True]


def test_errors() -> None:
    bloom = BloomFilter.new_dynamic()
    with pytest.raises(ValueError, match="null"):
        bloom.add_keys(pa.array(["a", None]))
    with pytest.raises(ValueError, match="empty"):
        bloom.add_keys(pa.array(["a", ""]))
    with pytest.raises(TypeError):
        bloom.add_keys(pa.array([1, 2]))
    with pytest.raises(Exception, match="type code"):
        BloomFilter.from_footer(bloom.to_base64(), "DYNAMIC_V9")
    with pytest.raises(Exception, match="truncated"):
        BloomFilter.from_footer(bloom.to_base64()[:200], "DYNAMIC_V0")


# ------------------------------------------------------------------------------ min / max keys


def test_min_max_follow_java_utf16_order() -> None:
    # UTF-8/code point order puts U+1F600 after U+E000; Java's UTF-16 order puts it before (D83D).
    keys = ["a", "\U0001f600", "\ue000", "b\uffff", "b\U00010000"]
    assert min_max_record_keys(pa.array(keys)) == ("a", "\ue000")
    assert min_max_record_keys(pa.array(["\U0001f600x", "\ue000"])) == ("\U0001f600x", "\ue000")

    rng = random.Random(3)
    for _ in range(50):
        sample = [k for k in _random_keys(rng, 30) if k]
        java_sorted = sorted(sample, key=lambda s: s.encode("utf-16-be"))
        assert min_max_record_keys(pa.array(sample)) == (java_sorted[0], java_sorted[-1])


def test_footer_metadata_without_keys() -> None:
    meta = build_footer_metadata(pa.array([], pa.string()))
    assert set(meta) == {BLOOM_FOOTER_KEY, BLOOM_TYPE_CODE_KEY}  # Java omits min/max when no key
