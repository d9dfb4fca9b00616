"""Demo (`./run.sh demo --kafka`): a Debezium CDC topic streamed into a Hudi merge-on-read table
(./demo_kafka_table) by the README's Kafka-to-lake job (hoodie_sink/kafka_job.py).

It starts a local Apache Kafka broker (KRaft, one node, on 127.0.0.1), creates a topic with three
partitions and produces a synthetic Debezium change stream of an `accounts` table into it (creates,
updates, deletes with their tombstones, keyed by the primary key), then runs the Spark job: Spark's
Kafka source, `hoodie_sink.spark.debezium_changes`, routed micro-batches written with
PostgresDebeziumAvroPayload ordered by `_event_lsn` (docs/hudi/debezium.md).  Half of the stream is
produced while the query runs.  One progress line per micro-batch; at the end the table is read
back with hoodie_sink's reader (and hudi-rs when installed) and compared with the table the topic
implies; the broker is stopped.

It runs from a clone of the repository: the broker and its jars come from the test tier's set-up
(tests/support/kafka_setup.py and kafka_broker.py; `./run.sh demo --kafka` fetches them).
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

TOPIC = "accounts_cdc"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--path", default=os.path.join(os.getcwd(), "demo_kafka_table"))
    ap.add_argument("--events", type=int, default=40_000, help="change events in the topic")
    ap.add_argument("--keys", type=int, default=5_000, help="distinct primary keys")
    ap.add_argument("--per-batch", type=int, default=5_000, help="maxOffsetsPerTrigger")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need hoodie_sink too
    try:  # the test tier's set-up and broker (not part of the package: imported by name)
        kafka_setup = importlib.import_module("tests.support.kafka_setup")
        KafkaBroker = importlib.import_module("tests.support.kafka_broker").KafkaBroker
    except ImportError as e:
        print(
            f"hoodie demo --kafka runs from a clone of the repository (./run.sh demo --kafka): {e}",
            file=sys.stderr,
        )
        return 2
    missing = kafka_setup.missing()
    if missing:
        print(
            f"hoodie demo --kafka: Kafka is not set up ({missing}); run ./run.sh demo --kafka",
            file=sys.stderr,
        )
        return 2

    from hoodie_sink.kafka_job import ChangeStream, start_job, table_of

    work = Path(tempfile.mkdtemp(prefix="hoodie-kafka-demo-"))
    shutil.rmtree(args.path, ignore_errors=True)
    print(f"hoodie demo --kafka: {args.events:,} Debezium change events of {args.keys:,} accounts -> "
          f"MERGE_ON_READ table {args.path} (micro-batches of at most {args.per_batch:,} messages)")  # fmt: skip
    broker = KafkaBroker(work / "kafka")
    try:
        print(f"  Kafka broker (KRaft) on {broker.bootstrap}: started in {broker.start():.1f}s", flush=True)
        broker.create_topic(TOPIC, 3)
        stream = ChangeStream(keys=args.keys, seed=7)
        sent: list = []

        def produce(n: int) -> None:
            msgs = [(k, v, None) for k, v in stream.events(n)]
            with_tombstones: list[tuple[str, str | None, None]] = []
            for k, v, p in msgs:
                with_tombstones.append((k, v, p))
                if '"op": "d"' in v:
                    with_tombstones.append((k, None, p))  # Debezium's tombstone after a delete
            broker.produce(TOPIC, with_tombstones)
            sent.extend(with_tombstones)

        first = args.events // 2
        produce(first)
        print(f"  produced {first:,} events to topic {TOPIC} (3 partitions)", flush=True)
        ok = _run_stream(args, broker, kafka_setup, start_job, produce, work, sent)
        model = table_of(v for _, v, _ in sent)
        return _summary(args.path, model, sent, ok)
    finally:
        broker.close()
        print("  Kafka broker stopped")
        shutil.rmtree(work, ignore_errors=True)


def _run_stream(args, broker, kafka_setup, start_job, produce, work: Path, sent: list) -> float:
    from hoodie_sink.demo_session import local_session, print_progress

    # spark.jars.packages: Spark's Kafka source
    spark = local_session("hoodie-kafka-demo", kafka_setup.spark_kafka_conf())
    print_progress(
        spark,
        lambda p, secs: (
            f"  micro-batch {p.batchId:>3}: {p.numInputRows:>7,} messages in {secs:5.1f}s "
            f"({p.numInputRows / max(secs, 1e-3):>8,.0f} msg/s)"
        ),
    )
    started = time.monotonic()
    q = start_job(spark, broker.bootstrap, TOPIC, args.path, str(work / "checkpoint"), args.per_batch)
    time.sleep(5)
    second = args.events - args.events // 2
    produce(second)
    print(f"  produced {second:,} more events while the query runs", flush=True)
    # caught up: Spark's committed offsets reach the topic's end
    total = len(sent)
    while q.isActive:
        last = q.lastProgress
        done = bool(last) and sum(int(o) for s in last["sources"] for o in _ends(s).values()) >= total
        if done and not q.status["isDataAvailable"]:
            break
        time.sleep(1)
    error = q.exception()
    q.stop()
    elapsed = time.monotonic() - started
    spark.stop()
    if error is not None:
        print(f"  the query failed: {error}")
        return -1.0
    return elapsed


def _ends(source: dict) -> dict:
    import json

    end = source.get("endOffset")
    end = json.loads(end) if isinstance(end, str) else end
    return (end or {}).get(TOPIC, {})


def _summary(path: str, model: dict, sent: list, elapsed: float) -> int:
    import pyarrow as pa

    import hoodie_sink

    cols = ["id", "region", "owner", "balance", "_event_lsn"]

    def rows(t: pa.Table) -> dict:
        return {r["id"]: r for r in t.select(cols).to_pylist()}

    want = {k: {c: r[c] for c in cols} for k, r in model.items()}
    ours = hoodie_sink.read(path)
    ok = elapsed >= 0 and rows(ours) == want
    readers = f"hoodie_sink reads {ours.num_rows:,}"
    try:  # hudi-rs 0.5.0 reads logs of this payload with its v1 reader only (docs/hudi/debezium.md#readers)
        from hudi import HudiTableBuilder

        t = HudiTableBuilder.from_base_uri(path).with_option("hoodie.read.file.group.reader.version", "1")
        theirs = pa.Table.from_batches(t.build().read())
        ok = ok and rows(theirs) == want
        readers = f"hudi-rs reads {theirs.num_rows:,}, " + readers
    except ImportError:
        readers += " (hudi-rs not installed: `pip install hudi` adds the second reader)"
    events = sum(1 for _, v, _ in sent if v is not None)
    names = os.listdir(os.path.join(path, ".hoodie"))
    commits = sum(1 for n in names if n.endswith(".deltacommit"))
    compactions = sum(1 for n in names if n.endswith(".commit"))
    verdict = "OK: the table is the one the topic implies" if ok else "MISMATCH"
    rate = f" in {elapsed:.1f}s ({events / elapsed:,.0f} events/s)" if elapsed > 0 else ""
    print(f"summary: {events:,} change events ({len(sent) - events:,} tombstones){rate}; the topic implies "
          f"{len(want):,} live accounts; {readers}; {commits} deltacommits, {compactions} compactions "
          f"-> {verdict}")  # fmt: skip
    print(f"\nnext:\n  read it:   {sys.executable} -c \"import hoodie_sink; print(hoodie_sink.read('{path}'))\"\n"
          '  the job:   README.md, "Kafka to the lake"; docs/hudi/debezium.md')  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
