"""MERGE with a Spark DataFrame source, in Spark tasks (docs/design/table-dml.md#in-tasks).

The driver plans (table/dml/merge_tasks.MergeTaskPlan: metadata only) and begins the instant;
one Spark job then gives each source row its record key, shuffles the source by it, and in each
task decides that share's changes (`changes_of`) and writes them (`write_task`, as any unrouted
write: each file group claimed by one task); the driver commits the tasks' results as one instant,
or rolls the instant back if any task failed.  The source's rows never reach the driver.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from hoodie_sink.datasource.batch_writer import task_identity
from hoodie_sink.datasource.spark_schema import spark_to_arrow
from hoodie_sink.errors import HoodieCommitStateUnknown
from hoodie_sink.table import client
from hoodie_sink.table.client import write_read_changes
from hoodie_sink.table.dml import table_merger
from hoodie_sink.table.dml.merge_plan import MergeSpec
from hoodie_sink.table.dml.merge_tasks import MergeTaskPlan, changes_of, record_keys
from hoodie_sink.table.dml.table_merger import DmlTarget

KEY = "__hoodie_dml_key"
_RESULT = StructType([StructField("result", BinaryType(), False)])
_METRICS = (
    "num_source_rows",
    "num_target_rows_updated",
    "num_target_rows_inserted",
    "num_target_rows_deleted",
)


def merge_dataframe(merger: table_merger.TableMerger) -> dict[str, int]:
    """Run `merger` (its source a Spark DataFrame) as one Spark job and one instant."""
    source: DataFrame = merger.source
    spark = source.sparkSession
    spec = MergeSpec(merger.predicate, merger.source_alias, merger.target_alias, tuple(merger.clauses))
    target = DmlTarget.open(merger.config, write_read_changes, checkpoint=merger.checkpoint)
    plan = MergeTaskPlan.of(target, spec, spark_to_arrow(source.schema))
    change_schema = target.change_rows(
        target.shape.schema.empty_table(), target.shape.schema.empty_table()
    ).schema
    ctx = client.begin(target.config, change_schema, read_on=target.snapshot.timeline)
    sc = spark.sparkContext
    counts = {name: sc.accumulator(0) for name in _METRICS}

    def keyed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        opened = None  # the table's settings and schema, read once per task
        for batch in batches:
            opened = opened or plan.target()
            rows = pa.Table.from_batches([batch])
            yield from rows.append_column(KEY, record_keys(plan, rows, opened)).to_batches()

    def plan_and_write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = [b for b in batches if b.num_rows]
        if not rows:
            return
        share = pa.Table.from_batches(rows).drop_columns([KEY])
        changes, metrics = changes_of(plan, share)
        for name in _METRICS:
            counts[name].add(metrics.get(name, 0))
        result = client.write_task(ctx, task_identity(), changes.to_batches())
        yield pa.RecordBatch.from_pydict({"result": [pickle.dumps(result)]})

    sc.setJobDescription(f"hoodie MERGE into {target.config.path}")
    with_key = source.mapInArrow(
        keyed, StructType([*source.schema.fields, StructField(KEY, StringType(), True)])
    )
    shuffled = with_key.repartition(spark.sparkContext.defaultParallelism, KEY)
    try:
        results = [pickle.loads(r["result"]) for r in shuffled.mapInArrow(plan_and_write, _RESULT).collect()]
        if sum(r.num_records for r in results):
            client.complete(ctx, results, target.commit_extra(), label="merge")
        else:
            client.abort(ctx)  # nothing to change: no commit, as a one-process merge makes none
    except HoodieCommitStateUnknown:
        raise
    except BaseException:
        client.abort(ctx)
        raise
    return {name: counts[name].value for name in _METRICS}


table_merger.register_dataframe_merge(merge_dataframe, lambda source: isinstance(source, DataFrame))
