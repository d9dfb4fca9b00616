"""Demo: a local Spark streaming job landing a CDC stream of trips in a Hudi table (./demo_table).

A synthetic change stream (inserts, updates and deletes of a trips table, one parquet file
per micro-batch) is routed to the table's file groups and written as upserts, micro-batch by
micro-batch (foreachBatch with hoodie_sink.spark.micro_batches; `--direct`: through
df.writeStream.format("hoodie") without routing).  One progress line
per micro-batch; at the end the table is read back with hudi-rs (the `hudi` package) and with
hoodie_sink's own reader and compared with what the stream said the table should hold.

`--mor` lands the stream in a merge-on-read table instead: updates and deletes become log files,
compacted inline every `hoodie.compact.inline.max.delta.commits` (5) micro-batches.

`--kafka`: a Debezium CDC topic on a local Kafka broker into ./demo_kafka_table (hoodie_sink/demo_kafka.py).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema(
    [("trip_id", pa.string()), ("city", pa.string()), ("rider", pa.string()), ("fare", pa.float64()),
     ("ts", pa.int64()), ("_hoodie_is_deleted", pa.bool_())]
)  # fmt: skip
DDL = "trip_id STRING, city STRING, rider STRING, fare DOUBLE, ts BIGINT, _hoodie_is_deleted BOOLEAN"
CITIES = ["san_francisco", "sao_paulo", "chennai", "new_york", "berlin"]


def make_changes(src: str, batches: int, rows: int, seed: int = 7) -> dict[str, dict]:
    """Write the change stream and return the final state it implies (the model)."""
    rng = random.Random(seed)
    model: dict[str, dict] = {}
    next_id, ts = 0, 0
    for b in range(batches):
        out = []
        live = list(model)
        for _ in range(rows):
            ts += 1
            r = rng.random()
            key = rng.choice(live) if live and r < 0.30 else ""
            if key not in model:  # none picked, or deleted earlier in this batch: make it an insert
                r = 1.0
            if r < 0.25:  # update
                rec = {
                    **model[key],
                    "fare": round(rng.uniform(5, 80), 2),
                    "ts": ts,
                    "_hoodie_is_deleted": False,
                }
            elif r < 0.30:  # delete
                rec = {**model[key], "ts": ts, "_hoodie_is_deleted": True}
            else:  # insert
                key = f"trip-{next_id:09d}"
                next_id += 1
                rec = {
                    "trip_id": key,
                    "city": CITIES[next_id % len(CITIES)],
                    "rider": f"rider-{rng.randrange(1000):03d}",
                    "fare": round(rng.uniform(5, 80), 2),
                    "ts": ts,
                    "_hoodie_is_deleted": False,
                }
            out.append(rec)
            if rec["_hoodie_is_deleted"]:
                model.pop(key, None)
            else:
                model[key] = rec
        path = os.path.join(src, f"changes-{b:05d}.parquet")
        pq.write_table(pa.Table.from_pylist(out, schema=SCHEMA), path)
        # Spark's file source takes the oldest files first (by modification time): keep stream order
        os.utime(path, (1_700_000_000 + b, 1_700_000_000 + b))
    return model


def rows_by_key(table: pa.Table) -> dict[str, tuple]:
    return {r["trip_id"]: (r["fare"], r["ts"]) for r in table.select(["trip_id", "fare", "ts"]).to_pylist()}


def read_with_hudi_rs(path: str) -> pa.Table | None:
    """The table as hudi-rs (the `hudi` package, a test extra) reads it, or None without it."""
    try:
        from hudi import HudiTableBuilder
    except ImportError:
        return None
    return pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read())


def next_steps(path: str, mor: bool) -> str:
    """What to try next, with this interpreter (the one that has hoodie_sink)."""
    py = sys.executable
    cli = os.path.join(os.path.dirname(py), "hoodie-sink")
    cli = cli if os.path.exists(cli) else f"{py} -m hoodie_sink.cli"
    lines = [
        "",
        "next:",
        f"  read it without Spark:  {py} -c \"import hoodie_sink; print(hoodie_sink.read('{path}'))\"",
        f"  read it with Spark:     spark.read.format('hoodie').load('{path}')   (PYSPARK_PYTHON={py})",
        f"  look inside:            {cli} timeline {path}   (also: commits, files, stats, validate)",
    ]
    if not mor:
        lines.append("  a merge-on-read table:  ./run.sh demo --mor   (log files and compaction)")
    lines.append(
        '  README.md: "Use", "Merge-on-read tables", "The `hoodie-sink` command", "How a write works"'
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--kafka" in argv:
        from hoodie_sink import demo_kafka

        return demo_kafka.main([a for a in argv if a != "--kafka"])
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--path", default=os.path.join(os.getcwd(), "demo_table"))
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--rows", type=int, default=50_000, help="changes per micro-batch")
    ap.add_argument("--mor", action="store_true", help="a merge-on-read table (log files and compaction)")
    ap.add_argument("--direct", action="store_true",
                    help="writeStream.format('hoodie') instead of routed micro-batches (foreachBatch)")  # fmt: skip
    args = ap.parse_args(argv)
    table_type = "MERGE_ON_READ" if args.mor else "COPY_ON_WRITE"

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need hoodie_sink too

    work = tempfile.mkdtemp(prefix="hoodie-demo-")
    src, ckpt = os.path.join(work, "changes"), os.path.join(work, "checkpoint")
    os.makedirs(src)
    shutil.rmtree(args.path, ignore_errors=True)
    print(f"hoodie demo: {args.batches} micro-batches of {args.rows:,} changes (70% inserts, 25% updates, "
          f"5% deletes) -> {table_type} table {args.path}"
          f"{' (direct stream sink)' if args.direct else ' (routed micro-batches)'}")  # fmt: skip
    model = make_changes(src, args.batches, args.rows)

    from hoodie_sink.demo_session import local_session, print_progress

    spark = local_session("hoodie-demo")
    print_progress(
        spark,
        lambda p, secs: (
            f"  batch {p.batchId + 1:>3}/{args.batches}: {p.numInputRows:>8,} changes in {secs:5.1f}s "
            f"({p.numInputRows / max(secs, 1e-3):>9,.0f} rows/s)"
        ),
    )
    started = time.monotonic()
    options = {
        "hoodie.table.name": "demo_trips",
        "hoodie.datasource.write.recordkey.field": "trip_id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.table.type": table_type,
        # merge-on-read: inserts in new file groups, so that updates land in log files from the
        # second micro-batch on (with padding, a table this small has one small file group per
        # city, which Hudi's rule rewrites with each batch's inserts and updates: no logs)
        "hoodie.parquet.small.file.limit": "0" if args.mor else str(100 << 20),
    }
    changes = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(src)
    if args.direct:  # the stream sink itself: each task assigns its own records
        writer = changes.writeStream.format("hoodie").options(**options).option("path", args.path)
    else:  # each micro-batch routed to its file groups, then written (README: Routed writes)
        import hoodie_sink.spark

        writer = changes.writeStream.foreachBatch(
            hoodie_sink.spark.micro_batches(args.path, {**options, "checkpointLocation": ckpt})
        )
    query = writer.option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    query.awaitTermination()
    query.stop()
    elapsed = time.monotonic() - started
    spark.stop()

    import hoodie_sink

    want = {k: (v["fare"], v["ts"]) for k, v in model.items()}
    ours = hoodie_sink.read(args.path, columns=["trip_id", "fare", "ts"])
    ok = ours.num_rows == len(want) and rows_by_key(ours) == want
    readers = "hoodie_sink reads"
    theirs = read_with_hudi_rs(args.path)  # an independent reader, when installed
    if theirs is not None:
        ok = ok and theirs.num_rows == len(want) and rows_by_key(theirs) == want
        readers = f"hudi-rs reads {theirs.num_rows:,}, hoodie_sink reads"
    instants = os.listdir(os.path.join(args.path, ".hoodie"))  # the active timeline's completed instants
    commits = sum(1 for n in instants if n.endswith(".deltacommit" if args.mor else ".commit"))
    compactions = sum(1 for n in instants if n.endswith(".commit")) if args.mor else 0
    names = [n for root, _, ns in os.walk(args.path) if ".hoodie" not in root for n in ns]
    files = sum(1 for n in names if n.endswith(".parquet"))
    logs = sum(1 for n in names if ".log." in n)
    sent = args.batches * args.rows
    verdict = "MISMATCH"
    if ok:
        verdict = "OK: both readers match the stream" if theirs is not None else "OK: it matches the stream"
    print(
        f"summary: {sent:,} changes in {elapsed:.1f}s ({sent / elapsed:,.0f} rows/s); the stream implies "
        f"{len(want):,} live trips; {readers} {ours.num_rows:,}; "
        f"{commits} {'deltacommits' if args.mor else 'commits'}, {files} base files"
        + (f", {logs} log files, {compactions} compactions" if args.mor else "")
        + f" -> {verdict}"
    )
    if theirs is None:
        print("(hudi-rs, the second reader the demo checks with, is not installed: `pip install hudi` or "
              "`./run.sh test` adds it)")  # fmt: skip
    print(next_steps(args.path, args.mor))
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
