"""Benchmark: an incremental read of one commit vs a full snapshot read (issue 13).

A table of --rows trips rows (10 city partitions, key trip_id, precombine ts) is bulk_inserted with
the engine API, then one upsert commit of --change rows (half updates of random existing keys,
half new keys: 1% of the table by default; --updates sets the share) lands on it (untimed);
base files of at most --max-file-mb (16) MiB, so the table has some 50 file groups.  Then, best of --repeat,
interleaved, on one local[2] session:

  snapshot     spark.read.format("hoodie").load(path): count(*), sum(fare)          [timed]
  incremental  the same with query.type=incremental, begin = the commit before the upsert
               (the upsert's changes only)                                          [timed]

  cdc          the same range as a change feed (incremental.format=cdc): op and the
               before / after images of every changed key                           [timed]

and the same three through the engine (`hoodie_sink.read`, no Spark).  "files" is what each read
opens: base files (COW) or file slices (MOR), from the read's plan (a change feed reads each
touched file group twice: before and after the write).  The incremental read's rows and the
change feed's changes are checked against the upsert (every changed key once).  --table-type MERGE_ON_READ: the upsert
goes to log files of the touched file groups.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_mor import BASE  # noqa: E402
from bench_streaming import trips_table  # noqa: E402
from common import SparkSettings, build_spark, format_table, human_rows, scratch_dir  # noqa: E402

OPTS = {**BASE, "hoodie.compact.inline": "false"}  # bench_mor's trips table


def build(
    path: str, rows: int, change: int, table_type: str, updates: float, max_file_mb: int
) -> tuple[str, str, int]:
    """The table; returns (the instant before the upsert, the upsert's instant, changed keys)."""
    import numpy as np

    import hoodie_sink
    from hoodie_sink.table.format.timeline.timeline import Timeline
    from hoodie_sink.table.storage import Storage

    rng = np.random.default_rng(5)
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type,
            "hoodie.parquet.max.file.size": str(max_file_mb << 20)}  # fmt: skip
    seed, _ = trips_table(np.arange(rows), 0, rng)
    hoodie_sink.write(seed, path, {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
    before = Timeline.load(Storage(path)).latest_completed().timestamp
    n_upd = int(change * updates)
    ids = np.concatenate([rng.choice(rows, n_upd, replace=False), np.arange(rows, rows + change - n_upd)])
    batch, _ = trips_table(ids, 1, rng)
    hoodie_sink.write(batch, path, {**opts, "hoodie.datasource.write.operation": "upsert"})
    after = Timeline.load(Storage(path)).latest_completed().timestamp
    return before, after, len(ids)


def files_read(path: str, begin: str | None, cdc: bool = False) -> int:
    from hoodie_sink.table.format.timeline.timeline import Timeline
    from hoodie_sink.table.read.incremental import open_incremental, plan_incremental, touched_refs
    from hoodie_sink.table.read.snapshot import Snapshot
    from hoodie_sink.table.storage import Storage

    if begin is None:
        return len(Snapshot.open(path).read_refs())
    storage = Storage(path)
    if cdc:
        from hoodie_sink.table.read.cdc import plan_cdc

        return 2 * sum(len(c.file_groups) for c in plan_cdc(storage, Timeline.load(storage), begin).instants)
    plan = plan_incremental(storage, Timeline.load(storage), begin)
    return len(touched_refs(open_incremental(path, plan).read_refs(), plan))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--change", type=int, default=50_000, help="rows of the upsert")
    ap.add_argument("--updates", type=float, default=0.5, help="share of the upsert that updates random keys")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-file-mb", type=int, default=16, help="base file size (more, smaller file groups)")
    ap.add_argument("--table-type", default="COPY_ON_WRITE", choices=["COPY_ON_WRITE", "MERGE_ON_READ"])
    ap.add_argument("--scratch", default=None)
    args = ap.parse_args(argv)
    import hoodie_sink

    with scratch_dir(args.scratch, "bench-incr-") as root:
        path = os.path.join(root, "t")
        t0 = time.perf_counter()
        before, after, changed = build(
            path, args.rows, args.change, args.table_type, args.updates, args.max_file_mb
        )
        print(f"table: {human_rows(args.rows)} rows + an upsert of {changed:,}, {args.updates:.0%} updates "
              f"({args.table_type}), "
              f"built in {time.perf_counter() - t0:.1f}s", flush=True)  # fmt: skip
        spark = build_spark(SparkSettings(), "bench-incremental")
        incr = {
            "hoodie.datasource.query.type": "incremental",
            "hoodie.datasource.read.begin.instanttime": before,
        }

        cdc = {**incr, "hoodie.datasource.query.incremental.format": "cdc"}

        def spark_read(options: dict) -> int:
            df = spark.read.format("hoodie").options(**options).load(path)
            if options is cdc:  # every change with its images
                return int(df.selectExpr("count(*) AS n", "sum(length(after)) AS s").collect()[0]["n"])
            return int(df.selectExpr("count(*) AS n", "sum(fare) AS s").collect()[0]["n"])

        def engine_read(options: dict) -> int:
            if options is cdc:
                return hoodie_sink.read(path, options).num_rows
            return hoodie_sink.read(path, options or None, columns=["trip_id", "fare"]).num_rows

        readers = {
            ("Spark", "snapshot"): lambda: spark_read({}),
            ("Spark", "incremental"): lambda: spark_read(incr),
            ("Spark", "cdc"): lambda: spark_read(cdc),
            ("engine", "snapshot"): lambda: engine_read({}),
            ("engine", "incremental"): lambda: engine_read(incr),
            ("engine", "cdc"): lambda: engine_read(cdc),
        }
        for run in readers.values():  # warm-up: JVM, Python workers, caches of the OS
            run()
        times: dict = {k: [] for k in readers}
        counts: dict = {}
        for _ in range(args.repeat):
            for key, run in readers.items():
                t = time.perf_counter()
                counts[key] = run()
                times[key].append(time.perf_counter() - t)
        spark.stop()
        files = {"snapshot": files_read(path, None), "incremental": files_read(path, before),
                 "cdc": files_read(path, before, cdc=True)}  # fmt: skip
        ok = counts[("Spark", "incremental")] == counts[("engine", "incremental")] == changed
        ok = ok and counts[("Spark", "cdc")] == counts[("engine", "cdc")] == changed
        results = []
        for (who, kind), ts in times.items():
            snap = min(times[(who, "snapshot")])
            results.append({
                "reader": who, "query": kind, "rows": f"{counts[(who, kind)]:,}", "files": f"{files[kind]:,}",
                "best s": f"{min(ts):.2f}", "median s": f"{statistics.median(ts):.2f}",
                "x snapshot (speed)": f"{snap / min(ts):.1f}",
            })  # fmt: skip
        print(f"\nincremental read of the upsert {after} (begin {before}); rows check: "
              f"{'OK' if ok else 'MISMATCH'} ({changed:,} changed keys)\n")  # fmt: skip
        print(format_table(results))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
