"""A routed write without Spark: the steps of hoodie_sink.spark.route (datasource/routing.py) run
over Arrow in this process, with Spark's shuffles simulated (by record key into `tag_tasks`
tasks sorted by key, or with RECORD_INDEX by the key's record-index file group; then by file
group into `write_tasks` tasks sorted by file group), then the sink's routed tasks and commit.
Lets the unit tests check routing against the model with many seeds, task counts and chunk sizes."""

from __future__ import annotations

import uuid
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from hoodie_sink.table.client import routing
from hoodie_sink.table.format.keygen import KeyGenerator
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.write import coordinator, write_path
from hoodie_sink.table.write.context import TaskIdentity


def _hash_tasks(values: list, n: int) -> np.ndarray:
    return np.array([zlib.crc32(str(v).encode()) % n for v in values], dtype=np.int64)


def _batches(t: pa.Table, size: int) -> list[pa.RecordBatch]:
    return [b for b in t.combine_chunks().to_batches(max_chunksize=size) if b.num_rows]


def spark_xxhash64(values: list[str]) -> np.ndarray:
    """Spark SQL's xxhash64 (seed 42) of each string, as Spark returns it (a signed long)."""
    return np.array([xxhash.xxh64_intdigest(v.encode(), seed=42) for v in values], dtype=np.uint64).view(
        np.int64
    )


def insert_spreads(keys: pa.Array, orders: pa.Array) -> np.ndarray:
    """The spread of each insert (routing/inserts.py SPREAD_SQL): of its key, or its arrival order."""
    return spark_xxhash64([k if k is not None else str(o)
                           for k, o in zip(keys.to_pylist(), orders.to_pylist(), strict=True)])  # fmt: skip


def with_insert_file_ids(out: pa.Table, buckets) -> pa.Table:
    """What the route's FILE_ID_SQL does, in Arrow: each insert's planned file group."""
    todo = pc.and_(pc.is_null(out.column(routing.FILE_ID)), out.column(routing.INSERT)).combine_chunks()
    rows = pc.indices_nonzero(todo)
    planned = buckets.file_ids_of(
        pc.take(out.column(routing.PARTITION), rows).combine_chunks(),
        insert_spreads(pc.take(out.column(routing.KEY), rows), pc.take(out.column(routing.ORDER), rows)),
    )
    fids = np.asarray(out.column(routing.FILE_ID).to_pylist(), dtype=object)
    fids[np.asarray(rows)] = np.asarray(planned.to_pylist(), dtype=object)
    return out.set_column(
        out.schema.get_field_index(routing.FILE_ID), routing.FILE_ID, pa.array(fids, pa.string())
    )


def route_table(table: pa.Table, path: str, options: dict, tag_tasks: int, write_tasks: int,
                batch_rows: int = 7) -> tuple[list[list[pa.RecordBatch]], pa.Schema]:  # fmt: skip
    """The routed input of each write task (batches sorted by file group) and its schema."""
    cfg = WriteConfig.from_options(options, path=str(path))
    op = routing.check_routable(cfg)
    nonce = uuid.uuid4().hex
    ctx, fingerprint = routing.routing_context(cfg, table.schema, nonce)
    table = table.append_column(routing.ARRIVAL, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    tagged: list[pa.RecordBatch] = []
    if routing.adds_file_groups_only(op):  # located where they are, in batches of the input
        for batch in _batches(table, batch_rows):
            loc = routing.record_locations(ctx, batch)
            n = batch.num_rows
            users = [batch.column(i) for i in range(batch.num_columns - 1)]  # without ARRIVAL
            tagged.append(pa.RecordBatch.from_arrays(users + [
                pa.nulls(n, pa.string()), loc.field("partition"), loc.field("key"), batch.column(routing.ARRIVAL),
                pa.repeat(pa.scalar(0, pa.int8()), n), pa.repeat(pa.scalar(True), n), pa.repeat(pa.scalar(False), n),
                pa.repeat(pa.scalar(fingerprint), n),
            ], names=batch.schema.names[:-1] + [f.name for f in routing.ROUTE_FIELDS]))  # fmt: skip
        within = routing.KEY if op.sorts_by_key else None
    else:
        keys = KeyGenerator(ctx.plan.keygen).record_keys(table.to_batches()[0] if table.num_rows else table)
        groups = routing.record_index_groups(ctx)
        if groups is None or not table.num_rows:
            task_of = _hash_tasks(pa.array(keys).to_pylist(), tag_tasks)
        else:  # RECORD_INDEX: shuffled by the key's record-index file group, as the route does
            grouped = routing.with_index_group(
                ctx, groups, table.drop_columns([routing.ARRIVAL]).combine_chunks().to_batches()[0]
            )
            task_of = _hash_tasks(grouped.column(routing.GROUP).to_pylist(), tag_tasks)
        for i in range(tag_tasks):
            rows = table.filter(pa.array(task_of == i))
            rows = rows.take(
                pc.sort_indices(pa.array(np.asarray(keys, dtype=object)[task_of == i], pa.string()))
            )
            tagger = routing.RouteTagger(ctx, fingerprint, i)
            tagged += list(tagger.tag(_batches(rows, batch_rows)))
        within = None
    schema = routing.route_input_schema(table.schema.remove(table.schema.get_field_index(routing.ARRIVAL)))
    out = pa.Table.from_batches(tagged, schema=schema) if tagged else schema.empty_table()
    todo = out.filter(pc.and_(pc.is_null(out.column(routing.FILE_ID)), out.column(routing.INSERT)))
    counts = {r["values"]: r["counts"] for r in pc.value_counts(todo.column(routing.PARTITION)).to_pylist()}
    if counts:
        out = with_insert_file_ids(out, routing.plan_inserts(ctx, counts, nonce))
    fids = out.column(routing.FILE_ID).to_pylist()
    write_of = _hash_tasks(fids, write_tasks)
    per_task = []
    for j in range(write_tasks):
        rows = out.filter(pa.array(write_of == j))
        rows = rows.sort_by([(routing.FILE_ID, "ascending")] + ([(within, "ascending")] if within else []))
        per_task.append(_batches(rows, batch_rows))
    return per_task, schema


def write_routed(per_task: list[list[pa.RecordBatch]], schema: pa.Schema, path: str, options: dict):
    """The sink's side: begin (routed), one routed task per list, commit (abort on failure)."""
    cfg = WriteConfig.from_options(options, path=str(path))
    ctx = coordinator.begin(cfg, routing.user_schema(schema), routed=True)
    try:
        results = [write_path.write_task(ctx, TaskIdentity(j, 3, 200 + j), batches)
                   for j, batches in enumerate(per_task)]  # fmt: skip
        return write_path.complete(ctx, results)
    except BaseException:
        coordinator.abort(ctx, settle_seconds=0)
        raise


def routed_write(table: pa.Table, path: str, options: dict, tag_tasks: int = 3, write_tasks: int = 2,
                 batch_rows: int = 7):  # fmt: skip
    per_task, schema = route_table(table, path, options, tag_tasks, write_tasks, batch_rows)
    return write_routed(per_task, schema, path, options)
