"""Tagging: the changes collected so far, de-duplicated, located in the file groups holding their
keys, and put in buckets by the bucket assigner (../upsert_task.py, steps 1 and 2)."""

from __future__ import annotations

import time

import pyarrow as pa

from hoodie_sink.table.index.key_index import KeyIndex, TagResult
from hoodie_sink.table.write.bucket_assigner import Assignment, BucketAssigner
from hoodie_sink.table.write.context import WriteContext
from hoodie_sink.table.write.merge import KEY, PART, reduce_changes
from hoodie_sink.table.write.upsert.stored_records import StoredRecords


class Tagging:
    def __init__(self, ctx: WriteContext, assigner: BucketAssigner, locator: KeyIndex | None,
                 stored: StoredRecords | None, rewrite: set[str], phase_ms: dict[str, int]):  # fmt: skip
        self.assigner = assigner
        # None: the index looks nothing up (BUCKET: the assigner hashes keys into buckets)
        self.locator = locator
        self.stored = stored
        self.rule = ctx.plan.merge_rule
        self.append_only = ctx.plan.operation.append_only
        self.mor = ctx.plan.merge_on_read
        # a record is its key under a global index, its (key, partition path) pair otherwise
        self.per_partition = not ctx.plan.index.is_global
        self.rewrite = rewrite  # merge-on-read file groups rewritten, not given a log (shared)
        self.repeated: set[str] = set()  # file groups holding a changed key more than once
        self.phase_ms = phase_ms

    def reduce(self, changes: pa.Table) -> pa.Table:
        return reduce_changes(changes, self.rule, per_partition=self.per_partition)

    def assign(self, changes: pa.Table) -> Assignment:
        if self.append_only:  # insert: no de-duplication, no lookup; small files first
            assignment = Assignment()
            self.assigner.assign_inserts(assignment, changes)
            return assignment
        if self.locator is None:
            return self.assigner.assign_for_bucket_index(self.reduce(changes))
        changes = self.reduce(changes)
        tag_started = time.perf_counter()
        changes, tags = self._locate(changes)
        tag_ms = int((time.perf_counter() - tag_started) * 1000)
        self.phase_ms["tag"] = self.phase_ms.get("tag", 0) + tag_ms
        assert self.stored is not None, "a look-up index reads stored records"
        # commit-time ordering (OverwriteWithLatestAvroPayload): the stored record never wins
        stored_ordering = self.stored.ordering if self.rule.event_time else None
        stored_in_place = None
        # (partial updates keep a change the stored record beats: it still fills the stored nulls)
        if self.mor and self.rule.drops_losers:
            stored_in_place = self.stored.in_place(changes, tags)
            changes, tags = self.stored.without_stored_winners(changes, tags, self.repeated)
        return self.assigner.assign(changes, tags, stored_ordering, stored_in_place)

    def _locate(self, changes: pa.Table) -> tuple[pa.Table, TagResult]:
        """Tag every change with the file group holding its key.  A key stored in several file
        groups (bulk_insert and insert keep duplicates) gets one change per file group, as Hudi's
        bloom index tags every one, so an upsert or delete changes every copy.  A merge-on-read
        file group holding a changed key twice is rewritten, not given a log: a log record meets
        one base copy only in every reader (docs/hudi/duplicate-keys.md)."""
        assert self.locator is not None, "the index looks keys up"
        located = self.locator.locate(
            changes.column(KEY).combine_chunks(), changes.column(PART).combine_chunks()
        )
        if len(located.record) != changes.num_rows:
            changes = changes.take(pa.array(located.record))
        if len(located.repeated):
            repeated = set(located.repeated.to_pylist())
            self.repeated |= repeated
            if self.mor:
                self.rewrite |= repeated
        return changes, located.tags
