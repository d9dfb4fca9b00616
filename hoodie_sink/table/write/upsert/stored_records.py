"""Look-ups of what is stored for the changed keys: their ordering values, whether a key is
stored in its record's partition, and which changes a stored record beats (event-time ordering).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.index.key_index import KeyIndex, TagResult
from hoodie_sink.table.write.context import WriteContext
from hoodie_sink.table.write.log_writer import current_ordering_values
from hoodie_sink.table.write.merge import DELETE, KEY, KIND, PART


class StoredRecords:
    def __init__(self, ctx: WriteContext, locator: KeyIndex, file_schema: pa.Schema):
        self.ctx = ctx
        self.locator = locator
        self.rule = ctx.plan.merge_rule
        self.ordering_field = self.rule.ordering_field
        self.file_schema = file_schema
        self.mor = ctx.plan.merge_on_read
        self.moves_partitions = ctx.plan.index.moves_partitions(ctx.config.index_update_partition_path)
        self.slices_with_deletes = [s.file_id for s in ctx.log_slices if s.has_deletes]

    def ordering(self, rows: pa.Table, file_ids: pa.Array) -> pa.Array:
        """The stored ordering values of `rows`' keys in the file groups `file_ids`."""
        assert self.ordering_field is not None, "only called with a precombine field"
        value_type = rows.schema.field(self.ordering_field).type
        keys = rows.column(KEY).combine_chunks()
        values = self.locator.stored_values(keys, file_ids, self.ordering_field, value_type)
        if self.mor:  # the logs hold newer values than the base files
            values = current_ordering_values(self.ctx, keys, file_ids, values, self.file_schema)
        return values

    def in_place(self, changes: pa.Table, tags: TagResult) -> pa.Array | None:
        """Global index with update.partition.path: the keys stored (also) in their record's
        partition, taken before without_stored_winners drops the changes a stored copy beats: a
        record moving out of another partition is not inserted where its key is stored already
        (bucket_assigner._one_insert_per_key), whether that copy takes the record or beats it."""
        if not self.moves_partitions:
            return None
        here = pc.and_(pc.is_valid(tags.file_id), pc.equal(tags.partition_path, changes.column(PART)))
        return changes.column(KEY).filter(pc.fill_null(here, False)).combine_chunks()

    def without_stored_winners(
        self, changes: pa.Table, tags: TagResult, repeated: set[str]
    ) -> tuple[pa.Table, TagResult]:
        """Merge-on-read, event-time ordering: drop the changes that the stored record beats, as a
        copy-on-write merge would (a log keeps what readers let win, and no more).  The base file's
        value stands for the stored one (our logs only hold records that beat it), except in slices
        whose logs hold deletes: there log_changes decides (a key deleted and written again)."""
        found = pc.is_valid(tags.file_id)
        if not pc.any(found).as_py():
            return changes, tags
        # and not in file groups holding a key twice (`repeated`): there the rewrite compares every copy
        merged_here = pa.array(self.slices_with_deletes + sorted(repeated), pa.string())
        checked = pc.and_(found, pc.invert(pc.is_in(tags.file_id, value_set=merged_here)))
        rows = changes.filter(checked)
        if rows.num_rows == 0:
            return changes, tags
        precombine = self.ordering_field
        assert precombine is not None, "only called with a precombine field"
        value_type = changes.schema.field(precombine).type
        stored = self.locator.stored_values(
            rows.column(KEY).combine_chunks(), tags.file_id.filter(checked), precombine, value_type
        )
        kinds = np.asarray(rows.column(KIND).to_numpy(), dtype=np.int8)
        # the delete operation ignores ordering
        loses = self.rule.strictly_greater(stored, rows.column(precombine)) & (kinds < DELETE)
        if not loses.any():
            return changes, tags
        drop = np.zeros(changes.num_rows, dtype=bool)
        drop[np.flatnonzero(np.asarray(checked.to_numpy(zero_copy_only=False), dtype=bool))[loses]] = True
        keep = pa.array(~drop)
        return changes.filter(keep), TagResult(
            tags.file_id.filter(keep), tags.partition_path.filter(keep), tags.base_instant.filter(keep)
        )
