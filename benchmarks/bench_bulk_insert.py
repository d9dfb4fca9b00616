"""Benchmark: bulk_insert through the `hoodie` sink vs Spark's own parquet writer (and pyarrow).

For each N in --rows, on one local[2] session:
  1. generate N deterministic trips rows (13 columns, `city` has 10 values) and materialise them
     once to a parquet staging dir; every timed write reads that same staging data, so source
     generation is paid once and excluded from all timings;
  2. time --repeat runs of each writer, interleaved (hoodie, spark, pyarrow, hoodie, ...):
       hoodie   df.write.format("hoodie") bulk_insert, key trip_id, partition city, mode overwrite
       spark    df.write.partitionBy("city").parquet(...), mode overwrite
       pyarrow  pq.write_to_dataset(partition_cols=["city"]) of the staging data, read into Arrow
                in the driver beforehand (a lower reference: no Spark, no meta columns, no sort);
     each run writes a fresh directory (measured, then removed), so no run pays for replacing
     the previous one;
  3. sample, during every run, the RSS of this session's Spark Python workers and JVM, and the
     CPU used by this session vs by anything else on the machine (the machine is shared: a run
     waits for a quiet machine first, and a run that others slowed down is re-run).

A small warm-up write through every writer comes first, so JVM JIT, Python worker start and
module imports are excluded from all timings.

Prints a Markdown timing table (rows/s, throughput ratio spark_seconds / writer_seconds; the
hoodie target is >= 0.8), a memory table, and the settings used.  With --profile, one extra
hoodie write per N runs under py-spy and where the task workers' time goes is printed.  Exit
code 1 if a hoodie write failed (its traceback is printed), else 0.  See README.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# benchmarks/ is not a package: the scripts run as files and import their sibling directly.
from common import (
    DirStats,
    MiB,
    ProcessSampler,
    RunProbe,
    SparkSettings,
    Timing,
    build_spark,
    descendants,
    dir_stats,
    format_table,
    human_rows,
    jvm_info,
    jvm_pid,
    materialise,
    scan_procs,
    scratch_dir,
    settle,
    source_version,
    trips_df,
    wait_until_quiet,
)

ALL_WRITERS = ("hoodie", "spark", "pyarrow")
HOODIE_TARGET_RATIO = 0.8
WARMUP_ROWS = 20_000
ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"
PYTHON_WORKER_IDLE_S = 40  # Spark's PythonWorkerFactory stops workers idle for 60 s; keep a margin
CPUS = os.cpu_count() or 1
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class WriterResult:
    rows: int
    writer: str
    timing: Timing = field(default_factory=Timing)
    probes: list[RunProbe] = field(default_factory=list)
    stats: DirStats | None = None
    verified: str = ""
    error: str | None = None

    @property
    def best_probe(self) -> RunProbe:
        return self.probes[self.timing.seconds.index(self.timing.best)]

    @property
    def worst_memory(self) -> RunProbe:
        """The run with the largest summed worker RSS: the question is how much a write can need."""
        return max(self.probes, key=lambda p: (p.max_sum_rss_kib, p.max_one_hwm_kib))


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

    pq.write_to_dataset(
        table, root_path=path, partition_cols=["city"], existing_data_behavior="delete_matching"
    )


def register_hoodie(spark) -> None:
    """Register explicitly (besides the pyspark_hoodie auto-registration) so the run uses this
    checkout and an import error surfaces here, with its traceback, not as a lookup failure."""
    from hoodie_sink.datasource.source import HoodieDataSource

    spark.dataSource.register(HoodieDataSource)


def verify_hoodie(path: str, rows: int) -> str:
    """Row count and distinct keys as hudi-rs reads them, so a fast-but-lossy write cannot pass."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from hudi import HudiReadOptions, HudiTableBuilder

    batches = HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions(projection=["trip_id"]))
    keys = pa.chunked_array([b.column(0) for b in batches], type=pa.string())
    n, distinct = len(keys), pc.count_distinct(keys).as_py()
    ok = n == rows and distinct == rows
    return f"hudi-rs reads {n:,} rows, {distinct:,} distinct keys: {'OK' if ok else 'MISMATCH'}"


