"""The route's tag step, in one task of the route (docs/design/routing.md#our-plan, step 2).

The task gets all records of each key (the route shuffles by the key's columns), sorted by
them.  It cuts its input into chunks at key boundaries, so a key's records are always combined
together, and for each chunk, all Arrow-vectorised: builds the changes (write/upsert/incoming.py),
combines the records of each key, looks them up against the routing snapshot with the write's
index and puts each change in its file group with the bucket assigner, as an unrouted upsert task
does (write/upsert/tagging.py).  Inserts are left without a file group: the route plans them
for the whole write once every task has counted its own (inserts.py).

Its output is the chunk's surviving rows, exactly as they came in (the user's columns keep
their Spark types), with the route columns (columns.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.write.base_file_writer import file_schema
from hoodie_sink.table.write.bucket_assigner import Assignment, BucketAssigner, add_to_bucket
from hoodie_sink.table.write.conflicts import clustering_conflict
from hoodie_sink.table.write.context import WriteContext, keygen_for, stored_keygen
from hoodie_sink.table.write.merge import KEY, KIND, ORDER, PART
from hoodie_sink.table.write.routing import columns as route
from hoodie_sink.table.write.upsert.incoming import IncomingChanges
from hoodie_sink.table.write.upsert.stored_records import StoredRecords
from hoodie_sink.table.write.upsert.tagging import Tagging

TAG_ROWS = 2_000_000  # rows per lookup, as an unrouted task (upsert_task.py)
_ROW = "_hoodie_route_row"  # a change's row in its chunk: the output takes the input row from it
_INSERTS = "inserts:"  # the bucket of the chunk's inserts: their file groups are planned later


class _RouteAssigner(BucketAssigner):
    """The bucket assigner without insert packing: the route packs inserts for the whole write
    (inserts.py), not per task.  Hash buckets (BUCKET index) are final already."""

    def __init__(self, ctx: WriteContext):
        super().__init__(ctx, try_claim=lambda fid: False)

    def _pack_inserts(self, out: Assignment, inserts: pa.Table) -> None:
        add_to_bucket(out, ("", _INSERTS), inserts)


class RouteTagger:
    def __init__(self, ctx: WriteContext, fingerprint: str, partition_id: int):
        cfg = ctx.config
        self.ctx = ctx
        self.fingerprint = fingerprint
        self.budget_rows = TAG_ROWS
        self.budget_bytes = max(1, cfg.task_buffer_bytes // 2)
        self.incoming = IncomingChanges(keygen_for(ctx), ctx.data_schema, ctx.plan.operation.deletes,
                                        cfg.fills_missing_columns, partition_id,
                                        cfg.path if cfg.debezium else None)  # fmt: skip
        locator = ctx.plan.index.locator(ctx.storage, list(ctx.base_files), stored_keygen(ctx))
        stored = StoredRecords(ctx, locator, file_schema(ctx.data_schema)) if locator is not None else None
        self.rewrite: set[str] = set()  # merge-on-read file groups holding a changed key twice
        self.phase_ms: dict[str, int] = {}
        self.tagging = Tagging(ctx, _RouteAssigner(ctx), locator, stored, self.rewrite, self.phase_ms)
        self.append_only = ctx.plan.operation.append_only

    def tag(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """The routed rows of the task's input (batches with the user's columns and ARRIVAL)."""
        held: list[pa.RecordBatch] = []
        rows = size = 0
        for batch in batches:
            if not batch.num_rows:
                continue
            held.append(batch)
            rows += batch.num_rows
            size += batch.nbytes
            if rows >= self.budget_rows or size >= self.budget_bytes:
                chunk = pa.Table.from_batches(held).combine_chunks()
                done, rest = self._split_at_last_key(chunk)
                if done is not None:
                    yield from self._route(done)
                held = rest.to_batches() if rest.num_rows else []
                rows, size = rest.num_rows, rest.nbytes
        if held:
            yield from self._route(pa.Table.from_batches(held).combine_chunks())

    def _split_at_last_key(self, chunk: pa.Table) -> tuple[pa.Table | None, pa.Table]:
        """The chunk without the records of its last key, and those records: the next chunk
        starts with them, so the records of a key are never split (the input is sorted by key)."""
        if self.append_only:  # nothing is combined: any cut will do
            return chunk, chunk.slice(chunk.num_rows)
        keys = self.incoming.keygen.record_keys(chunk.to_batches()[0])
        other = np.flatnonzero(np.asarray(pc.not_equal(keys, keys[-1]).fill_null(True)))
        if not len(other):  # one key all along: go on collecting
            return None, chunk
        cut = int(other[-1]) + 1
        return chunk.slice(0, cut), chunk.slice(cut)

    def _route(self, chunk: pa.Table) -> Iterator[pa.RecordBatch]:
        batch = chunk.to_batches()[0] if chunk.num_rows else None
        if batch is None:
            return
        changes = self.incoming.of(batch)
        # ties of the ordering field go to the later arrival in the user's input, not in the route's
        changes = changes.set_column(
            changes.schema.get_field_index(ORDER), ORDER, chunk.column(route.ARRIVAL)
        )
        changes = changes.append_column(_ROW, pa.array(np.arange(chunk.num_rows, dtype=np.int64)))
        assignment = self.tagging.assign(changes)
        clustering = self.ctx.clustering_file_groups
        if clustering:
            hit = {k: clustering[k] for k in assignment.buckets if k in clustering}
            if hit:
                raise clustering_conflict(self.ctx.config.path, hit)
        users = chunk.drop_columns([route.ARRIVAL])
        for (_, fid), rows in assignment.buckets.items():
            insert = fid == _INSERTS
            yield self._output(users, rows, None if insert else fid, insert)
        dels = assignment.unmatched_deletes
        if dels is not None and dels.num_rows:  # counted as deletes of missing keys by the sink
            yield self._output(users, dels, None, False)

    def _output(self, users: pa.Table, rows: pa.Table, fid: str | None, insert: bool) -> pa.RecordBatch:
        n = rows.num_rows
        picked = users.take(rows.column(_ROW))
        cols = list(picked.columns) + [
            pa.repeat(pa.scalar(fid, pa.string()), n),
            rows.column(PART),
            rows.column(KEY),
            rows.column(ORDER),
            rows.column(KIND),
            pa.repeat(pa.scalar(insert), n),
            pa.repeat(pa.scalar(fid is not None and fid in self.rewrite), n),
            pa.repeat(pa.scalar(self.fingerprint, pa.string()), n),
        ]
        names = list(picked.column_names) + list(route.ROUTE_COLUMNS)
        return pa.Table.from_arrays(cols, names=names).combine_chunks().to_batches()[0]
