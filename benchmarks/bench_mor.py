"""Benchmark: streaming upserts into MERGE_ON_READ vs COPY_ON_WRITE tables, snapshot reads of the
merge-on-read table before and after compaction, and compaction itself (issue 12).

One local[2] session.  Input (numpy/pyarrow, before any timing; bench_streaming.make_input): a seed
of --rows trips rows and --batches files of --batch rows, each half updates of random existing
keys (newer ts) and half new keys, 11 columns, partitioned by city (10 values), key trip_id,
precombine ts.

  seed       df.write.format("hoodie") bulk_insert of the seed into a MOR and a COW table   [timed:
             bulk_insert rows/s, the reference for compaction's rows/s]
  stream     df.writeStream.format("hoodie") (file source, maxFilesPerTrigger 1, availableNow)
             upsert into each table; per-batch durations (durationMs.triggerExecution) from the
             query's progress, the first batch of each query left out; p50/p95.  The MOR streams
             run with hoodie.compact.inline=false (compaction measured on its own below, as a
             job beside the stream would run it): "MOR" with Hudi's default small-file padding
             (inserts rewrite the smallest base file of each partition, as Java's merge handle
             does), "MOR logs" with hoodie.parquet.small.file.limit=0 (inserts in new file
             groups, every update in a log); the COW stream runs --cow-batches of the files
             (each rewrites most of the table, so fewer batches give the same percentiles)
  read       spark.read.format("hoodie") of the whole MOR table, sum(fare) + count (every column
             merged), after 5 deltacommits, after all of them, and after compaction    [timed]
  compact    hoodie_sink.compact(path, spark=spark): rows/s, log files and bytes merged, peak
             RSS of the Python workers (sampled every 0.1 s)                          [timed]
  hudi       the MOR stream through Apache Hudi's Spark writer (--hudi, interop tier, its own
             local[2] JVM after ours is done): seed bulk_inserted untimed, then the same files;
             per-batch p50/p95 from its query's progress, Hudi's defaults otherwise (SIMPLE
             index, metadata table), no compaction during the stream

Every table is checked at the end with hudi-rs: rows, distinct keys and the sum of ts (each
update applied, newest wins) against the generator's model.  Prints a Markdown table.  See
README.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_streaming import make_input, percentile  # noqa: E402
from common import MiB, ProcessSampler, SparkSettings, build_spark, format_table, human_rows, scratch_dir  # noqa: E402

BASE = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "trip_id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}
MOR = {**BASE, "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.compact.inline": "false"}
# inserts in new file groups only: every update goes to a log (with Hudi's default padding, each
# micro-batch rewrites the smallest base file of every partition with its inserts and updates)
MOR_LOGS_ONLY = {**MOR, "hoodie.parquet.small.file.limit": "0"}
COW = {**BASE, "hoodie.datasource.write.table.type": "COPY_ON_WRITE"}


def stream(spark, schema, src: str, path: str, ckpt: str, opts: dict) -> list[float]:
    """Run the files of `src` through the sink; per-batch seconds (non-empty batches)."""
    q = (
        spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src)
        .writeStream.format("hoodie").options(**opts).option("checkpointLocation", ckpt)
        .trigger(availableNow=True).start(path)
    )  # fmt: skip
    q.awaitTermination()
    q.stop()
    if q.exception():
        raise RuntimeError(str(q.exception()))
    return [p["durationMs"]["triggerExecution"] / 1000 for p in q.recentProgress if p["numInputRows"] > 0]


def phase_medians(metrics_file: str) -> str:
    """Medians over a stream's commits (the first left out, as for the batch times) of the sink's
    own phases: the slowest task's tag and write, the commit's merge of staged changes, the rest
    of the commit (timeline, services), and the files a commit wrote."""
    import json

    with open(metrics_file) as f:
        lines = [json.loads(line) for line in f if line.strip()][1:]
    if not lines:
        return ""

    def med(values: list[float]) -> float:
        return percentile(values, 0.5)

    task = [m["slowest_task_ms"] for m in lines]
    phases = [m["phases_ms"] for m in lines]
    return (f"slowest task tag {med([t.get('tag', 0) for t in task]) / 1000:.2f} s + write "
            f"{med([t.get('write', 0) for t in task]) / 1000:.2f} s; commit merge "
            f"{med([p.get('merge', 0) for p in phases]) / 1000:.2f} s + rest "
            f"{med([p.get('commit', 0) for p in phases]) / 1000:.2f} s; "
            f"{med([m['files_added'] + m['files_updated'] for m in lines]):.0f} files, "
            f"{med([m['bytes_written'] for m in lines]) / MiB:.0f} MiB per commit")  # fmt: skip


def feed(files: list[str], src: str, start: int) -> None:
    """Hard-link the next batch files into the stream's source, in order of modification time."""
    for i, f in enumerate(files):
        target = os.path.join(src, os.path.basename(f))
        shutil.copyfile(f, target)
        t = 1_700_000_000 + start + i
        os.utime(target, (t, t))


