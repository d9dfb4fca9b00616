"""The merge rule: which of two records of one key wins, the same for every writer and reader path
(combining a batch, merging into the stored record, folding log blocks, compaction, clustering,
the change feed).

Hudi 0.14's payloads (DefaultHoodieRecordPayload, OverwriteWithLatestAvroPayload;
docs/hudi/services.md#merge-semantics): with an ordering (precombine) field, the records of a key
are ordered by it among themselves, the higher value winning and ties going to the later record; `base_ordering` says
whether the ordering also decides against the stored record (event time, the default payload) or
the incoming record always replaces it (commit time, OverwriteWithLatest).  Without an ordering
field the latest record wins.  A null ordering value counts as the smallest value, as Java's merge
takes it (docs/hudi/null-ordering.md).  The delete operation compares nothing: its deletes win.

`partial` (Hudi 0.15's PartialUpdateAvroPayload, docs/hudi/partial-update.md): the same ordering
decides the winner, also against the stored record, but the loser is not dropped: it fills the
winner's null columns (format/partial_update.py).

`delete_op` (Hudi's PostgresDebeziumAvroPayload, docs/hudi/debezium.md): event time on the
precombine field `_event_lsn`, and a record whose `_change_operation_type` is 'd' is a delete
that keeps its ordering value, as a `_hoodie_is_deleted` record does (format/debezium.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.debezium import is_debezium
from hoodie_sink.table.format.partial_update import is_partial_update
from hoodie_sink.table.format.properties import COMMIT_TIME_STRATEGY, MERGER_STRATEGY_KEY, TableConfig


@dataclass(frozen=True)
class MergeRule:
    ordering_field: str | None = None
    base_ordering: bool = False
    partial: bool = False  # PartialUpdateAvroPayload: the loser fills the winner's nulls
    delete_op: bool = False  # PostgresDebeziumAvroPayload: _change_operation_type 'd' deletes

    @staticmethod
    def of_table(table: TableConfig) -> MergeRule:
        """The table's rule, inferred as readers do
        (docs/hudi/format.md#file-slices-and-merge-mode): the payload class, else the merger
        strategy id, else event time when there is a precombine field."""
        payload = table.payload_class or ""
        partial = is_partial_update(payload)
        if not table.precombine_field:
            return MergeRule(partial=partial)
        if partial:
            return MergeRule(table.precombine_field, base_ordering=True, partial=True)
        if is_debezium(payload):
            return MergeRule(table.precombine_field, base_ordering=True, delete_op=True)
        if not payload:
            strategy = table.extra.get(MERGER_STRATEGY_KEY)
            commit_time = strategy == COMMIT_TIME_STRATEGY
        else:
            commit_time = payload.endswith("OverwriteWithLatestAvroPayload")
        return MergeRule(table.precombine_field, base_ordering=not commit_time)

    @staticmethod
    def of_write(
        precombine_field: str | None,
        commit_time_ordering: bool,
        deletes: bool,
        partial: bool = False,
        delete_op: bool = False,
    ) -> MergeRule:
        """A write's rule: its precombine field and payload (resolved against the table), none
        for the delete operation, whose records win whatever their ordering values."""
        if deletes:
            return MergeRule()
        if not precombine_field:
            return MergeRule(partial=partial)
        if delete_op:
            return MergeRule(precombine_field, base_ordering=True, delete_op=True)
        return MergeRule(precombine_field, base_ordering=partial or not commit_time_ordering, partial=partial)

    @property
    def drops_losers(self) -> bool:
        """Whether a change the stored record beats can be dropped before it is written (event
        time, whole records): not under a partial update, where the loser still fills nulls."""
        return self.event_time and not self.partial

    @property
    def event_time(self) -> bool:
        """Whether the stored record can beat an incoming one (its ordering value is higher)."""
        return bool(self.ordering_field) and self.base_ordering

    def ranking(self, scope: list[str], arrival: str) -> list[tuple[str, ...]]:
        """Sort keys that put the winner of each `scope` group first: the highest ordering value
        (nulls last: the smallest), then the latest `arrival`."""
        keys: list[tuple[str, ...]] = [(c, "ascending") for c in scope]
        if self.ordering_field:
            keys.append((self.ordering_field, "descending", "at_end"))
        keys.append((arrival, "descending"))
        return keys

    @staticmethod
    def strictly_greater(a: pa.Array | pa.ChunkedArray, b: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """a > b per row, a null being smaller than any value and two nulls equal: where this
        holds, the record with `a` beats the one with `b` (otherwise `b`, the later, wins).  As
        Java's merge takes a null (docs/hudi/null-ordering.md): any record replaces a stored one
        without an ordering value; our writers store none in merge-on-read tables, other writers
        may.  hudi-rs 0.5.0 reads a stored null as 0, which differs for negative values only."""
        gt = pc.fill_null(pc.greater(a, b), False)
        a_over_null = pc.and_(pc.is_valid(a), pc.is_null(b))
        return np.asarray(pc.or_(gt, a_over_null).to_numpy(zero_copy_only=False), dtype=bool)
