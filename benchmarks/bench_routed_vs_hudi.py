"""Benchmark (issue 27): an upsert of 1% random keys into an N-row table of 100 partitions,
hoodie_sink routed vs Apache Hudi 0.15's Spark writer, same machine, same data, same run.

Writers, each timing the upsert alone (the base table is bulk-inserted by the same writer, untimed):
  ours routed    batch.transform(hoodie_sink.spark.route(path, o)).write.format("hoodie")
  ours unrouted  batch.write.format("hoodie")   (for reference)
  hudi default   format("hudi"), Hudi's defaults (SIMPLE index, metadata table on)
  hudi bloom     format("hudi"), hoodie.index.type=BLOOM, hoodie.metadata.enable=false
Each Spark is local[2] with the same driver memory; Hudi runs in the interop tier's own Spark 3.5.1
(tests/interop/hudi_server.py).  Data: common.trips_df with a partition column `zone` of 100
values (city x 10); the batch: 1% of the rows, random keys, new ts and fare (all updates).
Per run: seconds, bytes written and files added (the upsert's commit), peak RSS of the writer's
JVM (driver and executor: local mode) and of our Python workers, sampled every 0.2 s.  Each
table is read back with hudi-rs: N rows, N distinct keys, 1% of them updated.

    .venv/bin/python benchmarks/bench_routed_vs_hudi.py [--rows 20000000] [--hudi 0.15.0]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from common import (  # noqa: E402
    SparkSettings,
    _status_kib,
    build_spark,
    descendants,
    format_table,
    human_rows,
    jvm_pid,
    scan_procs,
    source_version,
    trips_df,
)

from tests.interop.java_hudi import JavaHudi, interop_missing  # noqa: E402

KEYS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "trip_id",
    "hoodie.datasource.write.partitionpath.field": "zone",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.parquet.compression.codec": "snappy",
}
HUDI_BLOOM = {"hoodie.index.type": "BLOOM", "hoodie.metadata.enable": "false"}


def op(name: str, **extra: str) -> dict[str, str]:
    return {**KEYS, "hoodie.datasource.write.operation": name, **extra}


class PeakRss:
    """Peak RSS (KiB) of a process tree while a write runs: the root's and its descendants' sum."""

    def __init__(self, root: Callable[[], int | None]):
        self._root = root  # resolved when the write starts: the Hudi server may start a new JVM
        self.root: int | None = None
        self.peak_root = self.peak_children = 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        if self.root is None:
            return
        procs = scan_procs()
        kids = descendants(procs, self.root)
        self.peak_root = max(self.peak_root, _status_kib(self.root, ("VmRSS",)).get("VmRSS", 0))
        self.peak_children = max(
            self.peak_children, sum(_status_kib(p, ("VmRSS",)).get("VmRSS", 0) for p in kids)
        )

    def __enter__(self):
        self.root = self._root()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self._sample()
            except Exception as e:  # noqa: BLE001  a process ended while it was read: next sample
                print(f"(rss sample: {e})", file=sys.stderr)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def java_tree_root(java: JavaHudi) -> int | None:
    procs = scan_procs()
    # the Spark driver JVM (the server's pyspark also ran short-lived `java` launcher processes)
    jvms = [p for p in descendants(procs, java.proc.pid) if b"SparkSubmit" in procs[p].cmdline]
    return jvms[0] if jvms else None


def latest_commit(path: Path) -> tuple[int, int]:
    """(bytes written, files added) of the table's latest commit."""
    commits = sorted(glob.glob(str(path / ".hoodie" / "*.commit")))
    md = json.loads(Path(commits[-1]).read_text())
    stats = [s for ss in md["partitionToWriteStats"].values() for s in ss]
    return sum(s["totalWriteBytes"] for s in stats), sum(
        1 for s in stats if s.get("prevCommit") in (None, "null")
    )


