"""Benchmark (issue 27): append and bulk_insert routed by hoodie_sink.spark.route vs unrouted, as
the input's Spark partitioning P grows.

N trips rows (common.trips_df, 10 cities), staged as parquet, are written into a fresh table by
`df.repartition(P)` (random) for each P in --parts, each operation and each mode:
  unrouted  df.write.format("hoodie")                                      [timed]
  routed    df.transform(route(path, options)).write.format(...)  [timed: route + write]
Reference in the same run: Spark's parquet sink writing the same DataFrame.  Printed: wall time,
files written, MB, the mean file size.  Unrouted, every task opens its own file group in every
partition it sees (P x 10 files at least); routed, the records go to sized new file groups.
Each table is checked with hudi-rs: N rows, and N distinct keys.  Exit code 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_routing import check, parquet_seconds, routed_or_not  # noqa: E402
from bench_upsert import hoodie_options, spark_phases  # noqa: E402
from common import SparkSettings, build_spark, scratch_dir, settle, trips_df  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--parts", default="2,64")
    ap.add_argument("--operations", default="bulk_insert,append")
    ap.add_argument("--scratch", default=None)
    ap.add_argument("--stages", action="store_true", help="print Spark's stage and task times of each write")
    args = ap.parse_args(argv)
    spark = build_spark(SparkSettings(driver_memory="4g"), "bench_routed_inserts")

    failed, results = False, []
    with scratch_dir(args.scratch, "bench_routed_inserts", False) as scratch:
        staged = os.path.join(scratch, "input")
        trips_df(spark, args.rows).write.parquet(staged)
        source = spark.read.parquet(staged)
        # untimed warm-up of both modes (Python workers, imports, first jobs)
        for mode in ("unrouted", "routed"):
            opts = hoodie_options("bulk_insert")
            path = os.path.join(scratch, f"warmup-{mode}")
            routed_or_not(source.limit(50_000), path, opts, mode).write.format("hoodie").options(**opts).mode(
                "append"
            ).save(path)
        for p in [int(x) for x in args.parts.split(",")]:
            df = source.repartition(p)
            parquet_s = parquet_seconds(spark, df, os.path.join(scratch, f"parquet-{p}"))
            for op in args.operations.split(","):
                for mode in ("unrouted", "routed"):
                    path = os.path.join(scratch, f"t-{op}-{mode}-{p}")
                    opts = hoodie_options(op)
                    settle(spark)
                    t0 = time.monotonic()
                    t0_ms = int(time.time() * 1000)
                    src = routed_or_not(df, path, opts, mode)
                    src.write.format("hoodie").options(**opts).mode("append").save(path)
                    total = time.monotonic() - t0
                    if args.stages:
                        print(
                            f"{op} {mode} P={p}: {spark_phases(spark, t0_ms, int(time.time() * 1000))}",
                            flush=True,
                        )
                    files = [os.path.join(d, f) for d, _, fs in os.walk(path) if ".hoodie" not in d
                             for f in fs if f.endswith(".parquet")]  # fmt: skip
                    mb = sum(os.path.getsize(f) for f in files) / 1e6
                    ok = check(path, args.rows)
                    failed |= ok != "ok"
                    row = {"P": p, "operation": op, "mode": mode, "total_s": round(total, 2), "files": len(files),
                           "mb_written": round(mb, 1), "mean_file_mb": round(mb / max(len(files), 1), 2),
                           "x_parquet": round(total / parquet_s, 2), "check": ok}  # fmt: skip
                    results.append(row)
                    print(json.dumps(row), flush=True)
    print()
    print("| P | operation | mode | total s | files | MB written | mean file MB | x parquet | check |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---|")
    for r in results:
        print(f"| {r['P']} | {r['operation']} | {r['mode']} | {r['total_s']} | {r['files']} | {r['mb_written']} | "
              f"{r['mean_file_mb']} | {r['x_parquet']} | {r['check']} |")  # fmt: skip
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
