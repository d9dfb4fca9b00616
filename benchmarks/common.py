"""Shared pieces for the hoodie_sink benchmarks: Spark session, trips data, disk and memory probes.

Everything here is engine-neutral, so a benchmark compares writers on the same session, the same
materialised input and the same measuring code.  Only the standard library, pyspark and pyarrow
are used (no psutil: process memory is read from /proc, Linux only).
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyspark is imported lazily so `--help` stays instant
    from pyspark.sql import DataFrame, SparkSession
    from typing_extensions import Self

MiB = 1024 * 1024
CITIES: tuple[str, ...] = (
    "san_francisco", "sao_paulo", "chennai", "new_york", "berlin",
    "london", "tokyo", "lagos", "mumbai", "sydney",
)  # fmt: skip

# Hudi's commit-time and bookkeeping columns, for readers that want the data-only schema.
HOODIE_META_COLUMNS = (
    "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
    "_hoodie_partition_path", "_hoodie_file_name",
)  # fmt: skip


# -- Spark ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[2]"
    driver_memory: str = "6g"
    shuffle_partitions: int = 2
    # None = Spark's default (10,000).  Raising it only changes the Arrow batches fed to Python
    # writers (and pandas/Arrow UDFs); Spark's own parquet writer never sees Arrow.
    arrow_max_records_per_batch: int | None = None
    extra: tuple[tuple[str, str], ...] = ()

    def conf(self) -> dict[str, str]:
        conf = {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.driver.memory": self.driver_memory,
            "spark.sql.session.timeZone": "UTC",
        }
        if self.arrow_max_records_per_batch is not None:
            conf["spark.sql.execution.arrow.maxRecordsPerBatch"] = str(self.arrow_max_records_per_batch)
        conf.update(dict(self.extra))
        return conf


def build_spark(settings: SparkSettings, app_name: str) -> SparkSession:
    """A fresh local session.  Must be the first session of the process: spark.driver.memory
    only takes effect when the builder launches the JVM."""
    from pyspark.sql import SparkSession

    # Python workers run `python3` from PATH unless told otherwise; when this script is started
    # as .venv/bin/python without an activated venv, that is a Python without pyarrow.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(settings.master).appName(app_name)
    for k, v in settings.conf().items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@dataclass(frozen=True)
class JvmInfo:
    driver_memory_conf: str
    max_heap_bytes: int  # Runtime.maxMemory(): what -Xmx actually gave the JVM
    total_heap_bytes: int
    heap_args: tuple[str, ...]  # -Xmx/-Xms/-XX:*Heap* flags the JVM was started with
    java_version: str

    def describe(self) -> str:
        args = " ".join(self.heap_args) or "(none)"
        return (
            f"JVM driver heap: spark.driver.memory={self.driver_memory_conf}, "
            f"Runtime.maxMemory={self.max_heap_bytes / MiB:,.0f} MiB, heap flags: {args}, java {self.java_version}"
        )


def jvm_info(spark: SparkSession) -> JvmInfo:
    jvm = spark.sparkContext._jvm  # classic (non-Connect) session only
    runtime = jvm.java.lang.Runtime.getRuntime()
    input_args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    heap = tuple(a for a in input_args if a.startswith(("-Xmx", "-Xms", "-XX:MaxHeap", "-XX:InitialHeap")))
    return JvmInfo(
        driver_memory_conf=spark.sparkContext.getConf().get("spark.driver.memory", "(default 1g)"),
        max_heap_bytes=int(runtime.maxMemory()),
        total_heap_bytes=int(runtime.totalMemory()),
        heap_args=heap,
        java_version=str(jvm.java.lang.System.getProperty("java.version")),
    )


def settle(spark: SparkSession | None = None) -> None:
    """Collect garbage on both sides between timed runs, so one run does not pay for the last."""
    gc.collect()
    if spark is not None:
        spark.sparkContext._jvm.java.lang.System.gc()


def source_version(repo_dir: str, paths: Sequence[str] = ("hoodie_sink",)) -> str:
    """The commit of the code under test, and whether it has uncommitted changes (read-only git)."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", repo_dir, *args], capture_output=True, text=True, check=False
        ).stdout

    head = git("rev-parse", "--short", "HEAD").strip() or "(no git)"
    dirty = [line for line in git("status", "--porcelain", "--", *paths).splitlines() if line.strip()]
    return f"{head}" + (
        f" + uncommitted changes in {len(dirty)} file(s) under {', '.join(paths)}" if dirty else ""
    )