def check(path: Path, rows: int, updated: int) -> str:
    import pyarrow as pa
    import pyarrow.compute as pc
    from hudi import HudiTableBuilder

    t = pa.Table.from_batches(HudiTableBuilder.from_base_uri(str(path)).build().read())
    keys = pc.count_distinct(t.column("_hoodie_record_key")).as_py()
    upd = pc.sum(pc.greater(t.column("fare"), 1000.0)).as_py() or 0
    ok = t.num_rows == rows == keys and upd == updated
    return "ok" if ok else f"FAILED: {t.num_rows} rows, {keys} keys, {upd} updated"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--hudi", default="0.15.0")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--only", default="ours-routed,ours-unrouted,hudi-default,hudi-bloom")
    args = ap.parse_args()
    if missing := interop_missing():
        print(f"the interop tier is not set up ({missing}): run ./run.sh test once", file=sys.stderr)
        return 2
    from pyspark.sql import functions as F

    import hoodie_sink.spark

    work = Path(args.work_dir or f"/tmp/bench-routed-vs-hudi-{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    spark = build_spark(SparkSettings(driver_memory=args.driver_memory), "bench-routed-vs-hudi")
    java = JavaHudi(args.hudi, driver_memory=args.driver_memory)
    results: list[dict[str, str]] = []
    n = args.rows
    try:
        base, batch = work / "base", work / "batch"
        zone = F.concat_ws("-", F.col("city"), (F.pmod(F.xxhash64("trip_id"), F.lit(10))).cast("string"))
        trips_df(spark, n).withColumn("zone", zone).write.mode("overwrite").parquet(str(base))
        upd = (spark.read.parquet(str(base)).where(F.pmod(F.xxhash64("trip_id", F.lit(3)), F.lit(100)) == 0)
               .withColumn("ts", F.col("ts") + F.expr("INTERVAL 400 DAYS"))
               .withColumn("fare", F.col("fare") + F.lit(2000.0)))  # fmt: skip
        upd.repartition(8).write.mode("overwrite").parquet(str(batch))
        updated = spark.read.parquet(str(batch)).count()
        print(f"staged: {n:,} base rows in 100 partitions, {updated:,} updates", file=sys.stderr, flush=True)
        jvm = jvm_pid()
        peaks: list[PeakRss] = [PeakRss(lambda: None)]

        def ours(path: Path, routed: bool) -> float:
            spark.read.parquet(str(base)).write.format("hoodie").options(**op("bulk_insert")).mode(
                "overwrite"
            ).save(str(path))
            df = spark.read.parquet(str(batch))
            with peaks[0]:
                start = time.perf_counter()
                if routed:
                    df = df.transform(hoodie_sink.spark.route(str(path), op("upsert")))
                df.write.format("hoodie").options(**op("upsert")).mode("append").save(str(path))
                return time.perf_counter() - start

        def hudi(path: Path, extra: dict) -> float:
            java.call(
                "write", path=str(path), input=str(base), options=op("bulk_insert", **extra), mode="overwrite"
            )
            with peaks[0]:
                reply = java.call("write", path=str(path), input=str(batch), options=op("upsert", **extra))
            return reply["seconds"]

        runs = {
            "ours-routed": (lambda p: ours(p, True), lambda: jvm),
            "ours-unrouted": (lambda p: ours(p, False), lambda: jvm),
            "hudi-default": (lambda p: hudi(p, {}), lambda: java_tree_root(java)),
            "hudi-bloom": (lambda p: hudi(p, HUDI_BLOOM), lambda: java_tree_root(java)),
        }
        # untimed: each writer once on a small table first (JIT, class loading, Python workers)
        small = work / "warm-input"
        spark.read.parquet(str(base)).limit(20_000).write.mode("overwrite").parquet(str(small))
        ours_warm = work / "warm-ours"
        spark.read.parquet(str(small)).write.format("hoodie").options(**op("bulk_insert")).mode(
            "overwrite"
        ).save(str(ours_warm))
        spark.read.parquet(str(small)).transform(
            hoodie_sink.spark.route(str(ours_warm), op("upsert"))
        ).write.format("hoodie").options(**op("upsert")).mode("append").save(str(ours_warm))
        for _ in range(2):
            java.call(
                "write", path=str(work / "warm-hudi"), input=str(small), options=op("upsert"), mode="append"
            )
        for name in args.only.split(","):
            run, root = runs[name]
            path = work / name
            shutil.rmtree(path, ignore_errors=True)
            rss = peaks[0] = PeakRss(root)  # around the timed upsert only
            seconds = run(path)
            written, added = latest_commit(path)
            result = {
                "writer": name, "upsert s": f"{seconds:.1f}", "MB written": f"{written / 1e6:.0f}",
                "files added": str(added), "JVM peak MiB": f"{rss.peak_root / 1024:.0f}",
                "Python workers peak MiB": f"{rss.peak_children / 1024:.0f}" if name.startswith("ours") else "-",
                "check": check(path, n, updated),
            }  # fmt: skip
            print(json.dumps(result), file=sys.stderr, flush=True)
            results.append(result)
            shutil.rmtree(path, ignore_errors=True)
    finally:
        java.close()
        spark.stop()
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nhoodie_sink {source_version(str(ROOT))} vs Apache Hudi {args.hudi} (Spark 3.5.1): upsert of 1% "
          f"random keys into {human_rows(n)} rows, 100 partitions; local[2], "
          f"driver memory {args.driver_memory}\n")  # fmt: skip
    print(format_table(results))
    return 0 if all(r["check"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
