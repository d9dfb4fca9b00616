"""Benchmark: the append operation and clustering (issue 5), on one local[2] session.

Part 1, append throughput.  N trips rows (common.trips_df) are materialised once as parquet;
the base table holds another N rows (bulk_insert, untimed).  Timed, interleaved, each from a
fresh copy of the base (hoodie) or into a fresh directory (Spark):
    spark    df.write.partitionBy("city").parquet(dir)                       (reference)
    append   df.write.format("hoodie") operation=append (no index, no merge)
    keyless  the same without a record key (generated keys)
    upsert   df.write.format("hoodie") operation=upsert (COW: index lookup, small-file packing)
Rows/s and ratios: append / spark (target >= 0.8), append / upsert (target >= 5).

Part 2, clustering.  A table made of --small-files appends of --small-rows rows each (engine
API, untimed), then hoodie_sink.cluster(spark=...) with sort column `fare` (linear) [timed]:
rows/s rewritten, files before/after.  A filter query on the sort column through our Spark
reader (`fare BETWEEN 10 AND 12`), before (once) and after clustering (best of 3), the table
loaded afresh each time: input partitions (= base files read) and seconds.  The clustering
target is --target-mb (2 MiB), so that a partition gets several files of narrow fare ranges.

Part 3, inline clustering in a stream: --stream-batches micro-batches of --stream-rows rows
(append) without clustering and with hoodie.clustering.inline every --inline-every commits:
wall seconds, addBatch p50/max (the batch that clusters pays for it), live files at the end.

Prints a Markdown table.  Needs a quiet machine (waits up to --wait-idle s for one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (
    SparkSettings,
    build_spark,
    dir_stats,
    format_table,
    human_rows,
    materialise,
    scratch_dir,
    settle,
    trips_df,
    wait_until_quiet,
)

BASE = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.partitionpath.field": "city",
}
KEYED = {
    **BASE,
    "hoodie.datasource.write.recordkey.field": "trip_id",
    "hoodie.datasource.write.precombine.field": "ts",
}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rows", type=int, default=2_000_000, help="part 1: rows per write (and in the base table)"
    )
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--small-files", type=int, default=200, help="part 2: appends before clustering")
    ap.add_argument("--small-rows", type=int, default=10_000, help="part 2: rows per append")
    ap.add_argument("--target-mb", type=int, default=2, help="part 2: clustering target file size")
    ap.add_argument("--stream-batches", type=int, default=60, help="part 3: micro-batches")
    ap.add_argument("--stream-rows", type=int, default=5_000, help="part 3: rows per micro-batch")
    ap.add_argument(
        "--inline-every", type=int, default=20, help="part 3: hoodie.clustering.inline.max.commits"
    )
    ap.add_argument("--parts", default="1,2,3")
    ap.add_argument("--wait-idle", type=float, default=60.0)
    ap.add_argument("--quick", action="store_true", help="200k rows, 50 small files of 2k rows")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.small_files, args.small_rows, args.repeat = 200_000, 50, 2_000, 1
        args.stream_batches, args.stream_rows, args.inline_every = 12, 1_000, 4
    return args


def best_of(label, fn, repeat, wait_idle, prepare=None):
    times = []
    for _ in range(repeat):
        if prepare:
            prepare()
        settle()
        wait_until_quiet(wait_idle)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        print(f"  {label:10s} {times[-1]:7.2f} s", flush=True)
    return min(times)


def part1(spark, args, scratch, rows_out):
    both = trips_df(spark, 2 * args.rows, seed=42)
    # base and batch split by a hash of the key: the batch's keys are all new to the table
    base_src = materialise(both.where("pmod(hash(trip_id), 2) = 0"), os.path.join(scratch, "base_src"))
    src = materialise(both.where("pmod(hash(trip_id), 2) = 1"), os.path.join(scratch, "src"))
    n = src.count()
    pristine = os.path.join(scratch, "pristine")
    base_src.write.format("hoodie").options(**KEYED).option("hoodie.datasource.write.operation", "bulk_insert").mode(
        "overwrite").save(pristine)  # fmt: skip
    work = os.path.join(scratch, "work")

    def fresh():
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(pristine, work)

    def empty():
        shutil.rmtree(work, ignore_errors=True)

    # warm-up: JIT, Python workers, imports (untimed)
    warm = src.limit(2000)
    warm.write.mode("overwrite").partitionBy("city").parquet(os.path.join(scratch, "warm_spark"))
    for op in ("append", "upsert"):
        warm.write.format("hoodie").options(**KEYED).option("hoodie.datasource.write.operation", op).mode(
            "append").save(os.path.join(scratch, "warm_hoodie"))  # fmt: skip
    results = {}
    if True:
        results["spark"] = best_of("spark", lambda: src.write.partitionBy("city").parquet(work), args.repeat,
                                   args.wait_idle, empty)  # fmt: skip
        results["append"] = best_of(
            "append",
            lambda: (
                src.write.format("hoodie")
                .options(**KEYED)
                .option("hoodie.datasource.write.operation", "append")
                .mode("append")
                .save(work)
            ),
            args.repeat,
            args.wait_idle,
            fresh,
        )
        files_append = dir_stats(work).data_files
        results["keyless"] = best_of(
            "keyless",
            lambda: (
                src.write.format("hoodie")
                .options(**BASE)
                .option("hoodie.datasource.write.operation", "append")
                .mode("append")
                .save(work)
            ),
            args.repeat,
            args.wait_idle,
            empty,
        )
        results["upsert"] = best_of(
            "upsert",
            lambda: (
                src.write.format("hoodie")
                .options(**KEYED)
                .option("hoodie.datasource.write.operation", "upsert")
                .mode("append")
                .save(work)
            ),
            args.repeat,
            args.wait_idle,
            fresh,
        )
    for name, s in results.items():
        rows_out.append({
            "part": "1", "case": f"{human_rows(n)} rows, {name}", "s": f"{s:.2f}", "rows/s": f"{n / s:,.0f}",
            "x spark (speed)": f"{results['spark'] / s:.2f}", "x upsert (speed)": f"{results['upsert'] / s:.2f}",
        })  # fmt: skip
    print(f"  append wrote {files_append} data files into a base of {dir_stats(pristine).data_files}")


def part2(spark, args, scratch, rows_out):
    import hoodie_sink

    path = os.path.join(scratch, "logs")
    shutil.rmtree(path, ignore_errors=True)
    big = trips_df(spark, args.small_files * args.small_rows, seed=5).toArrow()
    t0 = time.perf_counter()
    for i in range(args.small_files):
        chunk = big.slice(i * args.small_rows, args.small_rows)
        hoodie_sink.write(chunk, path, {**BASE, "hoodie.datasource.write.operation": "append"})
    print(
        f"  {args.small_files} appends of {args.small_rows:,} rows (engine API) in {time.perf_counter() - t0:.1f} s"
    )

    def query():
        df = spark.read.format("hoodie").load(path).where("fare BETWEEN 10 AND 12")
        parts = df.rdd.getNumPartitions()
        t = time.perf_counter()
        count = df.count()
        return time.perf_counter() - t, parts, count

    def best_query(runs: int):
        done = [query() for _ in range(runs)]
        return min(r[0] for r in done), done[0][1], done[0][2]

    q_before = best_query(1)  # thousands of one-file tasks: once is enough
    files_before = dir_stats(path).data_files
    wait_until_quiet(args.wait_idle)
    t0 = time.perf_counter()
    # A target of --target-mb per file, so that a partition gets several files of narrow fare ranges.
    result = hoodie_sink.cluster(path, {
        **BASE, "hoodie.clustering.plan.strategy.sort.columns": "fare",
        "hoodie.clustering.plan.strategy.small.file.limit": str(300 << 20),
        "hoodie.clustering.plan.strategy.target.file.max.bytes": str(args.target_mb << 20)}, spark=spark)  # fmt: skip
    s = time.perf_counter() - t0
    q_after = best_query(3)
    assert q_after[2] == q_before[2], (q_before, q_after)
    live_files = len(hoodie_sink_snapshot_files(path))
    rows_out.append(
        {
            "part": "2",
            "case": f"clustering {result.input_files} files -> {result.output_files}",
            "s": f"{s:.2f}",
            "rows/s": f"{result.rows / s:,.0f}",
            "x spark (speed)": "",
            "x upsert (speed)": "",
        }
    )
    for label, (qs, parts, count) in (("before", q_before), ("after", q_after)):
        rows_out.append(
            {
                "part": "2",
                "case": f"query fare BETWEEN 10 AND 12 {label}: {parts} files read, {count:,} rows",
                "s": f"{qs:.2f}",
                "rows/s": "",
                "x spark (speed)": "",
                "x upsert (speed)": "",
            }
        )
    print(f"  files on storage before {files_before}, live after {live_files}")


def part3(spark, args, scratch, rows_out):
    """Inline clustering in a stream: where its cost lands (the committing batch waits)."""
    import pyarrow.parquet as pq

    src = os.path.join(scratch, "stream_src")
    os.makedirs(src, exist_ok=True)
    data = trips_df(spark, args.stream_batches * args.stream_rows, seed=9).toArrow()
    for b in range(args.stream_batches):
        f = os.path.join(src, f"part-{b:05d}.parquet")
        pq.write_table(data.slice(b * args.stream_rows, args.stream_rows), f)
        os.utime(f, (1_700_000_000 + b, 1_700_000_000 + b))  # Spark's file source: oldest first
    schema = spark.read.parquet(src).schema
    for label, extra in (("no clustering", {}), (f"inline every {args.inline_every}", {
            "hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": str(args.inline_every),
            "hoodie.clustering.plan.strategy.sort.columns": "fare"})):  # fmt: skip
        out = os.path.join(scratch, f"stream_{len(extra)}")
        wait_until_quiet(args.wait_idle)
        t0 = time.perf_counter()
        q = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src).writeStream
             .format("hoodie").options(**BASE).option("hoodie.datasource.write.operation", "append").options(**extra)
             .option("checkpointLocation", out + "_ckpt").trigger(availableNow=True).start(out))  # fmt: skip
        q.awaitTermination()
        wall = time.perf_counter() - t0
        durations = sorted(p["durationMs"].get("addBatch", 0) for p in q.recentProgress if p["numInputRows"])
        live = len(hoodie_sink_snapshot_files(out))
        rows_out.append(
            {
                "part": "3",
                "case": f"stream {args.stream_batches} x {args.stream_rows:,} rows, {label}: "
                f"addBatch p50 {durations[len(durations) // 2]} ms, max {durations[-1]} ms; {live} live files",
                "s": f"{wall:.2f}",
                "rows/s": f"{args.stream_batches * args.stream_rows / wall:,.0f}",
                "x spark (speed)": "",
                "x upsert (speed)": "",
            }
        )


def hoodie_sink_snapshot_files(path):
    from hoodie_sink.table.read.snapshot import Snapshot

    return Snapshot.open(path).base_files()


def main(argv=None) -> int:
    args = parse_args(argv)
    spark = build_spark(
        SparkSettings(extra=(("spark.sql.python.filterPushdown.enabled", "true"),)), "bench_append"
    )
    import hoodie_sink

    hoodie_sink.register(spark)
    rows_out: list[dict[str, str]] = []
    with scratch_dir(None, "bench_append_") as scratch:
        if "1" in args.parts:
            print(f"part 1: {human_rows(args.rows)} rows", flush=True)
            part1(spark, args, scratch, rows_out)
        if "2" in args.parts:
            print(f"part 2: {args.small_files} x {args.small_rows:,} rows", flush=True)
            part2(spark, args, scratch, rows_out)
        if "3" in args.parts:
            print(f"part 3: stream of {args.stream_batches} x {args.stream_rows:,} rows", flush=True)
            part3(spark, args, scratch, rows_out)
    print()
    print(format_table(rows_out))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
