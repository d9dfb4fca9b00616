"""Benchmark: the `hoodie` sink vs Apache Hudi's own Spark writer, same machine, same data, same run.

Workloads (issue 10):
  * bulk_insert of N rows (default 1M and 5M) into a new table;
  * upsert of 10% of N (half updates of existing keys, half new keys) into an N-row table;
  * a streaming upsert of 20 micro-batches of 50k rows (each: 25k new keys, 25k updates of keys
    of earlier batches), one parquet file per micro-batch, trigger availableNow.

Each writer runs in its own Spark: ours in this process (the project's PySpark), Apache Hudi in
the interop tier's (pyspark 3.5.1 + hudi-spark3.5-bundle, tests/interop/hudi_server.py), each
`local[2]` with the same driver memory.  Both read the same staged parquet input and time the
write alone (Java's is timed inside its process: no request or reply in the figure).  The
untimed base tables of the upsert runs are bulk_inserted by each writer into its own table.

Settings, Hudi's recommended ones for each workload and the same for both where they mean the
same thing: record key `trip_id`, partition `city` (10 values), precombine `ts`, snappy,
120 MiB max file size (both defaults), Hudi's row writer for bulk_insert (its default),
Hudi's default index (SIMPLE in Spark since 0.14) and its defaults otherwise (metadata table on,
timeline-server markers); ours with its defaults (bloom index).  Java's bulk_insert sort mode
is its default (NONE); ours sorts each task's rows by (partition, key).

    .venv/bin/python benchmarks/bench_vs_hudi.py [--rows 1000000,5000000] [--repeat 1]
        [--hudi 0.15.0] [--stream-batches 20 --stream-rows 50000] [--only bulk_insert,upsert,stream]
        [--table-type MERGE_ON_READ]

Needs the interop tier (`./run.sh test` sets it up, or HOODIE_INTEROP_HOME).  Prints a Markdown
table: seconds, rows/s and our ratio (Hudi's time / ours: > 1 means we are faster).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from common import SparkSettings, build_spark, format_table, human_rows, source_version, trips_df  # noqa: E402

from tests.interop.java_hudi import JavaHudi, interop_missing  # noqa: E402

KEYS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "trip_id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.parquet.compression.codec": "snappy",
    "hoodie.parquet.max.file.size": str(120 * 1024 * 1024),
}
# the stream's schema as Spark's file source needs it (the same columns trips_df makes)
STREAM_SCHEMA = (
    "trip_id STRING, rider STRING, driver STRING, city STRING, ts TIMESTAMP, begin_lat DOUBLE, "
    "begin_lon DOUBLE, end_lat DOUBLE, end_lon DOUBLE, fare DOUBLE, distance_km FLOAT, passengers INT, "
    "tip DECIMAL(10,2)"
)


TABLE_TYPE = {"hoodie.datasource.write.table.type": "COPY_ON_WRITE"}  # --table-type


def op(name: str) -> dict[str, str]:
    return {**KEYS, **TABLE_TYPE, "hoodie.datasource.write.operation": name}


# -- data ------------------------------------------------------------------------------------------
def stage_inputs(spark, work: Path, sizes: list[int], stream_batches: int, stream_rows: int) -> dict:
    """Parquet inputs, written once: base N rows, the 10% upsert batch of N, the stream's files."""
    from pyspark.sql import functions as F

    staged: dict = {}
    for n in sizes:
        base = work / f"base-{n}"
        trips_df(spark, n).write.mode("overwrite").parquet(str(base))
        changes = work / f"upsert-{n}"
        updates = (
            spark.read.parquet(str(base)).sample(fraction=0.05 * 1.05, seed=7).limit(n // 20)
            .withColumn("ts", F.col("ts") + F.expr("INTERVAL 400 DAYS")).withColumn("fare", F.col("fare") + 1)
        )  # fmt: skip
        inserts = trips_df(spark, n // 20, seed=99).withColumn(
            "trip_id", F.concat(F.lit("new-"), F.col("trip_id"))
        )
        updates.unionByName(inserts).repartition(2).write.mode("overwrite").parquet(str(changes))
        staged[n] = (base, changes)
    src = work / "stream-src"
    src.mkdir(parents=True, exist_ok=True)
    half = stream_rows // 2
    for b in range(stream_batches):
        new = trips_df(spark, half, seed=1000 + b).withColumn(
            "trip_id", F.concat(F.lit(f"b{b}-"), F.col("trip_id"))
        )
        if b == 0:
            batch = new.unionByName(trips_df(spark, half, seed=2000).withColumn(
                "trip_id", F.concat(F.lit("b0u-"), F.col("trip_id"))))  # fmt: skip
        else:  # updates of keys of earlier batches
            earlier = b - 1
            old = trips_df(spark, half, seed=1000 + earlier).withColumn(
                "trip_id", F.concat(F.lit(f"b{earlier}-"), F.col("trip_id"))
            ).withColumn("ts", F.col("ts") + F.expr("INTERVAL 400 DAYS"))  # fmt: skip
            batch = new.unionByName(old)
        out = work / f"stream-tmp-{b}"
        batch.coalesce(1).write.mode("overwrite").parquet(str(out))
        f = next(out.glob("part-*.parquet"))
        dest = src / f"batch-{b:03d}.parquet"
        shutil.move(str(f), dest)
        os.utime(dest, (1_700_000_000 + b, 1_700_000_000 + b))  # the file source takes the oldest first
        shutil.rmtree(out)
    staged["stream"] = src
    return staged


# -- the two writers ---------------------------------------------------------------------------------
def ours_write(spark, src: Path, path: Path, options: dict, mode: str = "append") -> float:
    df = spark.read.parquet(str(src))
    start = time.perf_counter()
    df.write.format("hoodie").options(**options).mode(mode).save(str(path))
    return time.perf_counter() - start


def ours_stream(spark, src: Path, path: Path, ckpt: Path, options: dict) -> float:
    df = spark.readStream.schema(STREAM_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(src))
    start = time.perf_counter()
    q = (
        df.writeStream.format("hoodie").options(**options).option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True).start(str(path))
    )  # fmt: skip
    q.awaitTermination()
    seconds = time.perf_counter() - start
    if q.exception():
        raise RuntimeError(str(q.exception()))
    return seconds