# -- the trips data ---------------------------------------------------------------------------


def trips_df(spark: SparkSession, rows: int, partitions: int = 2, seed: int = 42) -> DataFrame:
    """`rows` deterministic trips with 13 columns of the usual kinds.

    Deterministic because the row ids come from spark.range with a fixed partition count and
    every random column uses rand(seed) (which is seeded per partition index).  The key is a
    UUID-formatted md5 of the id, so keys are unique, fixed-width and arrive unsorted, like
    real UUID keys.
    """
    from pyspark.sql import functions as F

    h = F.md5(F.col("id").cast("string"))
    uuid = F.concat_ws(
        "-", h.substr(1, 8), h.substr(9, 4), h.substr(13, 4), h.substr(17, 4), h.substr(21, 12)
    )
    city_idx = (F.pmod(F.xxhash64(F.col("id"), F.lit(seed)), F.lit(len(CITIES))) + 1).cast("int")
    cities = F.array(*[F.lit(c) for c in CITIES])

    def r(k: int):  # an independent uniform [0, 1) stream per column
        return F.rand(seed + k)

    return spark.range(0, rows, 1, partitions).select(
        uuid.alias("trip_id"),
        F.format_string("rider-%06d", (r(1) * 50_000).cast("int")).alias("rider"),
        F.format_string("driver-%05d", (r(2) * 20_000).cast("int")).alias("driver"),
        F.element_at(cities, city_idx).alias("city"),
        # 2024-01-01T00:00:00Z plus up to ~1 year, microsecond precision
        F.timestamp_micros(F.lit(1_704_067_200_000_000) + (r(3) * 31_536_000_000_000).cast("long")).alias(
            "ts"
        ),
        (r(4) * 180 - 90).alias("begin_lat"),
        (r(5) * 360 - 180).alias("begin_lon"),
        (r(6) * 180 - 90).alias("end_lat"),
        (r(7) * 360 - 180).alias("end_lon"),
        F.round(r(8) * 120 + 2.5, 2).alias("fare"),
        (r(9) * 40).cast("float").alias("distance_km"),
        (r(10) * 6 + 1).cast("int").alias("passengers"),
        (r(11) * 30).cast("decimal(10,2)").alias("tip"),
    )


def materialise(df: DataFrame, staging_dir: str) -> DataFrame:
    """Write `df` once to parquet and return a DataFrame reading it back.

    Chosen over cache(): every timed write then starts from the same plain parquet scan (cost
    equal for all writers, and excluded from none of them the same way), the JVM heap is not
    holding the cached data while writers run, and non-Spark references (pyarrow) can read the
    very same files.
    """
    df.write.mode("overwrite").parquet(staging_dir)
    return df.sparkSession.read.parquet(staging_dir)


# -- disk -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DirStats:
    data_bytes: int  # *.parquet outside any metadata dir
    data_files: int
    total_bytes: int  # everything, incl. .hoodie/, .crc checksums, _SUCCESS, partition metadata
    total_files: int
    partition_dirs: int  # directories holding data files


def dir_stats(path: str, metadata_dirs: Sequence[str] = (".hoodie",)) -> DirStats:
    data_bytes = data_files = total_bytes = total_files = 0
    partition_dirs: set[str] = set()
    for root, _dirs, names in os.walk(path):
        in_meta = any(part in metadata_dirs for part in os.path.relpath(root, path).split(os.sep))
        for name in names:
            size = os.path.getsize(os.path.join(root, name))
            total_bytes += size
            total_files += 1
            # Hidden/underscore files (.crc, _SUCCESS, .hoodie_partition_metadata) are not data.
            if not in_meta and name.endswith(".parquet") and not name.startswith((".", "_")):
                data_bytes += size
                data_files += 1
                partition_dirs.add(root)
    return DirStats(data_bytes, data_files, total_bytes, total_files, len(partition_dirs))


