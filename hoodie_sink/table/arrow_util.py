"""Small Arrow helpers shared by the index and hashing code."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa


def as_strings(
    values: pa.Array | pa.ChunkedArray | Iterable[str], what: str = "values", large_ok: bool = True
) -> pa.Array:
    """One contiguous string array (nulls kept): chunks combined, dictionaries decoded, string
    views cast; `large_ok=False` also casts large_string down to string (join sides must match)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    elif not isinstance(values, pa.Array):
        values = pa.array(list(values), type=pa.string())
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if pa.types.is_null(values.type):
        values = values.cast(pa.string())
    if pa.types.is_string_view(values.type) or (not large_ok and pa.types.is_large_string(values.type)):
        values = values.cast(pa.large_string() if large_ok else pa.string())
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise TypeError(f"{what} must be an Arrow string array, got {values.type}")
    return values
