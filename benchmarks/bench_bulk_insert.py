"""Benchmark: bulk_insert through the `hoodie` sink vs Spark's own parquet writer (and pyarrow).

For each N in --rows, on one local[2] session:
  1. generate N deterministic trips rows (13 columns, `city` has 10 values) and materialise them
     once to a parquet staging dir; every timed write reads that same staging data, so source
     generation is paid once and excluded from all timings;
  2. time, --repeat times each, interleaved:
       hoodie   df.write.format("hoodie") bulk_insert, key trip_id, partition city, mode overwrite
       spark    df.write.partitionBy("city").parquet(...), mode overwrite
       pyarrow  pq.write_to_dataset(partition_cols=["city"]) of the staging data read into Arrow
                in the driver beforehand (a lower reference: no Spark, no meta columns, no sort);
     each run writes a fresh directory (removed after its sizes are taken), so no run pays for
     replacing the previous one;
  3. sample the RSS of Spark's Python workers (and the driver JVM) while each write runs.

A small warm-up write through every writer comes first, so JVM JIT, Python worker start and
module imports are excluded from all timings.

Prints a Markdown timing table (rows/s, throughput ratio spark_seconds / writer_seconds; the
hoodie target is >= 0.8), a memory table, and the session settings.  Exit code 1 if a hoodie
write failed (its traceback is printed), else 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (  # noqa: E402  (benchmarks/ is not a package: run as a script)
    MiB,
    DirStats,
    MemoryPeaks,
    SparkSettings,
    Timing,
    WorkerMemorySampler,
    build_spark,
    dir_stats,
    format_table,
    human_rows,
    jvm_info,
    materialise,
    scratch_dir,
    settle,
    timed,
    trips_df,
)

ALL_WRITERS = ("hoodie", "spark", "pyarrow")
HOODIE_TARGET_RATIO = 0.8
WARMUP_ROWS = 20_000


@dataclass
class WriterResult:
    rows: int
    writer: str
    timing: Timing = field(default_factory=Timing)
    stats: DirStats | None = None
    memory: MemoryPeaks | None = None
    verified: str = ""
    error: str | None = None


# -- the writers ----------------------------------------------------------------------------


def hoodie_options(table_name: str = "trips") -> dict[str, str]:
    return {
        "hoodie.datasource.write.recordkey.field": "trip_id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.operation": "bulk_insert",
        "hoodie.table.name": table_name,
    }


def write_hoodie(df, path: str) -> None:
    df.write.format("hoodie").options(**hoodie_options()).mode("overwrite").save(path)


def write_spark(df, path: str) -> None:
    df.write.mode("overwrite").partitionBy("city").parquet(path)


def write_pyarrow(table, path: str) -> None:
    import pyarrow.parquet as pq

    pq.write_to_dataset(table, root_path=path, partition_cols=["city"], existing_data_behavior="delete_matching")


def verify_hoodie(path: str, rows: int) -> str:
    """Row count and distinct keys as hudi-rs reads them, so a fast-but-lossy write cannot pass."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from hudi import HudiReadOptions, HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(path).build()
    batches = table.read(HudiReadOptions(projection=["trip_id"]))
    keys = pa.chunked_array([b.column(0) for b in batches], type=pa.string()) if batches else pa.chunked_array([], pa.string())
    n, distinct = len(keys), pc.count_distinct(keys).as_py()
    ok = n == rows and distinct == rows
    return f"hudi-rs reads {n:,} rows, {distinct:,} distinct keys: {'OK' if ok else 'MISMATCH'}"


def register_hoodie(spark) -> None:
    """Register explicitly (besides the pyspark_hoodie auto-registration) so the run uses this
    checkout and an import error surfaces here, with its traceback, not as a lookup failure."""
    from hoodie_sink.datasource.source import HoodieDataSource

    spark.dataSource.register(HoodieDataSource)


# -- the run --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="bulk_insert benchmark: hoodie sink vs Spark parquet vs pyarrow",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000], help="row counts to run")
    ap.add_argument("--repeat", type=int, default=None,
                    help="timed runs per writer and N (default: 3 for N <= 1M, 1 above); best and median are shown")
    ap.add_argument("--quick", action="store_true", help="smoke test: N=200,000, one repeat")
    ap.add_argument("--only", default=",".join(ALL_WRITERS), help="comma-separated writers to run")
    ap.add_argument("--output-dir", default=None,
                    help="where staging and outputs go (a fresh temp dir under it; default: a temp dir under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch dir (staging data) afterwards")
    ap.add_argument("--driver-memory", default="6g", help="spark.driver.memory")
    ap.add_argument("--arrow-batch-sizes", type=int, nargs="+", default=None,
                    help="also run hoodie once per spark.sql.execution.arrow.maxRecordsPerBatch value "
                         "(default: only Spark's default, 10000)")
    ap.add_argument("--sample-interval", type=float, default=0.1, help="seconds between RSS samples")
    ap.add_argument("--no-verify", action="store_true", help="skip the hudi-rs row-count check of the hoodie output")
    args = ap.parse_args(argv)  # fmt: skip
    if args.quick:
        args.rows, args.repeat = [200_000], 1
    writers = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = [w for w in writers if w not in ALL_WRITERS]
    if unknown or not writers:
        ap.error(f"--only: unknown writer(s) {unknown}; choose from {', '.join(ALL_WRITERS)}")
    args.writers = [w for w in ALL_WRITERS if w in writers]  # fixed order: hoodie, spark, pyarrow
    return args


