"""Hudi BUCKET index hashing, bit-compatible with Apache Hudi 0.14/0.15 (Java), vectorised.

Java mirrored: ``org.apache.hudi.index.bucket.BucketIdentifier`` (hudi-client-common) and
``org.apache.hudi.keygen.KeyGenUtils.extractRecordKeysByFields`` (0.13-0.15 version):

* ``getBucketId(List<String> hashKeyFields, numBuckets) = (hashKeyFields.hashCode() & Integer.MAX_VALUE)
  % numBuckets`` where ``List.hashCode`` folds ``h = 31 * h + (e == null ? 0 : e.hashCode())`` from
  ``h = 1`` and ``String.hashCode`` folds ``31 * h + c`` over the UTF-16 code units (all int32 wrapping).
  -> :func:`bucket_ids` (hash field values given column by column).
* ``getHashKeys(recordKey, indexKeyFields)`` derives the hash field values from the record key string:
  a key without ``:`` is the single value; otherwise the key is split on ``,`` (Java ``split``: trailing
  empty pieces dropped), each piece on the first ``:``; a piece without ``:`` is kept as a value, a
  ``field:value`` piece is kept when ``field`` is one of the hash fields, ``__null__`` becomes null and
  ``__empty__`` becomes ``""``.  Values come in record-key order, not hash-field order.  This is Hudi's
  behaviour, quirks included (a single-field key whose value contains ``:``, e.g. a timestamp, yields an
  empty list, so every such key lands in bucket ``1 % numBuckets``; Hudi 1.0 changed this, HUDI-8403).
  -> :func:`record_key_bucket_ids`.
* File ids: ``bucketIdStr(n) = String.format("%08d", n)``; ``newBucketFileIdPrefix(n)`` replaces the first
  8 characters of a random UUID with it (file id = ``<prefix>-0``); ``bucketIdFromFileId(fileId) =
  Integer.parseInt(fileId.substring(0, 8))``.

Everything below loops in Python only over columns, never over records.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.arrow_util import as_strings

_is_string_view = getattr(pa.types, "is_string_view", lambda _t: False)  # pyarrow >= 16

NULL_RECORDKEY_PLACEHOLDER = "__null__"
EMPTY_RECORDKEY_PLACEHOLDER = "__empty__"
RECORD_KEY_PARTS_SEPARATOR = ","
COLUMN_VALUE_SEPARATOR = ":"

_JAVA_INT = re.compile(r"^[+-]?[0-9]+$")

StringsLike: TypeAlias = pa.Array | pa.ChunkedArray


# ------------------------------------------------------------------------------------- java hashes


def _as_utf8(values: StringsLike, what: str = "values") -> pa.Array:
    """One contiguous string/large_string array (nulls allowed)."""
    return as_strings(values, what)


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(used data bytes, int64 offsets rebased to 0) of a string array, honouring slices."""
    n = len(arr)
    bufs = arr.buffers()
    if n == 0 or bufs[1] is None:
        return np.zeros(0, np.uint8), np.zeros(n + 1, np.int64)
    off_type = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(bufs[1], dtype=off_type)[arr.offset : arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return data[offsets[0] : offsets[-1]], offsets - offsets[0]


def _powers31(count: int) -> np.ndarray:
    """31**k mod 2**32 for k in [0, count) (uint32)."""
    p = np.full(max(count, 1), 31, dtype=np.uint32)
    p[0] = 1
    return np.cumprod(p, dtype=np.uint32)  # wraps mod 2**32, like Java int arithmetic


_CHUNK_UNITS = 1 << 22  # bounds the temporaries of _segment_hash to ~50 MB


def _segment_hash(units: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Java's fold ``h = 31*h + u`` (from h=0) over each segment units[bounds[i]:bounds[i+1]], as uint32.

    h = sum(u_j * 31**(units after j in its segment)), summed as prefix sums; all arithmetic wraps
    mod 2**32 exactly as Java's int does.  Records are processed in chunks of ~_CHUNK_UNITS units.
    """
    n = len(bounds) - 1
    out = np.zeros(n, np.uint32)
    lengths = np.diff(bounds)
    if n == 0 or int(bounds[-1]) == 0:
        return out
    powers = _powers31(int(lengths.max()))
    lo = 0
    while lo < n:
        # Records [lo, hi) hold at most _CHUNK_UNITS units (or are a single larger record).
        hi = int(np.searchsorted(bounds, bounds[lo] + _CHUNK_UNITS, side="right")) - 1
        hi = min(max(hi, lo + 1), n)
        b = bounds[lo : hi + 1] - bounds[lo]
        u = units[bounds[lo] : bounds[hi]]
        total = int(b[-1])
        if total:
            after = np.repeat(b[1:], lengths[lo:hi]) - 1 - np.arange(total, dtype=np.int64)
            terms = u.astype(np.uint32) * powers[after]
            cs = np.zeros(total + 1, np.uint32)
            np.cumsum(terms, dtype=np.uint32, out=cs[1:])
            out[lo:hi] = cs[b[1:]] - cs[b[:-1]]
        lo = hi
    return out


def java_string_hashes(values: StringsLike) -> np.ndarray:
    """``String.hashCode()`` of every value as int32; null -> 0 (as ``List.hashCode`` treats nulls).

    UTF-8 is decoded to code points with numpy; a supplementary character counts as its two UTF-16
    surrogate code units, exactly as Java strings store it.
    """
    arr = _as_utf8(values)
    data, offsets = _buffers(arr)
    if data.size and (data >= 0x80).any():
        starts = np.flatnonzero((data & 0xC0) != 0x80)
        padded = np.concatenate([data, np.zeros(3, np.uint8)]).astype(np.uint32)
        lead = padded[starts]
        c1 = padded[starts + 1] & 0x3F
        c2 = padded[starts + 2] & 0x3F
        c3 = padded[starts + 3] & 0x3F
        cp = np.where(
            lead < 0x80,
            lead,
            np.where(
                lead < 0xE0,
                ((lead & 0x1F) << 6) | c1,
                np.where(
                    lead < 0xF0,
                    ((lead & 0x0F) << 12) | (c1 << 6) | c2,
                    ((lead & 0x07) << 18) | (c1 << 12) | (c2 << 6) | c3,
                ),
            ),
        )
        supp = cp >= 0x10000
        width = 1 + supp.astype(np.int64)
        unit_cum = np.concatenate([np.zeros(1, np.int64), np.cumsum(width)])
        units = np.empty(int(unit_cum[-1]), np.uint32)
        first = unit_cum[:-1]
        m = cp - 0x10000
        units[first] = np.where(supp, 0xD800 + (m >> 10), cp)
        units[first[supp] + 1] = 0xDC00 + (m[supp] & 0x3FF)
        bounds = unit_cum[np.searchsorted(starts, offsets)]
    else:
        units, bounds = data, offsets
    h = _segment_hash(units, bounds)
    if arr.null_count:
        h[~np.asarray(arr.is_valid())] = 0
    return h.view(np.int32)


def java_list_hashes(columns: Sequence[StringsLike]) -> np.ndarray:
    """``List<String>.hashCode()`` of the per-record lists [col0[i], col1[i], ...] as int32."""
    if not columns:
        raise ValueError("at least one hash field column is needed")
    n = len(columns[0])
    h = np.ones(n, np.uint32)
    for col in columns:
        if len(col) != n:
            raise ValueError(f"hash field columns differ in length: {len(col)} != {n}")
        h = h * np.uint32(31) + java_string_hashes(col).view(np.uint32)
    return h.view(np.int32)


def _bucket_of_hash(hashes: np.ndarray, num_buckets: int) -> np.ndarray:
    if not isinstance(num_buckets, (int, np.integer)) or num_buckets <= 0:
        raise ValueError(f"num_buckets must be a positive integer, got {num_buckets!r}")
    return ((hashes.view(np.uint32) & np.uint32(0x7FFFFFFF)) % np.uint32(num_buckets)).astype(np.int32)


def bucket_ids(hash_values: Sequence[StringsLike], num_buckets: int) -> np.ndarray:
    """``BucketIdentifier.getBucketId(hashKeyFields, numBuckets)`` per record (int32).

    ``hash_values[j][i]`` is the value of hash field j of record i as Java's string (null allowed).
    """
    return _bucket_of_hash(java_list_hashes(hash_values), num_buckets)


# ------------------------------------------------------------------------------ record key parsing


def _java_split_fields(index_key_fields: str | Sequence[str]) -> list[str]:
    """``Arrays.asList(indexKeyFields.split(","))``: no trimming, trailing empty pieces dropped."""
    if not isinstance(index_key_fields, str):
        return list(index_key_fields)
    if index_key_fields == "":
        return [""]
    parts = index_key_fields.split(RECORD_KEY_PARTS_SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def record_key_hash_lists(record_keys: StringsLike, index_key_fields: str | Sequence[str]) -> pa.ListArray:
    """``BucketIdentifier.getHashKeys(recordKey, indexKeyFields)`` for every key, as a list<string> array.

    ``index_key_fields`` is the ``hoodie.bucket.index.hash.field`` value (a str, split like Java) or
    the list of field names.  Slow-path helper for inspection and tests; :func:`record_key_bucket_ids`
    computes the hashes without materialising the lists.
    """
    values, list_offsets = _hash_key_values(record_keys, index_key_fields)
    return pa.ListArray.from_arrays(pa.array(list_offsets.astype(np.int32)), values)


def _hash_key_values(
    record_keys: StringsLike, index_key_fields: str | Sequence[str]
) -> tuple[pa.Array, np.ndarray]:
    """Flattened hash key values (string, nulls for __null__) and int64 list offsets per record."""
    keys = _as_utf8(record_keys, "record keys")
    if keys.null_count:
        raise ValueError(f"{keys.null_count} null record key(s): Hudi record keys are never null")
    n = len(keys)
    fields = _java_split_fields(index_key_fields)
    complex_mask = np.asarray(pc.match_substring(keys, COLUMN_VALUE_SEPARATOR))
    if not complex_mask.any():
        return keys, np.arange(n + 1, dtype=np.int64)

    # Complex keys: split on ',' and drop trailing empty pieces per key (Java String.split).
    cidx = np.flatnonzero(complex_mask)
    pieces = pc.split_pattern(keys.take(pa.array(cidx)), RECORD_KEY_PARTS_SEPARATOR)
    flat = pieces.flatten()
    parent = np.asarray(pc.list_parent_indices(pieces))
    nonempty = np.flatnonzero(np.asarray(pc.not_equal(pc.binary_length(flat), 0)))
    # Last non-empty piece of each key (every complex key has one: the piece holding ':').
    last_nonempty = np.full(len(cidx), -1, np.int64)
    is_last = (
        np.r_[parent[nonempty][1:] != parent[nonempty][:-1], True] if len(nonempty) else np.zeros(0, bool)
    )
    last_nonempty[parent[nonempty][is_last]] = nonempty[is_last]
    keep = np.arange(len(flat)) <= last_nonempty[parent]

    # Each piece split on the first ':' (split(":", 2)): [piece] or [field, value].
    kv = pc.split_pattern(flat, COLUMN_VALUE_SEPARATOR, max_splits=1)
    kv_flat = kv.flatten()
    kv_off = np.asarray(kv.offsets).astype(np.int64)
    kv_off -= kv_off[0]
    has_value = np.diff(kv_off) == 2
    field = kv_flat.take(pa.array(kv_off[:-1]))
    if fields:  # fields.isEmpty() keeps every piece
        keep &= ~has_value | np.asarray(pc.is_in(field, value_set=pa.array(fields, pa.string())))
    value = kv_flat.take(pa.array(kv_off[:-1] + has_value))
    # Placeholders apply to the value part of `field:value` pieces only.
    value = pc.if_else(
        pa.array(has_value & np.asarray(pc.equal(value, EMPTY_RECORDKEY_PLACEHOLDER))), "", value
    )
    is_null = has_value & np.asarray(pc.equal(value, NULL_RECORDKEY_PLACEHOLDER))
    value = pc.if_else(pa.array(is_null), pa.scalar(None, value.type), value)

    keep_idx = np.flatnonzero(keep)
    c_values = value.take(pa.array(keep_idx))
    c_counts = np.bincount(parent[keep_idx], minlength=len(cidx))

    counts = np.ones(n, np.int64)
    counts[cidx] = c_counts
    list_offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(counts)])
    # Assemble values in record order: simple keys contribute themselves, complex keys their pieces.
    src_is_complex = np.repeat(complex_mask, counts)
    order_simple = np.flatnonzero(~complex_mask)
    values = pa.concat_arrays(
        [keys.take(pa.array(order_simple)).cast(pa.string()), c_values.cast(pa.string())]
    )
    # Position of each output value inside `values` (simple block first, then complex block).
    pos = np.empty(int(list_offsets[-1]), np.int64)
    pos[~src_is_complex] = np.arange(len(order_simple))
    pos[src_is_complex] = len(order_simple) + np.arange(len(c_values))
    return values.take(pa.array(pos)), list_offsets


def record_key_bucket_ids(
    record_keys: StringsLike, index_key_fields: str | Sequence[str], num_buckets: int
) -> np.ndarray:
    """``BucketIdentifier.getBucketId(recordKey, indexKeyFields, numBuckets)`` per record (int32)."""
    values, list_offsets = _hash_key_values(record_keys, index_key_fields)
    elem = java_string_hashes(values).view(np.uint32)
    n = len(list_offsets) - 1
    lengths = np.diff(list_offsets)
    # List.hashCode = 31**len + sum(e_j * 31**(len-1-j)); the fold over elements is _segment_hash.
    powers = _powers31(int(lengths.max(initial=0)) + 1)
    h = powers[lengths] + _segment_hash(elem, list_offsets)
    assert len(h) == n
    return _bucket_of_hash(h.view(np.int32), num_buckets)


# ----------------------------------------------------------------------------------------- file ids


def bucket_file_id_prefix(bucket: int) -> str:
    """``BucketIdentifier.bucketIdStr``: the bucket number as 8 digits, the head of its file ids."""
    if not 0 <= bucket < 10**8:
        raise ValueError(f"bucket id must be in [0, 10**8), got {bucket}")
    return f"{bucket:08d}"


def new_bucket_file_id_prefix(bucket: int) -> str:
    """``BucketIdentifier.newBucketFileIdPrefix``: a random UUID whose first 8 chars are the bucket."""
    return bucket_file_id_prefix(bucket) + str(uuid.uuid4())[8:]


def bucket_of_file_id(file_id: str) -> int:
    """``BucketIdentifier.bucketIdFromFileId``: ``Integer.parseInt(fileId.substring(0, 8))``."""
    head = file_id[:8]
    if len(head) < 8 or not _JAVA_INT.match(head):
        raise ValueError(f"file id {file_id!r} does not start with an 8-digit bucket number")
    return int(head)
