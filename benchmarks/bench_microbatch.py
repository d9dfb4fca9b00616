"""Benchmark: the fixed cost of a small micro-batch, and whether it grows with the table's history.

Streams --batch-rows (5k) row micro-batches into the `hoodie` sink (operation insert, then
upsert) on two copies of tables that differ only in the length of their history:

  a table with --histories (10 and 1,000) completed commits, built untimed with the engine
  client (`hoodie_sink.table.client.write`): one bulk_insert of --seed-rows rows (10 city
  partitions), then commits of one inserted row each (in its key's city).  Inserts
  fill the partition's small file, so every commit rewrites one file group: the latest file
  slices (what a micro-batch reads and rewrites) are the same in both tables; the longer history
  leaves more timeline files in .hoodie/ and more old file versions (no cleaning yet), as a real
  table of that age has.

Each stream: spark.readStream.parquet over one pre-generated file per micro-batch
(maxFilesPerTrigger 1, trigger availableNow), hoodie options as in bench_streaming.py (table
trips, record key trip_id, partition path city, precombine ts), a fresh checkpoint and a fresh
copy of the table.  Upsert batches are 10% updates of seed keys (newer ts), 90% new keys.
The first --skip batches of every query (query start, first plan, Python worker start) are not
counted; --repeat (2) streams per (operation, history), in alternating order, their batches
pooled; reported: p50/p95 of Spark's `durationMs.addBatch` (the sink: our writer construction,
the write tasks, the commit) and `triggerExecution` (the whole micro-batch), and the ratio
(longest history / shortest).  Every table is read back with hudi-rs afterwards (row count,
completed commits).  A warm-up stream (untimed) starts the JVM and the Python workers first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# benchmarks/ is not a package: the scripts run as files and import their siblings directly.
from bench_streaming import SPARK_SCHEMA, percentile, trips_table
from common import (
    CITIES,
    ProcessSampler,
    SparkSettings,
    build_spark,
    format_table,
    scratch_dir,
    settle,
    source_version,
    wait_until_quiet,
)

CPUS = os.cpu_count() or 1
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_RATIO = 1.2  # addBatch p50, longest history / shortest
HOODIE_BASE = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "trip_id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}
HISTORY_ID0 = 10_000_000  # ids of the one-row history commits
STREAM_ID0 = 20_000_000  # ids of the streamed new keys


def opts(operation: str) -> dict[str, str]:
    return {**HOODIE_BASE, "hoodie.datasource.write.operation": operation}


# -- tables and input (untimed) ----------------------------------------------------------------


def build_table(path: str, seed_rows: int, commits: int, rng) -> float:
    """A table with `commits` completed commits: a seed bulk_insert, then one-row inserts."""
    import numpy as np

    from hoodie_sink.table import client

    t0 = time.perf_counter()
    seed, _ = trips_table(np.arange(seed_rows, dtype=np.int64), 0, rng)
    client.write(seed, path, opts("bulk_insert"))
    # one row per commit, each in the next city (ids chosen so city_index cycles evenly enough)
    for i in range(commits - 1):
        row, _ = trips_table(np.array([HISTORY_ID0 + i], dtype=np.int64), 1, rng)
        client.write(row, path, opts("insert"))
    return time.perf_counter() - t0


def hudi_rs_check(path: str, want_rows: int, want_commits: int) -> tuple[bool, str]:
    from hudi import HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(path).build()
    n = sum(b.num_rows for b in table.read())
    commits = len(table.get_timeline().get_completed_commits())
    ok = n == want_rows and commits == want_commits
    return ok, f"hudi-rs: {n:,} rows (want {want_rows:,}), {commits} commits (want {want_commits})"


@dataclass
class Input:
    src_dir: str
    new_rows: int  # new keys over all batches


def make_input(root: str, operation: str, batch_rows: int, batches: int, seed_rows: int, rng) -> Input:
    import numpy as np
    import pyarrow.parquet as pq

    src = os.path.join(root, f"src_{operation}")
    os.makedirs(src)
    n_upd = batch_rows // 10 if operation == "upsert" else 0
    next_id, now = STREAM_ID0, time.time()
    for b in range(batches):
        new_ids = np.arange(next_id, next_id + batch_rows - n_upd, dtype=np.int64)
        next_id += len(new_ids)
        ids = new_ids
        if n_upd:
            ids = rng.permutation(np.concatenate([rng.choice(seed_rows, n_upd, replace=False), new_ids]))
        table, _ = trips_table(ids.astype(np.int64), b + 2, rng)
        path = os.path.join(src, f"batch-{b:05d}.parquet")
        pq.write_table(table, path)
        t = now - (batches - b)  # the file source orders files by modification time
        os.utime(path, (t, t))
    return Input(src, next_id - STREAM_ID0)


# -- one stream --------------------------------------------------------------------------------


@dataclass
class Run:
    operation: str
    history: int
    add_batch_ms: list[int] = field(default_factory=list)
    trigger_ms: list[int] = field(default_factory=list)
    wall_s: float = 0.0
    others: float = 0.0
    check: str = ""
    ok: bool = True

    def p(self, what: str, q: float) -> float:
        return percentile(getattr(self, what), q)


def stream(spark, src: str, out: str, ckpt: str, operation: str) -> tuple[list[dict], float]:
    df = spark.readStream.schema(SPARK_SCHEMA).option("maxFilesPerTrigger", 1).parquet(src)
    w = df.writeStream.option("checkpointLocation", ckpt).trigger(availableNow=True).format("hoodie")
    t0 = time.perf_counter()
    q = w.options(**opts(operation)).start(out)
    q.awaitTermination()
    wall = time.perf_counter() - t0
    if q.exception() is not None:
        raise RuntimeError(f"streaming query failed: {q.exception()}")
    return [p for p in q.recentProgress if int(p["numInputRows"]) > 0], wall


def run_one(args, spark, scratch: str, template: str, inp: Input, operation: str, history: int) -> Run:
    out = os.path.join(scratch, f"run_{operation}_{history}")
    ckpt = out + "_ckpt"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(ckpt, ignore_errors=True)
    shutil.copytree(template, out)
    settle(spark)
    if args.wait_idle > 0:
        wait_until_quiet(args.wait_idle, args.busy_threshold)
    res = Run(operation, history)
    with ProcessSampler(0.5) as sampler:
        progress, res.wall_s = stream(spark, inp.src_dir, out, ckpt, operation)
    res.others = sampler.probe.other_share(CPUS)
    measured = progress[args.skip :]
    res.add_batch_ms = [int(p["durationMs"].get("addBatch", 0)) for p in measured]
    res.trigger_ms = [int(p["durationMs"].get("triggerExecution", 0)) for p in measured]
    if len(progress) != args.batches:
        res.ok, res.check = False, f"{len(progress)} batches with rows, want {args.batches}"
    if not args.no_verify:
        ok, text = hudi_rs_check(out, args.seed_rows + history - 1 + inp.new_rows, history + args.batches)
        res.ok, res.check = res.ok and ok, (res.check + "; " if res.check else "") + text
    print(
        f"  {operation:<6} {history:>5} commits: addBatch p50 {res.p('add_batch_ms', 0.5):6.0f} ms, "
        f"trigger p50 {res.p('trigger_ms', 0.5):6.0f} ms, wall {res.wall_s:5.1f} s, others {res.others:.0%}; "
        f"{res.check}",
        flush=True,
    )
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(ckpt, ignore_errors=True)
    return res


# -- report ------------------------------------------------------------------------------------


def report(runs: list[Run], histories: list[int]) -> None:
    rows = []
    for r in runs:
        rows.append({
            "operation": r.operation, "commits": str(r.history), "batches": str(len(r.add_batch_ms)),
            "addBatch p50 ms": f"{r.p('add_batch_ms', 0.5):,.0f}",
            "addBatch p95 ms": f"{r.p('add_batch_ms', 0.95):,.0f}",
            "trigger p50 ms": f"{r.p('trigger_ms', 0.5):,.0f}",
            "trigger p95 ms": f"{r.p('trigger_ms', 0.95):,.0f}",
            "others CPU": f"{r.others:.0%}", "check": "ok" if r.ok else "FAILED",
        })  # fmt: skip
    print("\n" + format_table(rows))
    lo, hi = min(histories), max(histories)
    for op in sorted({r.operation for r in runs}):
        by = {r.history: r for r in runs if r.operation == op}
        if lo in by and hi in by:
            a, b = by[lo], by[hi]
            ratio = b.p("add_batch_ms", 0.5) / a.p("add_batch_ms", 0.5)
            trig = b.p("trigger_ms", 0.5) / a.p("trigger_ms", 0.5)
            verdict = "meets" if ratio <= TARGET_RATIO else "misses"
            print(
                f"{op}: addBatch p50 {hi} commits / {lo} commits = {ratio:.2f}x ({verdict} the "
                f"{TARGET_RATIO}x target); triggerExecution p50 {trig:.2f}x"
            )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="addBatch p50 of small hoodie micro-batches on tables with a short and a long history",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--batch-rows", type=int, default=5_000, help="rows per micro-batch")
    ap.add_argument("--batches", type=int, default=12, help="micro-batches per stream")
    ap.add_argument("--skip", type=int, default=2, help="first batches of every stream not counted")
    ap.add_argument("--repeat", type=int, default=2,
                    help="streams per (operation, history), alternating order, batches pooled")  # fmt: skip
    ap.add_argument("--histories", default="10,1000", help="completed commits of the tables, comma separated")
    ap.add_argument("--operations", default="insert,upsert", help="operations streamed, comma separated")
    ap.add_argument("--seed-rows", type=int, default=50_000, help="rows of the tables' first commit")
    ap.add_argument("--seed", type=int, default=42, help="random seed of the generated data")
    ap.add_argument("--output-dir", default=None, help="parent of the scratch dir (default: under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch dir afterwards")
    ap.add_argument("--wait-idle", type=float, default=6.0, help="wait up to this many s for a quiet machine")
    ap.add_argument("--busy-threshold", type=float, default=0.15, help="share of all CPUs counted as busy")
    ap.add_argument("--no-verify", action="store_true", help="skip the hudi-rs read-back")
    args = ap.parse_args(argv)
    args.history_list = sorted(int(h) for h in args.histories.split(","))
    args.operation_list = [o.strip() for o in args.operations.split(",") if o.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    args = parse_args(argv)
    started = time.perf_counter()
    spark = build_spark(SparkSettings(), "bench_microbatch")
    runs: list[Run] = []
    try:
        with scratch_dir(args.output_dir, "bench_microbatch_", keep=args.keep) as scratch:
            from hoodie_sink.datasource.source import HoodieDataSource

            spark.dataSource.register(HoodieDataSource)
            print(f"bench_microbatch: {args.batches} x {args.batch_rows:,} rows per stream (first "
                  f"{args.skip} not counted), histories {args.history_list}, "
                  f"operations {args.operation_list}, "
                  f"seed {args.seed_rows:,} rows in {len(CITIES)} partitions; {CPUS} CPUs, "
                  f"scratch {scratch}")  # fmt: skip
            print(f"hoodie_sink: {source_version(REPO_DIR)}", flush=True)
            rng = np.random.default_rng(args.seed)
            templates = {}
            for h in args.history_list:
                templates[h] = os.path.join(scratch, f"table_{h}")
                secs = build_table(templates[h], args.seed_rows, h, np.random.default_rng(args.seed))
                print(f"table with {h} commits built in {secs:.1f} s (engine client, untimed)", flush=True)
                if not args.no_verify:
                    print("  " + hudi_rs_check(templates[h], args.seed_rows + h - 1, h)[1], flush=True)
            inputs = {
                op: make_input(scratch, op, args.batch_rows, args.batches, args.seed_rows, rng)
                for op in args.operation_list
            }
            # warm-up: JVM, Python workers, imports (untimed, on the shortest history)
            warm = make_input(os.path.join(scratch, "warm"), "insert", 1_000, 3, args.seed_rows, rng)
            warm_table = os.path.join(scratch, "warm_table")
            shutil.copytree(templates[args.history_list[0]], warm_table)
            stream(spark, warm.src_dir, warm_table, os.path.join(scratch, "warm_ckpt"), "insert")
            print(f"warm-up done at {time.perf_counter() - started:.0f} s", flush=True)
            for op in args.operation_list:
                pooled = {h: Run(op, h) for h in args.history_list}
                for r in range(args.repeat):
                    # alternate the order (ABBA...): no history always runs first after a pause
                    for h in args.history_list if r % 2 == 0 else args.history_list[::-1]:
                        one = run_one(args, spark, scratch, templates[h], inputs[op], op, h)
                        p = pooled[h]
                        p.add_batch_ms += one.add_batch_ms
                        p.trigger_ms += one.trigger_ms
                        p.others = max(p.others, one.others)
                        p.ok = p.ok and one.ok
                runs += pooled.values()
    finally:
        if runs:
            report(runs, args.history_list)
        spark.stop()
        print(f"\ntotal wall time {time.perf_counter() - started:.0f} s", flush=True)
    return 0 if runs and all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
