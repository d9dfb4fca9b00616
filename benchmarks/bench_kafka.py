"""Benchmark: a Kafka CDC stream into a 10M-row merge-on-read table through Spark (issue 31).

One real Apache Kafka broker (KRaft, tests/support/kafka_broker.py, the jars set-up fetched:
tests/support/kafka_setup.py) and one local[2] Spark session with Spark's Kafka source
(`spark.jars.packages` org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 from the Ivy cache
set-up filled, as tests/spark/kafka_driver.py brings it).

  topic      `--topic-partitions` (4) partitions; `--batches` (11) x `--batch` (200,000)
             Debezium-shaped JSON change events, produced with confluent-kafka (idempotent,
             keyed by the record key, so a key's changes stay in order in one partition) before
             any stream starts: production is timed and reported, never part of a stream's time.
             Each event is {"op", "ts_ms", "before", "after"}; `--update-share` (0.70) updates of
             live keys (uniform over the table), `--delete-share` (0.01) deletes of live keys
             (`after` null, the key in `before`), the rest inserts of new keys; `ts_ms` grows
             with the production order (the precombine field).
  table      `--rows` (10,000,000) rows bulk_inserted through the `hoodie` Spark sink
             (`df.write.format("hoodie")`, spark.range-generated, `--seed-tasks` Spark tasks)
             into a MERGE_ON_READ table: key `id` (long), partition path `part` (`--table-
             partitions`, 10 values: id % 10), precombine `ts`, columns fare, rider, note and
             `_hoodie_is_deleted`.  Every other option at its default: BLOOM index, metadata
             table on, inline compaction every 5 deltacommits, small-file limit 100 MiB
             (inserts pad the smallest base file of a partition), cleaning and archival on.
  stream     spark.readStream.format("kafka") (startingOffsets earliest,
             maxOffsetsPerTrigger = --batch, trigger availableNow) -> from_json -> the table's
             columns (`_hoodie_is_deleted` = op = 'd') -> foreachBatch(
             hoodie_sink.spark.micro_batches(path, options)): each micro-batch routed (tagged
             against the table, shuffled to one write task per file group) and upserted, exactly
             once.  Per batch: Spark's progress (durationMs.triggerExecution, addBatch,
             numInputRows) and the sink's own per-phase metrics (hoodie.sink.metrics.file).
  refs       the same topic, the same trigger and the same from_json in the same session:
             `parquet`: Spark's own parquet streaming sink, append only (no key, no upsert, no
             delete: every event lands as a row), what landing the events costs;
             `unrouted`: writeStream.format("hoodie") with the same options into a copy of the
             seed table (the stream sink, upsert, not routed: each Spark task writes the file
             groups its rows fall in).
  check      every hoodie table is read back with hoodie_sink.read (id, ts) and compared with the
             generator's model key by key (the live keys and each one's newest ts); the parquet
             output must hold every event once.

Steady-state rows/s = rows of batches 2..n / sum of their triggerExecution; the first batch
(Spark's Kafka consumer and Python workers start, the first route) is reported on its own.
p50/p95 by linear interpolation over batches 2..n.

    PYTHONPATH=. PYSPARK_PYTHON=.venv/bin/python HOODIE_INTEROP_HOME=~/.cache/hoodie_sink \\
        .venv/bin/python benchmarks/bench_kafka.py                      # the issue's size
    ... --rows 500000 --batch 20000 --batches 4 --refs parquet          # a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_DIR)  # hoodie_sink, benchmarks/ and tests/support of this checkout

from benchmarks.common import (  # noqa: E402
    MiB,
    ProcessSampler,
    SparkSettings,
    build_spark,
    format_table,
    human_rows,
    percentile,
    scratch_dir,
    source_version,
)

TS0 = 1_800_000_000_000  # ts_ms of the first event; the seed's rows have ts = TS0 - 1
NOTE = "n" * 40
BATCH_ROWS = 200_000  # --batch, set by main

OPTIONS = {
    "hoodie.table.name": "kafka_cdc",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.precombine.field": "ts",
}
EVENT_DDL = (
    "op STRING, ts_ms LONG, before STRUCT<id: LONG, part: STRING>, "
    "after STRUCT<id: LONG, part: STRING, fare: DOUBLE, rider: STRING, note: STRING>"
)


# -- the topic and its model (untimed) -----------------------------------------------------------


@dataclass
class Model:
    """ts of every key ever written (index = id), -1 once deleted."""

    ts: list[int]
    inserts: int = 0
    updates: int = 0
    deletes: int = 0


def produce(broker, topic: str, args: argparse.Namespace) -> tuple[Model, float, int]:
    """The change events, produced; returns the model, the seconds production took and the bytes
    of the values."""
    from confluent_kafka import Producer

    rng = random.Random(args.seed)
    model = Model(ts=[TS0 - 1] * args.rows)
    total = args.batches * args.batch
    errors: list[str] = []
    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 20,
        "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000, "log_level": 0,
        "error_cb": lambda e: errors.append(str(e)),
    })  # fmt: skip
    t0 = time.perf_counter()
    value_bytes = 0
    seq = 0
    for _ in range(args.batches):
        live_end = len(model.ts)  # updates and deletes pick among the keys written before this batch
        for _ in range(args.batch):
            ts = TS0 + seq
            seq += 1
            r = rng.random()
            if r < args.update_share + args.delete_share:
                while True:  # a live key: deleted ones are few, so rejection is cheap
                    key = rng.randrange(live_end)
                    if model.ts[key] >= 0:
                        break
                part = f"p{key % args.table_partitions}"
                if r < args.delete_share:
                    op, model.ts[key] = "d", -1
                    model.deletes += 1
                    value = f'{{"op":"d","ts_ms":{ts},"before":{{"id":{key},"part":"{part}"}},"after":null}}'
                else:
                    op, model.ts[key] = "u", ts
                    model.updates += 1
            else:
                key = len(model.ts)
                model.ts.append(ts)
                model.inserts += 1
                op, part = "c", f"p{key % args.table_partitions}"
            if op != "d":
                value = (f'{{"op":"{op}","ts_ms":{ts},"before":null,"after":{{"id":{key},"part":"{part}",'
                         f'"fare":{rng.randrange(500, 9000) / 100},"rider":"rider-{rng.randrange(50_000):06d}",'
                         f'"note":"{NOTE}"}}}}')  # fmt: skip
            value_bytes += len(value)
            while True:
                try:
                    producer.produce(topic, value=value, key=str(key))
                    break
                except BufferError:
                    producer.poll(0.05)
            if seq % 1000 == 0:
                producer.poll(0)
    left = producer.flush(120)
    took = time.perf_counter() - t0
    if left or errors:
        raise RuntimeError(f"{left} events not delivered; errors: {errors[:5]}")
    counted = end_offsets(broker, topic)
    if counted != total:
        raise RuntimeError(f"the topic holds {counted:,} events, {total:,} were produced")
    return model, took, value_bytes


def end_offsets(broker, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench-kafka-count", "log_level": 0})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts)
    finally:
        c.close()


# -- Spark ---------------------------------------------------------------------------------------


def seed_table(spark, path: str, args: argparse.Namespace) -> float:
    """`--rows` rows bulk_inserted through the sink; returns the seconds it took."""
    from pyspark.sql import functions as F

    df = spark.range(0, args.rows, 1, args.seed_tasks).select(
        F.col("id"),
        F.concat(F.lit("p"), (F.col("id") % args.table_partitions).cast("string")).alias("part"),
        F.lit(TS0 - 1).cast("long").alias("ts"),
        (F.floor(F.rand(7) * 8500 + 500) / 100).alias("fare"),
        F.format_string("rider-%06d", (F.rand(8) * 50_000).cast("int")).alias("rider"),
        F.lit(NOTE).alias("note"),
        F.lit(False).alias("_hoodie_is_deleted"),
    )
    t0 = time.perf_counter()
    (df.write.format("hoodie").options(**OPTIONS).option("hoodie.datasource.write.operation", "bulk_insert")
     .mode("append").save(path))  # fmt: skip
    return time.perf_counter() - t0


def kafka_rows(spark, bootstrap: str, topic: str, batch: int):
    """The topic as the table's rows: a stream of from_json'd change events."""
    from pyspark.sql import functions as F

    raw = (
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", batch)
        .option("failOnDataLoss", "true").load()
    )  # fmt: skip
    e = F.from_json(F.col("value").cast("string"), EVENT_DDL).alias("e")
    return raw.select(e).select(
        F.coalesce("e.after.id", "e.before.id").alias("id"),
        F.coalesce("e.after.part", "e.before.part").alias("part"),
        F.col("e.ts_ms").alias("ts"),
        F.col("e.after.fare").alias("fare"),
        F.col("e.after.rider").alias("rider"),
        F.col("e.after.note").alias("note"),
        (F.col("e.op") == "d").alias("_hoodie_is_deleted"),
    )


@dataclass
class Run:
    name: str
    what: str
    batches: list[dict] = field(default_factory=list)  # progress of the non-empty micro-batches
    wall_s: float = 0.0
    others_pct: float = 0.0
    own_pct: float = 0.0
    check: str = ""
    metrics: list[dict] = field(default_factory=list)
    route_s: list[float] = field(default_factory=list)  # routed stream: the route's seconds per batch
    full: int = 0  # batches of at least half --batch rows (the rest: Spark's rounding, see steady())

    def ms(self, key: str = "triggerExecution") -> list[float]:
        return [float(p["durationMs"].get(key, 0)) for p in self.batches]

    def rows(self) -> list[int]:
        return [int(p["numInputRows"]) for p in self.batches]

    def steady(self, key: str = "triggerExecution") -> tuple[list[float], list[int]]:
        """Durations and rows of batches 2..n, without the trailing short batches: Spark's Kafka
        source shares maxOffsetsPerTrigger among the topic's partitions by their backlog, rounded
        down per partition, so each batch reads a few events fewer than the limit and a last
        batch of a few events remains."""
        return self.ms(key)[1 : self.full], self.rows()[1 : self.full]


def run_query(name: str, what: str, start) -> Run:
    """Start a query (`start()` returns it), wait for availableNow to drain the topic."""
    run = Run(name, what)
    # CPU shares only (start to end); a sparse sampler: at 0.5 s its /proc scans cost ~8% of a
    # core on a machine with many processes (py-spy, the run of 2026-11-27)
    with ProcessSampler(5.0) as sampler:
        t0 = time.perf_counter()
        q = start()
        q.awaitTermination()
        run.wall_s = time.perf_counter() - t0
    cpus = os.cpu_count() or 1
    run.others_pct = 100 * sampler.probe.other_share(cpus)
    run.own_pct = 100 * sampler.probe.cpu_share(cpus)
    if q.exception() is not None:
        raise RuntimeError(f"{name}: the streaming query failed: {q.exception()}")
    run.batches = [p for p in q.recentProgress if int(p["numInputRows"]) > 0]
    run.full = sum(1 for p in run.batches if int(p["numInputRows"]) >= BATCH_ROWS // 2)
    return run


def stream_routed(spark, kafka, path: str, ckpt: str, metrics: str) -> Run:
    """The stream through micro_batches, with the route of each micro-batch timed: the driver's
    call of datasource.routing.routed (which runs the tag job, reading Kafka and parsing the JSON,
    to its local checkpoint, and plans the inserts) is wrapped here, measuring only."""
    import hoodie_sink.spark
    from hoodie_sink.datasource import routing

    route_s: list[float] = []
    original = routing.routed

    def timed_routed(*a, **kw):
        t0 = time.perf_counter()
        try:
            return original(*a, **kw)
        finally:
            route_s.append(time.perf_counter() - t0)

    opts = {**OPTIONS, "checkpointLocation": ckpt, "hoodie.sink.metrics.file": metrics}
    write = hoodie_sink.spark.micro_batches(path, opts)
    routing.routed = timed_routed  # micro_batches looks it up in its module at every batch
    try:
        run = run_query(
            "hoodie routed", "foreachBatch(micro_batches): routed upsert + deletes into the MOR table",
            lambda: kafka.writeStream.foreachBatch(write).option("checkpointLocation", ckpt)
            .trigger(availableNow=True).start(),
        )  # fmt: skip
    finally:
        routing.routed = original
    run.route_s = route_s
    return run


def stream_unrouted(spark, kafka, path: str, ckpt: str, metrics: str) -> Run:
    return run_query(
        "hoodie unrouted", "writeStream.format('hoodie'): upsert + deletes, not routed, into a copy of the seed",
        lambda: kafka.writeStream.format("hoodie").options(**OPTIONS).option("hoodie.sink.metrics.file", metrics)
        .option("checkpointLocation", ckpt).trigger(availableNow=True).start(path),
    )  # fmt: skip


def stream_parquet(spark, kafka, path: str, ckpt: str) -> Run:
    return run_query(
        "parquet", "writeStream.format('parquet'): append only, every event a row (no key, no upsert)",
        lambda: kafka.writeStream.format("parquet").option("path", path).option("checkpointLocation", ckpt)
        .trigger(availableNow=True).start(),
    )  # fmt: skip


# -- checks --------------------------------------------------------------------------------------


def check_table(path: str, model: Model) -> str:
    """The table read back with our reader against the model, key by key."""
    import numpy as np

    import hoodie_sink

    t = hoodie_sink.read(path, columns=["id", "ts"])
    ids = t.column("id").to_numpy()
    ts = t.column("ts").to_numpy()
    want = np.asarray(model.ts, dtype=np.int64)
    live = np.flatnonzero(want >= 0)
    problems = []
    if len(ids) != len(live):
        problems.append(f"{len(ids):,} rows, the model has {len(live):,} live keys")
    order = np.argsort(ids, kind="stable")
    ids, ts = ids[order], ts[order]
    if len(ids) == len(live) and not np.array_equal(ids, live):
        problems.append(
            f"keys differ, e.g. {ids[ids != live][:5].tolist()} vs {live[ids != live][:5].tolist()}"
        )
    elif len(ids) == len(live) and not np.array_equal(ts, want[live]):
        bad = ids[ts != want[live]]
        problems.append(f"{len(bad):,} keys with a wrong ts, e.g. {bad[:5].tolist()}")
    if problems:
        return "WRONG: " + "; ".join(problems)
    return f"OK: {len(ids):,} rows = the model's live keys, every key's ts the newest"


def check_parquet(spark, path: str, total: int) -> str:
    df = spark.read.parquet(path)
    n = df.count()
    distinct = df.select("ts").distinct().count()  # ts is unique per event
    if n != total or distinct != total:
        return f"WRONG: {n:,} rows, {distinct:,} distinct events, {total:,} produced"
    return f"OK: {n:,} rows, each event once"


def compactions(path: str) -> list[str]:
    hoodie = Path(path) / ".hoodie"
    return sorted(p.name.split(".")[0] for p in hoodie.iterdir() if p.name.endswith(".commit"))


# -- report --------------------------------------------------------------------------------------


def read_metrics(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def summary_rows(runs: list[Run], ref: Run | None) -> list[dict[str, str]]:
    rows = []
    for r in runs:
        ms, n = r.ms(), r.rows()
        steady_ms, steady_n = r.steady()
        rate = sum(steady_n) / (sum(steady_ms) / 1000) if steady_ms and sum(steady_ms) else float("nan")
        row = {
            "sink": r.name,
            "batches": f"{len(ms)} ({r.full - 1} steady)",
            "rows": f"{sum(n):,}",
            "first batch s": f"{ms[0] / 1000:.1f}" if ms else "-",
            "steady rows/s": f"{rate:,.0f}",
            "p50 s": f"{percentile(steady_ms, 0.5) / 1000:.2f}",
            "p95 s": f"{percentile(steady_ms, 0.95) / 1000:.2f}",
            "max s": f"{max(steady_ms, default=float('nan')) / 1000:.2f}",
            "addBatch p50 s": f"{percentile(r.steady('addBatch')[0], 0.5) / 1000:.2f}",
            "wall s": f"{r.wall_s:.0f}",
            "own CPU %": f"{r.own_pct:.0f}",
            "others CPU %": f"{r.others_pct:.0f}",
        }
        if ref is not None and ref.batches and steady_ms:
            ref_ms, ref_n = ref.steady()
            ref_rate = sum(ref_n) / (sum(ref_ms) / 1000)
            row["x parquet rows/s"] = f"{rate / ref_rate:.2f}"
        rows.append(row)
    return rows


TASK_AND_COMMIT = ("tag", "write", "merge", "commit")  # the rest of phases_ms: the table services


def batch_rows(run: Run) -> list[dict[str, str]]:
    """Per micro-batch: Spark's durations and the sink's phases (the metrics file's line of the
    commit; compaction and the other services are in `services`)."""
    rows = []
    by_batch = run.metrics
    for i, p in enumerate(run.batches):
        d = p["durationMs"]
        row = {"batch": str(i + 1), "rows": f"{int(p['numInputRows']):,}",
               "trigger s": f"{d.get('triggerExecution', 0) / 1000:.2f}",
               "addBatch s": f"{d.get('addBatch', 0) / 1000:.2f}"}  # fmt: skip
        if i < len(run.route_s):
            row["route s"] = f"{run.route_s[i]:.2f}"
        if i < len(by_batch):
            m = by_batch[i]
            ph, slow = m.get("phases_ms", {}), m.get("slowest_task_ms", {})
            row |= {
                "tasks": str(m.get("tasks", "")),
                "ins/upd/del": f"{m.get('inserts', 0):,}/{m.get('updates', 0):,}/{m.get('deletes', 0):,}",
                "slowest task tag s": f"{slow.get('tag', 0) / 1000:.2f}",
                "slowest task write s": f"{slow.get('write', 0) / 1000:.2f}",
                "commit s": f"{(ph.get('merge', 0) + ph.get('commit', 0)) / 1000:.2f}",
                "services s": f"{sum(v for k, v in ph.items() if k not in TASK_AND_COMMIT) / 1000:.2f}",
                "sink total s": f"{m.get('total_ms', 0) / 1000:.2f}",
                "files": str(m.get("files_added", 0) + m.get("files_updated", 0)),
                "MiB": f"{m.get('bytes_written', 0) / MiB:,.0f}",
            }
        rows.append(row)
    return rows


# -- main ----------------------------------------------------------------------------------------


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)  # fmt: skip
    ap.add_argument("--rows", type=int, default=10_000_000, help="rows of the seed table")
    ap.add_argument(
        "--batch", type=int, default=200_000, help="events per micro-batch (maxOffsetsPerTrigger)"
    )
    ap.add_argument(
        "--batches", type=int, default=11, help="micro-batches (the first is reported on its own)"
    )
    ap.add_argument("--topic-partitions", type=int, default=4)
    ap.add_argument("--table-partitions", type=int, default=10)
    ap.add_argument("--seed-tasks", type=int, default=4, help="Spark tasks of the seed's bulk_insert")
    ap.add_argument("--update-share", type=float, default=0.70)
    ap.add_argument("--delete-share", type=float, default=0.01)
    ap.add_argument("--refs", default="parquet,unrouted", help="parquet, unrouted (comma-separated; '' none)")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--scratch", default=None, help="parent of the scratch dir (default: under /tmp)")
    ap.add_argument(
        "--keep", action="store_true", help="keep the scratch dir (tables, broker log) afterwards"
    )
    ap.add_argument("--no-check", action="store_true", help="skip reading the tables back")
    args = ap.parse_args(argv)
    args.refs = [r for r in args.refs.split(",") if r]
    if unknown := set(args.refs) - {"parquet", "unrouted"}:
        ap.error(f"unknown --refs {sorted(unknown)}")
    return args


def bench(args: argparse.Namespace, root: Path) -> bool:
    from tests.support import kafka_setup
    from tests.support.kafka_broker import KafkaBroker

    if missing := kafka_setup.missing():
        raise SystemExit(f"Kafka not set up ({missing}): run `.venv/bin/python tests/support/kafka_setup.py`")
    print(f"bench_kafka: {human_rows(args.rows)}-row MOR table, {args.batches} x {human_rows(args.batch)} events "
          f"from {args.topic_partitions} Kafka partitions; refs {args.refs or 'none'}; scratch {root}")  # fmt: skip
    print(f"hoodie_sink: {source_version(REPO_DIR)}; {os.cpu_count()} CPUs; {uptime()}", flush=True)
    broker = KafkaBroker(root / "kafka")
    try:
        took = broker.start()
        print(f"broker up in {took:.1f} s at {broker.bootstrap}", flush=True)
        topic = "cdc"
        broker.create_topic(topic, args.topic_partitions)
        model, produce_s, value_bytes = produce(broker, topic, args)
        total = args.batches * args.batch
        print(f"produced {total:,} events ({value_bytes / MiB:,.0f} MiB of JSON) in {produce_s:.1f} s: "
              f"{model.inserts:,} inserts, {model.updates:,} updates, {model.deletes:,} deletes",
              flush=True)  # fmt: skip
        return run_spark(args, root, broker.bootstrap, topic, model, total)
    finally:
        broker.close()


def run_spark(
    args: argparse.Namespace, root: Path, bootstrap: str, topic: str, model: Model, total: int
) -> bool:
    from tests.support import kafka_setup

    extra = tuple(kafka_setup.spark_kafka_conf().items())
    spark = build_spark(SparkSettings(driver_memory=args.driver_memory, extra=extra), "bench_kafka")
    import hoodie_sink

    hoodie_sink.register(spark)
    try:
        routed_path, unrouted_path = str(root / "table"), str(root / "table-unrouted")
        seed_s = seed_table(spark, routed_path, args)
        print(f"seed: {args.rows:,} rows bulk_inserted in {seed_s:.1f} s ({args.rows / seed_s:,.0f} rows/s); "
              f"{uptime()}", flush=True)  # fmt: skip
        if "unrouted" in args.refs:
            shutil.copytree(routed_path, unrouted_path)
        kafka = kafka_rows(spark, bootstrap, topic, args.batch)
        runs: list[Run] = []
        ref = None
        if "parquet" in args.refs:  # first: it also warms Spark's Kafka consumer up
            ref = stream_parquet(spark, kafka, str(root / "parquet"), str(root / "ckpt-parquet"))
            ref.check = check_parquet(spark, str(root / "parquet"), total) if not args.no_check else "-"
            print(f"parquet: {ref.wall_s:.0f} s; {ref.check}", flush=True)
        routed = stream_routed(
            spark, kafka, routed_path, str(root / "ckpt-routed"), str(root / "metrics-routed.jsonl")
        )
        routed.metrics = read_metrics(str(root / "metrics-routed.jsonl"))
        print(f"hoodie routed: {routed.wall_s:.0f} s; {uptime()}", flush=True)
        runs.append(routed)
        if "unrouted" in args.refs:
            un = stream_unrouted(spark, kafka, unrouted_path, str(root / "ckpt-unrouted"),
                                 str(root / "metrics-unrouted.jsonl"))  # fmt: skip
            un.metrics = read_metrics(str(root / "metrics-unrouted.jsonl"))
            print(f"hoodie unrouted: {un.wall_s:.0f} s", flush=True)
            runs.append(un)
        for r in runs:
            if sum(r.rows()) != total:
                r.check = f"WRONG: the stream read {sum(r.rows()):,} events, {total:,} produced"
        if not args.no_check:
            for r, path in zip(runs, (routed_path, unrouted_path), strict=False):
                if not r.check:
                    t0 = time.perf_counter()
                    r.check = check_table(path, model)
                    print(f"{r.name}: {r.check} (read in {time.perf_counter() - t0:.1f} s)", flush=True)
        for r, path in zip(runs, (routed_path, unrouted_path), strict=False):
            print(f"{r.name}: compactions on the timeline: {compactions(path) or 'none'}")
        print(f"\nend: {uptime()}")
        print("\n" + format_table(summary_rows(([ref] if ref else []) + runs, ref)))
        for r in runs:
            print(f"\n{r.name}, per micro-batch:\n" + format_table(batch_rows(r)))
        print()
        for r in ([ref] if ref else []) + runs:
            print(f"- {r.name}: {r.what}; check {r.check}")
        return all(r.check.startswith(("OK", "-")) for r in ([ref] if ref else []) + runs)
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    global BATCH_ROWS
    args = parse_args(argv)
    BATCH_ROWS = args.batch
    with scratch_dir(args.scratch, "bench-kafka-", keep=args.keep) as scratch:
        ok = bench(args, Path(scratch))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
