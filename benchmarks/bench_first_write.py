"""The first write of a Spark session (issue 26 item 7): one row through the `hoodie` sink vs
Spark's parquet sink, each in a fresh Spark session of its own (a subprocess), with the second
write and the first read beside it.

Where the hoodie's extra seconds go: Spark starts one Python daemon per step of a Python data
source (look-up, the write's planning, the tasks, the commit), one after the other, and each step
imports the engine once; the daemons and their workers are reused by later writes.

    .venv/bin/python benchmarks/bench_first_write.py [--runs 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

SESSION = r"""
import os, sys, tempfile, shutil, time
fmt = sys.argv[1]
from pyspark.sql import SparkSession
t0 = time.monotonic()
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
session_s = time.monotonic() - t0
df = spark.createDataFrame([("k1", "p", 1)], "id STRING, part STRING, ts BIGINT")
d = tempfile.mkdtemp()
path = os.path.join(d, "t")
opts = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "part", "hoodie.datasource.write.precombine.field": "ts"}
writes = []
for _ in range(2):
    t = time.monotonic()
    w = df.write.format(fmt).mode("append")
    (w.options(**opts) if fmt == "hoodie" else w).save(path)
    writes.append(time.monotonic() - t)
t = time.monotonic()
assert spark.read.format(fmt).load(path).count() == (1 if fmt == "hoodie" else 2)  # hoodie upserts the key
read_s = time.monotonic() - t
print(f"RESULT {session_s:.2f} {writes[0]:.2f} {writes[1]:.2f} {read_s:.2f}")
spark.stop()
shutil.rmtree(d)
"""


def one_run(fmt: str) -> list[float]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    out = subprocess.run(
        [sys.executable, "-c", SESSION, fmt], env=env, capture_output=True, text=True, check=True
    )
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT"))
    return [float(v) for v in line.split()[1:]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="fresh sessions per sink (the best is shown)")
    args = ap.parse_args()
    rows = {}
    for _ in range(args.runs):
        for fmt in ("parquet", "hoodie"):  # interleaved, so a busy moment hits both
            got = one_run(fmt)
            rows[fmt] = [min(a, b) for a, b in zip(rows[fmt], got, strict=True)] if fmt in rows else got
    print("| sink | session start s | first write s | second write s | first read s |")
    print("|---|---:|---:|---:|---:|")
    for fmt, (session, first, second, read) in rows.items():
        print(f"| {fmt} | {session:.2f} | {first:.2f} | {second:.2f} | {read:.2f} |")
    extra = rows["hoodie"][1] - rows["parquet"][1]
    print(
        f"\nhoodie's first write takes {extra:.1f} s more than parquet's (best of {args.runs} fresh sessions each)"
    )


if __name__ == "__main__":
    main()
