"""Demo: a local Spark job landing trip data in a Hudi table under ./demo_table.

Writes a few batches (a bulk load, then incremental inserts) through df.write.format("hoodie"),
prints one progress line per batch, then reads the table back with hudi-rs (the `hudi`
package) and with our own reader and checks both against what was sent.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--path", default=os.path.join(os.getcwd(), "demo_table"))
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--rows", type=int, default=200_000, help="rows per batch")
    args = ap.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need hoodie_sink too
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("hoodie-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    shutil.rmtree(args.path, ignore_errors=True)
    opts = {
        "hoodie.table.name": "demo_trips",
        "hoodie.datasource.write.recordkey.field": "trip_id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.hive_style_partitioning": "true",
    }
    cities = ["san_francisco", "sao_paulo", "chennai", "new_york", "berlin"]
    city = F.element_at(F.array(*[F.lit(c) for c in cities]), (F.col("id") % len(cities) + 1).cast("int"))
    sent = 0
    print(f"hoodie demo: {args.batches} batches of {args.rows:,} trips into {args.path}")
    for b in range(args.batches):
        start = b * args.rows
        df = (
            spark.range(start, start + args.rows, 1, 2)
            .select(
                F.format_string("trip-%09d", "id").alias("trip_id"),
                F.format_string("rider-%03d", F.col("id") % 997).alias("rider"),
                city.alias("city"),
                (F.col("id") % 1000 / 10.0).alias("fare"),
                F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("ts"),
            )
        )
        op = "bulk_insert" if b == 0 else "insert"
        t0 = time.monotonic()
        df.write.format("hoodie").options(**opts).option("hoodie.datasource.write.operation", op).mode("append").save(
            args.path
        )
        dt = time.monotonic() - t0
        sent += args.rows
        print(f"  batch {b + 1}/{args.batches}: {op:<11} {args.rows:>9,} rows in {dt:5.1f}s ({args.rows / dt:>9,.0f} rows/s)")

    from hudi import HudiTableBuilder

    import hoodie_sink

    table = HudiTableBuilder.from_base_uri(args.path).build()
    rs_rows = sum(b.num_rows for b in table.read())
    ours = hoodie_sink.read(args.path, columns=["trip_id"])
    distinct = len(set(ours.column("trip_id").to_pylist()))
    commits = table.get_timeline().get_completed_commits()
    files = sum(1 for root, _, names in os.walk(args.path) if ".hoodie" not in root for n in names if n.endswith(".parquet"))
    ok = rs_rows == sent and ours.num_rows == sent and distinct == sent
    print(
        f"summary: sent {sent:,} rows; hudi-rs reads {rs_rows:,}, hoodie_sink reads {ours.num_rows:,} "
        f"({distinct:,} distinct keys); {len(commits)} commits, {files} base files -> {'OK' if ok else 'MISMATCH'}"
    )
    spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