def repeats_for(rows: int, repeat: int | None) -> int:
    return repeat if repeat is not None else (3 if rows <= 1_000_000 else 1)


def hoodie_variants(arrow_batch_sizes: list[int] | None) -> list[tuple[str, int | None]]:
    """(label, maxRecordsPerBatch or None for the session default)."""
    if not arrow_batch_sizes:
        return [("hoodie", None)]
    return [(f"hoodie b={b // 1000}k" if b % 1000 == 0 else f"hoodie b={b}", b) for b in arrow_batch_sizes]


class Bench:
    def __init__(self, args: argparse.Namespace, spark, scratch: str):
        self.args = args
        self.spark = spark
        self.scratch = scratch
        self.hoodie_failed: str | None = None
        self.default_batch = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")

    def _run_one(self, label: str, fn: Callable[[str], None], out: str, result: WriterResult,
                 sample: bool) -> None:  # fmt: skip
        shutil.rmtree(out, ignore_errors=True)
        settle(self.spark)
        if sample:
            with WorkerMemorySampler(self.args.sample_interval) as sampler:
                seconds = timed(lambda: fn(out))
            peaks = sampler.peaks
            # Keep the worst run's memory: the question is how much a write can need.
            if result.memory is None or peaks.max_sum_rss_kib > result.memory.max_sum_rss_kib:
                result.memory = peaks
        else:
            seconds = timed(lambda: fn(out))
        result.timing.seconds.append(seconds)
        result.stats = dir_stats(out)
        print(f"  {human_rows(result.rows):>5} {label:<14} run {len(result.timing.seconds)}: {seconds:7.2f} s", flush=True)

    def hoodie_fn(self, df, batch: int | None) -> Callable[[str], None]:
        def run(path: str) -> None:
            conf = "spark.sql.execution.arrow.maxRecordsPerBatch"
            self.spark.conf.set(conf, str(batch) if batch is not None else self.default_batch)
            try:
                write_hoodie(df, path)
            finally:
                self.spark.conf.set(conf, self.default_batch)

        return run

    def warm_up(self) -> None:
        """One small write through each writer: JVM JIT, worker start and imports excluded later."""
        t0 = time.perf_counter()
        src = materialise(trips_df(self.spark, WARMUP_ROWS), os.path.join(self.scratch, "warmup_src"))
        if "hoodie" in self.args.writers:
            try:
                register_hoodie(self.spark)
                write_hoodie(src, os.path.join(self.scratch, "warmup_hoodie"))
            except Exception:
                self.hoodie_failed = traceback.format_exc()
        if "spark" in self.args.writers:
            write_spark(src, os.path.join(self.scratch, "warmup_spark"))
        if "pyarrow" in self.args.writers:
            import pyarrow.parquet as pq

            write_pyarrow(pq.read_table(os.path.join(self.scratch, "warmup_src")), os.path.join(self.scratch, "warmup_pa"))
        for d in ("warmup_src", "warmup_hoodie", "warmup_spark", "warmup_pa"):
            shutil.rmtree(os.path.join(self.scratch, d), ignore_errors=True)
        print(f"warm-up ({WARMUP_ROWS:,} rows through {', '.join(self.args.writers)}): {time.perf_counter() - t0:.1f} s")

    def run_size(self, rows: int) -> list[WriterResult]:
        args, spark = self.args, self.spark
        staging = os.path.join(self.scratch, f"staging_{rows}")
        t0 = time.perf_counter()
        df = materialise(trips_df(spark, rows), staging)
        staged = dir_stats(staging, metadata_dirs=())
        print(
            f"N={rows:,}: staged in {time.perf_counter() - t0:.1f} s "
            f"({staged.data_bytes / MiB:,.0f} MiB parquet, {staged.data_files} files, "
            f"{df.rdd.getNumPartitions()} input partitions)",
            flush=True,
        )
        arrow_table = None
        if "pyarrow" in args.writers:
            import pyarrow.parquet as pq

            arrow_table = pq.read_table(staging)  # untimed: the reference starts from Arrow in memory

        jobs: list[tuple[str, Callable[[str], None], bool]] = []
        if "hoodie" in args.writers and not self.hoodie_failed:
            for label, batch in hoodie_variants(args.arrow_batch_sizes):
                jobs.append((label, self.hoodie_fn(df, batch), True))
        if "spark" in args.writers:
            jobs.append(("spark", lambda p: write_spark(df, p), True))
        if arrow_table is not None:
            jobs.append(("pyarrow", lambda p: write_pyarrow(arrow_table, p), False))

        results = {label: WriterResult(rows, label) for label, _, _ in jobs}
        if "hoodie" in args.writers and self.hoodie_failed:
            results["hoodie"] = WriterResult(rows, "hoodie", error="failed in warm-up")
        for rep in range(repeats_for(rows, args.repeat)):
            for label, fn, sample in jobs:
                res = results[label]
                if res.error:
                    continue
                out = os.path.join(self.scratch, f"out_{rows}_{label.replace(' ', '_').replace('=', '')}")
                try:
                    self._run_one(label, fn, out, res, sample)
                    if label.startswith("hoodie") and rep == 0 and not args.no_verify:
                        res.verified = verify_hoodie(out, rows)
                        print(f"  {human_rows(rows):>5} {label:<14} {res.verified}", flush=True)
                except Exception:
                    if not label.startswith("hoodie"):
                        raise
                    res.error = "write failed"
                    self.hoodie_failed = self.hoodie_failed or traceback.format_exc()
                finally:
                    shutil.rmtree(out, ignore_errors=True)
        del arrow_table
        shutil.rmtree(staging, ignore_errors=True)
        return list(results.values())


