"""MERGE with a Spark DataFrame source, in Spark tasks (docs/design/table-dml.md#in-tasks).

The driver plans (table/dml/merge_tasks.MergeTaskPlan: metadata only).  Then, in Spark:
1. each source row gets its record key and the source is shuffled by it; each task decides the
   changes of its share of the keys (`changes_of`: the stored rows looked up through the index in
   the snapshot the driver read), and the changes are kept (a local checkpoint), with each task's
   counts beside them;
2. the changes are routed as any routed write is (datasource/routing.py: tagged, inserts planned
   into small files and sized new file groups, shuffled by file group), on the snapshot the merge
   read, and written, each file group by one task;
3. the driver commits the tasks' results as one instant, or rolls the instant back if any failed.
The source's rows and the changes never reach the driver.

With WHEN NOT MATCHED BY SOURCE, tasks of their own read the stored rows those clauses may change
(the slices the driver chose: one task per slice) and give each its record key; those rows join
the source's in the shuffle (their columns side by side with the source's, null on the other
side's rows), so that each deciding task holds every source and stored row of its keys.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, BooleanType, StringType, StructField, StructType

from hoodie_sink.datasource.batch_writer import task_identity
from hoodie_sink.datasource.routing import routed_with_config
from hoodie_sink.datasource.spark_schema import arrow_to_spark, spark_to_arrow
from hoodie_sink.errors import HoodieCommitStateUnknown, HoodieWriteConflictError
from hoodie_sink.table import client
from hoodie_sink.table.client import routing, write_read_changes
from hoodie_sink.table.dml import table_merger
from hoodie_sink.table.dml.merge_plan import MergeSpec
from hoodie_sink.table.dml.merge_tasks import MergeTaskPlan, changes_of, record_keys, stored_rows_of
from hoodie_sink.table.dml.table_merger import DmlTarget

KEY = "__hoodie_dml_key"
STORED = "__hoodie_dml_stored"  # true on a stored row (WHEN NOT MATCHED BY SOURCE), false on a source row
STORED_PREFIX = "__hoodie_stored_"  # a stored row's columns, beside the source's
COUNTS = "__hoodie_dml_counts"  # a deciding task's counts (pickled), on a row of its own
_RESULT = StructType([StructField("result", BinaryType(), False)])
_METRICS = (
    "num_source_rows",
    "num_target_rows_updated",
    "num_target_rows_inserted",
    "num_target_rows_deleted",
)


def merge_dataframe(merger: table_merger.TableMerger) -> dict[str, int]:
    """Run `merger` (its source a Spark DataFrame) as Spark jobs and one instant."""
    source: DataFrame = merger.source
    spark = source.sparkSession
    spec = MergeSpec(merger.predicate, merger.source_alias, merger.target_alias, tuple(merger.clauses))
    target = DmlTarget.open(merger.config, write_read_changes, checkpoint=merger.checkpoint)
    source_schema = spark_to_arrow(source.schema)
    if merger.merge_schema:
        target = target.evolved_by(spec, source_schema)
    plan = MergeTaskPlan.of(target, spec, source_schema, merger.merge_schema)
    sc = spark.sparkContext
    sc.setJobDescription(f"hoodie MERGE into {target.config.path}: deciding the changes")
    decided = _decided(source, target, plan).localCheckpoint(eager=True)
    counted = [pickle.loads(r[0]) for r in decided.where(F.col(COUNTS).isNotNull()).select(COUNTS).collect()]
    metrics = {name: sum(c.get(name, 0) for c in counted) for name in _METRICS}
    changes = decided.where(F.col(COUNTS).isNull()).drop(COUNTS)
    if not any(metrics[name] for name in _METRICS[1:]):
        return metrics  # nothing to change: no instant, as a one-process merge makes none
    sc.setJobDescription(f"hoodie MERGE into {target.config.path}: routing the changes")
    routed = routed_with_config(changes, target.config)
    schema = routing.user_schema(spark_to_arrow(routed.schema))
    ctx = client.begin(target.config, schema, routed=True, read_on=target.snapshot.timeline)
    try:
        read_on = routing.route_fingerprint(ctx.plan.operation, target.snapshot.timeline)
        if ctx.routed_on != read_on:  # the changes were decided on the table as it was
            raise HoodieWriteConflictError(
                f"{target.config.path} changed while the merge decided its changes (read on [{read_on}], now "
                f"[{ctx.routed_on}]): nothing is committed. Help: run the merge again."
            )

        def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            result = client.write_task(ctx, task_identity(), batches)
            yield pa.RecordBatch.from_pydict({"result": [pickle.dumps(result)]})

        sc.setJobDescription(f"hoodie MERGE into {target.config.path}: writing")
        results = [pickle.loads(r["result"]) for r in routed.mapInArrow(write, _RESULT).collect()]
        client.complete(ctx, results, target.commit_extra(), label="merge")
    except HoodieCommitStateUnknown:
        raise
    except BaseException:
        client.abort(ctx)
        raise
    return metrics


def _decided(source: DataFrame, target: DmlTarget, plan: MergeTaskPlan) -> DataFrame:
    """The merge's change rows (the table's columns and the delete mark), decided by tasks each
    holding every source row (and stored row, for WHEN NOT MATCHED BY SOURCE) of its keys; each
    task adds one row with its counts (COUNTS; the other columns null), so that the counts come
    from the kept result, once per task whatever Spark retried."""
    spark = source.sparkSession
    stored_schema = target.rows_of_refs([], list(plan.stored_columns)).schema
    by_source = plan.stored_slices is not None
    source_arrow = plan.source_schema  # the source's Arrow schema, derived once by the driver
    empty = target.shape.schema.empty_table()
    change_schema = target.change_rows(empty, empty).schema
    out_schema = pa.schema([*(f.with_nullable(True) for f in change_schema), pa.field(COUNTS, pa.binary())])

    def keyed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        opened = None  # the table's settings and schema, read once per task
        for batch in batches:
            opened = opened or plan.target()
            rows = pa.Table.from_batches([batch])
            keys = record_keys(plan, rows, opened)
            if by_source:
                yield from _shuffle_rows(source_arrow, stored_schema, rows, keys, False).to_batches()
            else:
                yield from rows.append_column(KEY, keys).to_batches()

    def stored(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        assert plan.stored_slices is not None
        for batch in ids:
            share = [plan.stored_slices[i] for i in batch.column(0).to_pylist()]
            rows, keys = stored_rows_of(plan, share)
            yield from _shuffle_rows(source_arrow, stored_schema, rows, keys, True).to_batches()

    def decide(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = [b for b in batches if b.num_rows]
        if not rows:
            return
        share = pa.Table.from_batches(rows).drop_columns([KEY])
        kept = None
        if by_source:
            is_stored = share.column(STORED)
            kept = _side(share.filter(is_stored), STORED_PREFIX, stored_schema)
            share = _side(share.filter(pc.invert(is_stored)), "", source_arrow)
        changes, counts = changes_of(plan, share, kept)
        changes = changes.append_column(COUNTS, pa.nulls(changes.num_rows, pa.binary()))
        yield from changes.cast(out_schema).to_batches()
        counted = {name: [None] for name in change_schema.names}
        yield pa.RecordBatch.from_pydict({**counted, COUNTS: [pickle.dumps(counts)]}, schema=out_schema)

    fields = [*source.schema.fields, StructField(KEY, StringType(), True)]
    if by_source:
        fields = [StructField(f.name, f.dataType, True) for f in source.schema.fields]
        fields += [
            StructField(STORED_PREFIX + f.name, f.dataType, True)
            for f in arrow_to_spark(stored_schema).fields
        ]
        fields += [StructField(STORED, BooleanType(), False), StructField(KEY, StringType(), True)]
    with_key = source.mapInArrow(keyed, StructType(fields))
    if by_source:
        assert plan.stored_slices is not None
        n = len(plan.stored_slices)  # a scan task per slice, as a file scan has, up to a bound
        scan = spark.range(n, numPartitions=max(1, min(n, 8 * spark.sparkContext.defaultParallelism)))
        with_key = with_key.union(scan.mapInArrow(stored, StructType(fields)))
    shuffled = with_key.repartition(spark.sparkContext.defaultParallelism, KEY)
    return shuffled.mapInArrow(decide, arrow_to_spark(out_schema))


def _shuffle_rows(
    source_schema: pa.Schema, stored_schema: pa.Schema, rows: pa.Table, keys: pa.Array, is_stored: bool
) -> pa.Table:
    """Source or stored rows as the shuffle carries both: the source's columns, the stored rows'
    (prefixed), the side, the key; the other side's columns null."""
    n = rows.num_rows
    cols = [rows.column(f.name) if not is_stored else pa.nulls(n, f.type) for f in source_schema]
    cols += [rows.column(f.name).cast(f.type) if is_stored else pa.nulls(n, f.type) for f in stored_schema]
    names = [*source_schema.names, *(STORED_PREFIX + name for name in stored_schema.names), STORED, KEY]
    return pa.table([*cols, pa.array([is_stored] * n, pa.bool_()), keys], names=names)


def _side(rows: pa.Table, prefix: str, schema: pa.Schema) -> pa.Table:
    """One side's rows back in its own names and Arrow types (Spark's round trip may widen them)."""
    return pa.Table.from_arrays([rows.column(prefix + f.name).cast(f.type) for f in schema], schema=schema)


table_merger.register_dataframe_merge(merge_dataframe, lambda source: isinstance(source, DataFrame))
