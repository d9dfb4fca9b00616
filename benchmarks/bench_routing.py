"""Benchmark (issue 27): an upsert routed by hoodie_sink.spark.route vs the same upsert unrouted,
as the input's Spark partitioning P grows.

Base: N trips rows (common.trips_df: key trip_id, 10 cities) bulk-inserted through the sink once
and kept as a pristine copy.  Batch: half updates of random existing keys, half new keys
(bench_upsert.build_batch), staged as parquet.  For each P in --parts and each mode, a fresh copy
of the pristine table gets `batch.repartition(P)` (random) upserted:
  unrouted  df.write.format("hoodie")                                            [timed]
  routed    df.transform(route(path, options)).write.format(...)  [timed: route + write]
            (the route's own parallelism: Spark's shuffle partitions, 2 here, coalesced by AQE)
Printed per run, from the sink's metrics file (table/metrics.py): total wall time (the routed
one includes its tag job), the commit-time merge in the driver and the rest of the commit, the
task sums (tag, write), files added, bytes written.  Reference in the same run: Spark's own
parquet sink writing the same batch (`batch.repartition(P).write.parquet`), for scale.
`--cluster 2`: the same on a standalone cluster of two one-core workers on 127.0.0.1
(tests/support/standalone_cluster.py): the merge work then runs in the executors' tasks.
One untimed write of each mode comes first (Python workers, imports, first jobs warm).
Each table is checked with hudi-rs: rows == N + inserts, distinct keys == rows.
Exit code 1 if a check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_upsert import build_batch, hoodie_options, spark_phases  # noqa: E402
from common import SparkSettings, build_spark, scratch_dir, settle, trips_df  # noqa: E402

from tests.support.standalone_cluster import cluster_conf, standalone_cluster  # noqa: E402


def last_metrics(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.loads(f.read().splitlines()[-1])


def check(path: str, rows: int) -> str:
    import hudi
    import pyarrow as pa
    import pyarrow.compute as pc

    t = pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(path).build().read())
    n, distinct = t.num_rows, pc.count_distinct(t.column("_hoodie_record_key")).as_py()
    return "ok" if n == rows == distinct else f"FAILED: {n} rows, {distinct} keys, want {rows}"


def routed_or_not(df, path: str, opts: dict[str, str], mode: str):
    """`df` as the benchmark writes it in `mode`: through hoodie_sink.spark.route, or as it is."""
    import hoodie_sink.spark

    return df.transform(hoodie_sink.spark.route(path, opts)) if mode == "routed" else df


def parquet_seconds(spark, df, path: str) -> float:
    """The reference of the same run: Spark's own parquet sink writing `df`."""
    settle(spark)
    t0 = time.monotonic()
    df.write.mode("overwrite").parquet(path)
    return time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000, help="base table rows N")
    ap.add_argument("--batch", type=int, default=200_000, help="upsert rows (half updates, half inserts)")
    ap.add_argument("--parts", default="2,8,32,64,256", help="input partitionings P")
    ap.add_argument("--modes", default="unrouted,routed")
    ap.add_argument("--scratch", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--stages", action="store_true", help="print Spark's stage and task times of each write")
    ap.add_argument(
        "--cluster",
        type=int,
        default=0,
        help="run on a standalone cluster on 127.0.0.1 of this many one-core workers (0: local[2])",
    )
    ap.add_argument("--executor-memory", default="2g")
    ap.add_argument("--driver-memory", default="4g")
    args = ap.parse_args(argv)
    with contextlib.ExitStack() as stack:
        settings = SparkSettings(driver_memory=args.driver_memory)
        if args.cluster:
            os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # the driver binds where the cluster listens
            url = stack.enter_context(standalone_cluster(args.cluster, args.executor_memory))
            settings = SparkSettings(master=url, driver_memory=args.driver_memory,
                                     extra=cluster_conf(args.cluster, args.executor_memory))  # fmt: skip
        return run(args, build_spark(settings, "bench_routing"))


def run(args: argparse.Namespace, spark) -> int:

    failed = False
    results = []
    with scratch_dir(args.scratch, "bench_routing", args.keep) as scratch:
        pristine = os.path.join(scratch, "pristine")
        base = trips_df(spark, args.rows)
        t0 = time.monotonic()
        base.write.format("hoodie").options(**hoodie_options("bulk_insert")).mode("overwrite").save(pristine)
        print(f"base: {args.rows:,} rows bulk-inserted in {time.monotonic() - t0:.1f}s", flush=True)
        batch = build_batch(spark, base, args.rows, args.batch // 2, args.batch - args.batch // 2,
                            os.path.join(scratch, "batch"))  # fmt: skip
        metrics_file = os.path.join(scratch, "metrics.jsonl")
        # untimed: one write of each mode first, so that no measured run pays the Python workers'
        # start, imports and the JIT of the first Spark job of its kind
        for mode in args.modes.split(","):
            path = os.path.join(scratch, f"warmup-{mode}")
            shutil.copytree(pristine, path)
            opts = hoodie_options("upsert")
            routed_or_not(batch, path, opts, mode).write.format("hoodie").options(**opts).mode("append").save(
                path
            )
            shutil.rmtree(path)
        for p in [int(x) for x in args.parts.split(",")]:
            df = batch.repartition(p)
            parquet_s = parquet_seconds(spark, df, os.path.join(scratch, f"parquet-{p}"))
            for mode in args.modes.split(","):
                path = os.path.join(scratch, f"t-{mode}-{p}")
                shutil.copytree(pristine, path)
                opts = hoodie_options("upsert", **{"hoodie.sink.metrics.file": metrics_file})
                settle(spark)
                t0 = time.monotonic()
                t0_ms = int(time.time() * 1000)
                src = routed_or_not(df, path, opts, mode)
                route_s = time.monotonic() - t0
                src.write.format("hoodie").options(**opts).mode("append").save(path)
                total = time.monotonic() - t0
                if args.stages:
                    print(f"{mode} P={p}: {spark_phases(spark, t0_ms, int(time.time() * 1000))}", flush=True)
                m = last_metrics(metrics_file)
                ph = m["phases_ms"]
                ok = check(path, args.rows + args.batch - args.batch // 2)
                failed |= ok != "ok"
                row = {
                    "P": p, "mode": mode, "total_s": round(total, 2), "route_s": round(route_s, 2),
                    "merge_s": ph.get("merge", 0) / 1000, "commit_s": ph.get("commit", 0) / 1000,
                    "commit_cpu_s": m.get("commit_cpu_ms", 0) / 1000,
                    "tag_task_s": ph.get("tag", 0) / 1000, "write_task_s": ph.get("write", 0) / 1000,
                    "files_added": m["files_added"], "files_updated": m["files_updated"],
                    "mb_written": round(m["bytes_written"] / 1e6, 1), "parquet_s": round(parquet_s, 2), "check": ok,
                }  # fmt: skip
                results.append(row)
                print(json.dumps(row), flush=True)
                shutil.rmtree(path)
    print()
    print("| P | mode | total s | route s | driver merge s | commit s | commit CPU s | tag (tasks) s | write (tasks) s "
          "| files added | files updated | MB written | x parquet | check |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        print(f"| {r['P']} | {r['mode']} | {r['total_s']} | {r['route_s']} | {r['merge_s']} | "
              f"{r['commit_s']} | {r['commit_cpu_s']} | {r['tag_task_s']} | {r['write_task_s']} | "
              f"{r['files_added']} | {r['files_updated']} | "
              f"{r['mb_written']} | {r['total_s'] / max(r['parquet_s'], 1e-3):.1f} | {r['check']} |")  # fmt: skip
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