@contextmanager
def scratch_dir(base: str | None, prefix: str, keep: bool = False) -> Iterator[str]:
    """A fresh directory (under `base`, or a new temp dir under /tmp), removed afterwards."""
    if base:
        os.makedirs(base, exist_ok=True)
        path = tempfile.mkdtemp(prefix=prefix, dir=base)
    else:
        path = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


# -- processes: memory and CPU, from /proc (Linux; no psutil) ---------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:  # the process exited between listing and reading
        return None


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    cmdline: bytes  # NUL-separated argv
    cpu_ticks: int  # utime + stime + cutime + cstime (reaped children count once, in the parent)


def scan_procs() -> dict[int, Proc]:
    """Every process now: ~130 here, ~1.5 ms."""
    procs: dict[int, Proc] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat, cmd = _read(f"/proc/{entry}/stat"), _read(f"/proc/{entry}/cmdline")
        if stat is None or cmd is None:
            continue
        f = stat.rsplit(b")", 1)[1].split()  # after "(comm)", which may hold spaces; f[0] is field 3
        procs[int(entry)] = Proc(int(entry), int(f[1]), cmd, sum(int(x) for x in f[11:15]))
    return procs


def descendants(procs: dict[int, Proc], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _status_kib(pid: int, keys: Sequence[str]) -> dict[str, int]:
    raw = _read(f"/proc/{pid}/status")
    out: dict[str, int] = {}
    if raw is None:
        return out
    for line in raw.decode(errors="replace").splitlines():
        k, _, v = line.partition(":")
        if k in keys:
            out[k] = int(v.split()[0])
    return out


def is_python_worker(cmdline: bytes) -> bool:
    """Spark's Python daemons and the workers they fork (a fork keeps its daemon's cmdline)."""
    text = cmdline.replace(b"\0", b" ")
    return b"pyspark" in text and (b"daemon" in text or b"worker" in text)


def is_task_worker(proc: Proc, jvm: int | None) -> bool:
    """A fork of the `python -m pyspark.daemon pyspark.worker` daemon: runs tasks (here, the
    DataSourceArrowWriter.write calls).  The daemon itself is the JVM's child; its forks are not."""
    return proc.cmdline.rstrip(b"\0").split(b"\0")[-1] == b"pyspark.worker" and proc.ppid != jvm


def jvm_pid() -> int | None:
    """The driver JVM: the `java` child (via spark-submit) of this Python process."""
    for p in scan_procs().values():
        if p.ppid == os.getpid() and b"java" in p.cmdline.split(b"\0", 1)[0]:
            return p.pid
    return None


def reset_peak_rss(pids: Iterable[int]) -> None:
    """Reset VmHWM (write 5 to clear_refs, Linux >= 4.0), so a reused worker's peak is this run's."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass


def cpu_busy_ticks() -> int:
    """Non-idle CPU time of the whole machine (all cores), from the first line of /proc/stat."""
    raw = _read("/proc/stat") or b"cpu 0"
    f = [int(x) for x in raw.split(b"\n", 1)[0].split()[1:]]
    # user nice system idle iowait irq softirq steal: everything but idle and iowait
    return sum(f[:3]) + sum(f[5:8])


@dataclass
class RunProbe:
    """What one write cost besides wall time, and whether someone else shared the machine."""

    wall_s: float = 0.0
    own_cpu_s: float = 0.0  # this driver, its JVM and the JVM's Python workers
    other_cpu_s: float = 0.0  # every other process on the machine during the run
    samples: int = 0
    processes_seen: set[int] = field(default_factory=set)
    task_workers_seen: set[int] = field(default_factory=set)
    start_sum_rss_kib: int = 0  # all Python worker processes, first sample: what was idle before
    max_one_rss_kib: int = 0  # largest VmRSS of any single process in any sample
    max_one_hwm_kib: int = 0  # largest VmHWM: the kernel's peak, catches spikes between samples
    max_sum_rss_kib: int = 0  # largest sum of VmRSS over all Python worker processes in one sample
    max_task_sum_rss_kib: int = 0  # the same over the task workers only (those that run the write)
    max_jvm_rss_kib: int = 0

    def cpu_share(self, cpus: int) -> float:
        return self.own_cpu_s / (self.wall_s * cpus) if self.wall_s else 0.0

    def other_share(self, cpus: int) -> float:
        return self.other_cpu_s / (self.wall_s * cpus) if self.wall_s else 0.0

    def memory_row(self) -> dict[str, str]:
        def mib(kib: int) -> str:
            return f"{kib / 1024:,.0f}"

        return {
            "procs": str(len(self.processes_seen)),
            "task procs": str(len(self.task_workers_seen)),
            "max 1 RSS MiB": mib(self.max_one_rss_kib),
            "max 1 HWM MiB": mib(self.max_one_hwm_kib),
            "sum RSS before": mib(self.start_sum_rss_kib),
            "max sum RSS MiB": mib(self.max_sum_rss_kib),
            "max task sum MiB": mib(self.max_task_sum_rss_kib),
            "JVM RSS MiB": mib(self.max_jvm_rss_kib),
        }


class ProcessSampler:
    """Samples this session's processes from a background thread while a write runs.

    Memory: the RSS of Spark's Python worker processes and of the driver JVM.  Spark starts
    one `pyspark.daemon` per worker kind (data-source lookup, writer planning, commit, and
    `pyspark.worker` for tasks), each a child of the JVM, and each forks the real workers.
    Only descendants of *this* driver's JVM count: other Spark jobs on the machine (a test
    run, say) have workers with the same command lines.

    Sums of RSS count the pages a fork still shares with its daemon once per process, so they
    overstate the true total a little (~30 MiB per process here).  PSS would split shared pages
    fairly, but reading /proc/<pid>/smaps_rollup costs ~20 ms per sample for 9 processes, a
    visible CPU share on 2 cores, so it is not sampled.

    CPU: ticks of this driver's process tree vs all busy ticks of the machine, start to end,
    so a run that shared the CPU with someone else shows it.  The driver's main thread is
    blocked in a py4j call while a write runs; one sample costs ~2-3 ms.
    """

    def __init__(self, interval_s: float = 0.1):
        self.interval_s = interval_s
        self.probe = RunProbe()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._me = os.getpid()
        self._jvm = jvm_pid()
        self._t0 = 0.0
        self._busy0 = self._own0 = 0

    def _own_ticks(self, procs: dict[int, Proc]) -> int:
        tree = descendants(procs, self._me) | {self._me}
        return sum(procs[p].cpu_ticks for p in tree if p in procs)

    def sample_once(self) -> dict[int, Proc]:
        p = self.probe
        procs = scan_procs()
        ours = descendants(procs, self._jvm) if self._jvm is not None else set()
        sum_rss = task_rss = 0
        for pid in ours:
            proc = procs[pid]
            if not is_python_worker(proc.cmdline):
                continue
            st = _status_kib(pid, ("VmRSS", "VmHWM"))
            if not st:
                continue
            rss = st.get("VmRSS", 0)
            p.processes_seen.add(pid)
            sum_rss += rss
            if is_task_worker(proc, self._jvm):
                p.task_workers_seen.add(pid)
                task_rss += rss
            p.max_one_rss_kib = max(p.max_one_rss_kib, rss)
            p.max_one_hwm_kib = max(p.max_one_hwm_kib, st.get("VmHWM", 0))
        if p.samples == 0:
            p.start_sum_rss_kib = sum_rss
        p.max_sum_rss_kib = max(p.max_sum_rss_kib, sum_rss)
        p.max_task_sum_rss_kib = max(p.max_task_sum_rss_kib, task_rss)
        if self._jvm is not None:
            p.max_jvm_rss_kib = max(p.max_jvm_rss_kib, _status_kib(self._jvm, ("VmRSS",)).get("VmRSS", 0))
        p.samples += 1
        return procs

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample_once()

    def __enter__(self) -> Self:
        procs = scan_procs()
        if self._jvm is not None:
            reset_peak_rss(
                pid for pid in descendants(procs, self._jvm) if is_python_worker(procs[pid].cmdline)
            )
        procs = self.sample_once()  # the idle baseline, before the write starts
        self._own0, self._busy0 = self._own_ticks(procs), cpu_busy_ticks()
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="proc-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._t0
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        procs = self.sample_once()  # a last look: VmHWM still holds the peak of workers now idle
        own = (self._own_ticks(procs) - self._own0) / CLOCK_TICKS
        busy = (cpu_busy_ticks() - self._busy0) / CLOCK_TICKS
        self.probe.wall_s, self.probe.own_cpu_s = wall, own
        self.probe.other_cpu_s = max(0.0, busy - own)


def wait_until_quiet(
    max_wait_s: float, threshold: float = 0.15, window_s: float = 3.0
) -> tuple[float, float]:
    """Wait (up to max_wait_s) until processes outside this driver's tree use less than
    `threshold` of the machine's CPU over a `window_s` window.  Returns (waited s, last share)."""
    me, cpus = os.getpid(), os.cpu_count() or 1
    start = time.perf_counter()
    while True:
        procs = scan_procs()
        own0 = sum(procs[p].cpu_ticks for p in descendants(procs, me) | {me} if p in procs)
        busy0, t0 = cpu_busy_ticks(), time.perf_counter()
        time.sleep(window_s)
        procs = scan_procs()
        own1 = sum(procs[p].cpu_ticks for p in descendants(procs, me) | {me} if p in procs)
        other = max(0, (cpu_busy_ticks() - busy0) - (own1 - own0)) / CLOCK_TICKS
        share = other / ((time.perf_counter() - t0) * cpus)
        waited = time.perf_counter() - start
        if share < threshold or waited >= max_wait_s:
            return waited, share


