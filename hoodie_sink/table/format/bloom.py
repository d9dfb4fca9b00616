"""Hudi bloom filters, byte-exact with Apache Hudi 0.14/0.15 (Java), built with vectorised numpy.

Java classes mirrored (``org.apache.hudi.common.bloom`` unless noted):

* ``HoodieDynamicBoundedBloomFilter`` / ``InternalDynamicBloomFilter`` -- type code ``DYNAMIC_V0``: a
  matrix of standard filters ("rows"); a row takes ``nr`` keys, a new row is started while
  ``rows * nr < maxNr``, after that keys go round-robin over the existing rows (see ``_assign_rows``).
* ``SimpleBloomFilter`` / ``InternalBloomFilter`` (Hadoop ``org.apache.hadoop.util.bloom.BloomFilter``)
  -- type code ``SIMPLE``: one bit vector.
* ``InternalFilter`` -- the common header: int32 -1 (version), int32 nbHash, int8 hashType, int32 vectorSize.
* ``HashFunction`` -- nbHash rounds of MurmurHash, round i seeded with the 32-bit result of round i-1
  (round 0 with 0); position = ``abs(h % vectorSize)`` with Java's truncating remainder.
* ``BloomFilterUtils`` -- bit size and number of hashes from (numEntries, fpp).
* Hadoop ``org.apache.hadoop.util.hash.MurmurHash`` -- 32-bit MurmurHash2 whose tail bytes are
  *sign-extended* Java bytes (differs from textbook MurmurHash2 for bytes >= 0x80).
* ``org.apache.hudi.avro.HoodieBloomFilterWriteSupport`` -- the four Parquet footer entries.

Format reference: docs/hudi/format.md#footer-metadata and docs/hudi/format.md#bloom-filters.

Performance: keys come as Arrow string arrays; nothing loops per key in Python.  The seed-independent
part of MurmurHash (mixing every 4-byte word, the tail value) is computed once per key, so each of the
30 rounds costs two uint32 operations per word plus the finaliser.  Python loops run only over word
indices (max key length / 4), hash rounds and filter rows.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieKeyError, HoodieTableError
from hoodie_sink.table.arrow_util import as_strings

BLOOM_FOOTER_KEY = "org.apache.hudi.bloomfilter"
BLOOM_TYPE_CODE_KEY = "hoodie_bloom_filter_type_code"
MIN_KEY_FOOTER_KEY = "hoodie_min_record_key"
MAX_KEY_FOOTER_KEY = "hoodie_max_record_key"

TYPE_DYNAMIC_V0 = "DYNAMIC_V0"
TYPE_SIMPLE = "SIMPLE"

# Hadoop/Hudi Hash.MURMUR_HASH; the only hash type Hudi writes (JENKINS_HASH = 0 is not supported).
MURMUR_HASH = 1
_FILTER_VERSION = -1
_M = np.uint32(0x5BD1E995)
_HEADER = struct.Struct(">iibi")  # InternalFilter.write: version, nbHash, hashType (byte), vectorSize
_DYNAMIC_FIELDS = struct.Struct(">iii")  # nr, currentNbRecord, matrix.length

KeysLike: TypeAlias = pa.Array | pa.ChunkedArray


def bit_size(num_entries: int, fpp: float) -> int:
    """BloomFilterUtils.getBitSize; same float operation order as Java so ceil() lands identically."""
    log2_squared = math.log(2) * math.log(2)
    return math.ceil(num_entries * (-math.log(fpp) / log2_squared))


def num_hashes(vector_size: int, num_entries: int) -> int:
    """BloomFilterUtils.getNumHashes."""
    return math.ceil(math.log(2) * vector_size / num_entries)


def _i32(value: int) -> int:
    """Wrap like a Java int (the dynamic filter's counters are ints)."""
    return (value + 2**31) % 2**32 - 2**31


# --------------------------------------------------------------------------------------------- keys


def _normalise(keys: KeysLike | Iterable[str]) -> pa.Array:
    """One contiguous utf8/large_utf8 array without nulls (Java throws NullPointerException on null keys)."""
    if isinstance(keys, pa.Array) and pa.types.is_null(keys.type) and len(keys):
        raise HoodieKeyError(f"{len(keys)} null record key(s) given to the bloom filter.")
    keys = as_strings(keys, "record keys")
    if keys.null_count:
        raise HoodieKeyError(
            f"{keys.null_count} null record key(s) given to the bloom filter. "
            "Help: every record needs a non-null `_hoodie_record_key`."
        )
    return keys


def _buffers(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(data bytes, int64 offsets of this array's n+1 boundaries), honouring slices (keys.offset)."""
    n = len(keys)
    off_type = np.int64 if pa.types.is_large_string(keys.type) else np.int32
    bufs = keys.buffers()
    if n == 0 or bufs[1] is None:
        return np.zeros(0, np.uint8), np.zeros(n + 1, np.int64)
    offsets = np.frombuffer(bufs[1], dtype=off_type)[keys.offset : keys.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return data, offsets


@dataclass
class _PreparedKeys:
    """Seed-independent MurmurHash state for a batch of keys, kept in `order` (sorted by word count)."""

    n: int
    order: np.ndarray | None  # position i of the prepared batch is input key order[i]; None = identity
    lengths: np.ndarray  # uint32 byte lengths (the `seed ^ length` term)
    words: list[tuple[int, np.ndarray]]  # per word index j: (first key having word j, mixed words)
    tail: np.ndarray | None  # uint32 xor of the sign-extended tail bytes (0 for keys without a tail)
    tail_mult: np.ndarray | np.uint32 | None  # m for keys with a tail, 1 for the others
    empty: bool  # some key has zero bytes (Java's HashFunction rejects those)

    def murmur(self, seeds: np.ndarray) -> np.ndarray:
        """One MurmurHash pass for all keys; `seeds` (uint32) and the result are in prepared order."""
        h = seeds ^ self.lengths
        for start, mixed in self.words:
            # Keys are sorted by word count, so the keys that still have word j are a suffix.
            hs = h[start:]
            hs *= _M
            hs ^= mixed
        if self.tail is not None:
            h ^= self.tail
            h *= self.tail_mult
        tmp = np.empty_like(h)
        np.right_shift(h, 13, out=tmp)
        h ^= tmp
        h *= _M
        np.right_shift(h, 15, out=tmp)
        h ^= tmp
        return np.asarray(h)

    def to_prepared_order(self, values: np.ndarray) -> np.ndarray:
        return values if self.order is None else values[self.order]

    def to_input_order(self, values: np.ndarray) -> np.ndarray:
        if self.order is None:
            return values
        out = np.empty_like(values)
        out[self.order] = values
        return out


def _prepare(keys: pa.Array) -> _PreparedKeys:
    n = len(keys)
    data, offsets = _buffers(keys)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    n_words = lengths >> 2
    order = None
    if n and n_words.min() != n_words.max():
        max_words = int(n_words.max())
        # A stable sort of small ints is a radix sort in numpy: cheap even for millions of keys.
        sort_keys = n_words.astype(np.uint16) if max_words < 2**16 else n_words
        order = np.argsort(sort_keys, kind="stable")
        # Copy the strings into sorted order (one memcpy per key) so that the word gathers below walk
        # memory forwards; gathering words through `order` directly is cache-miss bound (~3x slower).
        data, offsets = _buffers(keys.take(pa.array(order)))
        starts = offsets[:-1]
        lengths = offsets[1:] - starts
        n_words = lengths >> 2
    max_words = int(n_words[-1]) if n else 0

    words: list[tuple[int, np.ndarray]] = []
    if max_words:
        # A uint32 view of the data at every byte address (stride 1, unaligned reads are fine in numpy)
        # turns "little-endian word at byte a" into one gather.  The signed top byte Java reads there
        # is shifted out of the int, so an unsigned little-endian load is exact.
        sliding = np.ndarray(shape=(len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))
        first_key = np.searchsorted(n_words, np.arange(max_words), side="right")
        for j in range(max_words):
            s = int(first_key[j])
            k = sliding[starts[s:] + 4 * j]
            k *= _M
            k ^= k >> 24
            k *= _M
            words.append((s, k))

    tail = tail_mult = None
    rem = lengths & 3
    has_tail = rem != 0
    if has_tail.any():
        # Java reads the tail through `(int) byte`: sign extension matters for bytes >= 0x80.
        signed = data.view(np.int8)
        ends = starts + lengths
        tail_i32 = np.zeros(n, np.int32)
        for back, shift in ((3, 16), (2, 8), (1, 0)):
            sel = rem >= back
            tail_i32[sel] ^= signed[ends[sel] - back].astype(np.int32) << shift
        tail = tail_i32.view(np.uint32)
        tail_mult = _M if has_tail.all() else np.where(has_tail, _M, np.uint32(1)).astype(np.uint32)
    return _PreparedKeys(
        n=n,
        order=order,
        lengths=lengths.astype(np.uint32),
        words=words,
        tail=tail,
        tail_mult=tail_mult,
        empty=bool((lengths == 0).any()),
    )


def murmur_hash(keys: KeysLike, seeds: np.ndarray | int) -> np.ndarray:
    """Hadoop MurmurHash (32-bit, sign-extended tail) of the UTF-8 bytes of every key, one seed per key.

    `seeds` is an int32/uint32 array (or a scalar for all keys); the result is int32, like Java's int.
    """
    arr = _normalise(keys)
    prepared = _prepare(arr)
    seed_arr = np.asarray(seeds)
    if seed_arr.dtype.kind not in "iu":
        raise TypeError(f"seeds must be integers, got {seed_arr.dtype}")
    # Reinterpret as 32-bit two's complement, so int32 -1 and uint32 0xFFFFFFFF are the same seed.
    seed_u32 = (np.broadcast_to(seed_arr, (prepared.n,)).astype(np.int64) & 0xFFFFFFFF).astype(np.uint32)
    h = prepared.murmur(prepared.to_prepared_order(seed_u32))
    return prepared.to_input_order(h).view(np.int32)


# ------------------------------------------------------------------------------------------ filter


class BloomFilter:
    """A Hudi bloom filter: DYNAMIC_V0 (bounded dynamic matrix of rows) or SIMPLE (one row).

    Bits are held as one bool matrix of shape (rows, vectorSize): scatter/gather by position is
    the fast numpy path, and packing to Java's LSB-first bytes happens only on serialisation.
    """

    def __init__(
        self,
        type_code: str,
        vector_size: int,
        nb_hash: int,
        hash_type: int = MURMUR_HASH,
        *,
        bits: np.ndarray | None = None,
        nr: int = 0,
        current_nb_record: int = 0,
        max_nr: int = 0,
    ) -> None:
        if type_code not in (TYPE_DYNAMIC_V0, TYPE_SIMPLE):
            raise ValueError(f"unknown bloom filter type code {type_code!r}")
        if vector_size <= 0 or nb_hash <= 0:
            raise ValueError(
                f"bloom filter needs vectorSize > 0 and nbHash > 0, got {vector_size}, {nb_hash}"
            )
        self._type_code = type_code
        self.vector_size = vector_size
        self.nb_hash = nb_hash
        self.hash_type = hash_type
        self._bits = bits if bits is not None else np.zeros((1, vector_size), dtype=bool)
        # InternalDynamicBloomFilter state.  Only nr and currentNbRecord are serialised: a filter read
        # back from a footer has maxNr = 0, reachedMax = false, curMatrixIndex = 0, exactly as in Java.
        self._nr = nr
        self._current_nb_record = current_nb_record
        self._max_nr = max_nr
        self._reached_max = False
        self._cur_matrix_index = 0

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def new_dynamic(
        cls, num_entries: int = 60000, fpp: float = 1e-9, max_entries: int = 100000
    ) -> BloomFilter:
        """HoodieDynamicBoundedBloomFilter(numEntries, errorRate, MURMUR_HASH, maxNoOfEntries)."""
        if num_entries <= 0 or not 0.0 < fpp < 1.0:
            raise ValueError(f"bloom filter needs num_entries > 0 and 0 < fpp < 1, got {num_entries}, {fpp}")
        vs = bit_size(num_entries, fpp)
        return cls(TYPE_DYNAMIC_V0, vs, num_hashes(vs, num_entries), nr=num_entries, max_nr=max_entries)

    @classmethod
    def new_simple(cls, num_entries: int = 60000, fpp: float = 1e-9) -> BloomFilter:
        """SimpleBloomFilter(numEntries, errorRate, MURMUR_HASH)."""
        if num_entries <= 0 or not 0.0 < fpp < 1.0:
            raise ValueError(f"bloom filter needs num_entries > 0 and 0 < fpp < 1, got {num_entries}, {fpp}")
        vs = bit_size(num_entries, fpp)
        return cls(TYPE_SIMPLE, vs, num_hashes(vs, num_entries))

    def grown_copy(self, max_entries: int) -> BloomFilter:
        """A copy to add more keys to, as a writer that keeps a file's keys would.

        Bloom filters only ever answer "maybe" for a key they were given, so the filter of a file
        version, plus the keys a merge inserts, is a valid filter of the merged version: rows
        a merge dropped only leave bits that cost a little pruning, never correctness.  The
        copy may grow new rows up to `max_entries` (the dynamic filter's bound, not serialised)."""
        return BloomFilter(
            self._type_code, self.vector_size, self.nb_hash, self.hash_type,
            bits=self._bits.copy(), nr=self._nr, current_nb_record=self._current_nb_record, max_nr=max_entries,
        )  # fmt: skip

    def same_shape(self, other: BloomFilter) -> bool:
        """Same type, size, hash count and row capacity: keys added to one land as in the other."""
        return (self._type_code, self.vector_size, self.nb_hash, self.hash_type, self._nr) == (
            other._type_code, other.vector_size, other.nb_hash, other.hash_type, other._nr,
        )  # fmt: skip

    @property
    def type_code(self) -> str:
        return self._type_code

    @property
    def num_rows(self) -> int:
        return int(self._bits.shape[0])

    # -- adding and probing --------------------------------------------------------------------

    def _assign_rows(self, count: int) -> np.ndarray | int:
        """Row of each of `count` new keys (int = all in that row), advancing the dynamic state.

        Replays InternalDynamicBloomFilter.add/getActiveStandardBF in whole runs instead of per key:
        a key goes to the last row until it holds `nr` keys; then, if rows*nr < maxNr, a new row is
        appended (lazily, when that next key arrives) and the count restarts at 0; otherwise reachedMax
        is set and that key goes to row 0, after which keys cycle rows curMatrixIndex++ % rows
        (so row 0 receives two keys in a row at the switch, as in Java).  currentNbRecord keeps
        counting through the round-robin phase and is serialised as such.
        """
        if self._type_code == TYPE_SIMPLE:
            return 0
        pieces: list[np.ndarray] = []
        single: int | None = None
        done = 0
        while done < count:
            rows = self.num_rows
            if self._reached_max:
                k = count - done
                cyc = (self._cur_matrix_index + np.arange(k, dtype=np.int64)) % rows
                pieces.append(cyc)
                self._cur_matrix_index += k
                self._current_nb_record = _i32(self._current_nb_record + k)
                done += k
                continue
            if rows == 0:
                raise HoodieTableError("cannot add keys to a dynamic bloom filter that has no rows")
            if self._current_nb_record >= self._nr:
                if _i32(rows * self._nr) < self._max_nr:
                    self._bits = np.concatenate([self._bits, np.zeros((1, self.vector_size), dtype=bool)])
                    self._current_nb_record = 0
                    continue
                self._reached_max = True
                pieces.append(np.zeros(1, np.int64))
                self._current_nb_record = _i32(self._current_nb_record + 1)
                done += 1
                continue
            k = min(count - done, self._nr - self._current_nb_record)
            last = self.num_rows - 1
            if not pieces and k == count:
                single = last
            pieces.append(np.full(k, last, dtype=np.int64))
            self._current_nb_record += k
            done += k
        if single is not None:
            return single
        return np.concatenate(pieces) if pieces else 0

    def _positions(self, prepared: _PreparedKeys) -> Iterator[np.ndarray]:
        """Yield the bit positions (int32, prepared order) of each hash round: HashFunction.hash."""
        seeds = np.zeros(prepared.n, np.uint32)
        vs = np.int32(self.vector_size)
        for _ in range(self.nb_hash):
            seeds = prepared.murmur(seeds)
            # Java `Math.abs(h % vectorSize)`: truncating remainder, |result| < vectorSize.
            yield np.abs(np.fmod(seeds.view(np.int32), vs))

    def _prepare_checked(self, keys: KeysLike | Iterable[str]) -> _PreparedKeys:
        if self.hash_type != MURMUR_HASH:
            raise HoodieTableError(
                f"bloom filter hash type {self.hash_type} is not supported (only MurmurHash)"
            )
        prepared = _prepare(_normalise(keys))
        if prepared.empty:
            # Hudi's HashFunction throws IllegalArgumentException("key length must be > 0").
            raise HoodieKeyError(
                "empty record key given to the bloom filter. Help: record keys must be non-empty."
            )
        return prepared

    def add_keys(self, keys: KeysLike | Iterable[str]) -> None:
        """Add keys in array order; the result equals Java adding them one by one in that order."""
        prepared = self._prepare_checked(keys)
        if prepared.n == 0:
            return
        rows = self._assign_rows(prepared.n)
        if isinstance(rows, int):
            target = self._bits[rows]
            for pos in self._positions(prepared):
                target[pos] = True
            return
        # Several rows: scatter into the flattened matrix at row * vectorSize + position.
        row_base = prepared.to_prepared_order(rows) * self.vector_size
        flat = self._bits.reshape(-1)
        for pos in self._positions(prepared):
            flat[row_base + pos] = True

    def might_contain(self, keys: KeysLike | Iterable[str]) -> np.ndarray:
        """Vectorised mightContain: a key matches if every one of its bits is set in some row."""
        prepared = self._prepare_checked(keys)
        hits = np.ones((self.num_rows, prepared.n), dtype=bool)
        for pos in self._positions(prepared):
            for r in range(self.num_rows):
                hits[r] &= self._bits[r][pos]
        return prepared.to_input_order(np.asarray(hits.any(axis=0)))

    # -- serialisation -------------------------------------------------------------------------

    def _header(self) -> bytes:
        return _HEADER.pack(_FILTER_VERSION, self.nb_hash, self.hash_type, self.vector_size)

    def serialize(self) -> bytes:
        """The bytes Java's write(DataOutput) produces (bit i -> byte i/8, mask 1 << i%8)."""
        parts = [self._header()]
        if self._type_code == TYPE_DYNAMIC_V0:
            parts.append(_DYNAMIC_FIELDS.pack(_i32(self._nr), _i32(self._current_nb_record), self.num_rows))
            for row in self._bits:
                parts.append(self._header())
                parts.append(np.packbits(row, bitorder="little").tobytes())
        else:
            parts.append(np.packbits(self._bits[0], bitorder="little").tobytes())
        return b"".join(parts)

    def to_base64(self) -> str:
        """The footer value: standard Base64 with padding (Hudi Base64CodecUtil.encode)."""
        return base64.b64encode(self.serialize()).decode("ascii")

    @classmethod
    def from_footer(cls, value_base64: str, type_code: str | None) -> BloomFilter:
        """Parse a footer value; type_code None means SIMPLE (BaseFileUtils.readBloomFilterFromMetadata)."""
        code = TYPE_SIMPLE if type_code in (None, "") else type_code
        if code not in (TYPE_SIMPLE, TYPE_DYNAMIC_V0):
            raise HoodieTableError(f"unknown bloom filter type code {type_code!r} in Parquet footer")
        try:
            raw = base64.b64decode(value_base64, validate=True)
        except (ValueError, TypeError) as exc:
            raise HoodieTableError(f"bloom filter footer value is not Base64: {exc}") from exc
        reader = _Reader(raw)
        nb_hash, hash_type, vs = reader.header()
        if code == TYPE_SIMPLE:
            return cls(TYPE_SIMPLE, vs, nb_hash, hash_type, bits=reader.bits(vs)[None, :])
        nr, current, n_rows = reader.unpack(_DYNAMIC_FIELDS)
        if n_rows < 0:
            raise HoodieTableError(f"corrupt dynamic bloom filter: {n_rows} rows")
        bits = np.zeros((n_rows, vs), dtype=bool)
        for r in range(n_rows):
            if reader.header() != (nb_hash, hash_type, vs):
                # Java lets rows differ from the outer header but never writes it that way.
                raise HoodieTableError("dynamic bloom filter row header differs from the filter header")
            bits[r] = reader.bits(vs)
        return cls(TYPE_DYNAMIC_V0, vs, nb_hash, hash_type, bits=bits, nr=nr, current_nb_record=current)


class _Reader:
    """Big-endian DataInputStream over the decoded footer bytes."""

    def __init__(self, raw: bytes) -> None:
        self._raw = raw
        self._pos = 0

    def unpack(self, fmt: struct.Struct) -> tuple[Any, ...]:
        if self._pos + fmt.size > len(self._raw):
            raise HoodieTableError("bloom filter footer value is truncated")
        values = fmt.unpack_from(self._raw, self._pos)
        self._pos += fmt.size
        return values

    def header(self) -> tuple[int, int, int]:
        (version,) = self.unpack(struct.Struct(">i"))
        if version > 0:
            # Pre-versioned Hadoop format: the int is nbHash and the hash is Jenkins.
            nb_hash, hash_type = version, 0
        elif version == _FILTER_VERSION:
            nb_hash, hash_type = self.unpack(struct.Struct(">ib"))
        else:
            raise HoodieTableError(f"unsupported bloom filter version {version}")
        (vs,) = self.unpack(struct.Struct(">i"))
        if vs <= 0 or nb_hash <= 0:
            raise HoodieTableError(f"corrupt bloom filter header: vectorSize={vs}, nbHash={nb_hash}")
        return nb_hash, hash_type, vs

    def bits(self, vector_size: int) -> np.ndarray:
        n_bytes = (vector_size + 7) // 8
        if self._pos + n_bytes > len(self._raw):
            raise HoodieTableError("bloom filter footer value is truncated")
        chunk = np.frombuffer(self._raw, dtype=np.uint8, count=n_bytes, offset=self._pos)
        self._pos += n_bytes
        return np.unpackbits(chunk, bitorder="little")[:vector_size].astype(bool)


# ------------------------------------------------------------------------------------------ footer

# Byte translation under which memcmp order of UTF-8 equals Java String.compareTo (UTF-16 code unit)
# order: only lead bytes need moving.  4-byte leads F0-F4 (supplementary, surrogates D800-DBFF) must
# sort after E0-ED (U+0800-D7FF) but before EE/EF (U+E000-FFFF).  Continuation bytes (80-BF) are
# untouched, and at the first differing byte both strings are at the same character boundary
# (identical prefixes), so comparing translated bytes compares Java's first differing code unit.
_UTF16_ORDER = np.arange(256, dtype=np.uint8)
_UTF16_ORDER[[0xF0, 0xF1, 0xF2, 0xF3, 0xF4, 0xEE, 0xEF]] = [0xEE, 0xEF, 0xF0, 0xF1, 0xF2, 0xF3, 0xF4]
_UTF16_ORDER_INVERSE = np.argsort(_UTF16_ORDER).astype(np.uint8)


def min_max_record_keys(keys: KeysLike | Iterable[str]) -> tuple[str, str] | None:
    """(min, max) by Java String.compareTo, or None for no keys.

    Arrow compares strings as UTF-8 bytes (= code point order); that equals UTF-16 order unless keys
    mix supplementary characters with U+E000-U+FFFF.  Only when a 4-byte sequence is present do we
    translate the bytes (vectorised) so the byte order becomes the UTF-16 order.  Note: Java's Spark
    row-writer path (bulk_insert, UTF8String) orders by bytes instead; the Avro path and the bloom
    index reader use String.compareTo, which is what range pruning needs.
    """
    arr = _normalise(keys)
    if len(arr) == 0:
        return None
    data, offsets = _buffers(arr)
    used = data[offsets[0] : offsets[-1]]
    if not (used >= 0xF0).any():
        result = pc.min_max(arr)
        return result["min"].as_py(), result["max"].as_py()
    translated = pa.py_buffer(_UTF16_ORDER[used].tobytes())
    rebased = pa.py_buffer((offsets - offsets[0]).astype(np.int64).tobytes())
    binary = pa.Array.from_buffers(pa.large_binary(), len(arr), [None, rebased, translated])
    result = pc.min_max(binary)

    def back(scalar: pa.Scalar) -> str:
        return _UTF16_ORDER_INVERSE[np.frombuffer(scalar.as_py(), dtype=np.uint8)].tobytes().decode("utf-8")

    return back(result["min"]), back(result["max"])


def build_footer_metadata(
    keys: KeysLike | Iterable[str],
    num_entries: int = 60000,
    fpp: float = 1e-9,
    max_entries: int = 100000,
) -> dict[str, str]:
    """The bloom/min/max footer entries Java's HoodieBloomFilterWriteSupport.finalizeMetadata writes
    for a DYNAMIC_V0 filter fed `keys` in file order (min/max are omitted when there are no keys)."""
    arr = _normalise(keys)
    bloom = BloomFilter.new_dynamic(num_entries, fpp, max_entries)
    bloom.add_keys(arr)
    meta = {BLOOM_FOOTER_KEY: bloom.to_base64(), BLOOM_TYPE_CODE_KEY: bloom.type_code}
    bounds = min_max_record_keys(arr)
    if bounds is not None:
        meta[MIN_KEY_FOOTER_KEY], meta[MAX_KEY_FOOTER_KEY] = bounds
    return meta
