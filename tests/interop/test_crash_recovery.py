"""A crashed write of ours followed by a Java write, and a crashed Java write followed by ours: the
survivor rolls the crashed write back, nothing committed is lost, nothing of the crashed write is
visible or left behind."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie_sink.table import client
from hoodie_sink.table.format.heartbeat import release_heartbeat
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.write.context import TaskIdentity
from tests.interop.compare import assert_readers_agree, assert_timeline_agrees
from tests.interop.conftest import ZONES
from tests.interop.java_hudi import JavaHudi
from tests.interop.test_we_write_into_java_tables import ARROW, BASE, Rounds, ours, theirs

pytestmark = [pytest.mark.compat, pytest.mark.interop]

# a dead writer's heartbeat expires after interval x misses: 2 s here, not 2 minutes
HEARTBEAT_MS = "hoodie.client.heartbeat.interval_in_ms"
FAST_BEAT = {HEARTBEAT_MS: "1000"}


def data_files_of(path: Path, instant: str) -> list[Path]:
    return [p for p in path.rglob(f"*_{instant}.parquet") if ".hoodie" not in p.parts]


def test_our_crashed_upsert_then_a_java_write(spark, java_local, tmp_path, writers_zone):
    writers_zone(ZONES[java_local.version])
    path = tmp_path / "t"
    model = Rounds(seed=7, path=path)
    theirs(java_local, path, model.upserts(n_new=200, n_updates=0, duplicates=0), "insert")
    ours(spark, path, model.upserts(n_new=20, n_updates=40))

    # our upsert crashes after writing its files (claims and staged files included)
    crashed = Rounds(seed=8, path=path)
    crashed.by_key = dict(model.by_key)
    batch = pa.Table.from_pylist(crashed.upserts(n_new=10, n_updates=50, duplicates=0), schema=ARROW)
    ctx = client.begin(WriteConfig.from_options({**BASE, **FAST_BEAT}, path=str(path)), batch.schema)
    client.write_task(ctx, TaskIdentity(only_task=True), batch.to_batches())
    release_heartbeat(ctx.storage, ctx.instant)  # the process is gone: its heartbeat keeper too
    instant = ctx.instant
    assert data_files_of(path, instant), "the crashed write left files"
    time.sleep(3.5)

    theirs(java_local, path, model.upserts(n_new=5, n_updates=30))  # Java rolls ours back first
    assert not data_files_of(path, instant)
    assert not (path / ".hoodie" / ".temp" / instant).exists()
    assert_readers_agree(java_local.read(path), path, model.rows())
    ours(spark, path, model.upserts(n_new=5, n_updates=30))
    assert_readers_agree(java_local.read(path), path, model.rows())
    assert_timeline_agrees(java_local, path)


def _kill_mid_write(java: JavaHudi, path: Path, batch: pa.Table, options: dict) -> str:
    """Start a Java write and kill -9 its JVM once the write's first data file is on storage;
    returns the instant it was writing."""
    src = java.scratch / "crash.parquet"
    pq.write_table(batch, src)
    before = {p.name for p in path.rglob("*.parquet")}
    assert java.proc.stdin is not None
    java.proc.stdin.write(
        json.dumps({"op": "write", "args": {"path": str(path), "input": str(src), "options": options}}) + "\n"
    )
    java.proc.stdin.flush()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        hoodie = path / ".hoodie"
        pending = [p.name.split(".")[0] for p in hoodie.glob("*.commit.requested")]
        pending = sorted(t for t in pending if not (hoodie / f"{t}.commit").exists())
        new = [p for p in path.rglob("*.parquet") if ".hoodie" not in p.parts and p.name not in before]
        if pending and new:
            os.killpg(java.proc.pid, signal.SIGKILL)
            java.proc.wait(30)
            return pending[-1]
        time.sleep(0.05)
    raise AssertionError("the Java write wrote no data file in 300 s")


def test_a_crashed_java_write_then_ours(spark, tmp_path, writers_zone):
    version = "0.15.0"
    writers_zone(ZONES[version])
    path = tmp_path / "t"
    model = Rounds(seed=9, path=path)
    java = JavaHudi(version, timezone=ZONES[version])
    try:
        theirs(java, path, model.upserts(n_new=300, n_updates=0, duplicates=0), "insert")
        n = 400_000
        big = pa.table(
            {"id": pa.array(range(10_000_000, 10_000_000 + n), pa.int64()),
             "city": pa.array(["sf", "nyc", "austin"] * (n // 3) + ["sf"] * (n % 3)),
             "ts": pa.array([99] * n, pa.int64()), "fare": pa.array([1.0] * n)},
            schema=ARROW,
        )  # fmt: skip
        instant = _kill_mid_write(
            java, path, big, {**BASE, **FAST_BEAT, "hoodie.datasource.write.operation": "insert"}
        )
    finally:
        java.close()
    assert data_files_of(path, instant)
    assert (path / ".hoodie" / ".temp" / instant).exists()
    time.sleep(3.5)  # Java's heartbeat of the dead write expires

    ours(spark, path, model.upserts(n_new=20, n_updates=40), **FAST_BEAT)  # rolls Java's write back first
    assert not data_files_of(path, instant), "Java's files (listed in its markers) are deleted"
    assert not list((path / ".hoodie").glob(f"{instant}.*")), "its instant is rolled back"
    java = JavaHudi(version, timezone=ZONES[version])
    try:
        assert_readers_agree(java.read(path), path, model.rows())
        theirs(java, path, model.upserts(n_new=5, n_updates=10))
        assert_readers_agree(java.read(path), path, model.rows())
    finally:
        java.close()
