"""A real Kafka topic into a hoodie table: Apache Kafka's broker (KRaft, tests/support/kafka_broker.py)
and Spark's Kafka source (spark-sql-kafka-0-10 4.2.0 on PySpark 4.3, docs/spark/kafka.md).

The Spark side runs in a driver subprocess (tests/spark/kafka_driver.py) whose JVM starts with the
Kafka source's package; the broker, the producer and the checks run here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.tables import hudi_rs_read

REPO = Path(__file__).resolve().parents[2]
TOPIC = "events"
PARTITIONS = 3
FIRST, SECOND = 300, 120  # messages before and after the broker's restart


def _tail(proc: subprocess.Popen) -> str:
    """The end of the driver's log (a file, not a pipe: a pipe nobody reads would block the driver
    once Spark and the Kafka client have logged 64 KiB, as they may while the broker is down)."""
    log = Path(proc.args[-1]).parent / "driver.log"
    return f"--- {log} ---\n" + log.read_text(errors="replace")[-4000:]


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the driver ended before writing {path.name}:\n{_tail(proc)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {path.name} after {timeout:.0f} s")
        time.sleep(0.2)
    return json.loads(path.read_text())


def _table_rows(path: Path) -> int:
    return hudi_rs_read(path).num_rows if (path / ".hoodie").exists() else 0


def _wait_rows(path: Path, n: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    got = -1
    while time.monotonic() < deadline:
        got = _table_rows(path)
        if got >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the driver ended at {got} rows:\n{_tail(proc)}")
        time.sleep(0.5)
    raise AssertionError(f"{got} rows in the table after {timeout:.0f} s, expected {n}")


def _payload(i: int) -> tuple[str, str, int]:
    return (f"k{i}", json.dumps({"n": i}), i % PARTITIONS)


def test_kafka_topic_into_hoodie_through_a_broker_restart(kafka_broker, tmp_path):
    broker = kafka_broker
    broker.create_topic(TOPIC, PARTITIONS)
    sent = broker.produce(TOPIC, [_payload(i) for i in range(FIRST)])
    assert sorted({p for p, _ in sent}) == list(range(PARTITIONS))

    control, table = tmp_path / "control", tmp_path / "table"
    control.mkdir()
    cmd = [sys.executable, "-m", "tests.spark.kafka_driver", broker.bootstrap, TOPIC, str(table),
           str(tmp_path / "ckpt"), str(control)]  # fmt: skip
    with open(tmp_path / "driver.log", "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    try:
        # batch reads: every message, in its partition at its offset; a per-partition range
        batch = _wait_for(control / "batch.json", proc, 180)
        want = sorted((p, o, f"k{i}", json.dumps({"n": i})) for i, (p, o) in enumerate(sent))
        assert sorted((m["partition"], m["offset"], m["key"], m["value"]) for m in batch["whole"]) == want
        per_partition = FIRST // PARTITIONS
        want_ranged = [(p, o) for p, o, _, _ in want if (p == 0 and o >= 2) or p == 1 or (p == 2 and o < 3)]
        assert [(m["partition"], m["offset"]) for m in batch["ranged"]] == want_ranged
        assert len(want_ranged) == (per_partition - 2) + per_partition + 3

        # availableNow: every message lands, once
        done = _wait_for(control / "available_now.json", proc, 120)
        assert sum(done["batches"]) == FIRST
        assert _table_rows(table) == FIRST

        # a running query; the broker restarts under it; more messages; the query goes on
        _wait_for(control / "running.json", proc, 60)
        restart_s = broker.restart()
        broker.produce(TOPIC, [_payload(i) for i in range(FIRST, FIRST + SECOND)])
        _wait_rows(table, FIRST + SECOND, proc, 120)
        (control / "stop").touch()
        stopped = _wait_for(control / "stopped.json", proc, 60)
        assert stopped["error"] is None
        proc.wait(60)
        assert proc.returncode == 0, _tail(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    rows = hudi_rs_read(table)
    assert rows.num_rows == FIRST + SECOND
    got = sorted(zip(rows["kafka_partition"].to_pylist(), rows["key"].to_pylist(), strict=True))
    assert got == sorted((str(i % PARTITIONS), f"k{i}") for i in range(FIRST + SECOND))
    assert rows["_hoodie_record_key"].unique().to_pylist().__len__() == FIRST + SECOND
    at = {name: d["at"] for name, d in (("batch", batch), ("availableNow", done), ("stopped", stopped))}
    print(
        f"broker starts: {[round(s, 1) for s in broker.start_times]} s (the restart: {restart_s:.1f} s); "
        f"driver: {at} s after its start"
    )
