"""Partial updates (PartialUpdateAvroPayload, docs/hudi/partial-update.md) written through Spark:
`df.write.format("hoodie")` as it is and routed (hoodie_sink.spark.route), copy-on-write and
merge-on-read, against the payload's model of tests/unit/write/test_partial_update.py (random
batches with null and missing columns, late and tied ordering values, deletes), read back by our
reader and hudi-rs.

In a multi-task write the order in which a key's records of one batch meet is Spark's, and the
payload's fold depends on it (docs/hudi/partial-update.md#what-hoodie_sink-does), so those batches
hold a key once; a batch with a key several times is written from one ordered partition."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
import hoodie_sink.spark
from tests.unit.write.test_partial_update import (
    SCHEMA,
    Model,
    base_files,
    check_hudi_rs,
    data_of,
    file_ids,
    latest_instant,
    options,
    ours,
    reduce_batch,
    run_sequence,
)


def spark_writer(spark, routed: bool, partitions: int):
    def write(
        path: Path, opts: dict, rows: list[dict], missing: list[str], operation: str = "upsert"
    ) -> None:
        schema = pa.schema([f for f in SCHEMA if f.name not in missing])
        table = pa.Table.from_pylist([{c: r[c] for c in schema.names} for r in rows], schema=schema)
        df = spark.createDataFrame(table.to_pandas()).repartition(partitions)
        full = {**opts, "hoodie.datasource.write.operation": operation}
        if routed:
            df = df.transform(hoodie_sink.spark.route(str(path), full))
        df.write.format("hoodie").options(**full).mode("append").save(str(path))

    return write


@pytest.mark.parametrize("routed", [False, True], ids=["as-is", "routed"])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_partial_updates_through_spark_match_the_payload(spark, tmp_path, table_type, routed):
    writer = spark_writer(spark, routed, partitions=3)
    for _ in run_sequence(tmp_path / "t", table_type, 60, rounds=4, writer=writer, one_per_key=True):
        pass


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_key_several_times_in_one_ordered_partition_folds_in_order(spark, tmp_path, table_type):
    path, opts, model = tmp_path / "t", options(table_type), Model()
    mor = table_type == "MERGE_ON_READ"
    writer = spark_writer(spark, False, partitions=1)
    first = [{"id": f"k{i}", "p": f"p{i % 2}", "ts": 5, "a": "a", "b": 1, "c": None} for i in range(6)]
    writer(path, opts, first, [])
    model.apply(reduce_batch(first), set(), False)
    model.fid.update(file_ids(ours(path)))
    seen = base_files(path)
    # k1: a tie, a late record and nulls; k2: a missing column; k9: a new key twice
    batch = [
        {"id": "k1", "p": "p1", "ts": 6, "a": None, "b": 7, "c": None},
        {"id": "k1", "p": "p1", "ts": 6, "a": "x", "b": None, "c": 2.5},
        {"id": "k1", "p": "p1", "ts": 3, "a": "late", "b": 99, "c": 9.5},
        {"id": "k2", "p": "p0", "ts": 8, "a": None, "b": 3, "c": None},
        {"id": "k9", "p": "p1", "ts": 1, "a": "n", "b": None, "c": None},
        {"id": "k9", "p": "p1", "ts": 2, "a": None, "b": 4, "c": None},
    ]
    writer(path, opts, batch, [])
    now = base_files(path)
    rewritten = {fid for fid, inst in now - seen if inst == latest_instant(path)}
    model.apply(reduce_batch(batch), rewritten, mor)
    assert data_of(ours(path)) == model.rows()
    assert model.rows()["k1"] == {"id": "k1", "p": "p1", "ts": 6, "a": "x", "b": 7, "c": 2.5}
    check_hudi_rs(path, model, mor)
