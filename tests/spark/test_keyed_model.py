"""Keyed writes (upsert, delete) of every index type against Hudi's semantics (tests/support/keyed_model.py),
through df.write.format("hoodie") with the batch randomly repartitioned (issue 8, items 1 and 2).

Lean on purpose: small batches, three commits per table, the shared session.
"""

from __future__ import annotations

import random

import pytest

import hoodie_sink.spark
from tests.support.keyed_model import (
    VARIANTS,
    BatchGenerator,
    KeyedModel,
    assert_locations,
    next_batch,
    options_for,
)
from tests.support.tables import assert_table_matches, partition_of_keys

DDL = "id STRING, p STRING, ts LONG, v LONG, _hoodie_is_deleted BOOLEAN"
COLUMNS = ["id", "p", "ts", "v", "_hoodie_is_deleted"]


def write(spark, path, options, rows, n_tasks, operation="upsert", routed=False):
    df = spark.createDataFrame([tuple(r[c] for c in COLUMNS) for r in rows], DDL).repartition(n_tasks)
    options = {**options, "hoodie.datasource.write.operation": operation}
    if routed:  # the route's own parallelism is drawn too: it does not follow the input's
        df = df.transform(hoodie_sink.spark.route(path, options, parallelism=n_tasks % 3 + 1))
    df.write.format("hoodie").options(**options).mode("append").save(path)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("index,move", VARIANTS, ids=[f"{i}{'-move' if m else ''}" for i, m in VARIANTS])
def test_keyed_writes_match_hudi_semantics(spark, tmp_path, index, move, seed):
    _model_run(spark, tmp_path, index, move, seed, routed=False)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("index,move", VARIANTS, ids=[f"{i}{'-move' if m else ''}" for i, m in VARIANTS])
def test_routed_keyed_writes_match_hudi_semantics(spark, tmp_path, index, move, seed):
    """The same model run with hoodie_sink.spark.route in front of the sink (issue 27)."""
    _model_run(spark, tmp_path, index, move, seed, routed=True)


def _model_run(spark, tmp_path, index, move, seed, routed):
    rng = random.Random(2000 + seed)
    gen = BatchGenerator(100 + seed, key_space=150)
    model = KeyedModel(index, move)
    path = str(tmp_path / "t")
    options = options_for(index, move)
    # inserts; updates, moves, late records, soft deletes; the delete operation.  Routed (but on the
    # BUCKET index, which refuses them): an append or bulk_insert of new keys, which the next
    # upsert finds and updates
    steps = ["upsert", "upsert", "delete"]
    if routed and index != "bucket":
        steps[1:1] = [("append", "bulk_insert")[seed % 2], "upsert"]
    for step, operation in enumerate(steps):
        if operation in ("append", "bulk_insert"):
            n = rng.randrange(1, 60)
            rows = [_row(f"new{step}-{i}", rng.choice("abcd"), rng.randrange(1, 9)) for i in range(n)]
        else:
            rows = next_batch(gen, model, rng, operation, 15, (40, 90))
        write(spark, path, options, rows, rng.randrange(1, 5), operation, routed)
        model.apply(rows, "delete" if operation == "delete" else "upsert")
        assert_locations(assert_table_matches(path, model.expected()), model)


def _row(k, p, ts, deleted=False):
    return {"id": k, "p": p, "ts": ts, "v": ts, "_hoodie_is_deleted": deleted}


def test_global_index_moves_only_the_winner(spark, tmp_path):
    """Item 1 through Spark: the records of a key spread over tasks; the key ends in the winner's
    partition only, and a late record moves nothing."""
    path = str(tmp_path / "t")
    options = options_for("global_bloom", True)
    write(spark, path, options, [_row("late", "a", 50), _row("stay", "a", 10), _row("twice", "a", 10),
                                 _row("gone", "a", 10), _row("moves", "a", 10)], 1)  # fmt: skip
    batch = [_row("late", "b", 40), _row("stay", "b", 20), _row("twice", "b", 20), _row("gone", "b", 20),
             _row("moves", "c", 20), _row("stay", "a", 30), _row("twice", "c", 30),
             _row("gone", "a", 30, deleted=True), _row("moves", "d", 15)]  # fmt: skip
    write(spark, path, options, batch, 4)
    theirs = assert_table_matches(path, [_row("late", "a", 50), _row("stay", "a", 30), _row("twice", "c", 30),
                                         _row("moves", "c", 20)])  # fmt: skip
    assert partition_of_keys(theirs) == {"late": "a", "stay": "a", "twice": "c", "moves": "c"}


@pytest.mark.parametrize("index", ["bloom", "bucket"])
def test_partition_scoped_index_combines_per_key_and_partition(spark, tmp_path, index):
    """Item 2 through Spark: a CDC batch deleting k in d4 and inserting k in d0 leaves k in d0 only."""
    path = str(tmp_path / "t")
    options = options_for(index, False)
    write(spark, path, options, [_row("k", "d4", 1), _row("j", "d4", 1)], 1)
    cdc = [_row("k", "d4", 2, deleted=True), _row("k", "d0", 3),
           _row("j", "d0", 2), _row("j", "d4", 3, deleted=True)]  # fmt: skip
    write(spark, path, options, cdc, 1)
    theirs = assert_table_matches(path, [_row("k", "d0", 3), _row("j", "d0", 2)])
    assert sorted(theirs.column("_hoodie_partition_path").to_pylist()) == ["d0", "d0"]
