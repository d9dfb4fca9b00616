"""Benchmark: snapshot reads through `spark.read.format("hoodie")` vs Spark's own parquet reader.

A copy-on-write table of --files base files (--rows rows in all, 10 city partitions) is written
once with the engine API (one append commit per --files/10 files, untimed).  Then, on one local[2]
session, each timed run counts rows of:

  hoodie        spark.read.format("hoodie").load(path).count()                 (a fresh DataFrame)
  hoodie fare   ... .where("fare BETWEEN 10 AND 12").count()                    (data skipping)
  parquet       spark.read.parquet(<the same base files>).count()               (the reference)
  parquet fare  ... .where("fare BETWEEN 10 AND 12").count()

Runs are interleaved, --repeat times each, best and median shown; a warm-up of every reader
comes first.  The ratio is parquet seconds / hoodie seconds (>= 1: hoodie is as fast).  What a
hoodie read does on top of a parquet scan: one task per base file, and in each task the pinned
snapshot of its query (a timeline listing and the table's schema) and the file's own read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyarrow as pa  # noqa: E402
from common import CITIES, SparkSettings, build_spark, format_table, scratch_dir  # noqa: E402


def build_table(path: str, rows: int, files: int, seed: int = 7) -> list[str]:
    import numpy as np

    import hoodie_sink
    from hoodie_sink.table.read.snapshot import Snapshot

    commits = max(1, files // len(CITIES))
    per_commit = rows // commits
    rng = np.random.default_rng(seed)
    opts = {
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.recordkey.field": "trip_id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.operation": "append",
    }
    for c in range(commits):
        n = per_commit
        t = pa.table({
            "trip_id": pa.array([f"t{c:05d}-{i:08d}" for i in range(n)]),
            "city": pa.array(np.array(CITIES)[rng.integers(0, len(CITIES), n)]),
            "fare": pa.array(rng.uniform(0, 100, n)),
            "ts": pa.array(rng.integers(0, 10**9, n)),
        })  # fmt: skip
        hoodie_sink.write(t, path, opts)
    return [os.path.join(path, bf.path) for bf in Snapshot.open(path).base_files()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=200, help="base files (a multiple of 10)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--output-dir", default=None)
    args = ap.parse_args(argv)
    with scratch_dir(args.output_dir, "bench_read") as scratch:
        path = os.path.join(scratch, "trips")
        t0 = time.monotonic()
        files = build_table(path, args.rows, args.files)
        print(
            f"table: {len(files)} base files, {args.rows} rows, built in {time.monotonic() - t0:.1f}s",
            flush=True,
        )
        spark = build_spark(
            SparkSettings(extra=(("spark.sql.python.filterPushdown.enabled", "true"),)), "bench_read"
        )
        where = "fare BETWEEN 10 AND 12"
        readers = {
            "hoodie": lambda: spark.read.format("hoodie").load(path).count(),
            "hoodie fare": lambda: spark.read.format("hoodie").load(path).where(where).count(),
            "parquet": lambda: spark.read.parquet(*files).count(),
            "parquet fare": lambda: spark.read.parquet(*files).where(where).count(),
        }
        counts = {name: fn() for name, fn in readers.items()}  # warm-up, and the answers
        assert (
            counts["hoodie"]
            == counts["parquet"]
            == args.rows // max(1, args.files // 10) * max(1, args.files // 10)
        )
        assert counts["hoodie fare"] == counts["parquet fare"]
        times: dict[str, list[float]] = {name: [] for name in readers}
        for _ in range(args.repeat):
            for name, fn in readers.items():
                t = time.monotonic()
                fn()
                times[name].append(time.monotonic() - t)
        rows = []
        for name in readers:
            best, med = min(times[name]), statistics.median(times[name])
            ref = min(times[name.replace("hoodie", "parquet")])
            rows.append({"reader": name, "rows": str(counts[name]), "best s": f"{best:.2f}",
                         "median s": f"{med:.2f}", "parquet / this": f"{ref / best:.2f}"})  # fmt: skip
        print(format_table(rows))
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