# -- timing and reporting ---------------------------------------------------------------------


@dataclass
class Timing:
    seconds: list[float] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    v = sorted(values)
    if not v:
        return float("nan")
    pos = (len(v) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _numeric(v: str) -> bool:
    return bool(v) and v.replace(",", "").replace(".", "").replace("-", "").isdigit()


def format_table(rows: Sequence[dict[str, str]]) -> str:
    """A Markdown table (pastes into notes, renders in most viewers), columns padded to fit;
    numeric columns right-aligned, text columns left-aligned."""
    if not rows:
        return "(no rows)"
    headers: list[str] = []
    for r in rows:  # union of keys, first-seen order: a FAILED row may have fewer cells
        headers.extend(h for h in r if h not in headers)
    widths = {h: max(len(h), *(len(r.get(h, "")) for r in rows)) for h in headers}
    right = {h: all(_numeric(r.get(h, "")) or r.get(h, "") in ("", "-") for r in rows) for h in headers}

    def cell(h: str, v: str) -> str:
        return v.rjust(widths[h]) if right[h] else v.ljust(widths[h])

    lines = ["| " + " | ".join(cell(h, h) for h in headers) + " |"]
    lines.append(
        "|"
        + "|".join("-" * (widths[h] + 1) + ":" if right[h] else "-" * (widths[h] + 2) for h in headers)
        + "|"
    )
    for r in rows:
        lines.append("| " + " | ".join(cell(h, r.get(h, "")) for h in headers) + " |")
    return "\n".join(lines)


def human_rows(n: int) -> str:
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n % 1_000 == 0:
        return f"{n // 1_000}k"
    return f"{n:,}"