# -- profiling (optional, py-spy) -----------------------------------------------------------


def py_spy_path() -> str | None:
    exe = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return exe if os.path.exists(exe) else shutil.which("py-spy")


def task_daemon_pid() -> int | None:
    """The `python -m pyspark.daemon pyspark.worker` child of our JVM, which forks task workers."""
    jvm = jvm_pid()
    procs = scan_procs()
    for pid in descendants(procs, jvm) if jvm else ():
        p = procs[pid]
        if p.ppid == jvm and p.cmdline.rstrip(b"\0").split(b"\0")[-1] == b"pyspark.worker":
            return pid
    return None


def summarise_py_spy(raw_file: str, top: int = 16) -> str:
    """Where the task workers' wall time goes, from py-spy's raw output (collapsed stacks).

    Samples of the daemon's own accept loop are dropped; the rest (both task workers, idle
    samples included) are bucketed: waiting for the task, worker set-up, waiting on the JVM for
    the next Arrow batch, and inside hoodie_sink by (deepest hoodie_sink frame -> the library
    call it is in), which names the step without knowing hoodie_sink's internals."""
    buckets: Counter[str] = Counter()
    total = 0
    with open(raw_file) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not count.isdigit() or "worker (daemon.py" not in stack:
                continue
            n = int(count)
            total += n
            buckets[_bucket([_frame_name(fr) for fr in stack.split(";")])] += n
    # Time between tasks (before the write reaches the workers, during the commit) is not the
    # write's: left out of the shares, and said how much.
    idle = buckets.pop(IDLE_BUCKET, 0)
    total -= idle
    if total <= 0:
        return "(no samples)"
    rows = [{"where": k, "share": f"{100 * c / total:.1f}%"} for k, c in buckets.most_common(top)]
    rest = total - sum(c for _, c in buckets.most_common(top))
    if rest:
        rows.append({"where": "(the rest)", "share": f"{100 * rest / total:.1f}%"})
    return (
        f"{total:,} samples of the task workers running the write (100 Hz, both workers, blocked time "
        f"included; {idle:,} samples of workers idle between tasks left out)\n" + format_table(rows)
    )


def _frame_name(frame: str) -> tuple[str, str, str]:
    """("function", "short/path.py", "line") from py-spy's "function (path/to/file.py:123)"."""
    fn, _, loc = frame.partition(" (")
    path, _, line = loc.rstrip(")").rpartition(":")
    for marker in ("site-packages/", REPO_DIR + os.sep):
        if marker in path:
            path = path.split(marker, 1)[1]
    return fn, path, line


IDLE_BUCKET = "idle worker: waiting for a task"
SETUP_FRAMES = ("read_command", "setup_spark_files", "_find_and_load", "invalidate_caches")


def _bucket(frames: list[tuple[str, str, str]]) -> str:
    names = [fn for fn, _, _ in frames]
    # The writer pulls its input batches, so reading them happens under hoodie_sink frames.
    if any(fn.endswith("load_stream") for fn in names):
        return "waiting for / reading the next Arrow batch from the JVM"
    if any("get_init_message" in fn for fn in names):
        return IDLE_BUCKET
    if any(fn in SETUP_FRAMES for fn in names):
        return "worker set-up: imports, unpickling the writer, path caches"
    ours = [i for i, (_, path, _) in enumerate(frames) if path.startswith("hoodie_sink/")]
    if ours:
        i = ours[-1]
        fn, path, line = frames[i]
        if i + 1 == len(frames):
            return f"{fn} ({path}) own code"
        inner_fn, inner_path, _ = frames[i + 1]
        if inner_path.startswith("pyarrow/compute"):  # pc.* calls all go through one wrapper
            inner_fn = "pyarrow.compute"
        return f"{fn} ({path}:{line}) -> {inner_fn}"
    fn, path, _ = frames[-1]
    return f"other: {fn} ({path})"


