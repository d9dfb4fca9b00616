"""df.writeStream.format("hoodie"): one commit per non-empty micro-batch, exactly once."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support import faulty_source
from tests.support.streams import stream_files
from tests.support.tables import assert_table_matches, hudi_rs_timeline, streaming_batch_ids

SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("fare", pa.float64()),
                    ("_hoodie_is_deleted", pa.bool_())])  # fmt: skip
OPTS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}


def cdc_files(src: Path, batches: int, seed: int = 0, rows=(5, 60)) -> list[list[dict]]:
    """A CDC-like stream: one parquet file per micro-batch, inserts, updates and deletes."""
    rng = random.Random(seed)
    src.mkdir(parents=True, exist_ok=True)
    out, ts, live = [], 0, set()
    for b in range(batches):
        rows_b = []
        for _ in range(rng.randrange(*rows)):
            ts += 1
            i = rng.choice(sorted(live)) if live and rng.random() < 0.4 else rng.randrange(10_000)
            deleted = i in live and rng.random() < 0.15
            rows_b.append(
                {"id": i, "city": "abc"[i % 3], "ts": ts, "fare": float(ts), "_hoodie_is_deleted": deleted}
            )
            (live.discard if deleted else live.add)(i)
        f = src / f"part-{b:05d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows_b, schema=SCHEMA), f)
        # Spark's file source takes files oldest first by modification time: make the order strict
        os.utime(f, (1_700_000_000 + b, 1_700_000_000 + b))
        out.append(rows_b)
    return out


def model_of(batches: list[list[dict]]) -> list[dict]:
    model: dict[int, dict] = {}
    for rows in batches:
        for r in rows:  # ts grows with arrival: the later record wins
            if r["_hoodie_is_deleted"]:
                model.pop(r["id"], None)
            else:
                model[r["id"]] = r
    return list(model.values())


def run_stream(spark, src: Path, path: Path, ckpt: Path, extra: dict | None = None):
    return stream_files(spark, _spark_schema(spark), src, path, ckpt, {**OPTS, **(extra or {})})


def _spark_schema(spark):
    return "id LONG, city STRING, ts LONG, fare DOUBLE, _hoodie_is_deleted BOOLEAN"


def commits(path: Path) -> list:
    return hudi_rs_timeline(path).get_completed_commits()


def test_stream_of_50_upsert_and_delete_batches_equals_the_model(spark, tmp_path):
    batches = cdc_files(tmp_path / "src", 50)
    q = run_stream(spark, tmp_path / "src", tmp_path / "t", tmp_path / "ckpt")
    assert_table_matches(tmp_path / "t", model_of(batches))
    assert streaming_batch_ids(tmp_path / "t") == list(range(50))  # active and archived commits
    cs = commits(tmp_path / "t")
    meta = json.loads(hudi_rs_timeline(tmp_path / "t").get_instant_metadata_in_json(cs[-1]))
    cp = json.loads(meta["extraMetadata"]["_hudi_streaming_sink_checkpoint"])
    assert list(cp.values()) == ["49"]
    assert q.lastProgress is not None and q.lastProgress["numInputRows"] > 0


@pytest.mark.s3
def test_replayed_batch_writes_and_commits_nothing(spark, tmp_path):
    batches = cdc_files(tmp_path / "src", 4)
    run_stream(spark, tmp_path / "src", tmp_path / "t", tmp_path / "ckpt")
    before = [c.timestamp for c in commits(tmp_path / "t")]
    files_before = sorted(p.name for p in (tmp_path / "t").rglob("*.parquet"))
    # as after a crash between our commit and Spark's: Spark replays the last batch
    for f in ("3", ".3.crc"):
        (tmp_path / "ckpt" / "commits" / f).unlink(missing_ok=True)
    run_stream(spark, tmp_path / "src", tmp_path / "t", tmp_path / "ckpt")
    assert [c.timestamp for c in commits(tmp_path / "t")] == before
    assert sorted(p.name for p in (tmp_path / "t").rglob("*.parquet")) == files_before
    assert_table_matches(tmp_path / "t", model_of(batches))


@pytest.mark.s3
def test_task_retry_inside_a_micro_batch_leaves_no_duplicates(spark, tmp_path):
    src = tmp_path / "src"
    batches = cdc_files(src, 3, rows=(200, 300))
    # two input files per batch -> two tasks; the task of partition 1 fails once each batch
    for f in sorted(src.glob("*.parquet")):
        t = pq.read_table(f)
        half = t.num_rows // 2
        mtime = f.stat().st_mtime
        for suffix, part in (("-a", t.slice(0, half)), ("-b", t.slice(half))):
            g = f.with_name(f.stem + suffix + ".parquet")
            pq.write_table(part, g)
            os.utime(g, (mtime, mtime))
        f.unlink()
    df = spark.readStream.schema(_spark_schema(spark)).option("maxFilesPerTrigger", 2).parquet(str(src))
    q = (
        df.writeStream.format(faulty_source.register(spark)).options(**OPTS).option("fault.task", "1")
        .option("fault.log", str(tmp_path / "faults"))
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start(str(tmp_path / "t"))
    )  # fmt: skip
    q.awaitTermination(600)
    q.stop()
    assert q.exception() is None
    # one first-attempt failure of task 1 per micro-batch, each in a Python worker
    hits = faulty_source.injected_in(tmp_path / "faults")
    assert [(part, attempt) for _, part, attempt in hits] == [(1, 0)] * 3 and os.getpid() not in {
        h[0] for h in hits
    }
    assert_table_matches(tmp_path / "t", model_of(batches))


def test_empty_micro_batches_make_no_commit(spark, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(SCHEMA.empty_table(), src / "part-00000.parquet")
    run_stream(spark, src, tmp_path / "t", tmp_path / "ckpt")
    assert not (tmp_path / "t" / ".hoodie").exists() or commits(tmp_path / "t") == []
    shutil.rmtree(tmp_path / "ckpt")


def _insert_files(src: Path, batches: int, rows: int) -> list[dict]:
    src.mkdir(parents=True, exist_ok=True)
    out = []
    for b in range(batches):
        rows_b = [
            {"id": b * rows + i, "city": "a", "ts": b, "fare": float(i), "_hoodie_is_deleted": False}
            for i in range(rows)
        ]
        f = src / f"part-{b:05d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows_b, schema=SCHEMA), f)
        os.utime(f, (1_700_000_000 + b, 1_700_000_000 + b))
        out += rows_b
    return out


def _file_versions(path: Path) -> dict[str, int]:
    """file id -> how many base file versions (one per commit that wrote the file group)."""
    out: dict[str, int] = {}
    for f in (path / "a").glob("*.parquet"):
        fid = f.name.split("_")[0]
        out[fid] = out.get(fid, 0) + 1
    return out


def test_streaming_insert_writes_new_file_groups_as_flinks_append_mode(spark, tmp_path):
    """A stream's inserts never rewrite earlier batches' files (the Flink writer's insert); with
    append.mode=false they fill the small file, each batch rewriting it (Hudi Spark's insert)."""
    rows = _insert_files(tmp_path / "src", 3, 50)
    insert = {"hoodie.datasource.write.operation": "insert"}
    run_stream(spark, tmp_path / "src", tmp_path / "t", tmp_path / "ckpt", insert)
    assert_table_matches(tmp_path / "t", rows)
    assert len(commits(tmp_path / "t")) == 3
    assert sorted(_file_versions(tmp_path / "t").values()) == [1, 1, 1]

    packing = {**insert, "hoodie.datasource.write.append.mode": "false"}
    run_stream(spark, tmp_path / "src", tmp_path / "p", tmp_path / "ckpt2", packing)
    assert_table_matches(tmp_path / "p", rows)
    assert sorted(_file_versions(tmp_path / "p").values()) == [3]
