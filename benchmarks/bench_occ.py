"""Benchmark: what optimistic concurrency control adds to a commit (issue 14), on local disk.

A table gets --history commits (10-row upserts through the engine API; archival and cleaning off,
so all of them stay on the active timeline), then --commits more upserts are timed, alternating
single-writer mode and OCC with each lock provider.  Each commit updates one existing file group
and inserts into a new one.  Printed: the median time of the whole write and of its commit phase
(`complete`: the lock, the conflict check against the writes completed since the write began,
the publication), and the difference OCC makes.  No concurrent writer runs: this is the price
every commit pays, not the cost of a conflict.

--stream ROWSxBATCHES (e.g. 200000x8): also a Spark streaming upsert of that many micro-batches
(parquet files) into a fresh table, single writer vs OCC, where the tasks keep their input for a
retry after a lost conflict: the median micro-batch duration of each (Spark's batchDuration).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import format_table, scratch_dir  # noqa: E402

LOCKS = "org.apache.hudi.client.transaction.lock."
BASE = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.parquet.small.file.limit": "0",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
}
MODES = {
    "single writer": {},
    "OCC, file-system lock": {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
                              "hoodie.write.lock.provider": LOCKS + "FileSystemBasedLockProvider"},
    "OCC, in-process lock": {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
                             "hoodie.write.lock.provider": LOCKS + "InProcessLockProvider"},
}  # fmt: skip


def one_write(path: str, opts: dict, n: int) -> tuple[float, float]:
    """One upsert (an update of key 0 and a new key); (write seconds, commit seconds)."""
    import pyarrow as pa

    from hoodie_sink.table import client
    from hoodie_sink.table.options.write_config import WriteConfig
    from hoodie_sink.table.write.context import TaskIdentity

    rows = pa.table({"id": [0, 1_000_000 + n], "p": ["a", "a"], "ts": [n, n], "v": [n, n]})
    t0 = time.perf_counter()
    ctx = client.begin(WriteConfig.from_options(opts, path=path), rows.schema)
    result = client.write_task(ctx, TaskIdentity(only_task=True), rows.to_batches())
    t1 = time.perf_counter()
    client.complete(ctx, [result])
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1


def stream_part(root: str, rows_per_batch: int, batches: int) -> list[dict]:
    """Median micro-batch duration of a streaming upsert, single writer vs OCC (input kept)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from common import SparkSettings, build_spark

    src = os.path.join(root, "src")
    os.makedirs(src)
    rng = np.random.default_rng(3)
    for b in range(batches):
        ids = rng.integers(0, rows_per_batch * 4, rows_per_batch)
        t = pa.table({"id": ids, "p": [f"p{b % 4}"] * rows_per_batch, "ts": [b] * rows_per_batch,
                      "v": rng.random(rows_per_batch)})  # fmt: skip
        pq.write_table(t, os.path.join(src, f"part-{b:05d}.parquet"))
        os.utime(os.path.join(src, f"part-{b:05d}.parquet"), (1_700_000_000 + b, 1_700_000_000 + b))
    spark = build_spark(SparkSettings(), "bench-occ-stream")
    out = []
    # each mode twice, alternating; the second round is reported (the first warms the JVM up)
    for rnd, mode in enumerate(["single writer", "OCC, file-system lock"] * 2):
        table = os.path.join(root, f"{rnd}-" + mode.replace(" ", "_").replace(",", ""))
        df = (
            spark.readStream.schema("id LONG, p STRING, ts LONG, v DOUBLE")
            .option("maxFilesPerTrigger", 1)
            .parquet(src)
        )
        q = (
            df.writeStream.format("hoodie").options(**BASE, **MODES[mode])
            .option("checkpointLocation", table + "-ckpt").trigger(availableNow=True).start(table)
        )  # fmt: skip
        q.awaitTermination()
        durations = [p["batchDuration"] / 1000 for p in q.recentProgress if p["numInputRows"]]
        if rnd < 2:
            continue
        out.append({"mode": mode, "micro-batches": str(len(durations)),
                    "batch p50 s": f"{statistics.median(durations):.2f}"})  # fmt: skip
    spark.stop()
    base = float(out[0]["batch p50 s"])
    for row in out:
        row["x single writer"] = f"{float(row['batch p50 s']) / base:.2f}"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--history", type=int, default=1000, help="commits on the timeline before timing")
    ap.add_argument("--commits", type=int, default=30, help="timed commits per mode")
    ap.add_argument("--stream", default="", help="ROWSxBATCHES of a streaming comparison ('' = skip)")
    ap.add_argument("--scratch", default=None)
    args = ap.parse_args(argv)
    import pyarrow as pa

    import hoodie_sink

    with scratch_dir(args.scratch, "bench-occ-") as root:
        path = os.path.join(root, "t")
        t = time.perf_counter()
        for i in range(args.history):
            rows = pa.table({"id": [i % 50, 10_000 + i], "p": ["a", "b"], "ts": [i, i], "v": [i, i]})
            hoodie_sink.write(rows, path, BASE)
        print(f"table: {args.history} commits on the active timeline, built in {time.perf_counter() - t:.0f}s",
              flush=True)  # fmt: skip
        times: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
        n = 0
        for _ in range(args.commits):
            for mode, extra in MODES.items():
                n += 1
                times[mode].append(one_write(path, {**BASE, **extra}, n))
        single_write = statistics.median(w for w, _ in times["single writer"])
        single_commit = statistics.median(c for _, c in times["single writer"])
        out = []
        for mode, ts in times.items():
            write, commit = statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts)
            out.append({
                "mode": mode, "write p50 ms": f"{write * 1000:.1f}", "commit p50 ms": f"{commit * 1000:.1f}",
                "commit - single writer ms": f"{(commit - single_commit) * 1000:+.1f}",
                "write x single writer": f"{write / single_write:.2f}",
            })  # fmt: skip
        print(f"\n{args.commits} commits per mode, interleaved, at {args.history}+ commits on the timeline\n")
        print(format_table(out))
        if args.stream:
            n, b = (int(x) for x in args.stream.lower().split("x"))
            print(f"\nstreaming upsert, {b} micro-batches of {n:,} rows, single writer vs OCC (input kept)\n")
            print(format_table(stream_part(os.path.join(root, "stream"), n, b)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
