"""Apache Hudi 0.15's `PartialUpdateAvroPayload`, vectorised: two records of one key become one
whose every column is the winner's value, or the loser's where the winner's is null
(docs/hudi/partial-update.md).

The winner is decided by the whole record's ordering value, never per column: the older record
wins only if its ordering value is strictly greater (a null stored value being the smallest, as
MergeRule.strictly_greater takes it), so a tie goes to the newer record.  Java folds records one
pair at a time in arrival order (a batch's de-duplication, a slice's log records, then the log
record against the base row); the fold is not associative (a merged record carries its winner's
ordering value only), so callers fold in that order, one round per occurrence of a key.

Meta columns (`newer_first`) always come from the newer record where it has them: what Java's
`mergeDisorderRecordsWithMetadata` does when the older record wins on ordering.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PARTIAL_UPDATE_PAYLOAD = "org.apache.hudi.common.model.PartialUpdateAvroPayload"


def is_partial_update(payload_class: str | None) -> bool:
    return bool(payload_class) and str(payload_class).endswith("PartialUpdateAvroPayload")


def combine(
    older: pa.Table,
    newer: pa.Table,
    older_first: np.ndarray,
    columns: Iterable[str],
    newer_first: Sequence[str] = (),
) -> dict[str, pa.Array | pa.ChunkedArray]:
    """The merged values of `columns` for row-aligned `older` and `newer`: where `older_first`,
    coalesce(older, newer), else coalesce(newer, older); `newer_first` columns always
    coalesce(newer, older).  The newer column is cast to the older one's type."""
    mask = pa.array(older_first, pa.bool_())
    out: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name in columns:
        old, new = _flat(older.column(name)), _flat(newer.column(name))
        if new.type != old.type:
            new = new.cast(old.type)
        if name in newer_first or not older_first.any():
            out[name] = pc.coalesce(new, old)
        else:
            out[name] = pc.if_else(mask, pc.coalesce(old, new), pc.coalesce(new, old))
    return out


def _flat(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def occurrences(groups: np.ndarray) -> np.ndarray:
    """For rows sorted by group (then by arrival), the rank of each row within its group."""
    n = len(groups)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.ones(n, dtype=bool)
    starts[1:] = groups[1:] != groups[:-1]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    return np.arange(n) - group_start