# -- the run --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="bulk_insert benchmark: hoodie sink vs Spark parquet vs pyarrow",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000], help="row counts to run")
    ap.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="timed runs per writer and N (default: 3 for N <= 1M, else 1); best and median shown",
    )
    ap.add_argument("--quick", action="store_true", help="smoke test: N=200,000, one repeat")
    ap.add_argument("--only", default=",".join(ALL_WRITERS), help="comma-separated writers to run")
    ap.add_argument(
        "--output-dir",
        default=None,
        help="parent of the scratch dir for staging and outputs (default: a temp dir under /tmp)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the scratch dir afterwards")
    ap.add_argument("--driver-memory", default="6g", help="spark.driver.memory")
    ap.add_argument(
        "--arrow-batch-sizes",
        type=int,
        nargs="+",
        default=None,
        help=f"run hoodie once per {ARROW_BATCH_CONF} value (default: Spark's default only)",
    )
    ap.add_argument("--sample-interval", type=float, default=0.1, help="seconds between process samples")
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=60.0,
        help="before each timed run, wait up to this many seconds for other processes to use less "
        "than --busy-threshold of the CPUs (0: don't wait); the table shows what they used anyway",
    )
    ap.add_argument(
        "--busy-threshold",
        type=float,
        default=0.15,
        help="share of all CPUs used by other processes above which the machine counts as busy",
    )
    ap.add_argument(
        "--contended-retries",
        type=int,
        default=2,
        help="re-run a timed write this many times while other processes were busy during it",
    )
    ap.add_argument("--no-verify", action="store_true", help="skip the hudi-rs check of the hoodie output")
    ap.add_argument(
        "--profile",
        action="store_true",
        help="one extra (untimed) hoodie write per N under py-spy; print the hottest frames",
    )
    args = ap.parse_args(argv)  # fmt: skip
    if args.quick:
        args.rows, args.repeat = [200_000], 1
    writers = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = [w for w in writers if w not in ALL_WRITERS]
    if unknown or not writers:
        ap.error(f"--only: unknown writer(s) {unknown}; choose from {', '.join(ALL_WRITERS)}")
    args.writers = [w for w in ALL_WRITERS if w in writers]  # fixed order: hoodie, spark, pyarrow
    if args.profile and not py_spy_path():
        ap.error("--profile needs py-spy: .venv/bin/pip install py-spy")
    return args


def repeats_for(rows: int, repeat: int | None) -> int:
    return repeat if repeat is not None else (3 if rows <= 1_000_000 else 1)


def hoodie_variants(arrow_batch_sizes: list[int] | None) -> list[tuple[str, int | None]]:
    """(label, maxRecordsPerBatch or None for the session's value)."""
    if not arrow_batch_sizes:
        return [("hoodie", None)]
    return [(f"hoodie b={b // 1000}k" if b % 1000 == 0 else f"hoodie b={b}", b) for b in arrow_batch_sizes]


