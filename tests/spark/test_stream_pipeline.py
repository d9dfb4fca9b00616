"""A two-stage streaming pipeline (issue 13): event files -> hoodie table A (stage 1), then
`spark.readStream.format("hoodie")` of A -> an aggregate per city -> hoodie table B (stage 2,
complete mode: each micro-batch replaces B with the running aggregate).  Each stage's driver is
killed with SIGKILL once at a crash point of its sink's commit (tests/spark/test_streaming_kill.py
patches them in), then restarted from its checkpoint: A holds every event once and B equals the
aggregate of all events, so nothing was lost or counted twice across the two checkpoints."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.spark.stream_drivers import events_into_a, totals_into_b, wait_out_the_killed_heartbeat
from tests.spark.test_streaming_kill import KILL_AT, SITECUSTOMIZE, run_driver
from tests.support.tables import assert_table_matches, hudi_rs_read
from tests.support.worker_site import driver_env

pytestmark = pytest.mark.slow


def event_files(src: Path, files: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    src.mkdir(parents=True)
    out: list[dict] = []
    for f in range(files):
        rows = [{"id": len(out) + i, "city": rng.choice("abcd"), "fare": float(rng.randrange(1, 100))}
                for i in range(rng.randrange(20, 60))]  # fmt: skip
        out += rows
        pq.write_table(pa.Table.from_pylist(rows), src / f"part-{f:05d}.parquet")
    return out


def totals_of(events: list[dict]) -> list[dict]:
    out: dict[str, dict] = {}
    for e in events:
        t = out.setdefault(e["city"], {"city": e["city"], "events": 0, "fares": 0.0})
        t["events"] += 1
        t["fares"] += e["fare"]
    return list(out.values())


def test_a_two_stage_pipeline_survives_a_kill_of_each_stage(spark, tmp_path):
    src, a, b = tmp_path / "src", tmp_path / "a", tmp_path / "b"
    events = event_files(src, 6, seed=3)
    env = driver_env(tmp_path / "site", SITECUSTOMIZE)
    stage1 = [str(src), str(a), str(tmp_path / "ckpt1")]
    stage2 = [str(a), str(b), str(tmp_path / "ckpt2")]
    # stage 1 dies in its third micro-batch, before the commit file
    marks1 = tmp_path / "marks1"
    run_driver(
        "events_into_a", stage1, {**env, KILL_AT: f"before-commit:{marks1}:2"}, marks1 / "before-commit"
    )
    assert 0 < hudi_rs_read(a).num_rows < len(events)
    # stage 2 dies right after its second commit to B, before Spark recorded the batch
    marks2 = tmp_path / "marks2"
    run_driver("totals_into_b", stage2, {**env, KILL_AT: f"after-commit:{marks2}:1"}, marks2 / "after-commit")
    # both restart from their checkpoints (in this session) and run to the end, stage 2 while
    # stage 1 is behind it
    wait_out_the_killed_heartbeat()
    totals_into_b(spark, *stage2)
    events_into_a(spark, *stage1)
    totals_into_b(spark, *stage2)
    assert_table_matches(a, events)
    got = sorted(hudi_rs_read(b).select(["city", "events", "fares"]).to_pylist(), key=lambda r: r["city"])
    assert got == sorted(totals_of(events), key=lambda r: r["city"])
