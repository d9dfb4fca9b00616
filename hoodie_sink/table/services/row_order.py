"""Row orders for clustering (hoodie.layout.optimize.strategy): linear, z-order, Hilbert.

Linear sorts by the sort columns in turn: best for filters on the first column.  The two
space-filling curves give every column a say, so that files end up with narrow ranges on each
of them (filters on any sort column skip files).  For the curves each column is first mapped
to its rank among the distinct values of the data (a dense rank, so that skewed or non-numeric
columns spread over the whole range), scaled to `BITS` bits; nulls rank last.  All of it is
vectorised numpy over Arrow columns.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BITS = 16  # bits per column on the curve; 4 columns fill 64 bits


def sort_indices(table: pa.Table, columns: tuple[str, ...], strategy: str) -> pa.Array:
    """The permutation that puts `table` in clustering order."""
    if not columns:
        raise ValueError("a clustering order needs at least one sort column")
    if strategy == "linear" or len(columns) == 1:
        return pc.sort_indices(table, sort_keys=[(c, "ascending", "at_end") for c in columns])
    bits = max(1, min(BITS, 64 // len(columns)))
    coords = np.stack([_scaled_rank(table.column(c), bits) for c in columns])
    if strategy == "z-order":
        keys = _interleave(coords, bits)
    elif strategy == "hilbert":
        keys = _interleave(_hilbert_transpose(coords, bits), bits)
    else:
        raise ValueError(f"unknown layout strategy {strategy!r}")
    return pa.array(np.argsort(keys, kind="stable"))


def _scaled_rank(col: pa.ChunkedArray | pa.Array, bits: int) -> np.ndarray:
    """Dense rank of each value (nulls last), scaled onto [0, 2**bits)."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    distinct = pc.unique(col.drop_null()) if col.null_count else pc.unique(col)
    distinct = distinct.take(pc.sort_indices(distinct))
    rank = pc.index_in(col, value_set=distinct)  # null for nulls
    n = max(len(distinct), 1)
    r = np.asarray(pc.fill_null(rank, n).to_numpy(zero_copy_only=False), dtype=np.uint64)
    top = (1 << bits) - 1
    return (r * top // n).astype(np.uint64)


def _interleave(coords: np.ndarray, bits: int) -> np.ndarray:
    """Morton code: bit b of dimension d goes to position b * dims + (dims - 1 - d)."""
    dims = coords.shape[0]
    out = np.zeros(coords.shape[1], dtype=np.uint64)
    for b in range(bits - 1, -1, -1):
        for d in range(dims):
            out = (out << np.uint64(1)) | ((coords[d] >> np.uint64(b)) & np.uint64(1))
    return out


def _hilbert_transpose(coords: np.ndarray, bits: int) -> np.ndarray:
    """Skilling's AxestoTranspose ("Programming the Hilbert curve", 2004), vectorised over rows:
    the result, bit-interleaved, is the Hilbert index."""
    x = coords.astype(np.uint64).copy()
    dims = x.shape[0]
    m = np.uint64(1) << np.uint64(bits - 1)
    q = m
    while q > 1:  # inverse undo
        p = q - np.uint64(1)
        for i in range(dims):
            hit = (x[i] & q) != 0
            x[0] = np.where(hit, x[0] ^ p, x[0])  # invert low bits of x[0]
            t = np.where(hit, 0, (x[0] ^ x[i]) & p).astype(np.uint64)  # exchange low bits
            x[0] ^= t
            x[i] ^= t
        q >>= np.uint64(1)
    for i in range(1, dims):  # Gray encode
        x[i] ^= x[i - 1]
    t = np.zeros(x.shape[1], dtype=np.uint64)
    q = m
    while q > 1:
        t = np.where((x[dims - 1] & q) != 0, t ^ (q - np.uint64(1)), t)
        q >>= np.uint64(1)
    for i in range(dims):
        x[i] ^= t
    return x