def java_write(java: JavaHudi, src: Path, path: Path, options: dict, mode: str = "append") -> float:
    return java.call("write", path=str(path), input=str(src), options=options, mode=mode)["seconds"]


def rows_in(path: Path) -> int:
    from hudi import HudiTableBuilder

    return sum(b.num_rows for b in HudiTableBuilder.from_base_uri(str(path)).build().read())


# -- the run -------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="1000000,5000000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--hudi", default="0.15.0")
    ap.add_argument("--stream-batches", type=int, default=20)
    ap.add_argument("--stream-rows", type=int, default=50_000)
    ap.add_argument("--only", default="bulk_insert,upsert,stream")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--table-type", default="COPY_ON_WRITE", choices=["COPY_ON_WRITE", "MERGE_ON_READ"],
                    help="both writers' table type (MERGE_ON_READ: each with its default compaction)")  # fmt: skip
    args = ap.parse_args()
    TABLE_TYPE["hoodie.datasource.write.table.type"] = args.table_type
    if missing := interop_missing():
        print(f"the interop tier is not set up ({missing}): run ./run.sh test once", file=sys.stderr)
        return 2
    sizes = [int(x) for x in args.rows.split(",") if x]
    only = set(args.only.split(","))
    work = Path(args.work_dir or f"/tmp/bench-vs-hudi-{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    spark = build_spark(SparkSettings(driver_memory=args.driver_memory), "bench-vs-hudi")
    java = JavaHudi(args.hudi, driver_memory=args.driver_memory)
    results: list[dict[str, str]] = []
    try:
        staged = stage_inputs(spark, work, sizes, args.stream_batches, args.stream_rows)
        warm = work / "warm"
        trips_df(spark, 20_000).write.mode("overwrite").parquet(str(warm))
        for who, write in (("ours", lambda p: ours_write(spark, warm, p, op("upsert"))),
                           ("hudi", lambda p: java_write(java, warm, p, op("upsert")))):  # fmt: skip
            write(work / f"warm-{who}")  # JIT, Python workers, class loading: untimed
            write(work / f"warm-{who}")
        for n in sizes:
            base, changes = staged[n]
            if "bulk_insert" in only:
                results.append(measure(f"bulk_insert {human_rows(n)}", n, args.repeat, work, {
                    "ours": lambda p, b=base: ours_write(spark, b, p, op("bulk_insert"), "overwrite"),
                    "hudi": lambda p, b=base: java_write(java, b, p, op("bulk_insert"), "overwrite"),
                }, expect=n))  # fmt: skip
            if "upsert" in only:
                batch_rows = 2 * (n // 20)
                results.append(measure(f"upsert 10% into {human_rows(n)}", batch_rows, args.repeat, work, {
                    "ours": lambda p, b=base, c=changes: (ours_write(spark, b, p, op("bulk_insert"), "overwrite"),
                                                          ours_write(spark, c, p, op("upsert")))[1],
                    "hudi": lambda p, b=base, c=changes: (java_write(java, b, p, op("bulk_insert"), "overwrite"),
                                                          java_write(java, c, p, op("upsert")))[1],
                }, expect=n + n // 20))  # fmt: skip
        if "stream" in only:
            src, total = staged["stream"], args.stream_batches * args.stream_rows
            results.append(measure(f"streaming upsert {args.stream_batches}x{human_rows(args.stream_rows)}",
                                   total, args.repeat, work, {
                "ours": lambda p: ours_stream(spark, src, p, p.with_suffix(".ckpt"), op("upsert")),
                "hudi": lambda p: java.call("stream", path=str(p), input=str(src), schema=STREAM_SCHEMA,
                                            checkpoint=str(p.with_suffix(".ckpt")), options=op("upsert"))["seconds"],
            }, expect=(args.stream_batches + 1) * args.stream_rows // 2))  # fmt: skip
    finally:
        java.close()
        spark.stop()
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nhoodie_sink {source_version(str(ROOT))} vs Apache Hudi {args.hudi} (Spark 3.5.1), local[2], "
          f"driver memory {args.driver_memory}, {os.cpu_count()} CPUs, {args.table_type}\n")  # fmt: skip
    print(format_table(results))
    return 0


def measure(name: str, rows: int, repeat: int, work: Path, writers: dict, expect: int) -> dict[str, str]:
    """Run each writer `repeat` times (interleaved, each into a fresh table); the best time counts."""
    times: dict[str, list[float]] = {w: [] for w in writers}
    for r in range(repeat):
        for who, run in writers.items():
            path = work / f"{who}-{r}"
            shutil.rmtree(path, ignore_errors=True)
            shutil.rmtree(path.with_suffix(".ckpt"), ignore_errors=True)
            seconds = run(path)
            got = rows_in(path)
            if got != expect:
                raise AssertionError(f"{name}: {who} table holds {got} rows, expected {expect}")
            times[who].append(seconds)
            print(f"{name}: {who} run {r + 1}: {seconds:.2f} s", file=sys.stderr, flush=True)
            shutil.rmtree(path, ignore_errors=True)
    ours, hudi = min(times["ours"]), min(times["hudi"])
    return {
        "workload": name,
        "rows": f"{rows:,}",
        "ours s": f"{ours:.2f}",
        "hudi s": f"{hudi:.2f}",
        "ours rows/s": f"{rows / ours:,.0f}",
        "hudi rows/s": f"{rows / hudi:,.0f}",
        "ratio (hudi s / ours s)": f"{hudi / ours:.2f}x",
        "median ours / hudi": f"{statistics.median(times['ours']):.2f} / {statistics.median(times['hudi']):.2f}",
    }


if __name__ == "__main__":
    sys.exit(main())