def timed_read(spark, path: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    row = spark.read.format("hoodie").load(path).selectExpr("sum(fare) as s", "count(*) as n").collect()[0]
    return time.perf_counter() - t0, int(row["n"])


def check(path: str, expect_rows: int, expect_ts_sum: int) -> str:
    import pyarrow as pa
    import pyarrow.compute as pc
    from hudi import HudiTableBuilder

    t = pa.Table.from_batches(HudiTableBuilder.from_base_uri(path).build().read())
    keys = pc.count_distinct(t.column("trip_id")).as_py()
    ts_sum = pc.sum(t.column("ts").cast("int64")).as_py()
    ok = t.num_rows == expect_rows == keys and ts_sum == expect_ts_sum
    return f"{'OK' if ok else 'MISMATCH'} ({t.num_rows:,} rows, {keys:,} keys)"


# Java's options for the same stream: its defaults otherwise (SIMPLE index, metadata table, small
# file padding), and no compaction during the stream (ours runs with hoodie.compact.inline=false)
JAVA_MOR = {
    **BASE,
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.compact.inline": "false",
    "hoodie.datasource.compaction.async.enable": "false",
}
STREAM_DDL = (
    "trip_id STRING, rider STRING, driver STRING, city STRING, ts TIMESTAMP, begin_lat DOUBLE, "
    "begin_lon DOUBLE, end_lat DOUBLE, end_lon DOUBLE, fare DOUBLE, passengers INT"
)


def java_stream(version: str, root: str, inp, files: list[str]) -> tuple[list[float], str] | None:
    """The MOR stream through Apache Hudi's Spark writer (the interop tier's JVM): the seed
    bulk_inserted untimed, then every batch file; per-batch seconds (the first left out)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tests.interop.java_hudi import JavaHudi, interop_missing

    if missing := interop_missing():
        print(f"Apache Hudi stream skipped: the interop tier is not set up ({missing})", flush=True)
        return None
    java = JavaHudi(version, timeout_s=3600, driver_memory="6g")
    try:
        path, src = os.path.join(root, "java-mor"), os.path.join(root, "src-java")
        os.makedirs(src)
        feed(files, src, 0)
        bulk = {**JAVA_MOR, "hoodie.datasource.write.operation": "bulk_insert"}
        t0 = time.perf_counter()
        java.call("write", path=path, input=inp.seed_dir, options=bulk, mode="append")
        print(f"Apache Hudi bulk_insert of the seed: {time.perf_counter() - t0:.1f}s", flush=True)
        out = java.call("stream", path=path, input=src, schema=STREAM_DDL, checkpoint=path + ".ckpt",
                        options={**JAVA_MOR, "hoodie.datasource.write.operation": "upsert"})  # fmt: skip
    finally:
        java.close()
    return out["batch_seconds"][1:], check(path, inp.expect_rows, inp.expect_ts_sum)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000, help="rows of the table before the stream")
    ap.add_argument("--batch", type=int, default=50_000, help="rows per micro-batch (half updates)")
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--cow-batches", type=int, default=10)
    ap.add_argument("--scratch", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--hudi", default="0.15.0",
                    help="Apache Hudi version of the same MOR stream (interop tier); 'none' skips it")  # fmt: skip
    args = ap.parse_args(argv)
    spark = build_spark(SparkSettings(), "bench-mor")
    results: list[dict[str, str]] = []
    with scratch_dir(args.scratch, "bench-mor-", args.keep) as root:
        seed_batches = max(1, args.rows // args.batch)
        inp = make_input(root, "upsert", args.batch, args.batches, 0.5, seed_batches, seed=11)
        files = sorted(os.path.join(inp.src_dir, f) for f in os.listdir(inp.src_dir))
        schema = spark.read.parquet(files[0]).schema
        seed = spark.read.parquet(inp.seed_dir)
        print(f"input: seed {human_rows(inp.seed_rows)} rows, {args.batches} x {human_rows(args.batch)} "
              f"(50% updates), generated in {inp.gen_s:.1f}s", flush=True)  # fmt: skip
        # warm-up (untimed): JVM, Python workers, imports, on both table types and the reader
        for opts in (MOR, COW):
            warm = os.path.join(root, f"warm-{opts['hoodie.datasource.write.table.type']}")
            seed.limit(1000).write.format("hoodie").options(**opts).mode("append").save(warm)
            seed.limit(500).write.format("hoodie").options(**opts).mode("append").save(warm)
            timed_read(spark, warm)
        tables = {}
        metrics = {name: os.path.join(root, f"metrics-{name.lower().replace(' ', '-')}.jsonl")
                   for name in ("MOR", "MOR logs", "COW")}  # fmt: skip
        with_metrics = {name: {"hoodie.sink.metrics.file": m} for name, m in metrics.items()}
        variants = (("MOR", MOR), ("MOR logs", MOR_LOGS_ONLY), ("COW", COW))
        for name, opts in variants:
            path = os.path.join(root, name.lower().replace(" ", "-"))
            t0 = time.perf_counter()
            seed.write.format("hoodie").options(**opts).option(
                "hoodie.datasource.write.operation", "bulk_insert"
            ).mode("append").save(path)
            secs = time.perf_counter() - t0
            tables[name] = path
            print(f"{name} bulk_insert: {inp.seed_rows / secs:,.0f} rows/s ({secs:.1f}s)", flush=True)
            results.append({"step": f"{name} bulk_insert seed", "seconds": f"{secs:.1f}",
                            "figure": f"{inp.seed_rows / secs:,.0f} rows/s"})  # fmt: skip
        bulk_rate = inp.seed_rows / float(results[0]["seconds"])

        # MOR stream: 5 batches, read, the rest, read, compact, read
        src, ckpt = os.path.join(root, "src-mor"), os.path.join(root, "ckpt-mor")
        os.makedirs(src)
        feed(files[:5], src, 0)
        mor_times = stream(spark, schema, src, tables["MOR"], ckpt, {**MOR, **with_metrics["MOR"]})
        r5, n5 = timed_read(spark, tables["MOR"])
        feed(files[5:], src, 5)
        mor_times += stream(spark, schema, src, tables["MOR"], ckpt, {**MOR, **with_metrics["MOR"]})
        r_all, n_all = timed_read(spark, tables["MOR"])
        import hoodie_sink

        with ProcessSampler() as sampler:
            t0 = time.perf_counter()
            done = hoodie_sink.compact(tables["MOR"], MOR, spark=spark)
            c_secs = time.perf_counter() - t0
        c_rows = sum(r.rows for r in done)
        r_c, n_c = timed_read(spark, tables["MOR"])
        mor_check = check(tables["MOR"], inp.expect_rows, inp.expect_ts_sum)

        # MOR without padding: every batch, then compacted (for the check and the read)
        src, ckpt = os.path.join(root, "src-logs"), os.path.join(root, "ckpt-logs")
        os.makedirs(src)
        feed(files, src, 0)
        logs_times = stream(
            spark, schema, src, tables["MOR logs"], ckpt, {**MOR_LOGS_ONLY, **with_metrics["MOR logs"]}
        )
        r_logs, _ = timed_read(spark, tables["MOR logs"])
        hoodie_sink.compact(tables["MOR logs"], MOR_LOGS_ONLY, spark=spark)
        r_logs_c, _ = timed_read(spark, tables["MOR logs"])
        logs_check = check(tables["MOR logs"], inp.expect_rows, inp.expect_ts_sum)

        # COW stream: the first --cow-batches files (same input)
        src, ckpt = os.path.join(root, "src-cow"), os.path.join(root, "ckpt-cow")
        os.makedirs(src)
        feed(files[: args.cow_batches], src, 0)
        cow_times = stream(spark, schema, src, tables["COW"], ckpt, {**COW, **with_metrics["COW"]})

        java = java_stream(args.hudi, root, inp, files) if args.hudi != "none" else None

        # the first batch of a query: query start-up
        measured = {"MOR": mor_times[1:], "MOR logs": logs_times[1:], "COW": cow_times[1:]}
        for name, ts in measured.items():
            results.append({"step": f"{name} stream, per batch ({len(ts)} batches)",
                            "seconds": f"p50 {percentile(ts, 0.5):.2f} / p95 {percentile(ts, 0.95):.2f}",
                            "figure": phase_medians(metrics[name])})  # fmt: skip
        if java is not None:
            ts, java_check = java
            results.append({"step": f"Apache Hudi {args.hudi} MOR stream, per batch ({len(ts)} batches)",
                            "seconds": f"p50 {percentile(ts, 0.5):.2f} / p95 {percentile(ts, 0.95):.2f}",
                            "figure": f"{percentile(ts, 0.5) / percentile(measured['MOR'], 0.5):.1f}x our MOR p50; "
                                      f"{java_check}"})  # fmt: skip
        cow_p50 = percentile(measured["COW"], 0.5)
        for name in ("MOR", "MOR logs"):
            speed = cow_p50 / percentile(measured[name], 0.5)
            results.append(
                {"step": f"COW p50 / {name} p50", "seconds": "", "figure": f"{speed:.1f}x (target >= 5x)"}
            )
        results.append({"step": "MOR read after 5 deltacommits", "seconds": f"{r5:.2f}",
                        "figure": f"{r5 / r_c:.2f}x compacted ({n5:,} rows)"})  # fmt: skip
        results.append({"step": f"MOR read after {args.batches} deltacommits", "seconds": f"{r_all:.2f}",
                        "figure": f"{r_all / r_c:.2f}x compacted (target <= 2x)"})  # fmt: skip
        results.append(
            {"step": "MOR read after compaction", "seconds": f"{r_c:.2f}", "figure": f"{n_c:,} rows"}
        )
        logs = sum(r.log_files for r in done)
        peak = sampler.probe.max_one_hwm_kib * 1024 / MiB
        results.append({"step": f"compaction ({sum(r.file_groups for r in done)} file slices, {logs} logs)",
                        "seconds": f"{c_secs:.1f}",
                        "figure": f"{c_rows / c_secs:,.0f} rows/s = {c_rows / c_secs / bulk_rate:.2f}x bulk_insert; "
                                  f"peak worker RSS {peak:,.0f} MiB"})  # fmt: skip
        results.append({"step": f"MOR logs read after {args.batches} deltacommits", "seconds": f"{r_logs:.2f}",
                        "figure": f"{r_logs / r_logs_c:.2f}x compacted ({r_logs_c:.2f} s)"})  # fmt: skip
        results.append({"step": "MOR table check (hudi-rs)", "seconds": "", "figure": mor_check})
        results.append({"step": "MOR logs table check (hudi-rs)", "seconds": "", "figure": logs_check})
        print(format_table(results))
    spark.stop()
    return 0 if mor_check.startswith("OK") and logs_check.startswith("OK") else 1


if __name__ == "__main__":
    sys.exit(main())
