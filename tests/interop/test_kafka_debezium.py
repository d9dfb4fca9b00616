"""Issue 31's Kafka test: a Debezium CDC topic (op c/u/d with tombstones, before/after, ts_ms,
source.lsn; 3 partitions, messages keyed by the primary key) streamed by the README's job
(hoodie_sink/kafka_job.py: Spark's Kafka source, hoodie_sink.spark.debezium_changes, routed
micro-batches) into a merge-on-read table with PostgresDebeziumAvroPayload (docs/hudi/debezium.md).

The driver (tests/interop/kafka_cdc_driver.py, at most 150 messages a micro-batch) is killed with SIGKILL
mid-stream and started again from its checkpoint; then the broker restarts under it and more
changes arrive.  Checked: exactly once against the topic's contents (each micro-batch committed
once, the committed ones covering the topic's offsets without a gap), and the table equals the one
the topic implies, read by our reader, hudi-rs and Apache Hudi 0.15 (Java).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.kafka_job import ChangeStream, table_of
from tests.interop.kafka_cdc_driver import HEARTBEAT_MS
from tests.support.kafka_broker import kafka_broker  # noqa: F401 - the broker fixture
from tests.unit.write.test_debezium_payload import hudi_rs_v1

pytestmark = [pytest.mark.compat, pytest.mark.interop]
REPO = Path(__file__).resolve().parents[2]
TOPIC = "accounts_cdc"
FIRST, SECOND = 600, 300  # change events before the kill / after the broker restart
COLUMNS = ["id", "region", "owner", "balance", "_event_lsn", "_change_operation_type"]


def _messages(events: list[tuple[str, str]]) -> list[tuple[str, str | None, None]]:
    """Kafka messages: each event, and after a delete Debezium's tombstone (a null value)."""
    out: list[tuple[str, str | None, None]] = []
    for key, value in events:
        out.append((key, value, None))
        if json.loads(value)["op"] == "d":
            out.append((key, None, None))
    return out


def _start(tmp_path: Path, bootstrap: str, n: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "tests.interop.kafka_cdc_driver", bootstrap, TOPIC, str(tmp_path / "table"),
           str(tmp_path / "ckpt"), str(tmp_path / "control")]  # fmt: skip
    with open(tmp_path / f"driver-{n}.log", "wb") as log:
        return subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)


def _deltacommits(table: Path) -> list[Path]:
    meta = table / ".hoodie"
    return sorted(meta.glob("*.deltacommit")) if meta.exists() else []


def _pending(table: Path) -> list[str]:
    """Data instants requested or inflight, not completed."""
    meta = table / ".hoodie"
    names = {p.name for p in meta.iterdir()} if meta.exists() else set()
    started = {
        n.split(".")[0] for n in names if n.endswith((".deltacommit.requested", ".deltacommit.inflight"))
    }
    return sorted(i for i in started if f"{i}.deltacommit" not in names)


def _wait(cond, proc: subprocess.Popen, timeout: float, what: str, tmp_path: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        if proc.poll() is not None:
            logs = sorted(tmp_path.glob("driver-*.log"))[-1].read_text(errors="replace")[-4000:]
            raise AssertionError(f"the driver ended while waiting for {what}:\n{logs}")
        time.sleep(0.5)
    raise AssertionError(f"no {what} after {timeout:.0f} s")


def _rows(t: pa.Table) -> dict[int, dict]:
    return {r["id"]: r for r in t.select(COLUMNS).to_pylist()}


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_debezium_topic_into_mor_through_a_kill_and_a_broker_restart(kafka_broker, java_hudi, tmp_path):  # noqa: F811
    broker, table = kafka_broker, tmp_path / "table"
    (tmp_path / "control").mkdir()
    broker.create_topic(TOPIC, 3)
    stream = ChangeStream(keys=100, seed=31)
    sent = _messages(stream.events(FIRST))
    placed = broker.produce(TOPIC, sent)
    assert sorted({p for p, _ in placed}) == [0, 1, 2]
    t0 = time.monotonic()

    proc = _start(tmp_path, broker.bootstrap, 1)
    try:
        # kill -9 mid-stream: a micro-batch committed, the next one being written
        _wait(lambda: _deltacommits(table) and _pending(table), proc, 150, "a commit, then a write", tmp_path)
        at = {"killed": time.monotonic() - t0}
        _kill(proc)
        killed_at = len(_deltacommits(table))
        killed_pending = _pending(table)
        time.sleep(HEARTBEAT_MS / 1000 * 2 + 1.2)  # the killed write's heartbeat expires
        proc = _start(tmp_path, broker.bootstrap, 2)
        _wait(
            lambda: len(_deltacommits(table)) > killed_at, proc, 150, "a commit after the restart", tmp_path
        )
        at["commit after the restart"] = time.monotonic() - t0
        restart_s = broker.restart()
        more = _messages(stream.events(SECOND))
        placed += broker.produce(TOPIC, more)
        sent += more
        want = table_of(v for _, v, _ in sent)
        _wait(lambda: _rows(hoodie_sink.read(str(table))) == want, proc, 180, "the table the topic implies",
              tmp_path)  # fmt: skip
        at["caught up"] = time.monotonic() - t0
        (tmp_path / "control" / "stop").touch()
        _wait(
            lambda: list((tmp_path / "control").glob("stopped-*.json")),
            proc,
            60,
            "the query's stop",
            tmp_path,
        )
        proc.wait(60)
        assert proc.returncode == 0
    finally:
        _kill(proc)
    elapsed = time.monotonic() - t0

    stopped = json.loads(next((tmp_path / "control").glob("stopped-*.json")).read_text())
    assert stopped["error"] is None
    # exactly once: each micro-batch committed once (its id in the commit's checkpoint map), the
    # committed ids 0..last without a gap, and the last one's end offsets (Spark's offset log) the
    # topic's end: every message is in exactly one committed micro-batch
    commits = [json.loads(p.read_text())["extraMetadata"] for p in _deltacommits(table)]
    ids = [int(v) for c in commits for v in json.loads(c["_hudi_streaming_sink_checkpoint"]).values()]
    assert sorted(ids) == list(range(len(ids))), f"committed micro-batches {sorted(ids)}"
    last_offsets = json.loads((tmp_path / "ckpt" / "offsets" / str(len(ids) - 1)).read_text().splitlines()[2])
    end = {str(p): 1 + max(o for q, o in placed if q == p) for p in range(3)}
    assert last_offsets[TOPIC] == end
    events = sum(1 for _, v, _ in sent if v is not None)
    # the table the topic implies, read by us, hudi-rs and Java
    assert _rows(hoodie_sink.read(str(table))) == want
    assert _rows(hudi_rs_v1(table)) == want
    assert _rows(java_hudi.read(table)) == want
    # the killed write was rolled back by the restarted driver (its instant never completed)
    assert not set(killed_pending) & {p.name.split(".")[0] for p in _deltacommits(table)}
    print(f"{events} change events ({len(sent) - events} tombstones) in {len(ids)} micro-batches, "
          f"{len(want)} live keys; killed after {killed_at} deltacommit(s) while writing {killed_pending}; "
          f"broker restart {restart_s:.1f} s; "
          f"{elapsed:.0f} s in all; at {', '.join(f'{k}: {v:.0f} s' for k, v in at.items())}")  # fmt: skip