def timing_rows(results: list[WriterResult]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    by_n: dict[int, dict[str, WriterResult]] = {}
    for r in results:
        by_n.setdefault(r.rows, {})[r.writer] = r
    for n, group in by_n.items():
        spark = group.get("spark")
        spark_s = spark.timing.best if spark and spark.timing.seconds else None
        for r in group.values():
            if r.error or not r.timing.seconds:
                out.append({"rows": human_rows(n), "writer": r.writer, "best s": "FAILED"})
                continue
            s = r.timing.best
            ratio = f"{spark_s / s:.2f}" if spark_s else "-"
            st = r.stats
            assert st is not None
            out.append({
                "rows": human_rows(n),
                "writer": r.writer,
                "best s": f"{s:.2f}",
                "median s": f"{r.timing.median:.2f}",
                "runs": str(len(r.timing.seconds)),
                "rows/s": f"{n / s:,.0f}",
                "spark/x": ratio,
                "data MiB": f"{st.data_bytes / MiB:,.1f}",
                "total MiB": f"{st.total_bytes / MiB:,.1f}",
                "data files": str(st.data_files),
                "all files": str(st.total_files),
                "part dirs": str(st.partition_dirs),
            })  # fmt: skip
    return out


def memory_rows(results: list[WriterResult]) -> list[dict[str, str]]:
    return [
        {"rows": human_rows(r.rows), "writer": r.writer, **r.memory.row()}
        for r in results
        if r.memory is not None and not r.error
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import pyarrow
    import pyspark

    settings = SparkSettings(driver_memory=args.driver_memory)
    started = time.perf_counter()
    spark = build_spark(settings, "bench_bulk_insert")
    results: list[WriterResult] = []
    bench: Bench | None = None
    try:
        with scratch_dir(args.output_dir, "bench_bulk_insert_", keep=args.keep) as scratch:
            info = jvm_info(spark)
            print(f"bench_bulk_insert: writers={','.join(args.writers)} rows={[human_rows(n) for n in args.rows]} "
                  f"scratch={scratch}")  # fmt: skip
            print(f"pyspark {pyspark.__version__}, pyarrow {pyarrow.__version__}, python {sys.version.split()[0]}, "
                  f"{os.cpu_count()} CPUs")  # fmt: skip
            conf = settings.conf()
            conf.setdefault("spark.sql.execution.arrow.maxRecordsPerBatch",
                            spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") + " (default)")
            print("spark: master=" + settings.master + ", " + ", ".join(f"{k}={v}" for k, v in sorted(conf.items())))
            print(info.describe())
            print(f"python workers: PYSPARK_PYTHON={os.environ.get('PYSPARK_PYTHON')}")
            print("source: generated once per N, materialised to a parquet staging dir, read back for every write")
            bench = Bench(args, spark, scratch)
            bench.warm_up()
            for n in args.rows:
                results.extend(bench.run_size(n))
    finally:
        spark.stop()

    print()
    print(format_table(timing_rows(results)))
    mem = memory_rows(results)
    if mem:
        print()
        print("Python worker memory during each write (worst run; 1 = largest single worker, sum = all "
              "workers at one sample; HWM = kernel peak RSS, reset before the run):")  # fmt: skip
        print(format_table(mem))
    for r in results:
        if r.writer.startswith("hoodie") and not r.error and "spark" in args.writers:
            spark_r = next((x for x in results if x.rows == r.rows and x.writer == "spark"), None)
            if spark_r and spark_r.timing.seconds:
                ratio = spark_r.timing.best / r.timing.best
                verdict = "meets" if ratio >= HOODIE_TARGET_RATIO else "below"
                print(f"{human_rows(r.rows)} {r.writer}: throughput ratio {ratio:.2f} ({verdict} target {HOODIE_TARGET_RATIO})"
                      + (f"; {r.verified}" if r.verified else ""))  # fmt: skip
    print(f"total wall time {time.perf_counter() - started:.0f} s")
    if bench is not None and bench.hoodie_failed:
        print("\nhoodie write FAILED:\n" + bench.hoodie_failed, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