class Bench:
    def __init__(self, args: argparse.Namespace, spark, scratch: str):
        self.args = args
        self.spark = spark
        self.scratch = scratch
        self.hoodie_failed: str | None = None
        self.default_batch: str = spark.conf.get(ARROW_BATCH_CONF)
        self.profiles: list[tuple[int, str]] = []
        self.warm_src = None  # the warm-up DataFrame, kept for _keep_workers_warm
        self.last_python_use = time.monotonic()

    def hoodie_fn(self, df, batch: int | None) -> Callable[[str], None]:
        def run(path: str) -> None:
            self.spark.conf.set(ARROW_BATCH_CONF, str(batch) if batch is not None else self.default_batch)
            try:
                write_hoodie(df, path)
            finally:
                self.spark.conf.set(ARROW_BATCH_CONF, self.default_batch)

        return run

    def _keep_workers_warm(self) -> None:
        """Spark kills Python workers idle for more than a minute; a hoodie run after a long wait
        would then pay worker start-up and imports, which the warm-up is meant to exclude.  So
        before a hoodie run, if the workers may have gone, a small hoodie write brings them back."""
        if self.warm_src is None or time.monotonic() - self.last_python_use < PYTHON_WORKER_IDLE_S:
            return
        out = os.path.join(self.scratch, "keepalive")
        write_hoodie(self.warm_src, out)
        shutil.rmtree(out, ignore_errors=True)
        self.last_python_use = time.monotonic()

    def _run_one(self, label: str, fn: Callable[[str], None], out: str, result: WriterResult) -> None:
        """One timed run; a run during which other processes took a large CPU share is discarded
        and retried (up to --contended-retries times), since it measures the neighbours."""
        args = self.args
        for attempt in range(args.contended_retries + 1):
            shutil.rmtree(out, ignore_errors=True)
            settle(self.spark)
            note = ""
            if args.wait_idle > 0:
                waited, share = wait_until_quiet(args.wait_idle, args.busy_threshold)
                if waited > 4:  # one window is always spent measuring
                    note = f" (waited {waited:.0f} s for a quiet machine; others then at {share:.0%})"
            if label.startswith("hoodie"):
                self._keep_workers_warm()
            with ProcessSampler(args.sample_interval) as sampler:
                t0 = time.perf_counter()
                fn(out)
                seconds = time.perf_counter() - t0
            if label.startswith("hoodie"):
                self.last_python_use = time.monotonic()
            probe = sampler.probe
            contended = probe.other_share(CPUS) >= args.busy_threshold
            print(
                f"  {human_rows(result.rows):>5} {label:<14} run {len(result.timing.seconds) + 1}: {seconds:7.2f} s, "
                f"CPU {probe.cpu_share(CPUS):.0%} of {CPUS} cores, others {probe.other_share(CPUS):.0%}{note}"
                + (" -> discarded, others busy" if contended and attempt < args.contended_retries else ""),
                flush=True,
            )
            if not contended or attempt == args.contended_retries:
                break
        result.timing.seconds.append(seconds)
        result.probes.append(probe)
        result.stats = dir_stats(out)

    def _profile_hoodie(self, df, rows: int) -> None:
        """One more hoodie write with py-spy attached to the task-worker daemon and its forks."""
        daemon = task_daemon_pid()
        if daemon is None:
            print("  profile: no pyspark.worker daemon found; skipped")
            return
        raw = os.path.join(self.scratch, f"py-spy_{rows}.txt")
        out = os.path.join(self.scratch, f"profile_{rows}")
        # --nonblocking: sample without pausing the workers, so the profiled run is not slowed
        # much; --subprocesses: the forks that run the tasks; --idle: keep samples of threads
        # blocked (waiting for the next Arrow batch from the JVM, say): they are wall time too.
        spy = subprocess.Popen(
            [py_spy_path() or "py-spy", "record", "--pid", str(daemon), "--subprocesses", "--nonblocking",
             "--idle", "--rate", "100", "--format", "raw", "--output", raw],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        self._keep_workers_warm()  # profile the steady state, not worker start-up
        time.sleep(1.0)  # let py-spy attach before the write starts
        try:
            t0 = time.perf_counter()
            self.hoodie_fn(df, None)(out)
            seconds = time.perf_counter() - t0
        finally:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
            _, err = spy.communicate(timeout=60)
            shutil.rmtree(out, ignore_errors=True)
        if not os.path.exists(raw):
            print(f"  profile: py-spy wrote nothing: {err.decode(errors='replace').strip()[-500:]}")
            return
        if self.args.keep:
            shutil.copy(raw, os.path.join(self.args.output_dir or "/tmp", os.path.basename(raw)))
        self.profiles.append((rows, f"{human_rows(rows)} hoodie under py-spy: {seconds:.2f} s; "
                                    + summarise_py_spy(raw)))  # fmt: skip

    def warm_up(self) -> None:
        """One small write through each writer: JVM JIT, worker start and imports excluded later."""
        t0 = time.perf_counter()
        src_dir = os.path.join(self.scratch, "warmup_src")
        src = materialise(trips_df(self.spark, WARMUP_ROWS), src_dir)
        if "hoodie" in self.args.writers:
            try:
                register_hoodie(self.spark)
                write_hoodie(src, os.path.join(self.scratch, "warmup_hoodie"))
                self.warm_src, self.last_python_use = src, time.monotonic()
            except Exception:  # noqa: BLE001  any failure of the sink is reported, not raised
                self.hoodie_failed = traceback.format_exc()
        if "spark" in self.args.writers:
            write_spark(src, os.path.join(self.scratch, "warmup_spark"))
        if "pyarrow" in self.args.writers:
            import pyarrow.parquet as pq

            write_pyarrow(pq.read_table(src_dir), os.path.join(self.scratch, "warmup_pa"))
        for d in ("warmup_hoodie", "warmup_spark", "warmup_pa"):  # warmup_src stays: keep-alive input
            shutil.rmtree(os.path.join(self.scratch, d), ignore_errors=True)
        took = time.perf_counter() - t0
        print(f"warm-up: {WARMUP_ROWS:,} rows through {', '.join(self.args.writers)} in {took:.1f} s")

    def run_size(self, rows: int) -> list[WriterResult]:
        args, spark = self.args, self.spark
        staging = os.path.join(self.scratch, f"staging_{rows}")
        t0 = time.perf_counter()
        df = materialise(trips_df(spark, rows), staging)
        staged = dir_stats(staging, metadata_dirs=())
        print(
            f"N={rows:,}: staged in {time.perf_counter() - t0:.1f} s ({staged.data_bytes / MiB:,.0f} MiB parquet, "
            f"{staged.data_files} files, {df.rdd.getNumPartitions()} input partitions)",
            flush=True,
        )
        arrow_table = None
        if "pyarrow" in args.writers:
            import pyarrow.parquet as pq

            arrow_table = pq.read_table(staging)  # untimed: the reference starts from Arrow in memory

        jobs: list[tuple[str, Callable[[str], None]]] = []
        if "hoodie" in args.writers and not self.hoodie_failed:
            jobs += [
                (label, self.hoodie_fn(df, batch)) for label, batch in hoodie_variants(args.arrow_batch_sizes)
            ]
        if "spark" in args.writers:
            jobs.append(("spark", lambda p: write_spark(df, p)))
        if arrow_table is not None:
            jobs.append(("pyarrow", lambda p: write_pyarrow(arrow_table, p)))

        results = {label: WriterResult(rows, label) for label, _ in jobs}
        if "hoodie" in args.writers and self.hoodie_failed:
            results["hoodie"] = WriterResult(rows, "hoodie", error="failed in warm-up")
        for rep in range(repeats_for(rows, args.repeat)):
            for label, fn in jobs:
                res = results[label]
                if res.error:
                    continue
                out = os.path.join(self.scratch, f"out_{rows}_{label.replace(' ', '_').replace('=', '')}")
                try:
                    self._run_one(label, fn, out, res)
                    if label.startswith("hoodie") and rep == 0 and not args.no_verify:
                        res.verified = verify_hoodie(out, rows)
                        print(f"  {human_rows(rows):>5} {label:<14} {res.verified}", flush=True)
                except Exception:  # a failing sink is reported; a failing reference re-raises
                    if not label.startswith("hoodie"):
                        raise
                    res.error = "write failed"
                    self.hoodie_failed = self.hoodie_failed or traceback.format_exc()
                finally:
                    shutil.rmtree(out, ignore_errors=True)
        if args.profile and "hoodie" in results and not results["hoodie"].error:
            self._profile_hoodie(df, rows)
        arrow_table = None  # free the reference copy before the next N
        shutil.rmtree(staging, ignore_errors=True)
        return list(results.values())


# -- report ---------------------------------------------------------------------------------


def timing_rows(results: list[WriterResult]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for r in results:
        spark = next(
            (x for x in results if x.rows == r.rows and x.writer == "spark" and x.timing.seconds), None
        )
        if r.error or not r.timing.seconds:
            out.append({"rows": human_rows(r.rows), "writer": r.writer, "best s": "FAILED"})
            continue
        s, st, probe = r.timing.best, r.stats, r.best_probe
        assert st is not None
        out.append({
            "rows": human_rows(r.rows),
            "writer": r.writer,
            "best s": f"{s:.2f}",
            "median s": f"{r.timing.median:.2f}",
            "runs": str(len(r.timing.seconds)),
            "rows/s": f"{r.rows / s:,.0f}",
            "spark/x": f"{spark.timing.best / s:.2f}" if spark else "-",
            "CPU %": f"{100 * probe.cpu_share(CPUS):.0f}",
            "others CPU %": f"{100 * max(p.other_share(CPUS) for p in r.probes):.0f}",
            "data MiB": f"{st.data_bytes / MiB:,.1f}",
            "total MiB": f"{st.total_bytes / MiB:,.1f}",
            "data files": str(st.data_files),
            "all files": str(st.total_files),
            "part dirs": str(st.partition_dirs),
        })  # fmt: skip
    return out


def memory_rows(results: list[WriterResult]) -> list[dict[str, str]]:
    return [
        {"rows": human_rows(r.rows), "writer": r.writer, **r.worst_memory.memory_row()}
        for r in results
        if r.probes and not r.error and r.writer != "pyarrow"
    ]


MEMORY_LEGEND = """\
Memory during each write (worst run).  procs: Python worker processes of this session seen
(daemons and forks); task procs: the forks that ran the write tasks; 1 = largest single process;
HWM = kernel peak RSS (reset before the run, so it catches spikes between samples); sum = over
all procs in one sample; task sum = over task procs only.  spark rows: Spark's own writer runs
no Python: their worker columns are the idle workers that earlier hoodie writes left behind."""


def print_report(args: argparse.Namespace, results: list[WriterResult], bench: Bench | None) -> None:
    print()
    print(format_table(timing_rows(results)))
    print("spark/x = spark best s / writer best s (throughput ratio); CPU % = this session's CPU time / "
          f"(wall x {CPUS} cores), best run; others CPU % = other processes on the machine, worst run")  # fmt: skip
    mem = memory_rows(results)
    if mem:
        print()
        print(MEMORY_LEGEND)
        print(format_table(mem))
    print()
    for r in results:
        spark = next(
            (x for x in results if x.rows == r.rows and x.writer == "spark" and x.timing.seconds), None
        )
        if r.writer.startswith("hoodie") and r.timing.seconds and spark:
            ratio = spark.timing.best / r.timing.best
            verdict = "meets" if ratio >= HOODIE_TARGET_RATIO else "BELOW"
            print(f"{human_rows(r.rows)} {r.writer}: throughput ratio {ratio:.2f} ({verdict} target "
                  f"{HOODIE_TARGET_RATIO})" + (f"; {r.verified}" if r.verified else ""))  # fmt: skip
    for _, text in bench.profiles if bench else ():
        print()
        print(text)


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
            conf = settings.conf()
            conf.setdefault(ARROW_BATCH_CONF, spark.conf.get(ARROW_BATCH_CONF) + " (default)")
            print(f"bench_bulk_insert: writers={','.join(args.writers)} rows={[human_rows(n) for n in args.rows]} "
                  f"scratch={scratch}")  # fmt: skip
            print(f"pyspark {pyspark.__version__}, pyarrow {pyarrow.__version__}, python {sys.version.split()[0]}, "
                  f"{CPUS} CPUs, load avg {os.getloadavg()[0]:.1f}")  # fmt: skip
            print(
                f"spark: master={settings.master}, " + ", ".join(f"{k}={v}" for k, v in sorted(conf.items()))
            )
            print(jvm_info(spark).describe())
            print(f"python workers: PYSPARK_PYTHON={os.environ.get('PYSPARK_PYTHON')}")
            if "hoodie" in args.writers:
                print(
                    f"hoodie_sink: {source_version(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))}"
                )
            print("source: generated once per N, written to a parquet staging dir, read back by every write")
            bench = Bench(args, spark, scratch)
            bench.warm_up()
            for n in args.rows:
                results.extend(bench.run_size(n))
    finally:
        spark.stop()
        if results:
            print_report(args, results, bench)
        print(f"total wall time {time.perf_counter() - started:.0f} s")
    if bench is not None and bench.hoodie_failed:
        print("\nhoodie write FAILED:\n" + bench.hoodie_failed, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
