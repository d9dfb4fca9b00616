"""Benchmark: COPY_ON_WRITE upserts through the `hoodie` sink vs a delta-rs MERGE of the same batch.

For each N in --rows, on one local[2] session (everything below is untimed unless it says so):
  * base data: N deterministic trips rows (common.trips_df: key `trip_id`, partition `city` with
    10 values, precombine `ts`), staged once as parquet; from it a hoodie table (`bulk_insert`
    through df.write.format("hoodie")) and a Delta table (deltalake.write_deltalake,
    partition_by city), both kept as pristine copies;
  * an upsert batch: half updates of random existing keys (same city, ts moved 400 days later,
    new fare/tip/passengers/end point), half new keys; staged as parquet, read back by Spark,
    and loaded once into Arrow (batch.toArrow()) for the non-Spark writers.
Every timed run starts from a fresh copy of the pristine table (shutil.copytree, untimed):

  part 1, Spark path (batch = --batch-fraction of N, default 10%):
      hoodie  batch.repartition(2) (random), df.write.format("hoodie") upsert, mode append   [timed]
      hoodie  batch.repartition(2, "city") (changes of one file group in one task)           [timed]
      hoodie  batch.repartition(2, "trip_id") (by record key; only with --key-partitioning)   [timed]
      delta   DeltaTable.merge(arrow batch, t.trip_id = s.trip_id AND t.city = s.city)
              .when_matched_update_all().when_not_matched_insert_all().execute()              [timed]
  part 2, engine core: hoodie_sink.write(arrow batch, path, upsert options) vs the same delta
      merge, run next to it                                                                   [timed]
  part 3, scaling: a fixed --scaling-batch (100k) batch into every N, Spark path, random
      partitioning; variants: keys over all cities, updates in 2 of 10 cities (inserts
      everywhere), and updates + inserts in 2 cities; delta for reference                    [timed]
  part 4, memory (largest N only): a --memory-batch-rows batch (default N: 5M into 5M), Spark path,
      random partitioning, with the default task buffer (256 MiB) and with --small-budget
      (64 MiB); /proc is sampled every --sample-interval s                                    [timed]

After every hoodie run: file groups rewritten / created (the commit's partitionToWriteStats,
prevCommit set or "null") and the sink's extraMetadata "hoodie.sink.write.stats"; the
correctness check reads the table back with hudi-rs: rows == N + new keys, distinct keys ==
rows, rows carrying the update marker (ts >= 2025-01-01) == updates.  The delta result gets the
same check.  Spark runs also show a phase split from Spark's status store: before the first
stage (planning, the driver-side writer = commit.begin), the scan/shuffle stage, the write
stage (the Python tasks) and after it (the commit: reconciliation of contended file groups).

With --profile, one extra untimed hoodie_sink.write per N runs under cProfile.  Prints a
Markdown results table at the end.  Exit code 1 if a hoodie write failed or a check failed.
See README.md.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# benchmarks/ is not a package: the scripts run as files and import their sibling directly.
from common import (
    CITIES,
    MiB,
    ProcessSampler,
    RunProbe,
    SparkSettings,
    _status_kib,
    build_spark,
    descendants,
    dir_stats,
    format_table,
    human_rows,
    is_python_worker,
    is_task_worker,
    jvm_info,
    materialise,
    scratch_dir,
    settle,
    source_version,
    trips_df,
    wait_until_quiet,
)

SEED = 42
CPUS = os.cpu_count() or 1
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP_ROWS = 20_000
PYTHON_WORKER_IDLE_S = 40  # Spark stops Python workers idle for 60 s; keep a margin
UPDATE_SHIFT_DAYS = 400  # base ts lie in 2024; updated rows move to 2025-02-04 or later
UPDATED_SINCE = datetime(2025, 1, 1, tzinfo=timezone.utc)
SMALL_BUDGET = 64 * MiB
TASK_BUDGET_KEY = "hoodie.write.buffer.task.max.bytes"
BUCKET_BUDGET_KEY = "hoodie.write.buffer.bucket.max.bytes"
DEFAULT_TASK_BUDGET = (
    256 * MiB
)  # README / table/options/write_config.py defaults, printed with the memory rows
DEFAULT_BUCKET_BUDGET = 64 * MiB
FEW_CITIES = CITIES[:2]


TABLE_OPTIONS: dict[str, str] = {}  # --table-type (and what a MERGE_ON_READ run needs)


def hoodie_options(operation: str, **extra: str) -> dict[str, str]:
    return {
        **TABLE_OPTIONS,
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.recordkey.field": "trip_id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.operation": operation,
        **extra,
    }


def target_ratio(rows: int) -> float:
    """The brief's targets for the Spark path: hoodie <= delta at 5M, <= 1.5x at 1M (and below)."""
    return 1.0 if rows >= 5_000_000 else 1.5


# -- data -------------------------------------------------------------------------------------


@dataclass
class Batch:
    label: str
    df: object  # DataFrame reading the staged parquet
    arrow: object | None  # pyarrow.Table, or None when no non-Spark writer needs it
    updates: int
    inserts: int
    cities: str  # "all" or the cities the keys were drawn from

    @property
    def rows(self) -> int:
        return self.updates + self.inserts


def build_batch(
    spark, base_df, base_rows: int, updates: int, inserts: int, staging: str,
    update_cities: tuple[str, ...] | None = None, insert_cities: tuple[str, ...] | None = None,
    seed: int = 7,
) -> object:  # fmt: skip
    """`updates` random existing keys with new values and a later ts, plus `inserts` new keys,
    staged as parquet; returns the DataFrame reading it back.

    Updates: a hash of the key (seeded) below a threshold, then an exact `limit`; no global sort.
    New keys: trips_df over more ids than the base has, minus the base's keys (the key is an
    md5 of the row id, so keys of ids >= N are new and their `city` follows the same rule)."""
    from pyspark.sql import functions as F

    cols = base_df.columns
    src = base_df if update_cities is None else base_df.where(F.col("city").isin(*update_cities))
    pool = base_rows if update_cities is None else src.count()
    if updates > pool:
        raise ValueError(f"asked for {updates:,} updates, only {pool:,} candidate keys")
    frac = min(1.0, updates / pool * 1.03 + 1e-4)  # a little more, then trim exactly
    u = F.pmod(F.xxhash64("trip_id", F.lit(seed)), F.lit(1 << 30)) / float(1 << 30)
    upd = src.where(u < F.lit(frac)).limit(updates)
    upd = upd.select(
        *[
            {
                "ts": F.expr(f"ts + INTERVAL {UPDATE_SHIFT_DAYS} DAYS").alias("ts"),
                "fare": F.round(F.rand(seed + 1) * 120 + 2.5, 2).alias("fare"),
                "tip": (F.rand(seed + 2) * 30).cast("decimal(10,2)").alias("tip"),
                "passengers": (F.rand(seed + 3) * 6 + 1).cast("int").alias("passengers"),
                "end_lat": (F.rand(seed + 4) * 180 - 90).alias("end_lat"),
                "end_lon": (F.rand(seed + 5) * 360 - 180).alias("end_lon"),
            }.get(c, F.col(c))
            for c in cols
        ]
    )
    share = 1.0 if insert_cities is None else len(insert_cities) / len(CITIES)
    extra_ids = int(inserts / share * 1.15) + 1_000
    new = trips_df(spark, base_rows + extra_ids, seed=SEED).join(
        base_df.select("trip_id"), "trip_id", "left_anti"
    )
    if insert_cities is not None:
        new = new.where(F.col("city").isin(*insert_cities))
    new = new.limit(inserts).select(*cols)
    df = materialise(upd.unionByName(new), staging)
    got_upd = df.where(F.col("ts") >= F.lit(UPDATED_SINCE)).count()
    total = df.count()
    if got_upd != updates or total != updates + inserts:
        raise RuntimeError(
            f"batch: {got_upd:,} updates / {total:,} rows, wanted {updates:,} / {updates + inserts:,}"
        )
    return df


# -- checks and commit metadata ---------------------------------------------------------------


def _counts(keys, ts) -> tuple[int, int, int]:
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(keys)
    distinct = pc.count_distinct(keys).as_py()
    since = pa.scalar(UPDATED_SINCE, type=pa.timestamp("us", tz="UTC"))
    ts = pc.cast(ts, pa.timestamp("us", tz="UTC"))
    updated = pc.sum(pc.greater_equal(ts, since).cast(pa.int64())).as_py() or 0
    return n, distinct, updated


def check_result(kind: str, path: str, expect_rows: int, expect_updated: int) -> tuple[bool, str]:
    """Rows, distinct keys and rows carrying the update marker, as hudi-rs (or delta-rs) reads them."""
    import pyarrow as pa

    if kind == "hoodie":
        from hudi import HudiReadOptions, HudiTableBuilder

        batches = (
            HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions(projection=["trip_id", "ts"]))
        )
        table = pa.Table.from_batches(batches) if batches else pa.table({"trip_id": [], "ts": []})
        reader = "hudi-rs"
    else:
        from deltalake import DeltaTable

        table = DeltaTable(path).to_pyarrow_table(columns=["trip_id", "ts"])
        reader = "delta-rs"
    n, distinct, updated = _counts(table.column("trip_id"), table.column("ts"))
    ok = n == expect_rows and distinct == expect_rows and updated == expect_updated
    text = (
        f"{reader}: {n:,} rows (want {expect_rows:,}), {distinct:,} distinct keys, {updated:,} updated "
        f"(want {expect_updated:,}): {'OK' if ok else 'MISMATCH'}"
    )
    return ok, text


COMMIT_RE = re.compile(r"^(\d+)\.commit$")


def latest_commit(path: str) -> dict:
    hoodie = os.path.join(path, ".hoodie")
    names = sorted(n for n in os.listdir(hoodie) if COMMIT_RE.match(n))
    with open(os.path.join(hoodie, names[-1])) as f:
        return json.load(f)


@dataclass
class CommitSummary:
    rewritten: int  # write stats with a prevCommit: a new version of an existing file group
    created: int  # write stats without: new file groups
    partitions: int
    sink_stats: dict

    def describe(self) -> str:
        s = self.sink_stats
        return (
            f"{self.rewritten} file groups rewritten + {self.created} new in {self.partitions} partitions; "
            f"sink stats: contended {s.get('contendedFileGroups', '?')}, staged rows {s.get('stagedRecords', '?'):,}, "
            f"duplicate inserts removed {s.get('duplicateInsertsRemoved', '?')}"
            if isinstance(s.get("stagedRecords"), int)
            else f"{self.rewritten} rewritten + {self.created} new; sink stats {s}"
        )


def commit_summary(path: str) -> CommitSummary:
    md = latest_commit(path)
    stats = [s for lst in md.get("partitionToWriteStats", {}).values() for s in lst]
    rewritten = sum(1 for s in stats if s.get("prevCommit") not in (None, "null"))
    raw = (md.get("extraMetadata") or {}).get("hoodie.sink.write.stats")
    return CommitSummary(
        rewritten=rewritten,
        created=len(stats) - rewritten,
        partitions=len(md.get("partitionToWriteStats", {})),
        sink_stats=json.loads(raw) if raw else {},
    )


def file_groups_in(path: str) -> int:
    md = latest_commit(path)
    return sum(len(v) for v in md.get("partitionToWriteStats", {}).values())


# -- measuring --------------------------------------------------------------------------------


class KindSampler(ProcessSampler):
    """common.ProcessSampler, plus the largest RSS / HWM per kind of Python worker: task workers
    (forks of the pyspark.worker daemon), and each daemon kind with its forks (the planner
    `write_into_data_source` runs commit.begin, `commit_data_source_write` runs the commit)."""

    def __init__(self, interval_s: float = 0.1):
        self.by_kind: dict[str, tuple[int, int]] = {}
        super().__init__(interval_s)

    def sample_once(self):
        procs = super().sample_once()
        if self._jvm is None:
            return procs
        for pid in descendants(procs, self._jvm):
            proc = procs.get(pid)
            if proc is None or not is_python_worker(proc.cmdline):
                continue
            if is_task_worker(proc, self._jvm):
                kind = "task"
            else:
                kind = proc.cmdline.rstrip(b"\0").split(b"\0")[-1].decode(errors="replace").rsplit(".", 1)[-1]
                kind = "daemon" if kind == "worker" else kind
            st = _status_kib(pid, ("VmRSS", "VmHWM"))
            rss, hwm = self.by_kind.get(kind, (0, 0))
            self.by_kind[kind] = (max(rss, st.get("VmRSS", 0)), max(hwm, st.get("VmHWM", 0)))
        return procs


def spark_phases(spark, t_start_ms: int, t_end_ms: int) -> str:
    """Stage times of the save() from Spark's status store (kept with the UI disabled too)."""
    try:
        store = spark.sparkContext._jsc.sc().statusStore()
        jobs = store.jobsList(None)
        spans: dict[int, tuple[int, int, int]] = {}
        for i in range(jobs.size()):
            job = jobs.apply(i)
            sub = job.submissionTime()
            if not sub.isDefined() or sub.get().getTime() < t_start_ms - 5:
                continue
            ids = job.stageIds()
            for k in range(ids.size()):
                st = store.lastStageAttempt(ids.apply(k))
                a, b = st.submissionTime(), st.completionTime()
                if a.isDefined() and b.isDefined():  # skipped stages have neither
                    spans[st.stageId()] = (a.get().getTime(), b.get().getTime(), st.stageId(), st.attemptId())
        if not spans:
            return ""
        ordered = sorted(spans.values())
        parts = [f"before the stages {(ordered[0][0] - t_start_ms) / 1000:.1f}"]
        for j, (a, b, sid, att) in enumerate(ordered):
            name = "write stage" if j == len(ordered) - 1 else "scan/shuffle stage"
            tasks = store.taskList(sid, att, 1000)
            per_task = []
            for k in range(tasks.size()):
                t = tasks.apply(k)
                d = t.duration()
                rows = (
                    t.taskMetrics().get().shuffleReadMetrics().recordsRead()
                    if t.taskMetrics().isDefined()
                    else 0
                )
                per_task.append(
                    f"{d.get() / 1000:.1f}" + (f"/{rows / 1000:.0f}k rows" if rows else "")
                    if d.isDefined()
                    else "?"
                )
            parts.append(f"{name} {(b - a) / 1000:.1f} (tasks {', '.join(per_task)})")
        parts.append(f"after the stages (commit) {(t_end_ms - ordered[-1][1]) / 1000:.1f}")
        return "phases s: " + ", ".join(parts)
    except Exception as e:  # noqa: BLE001  the split is a nicety; never fail the run for it
        return f"(no phase split: {type(e).__name__}: {str(e)[:120]})"


@dataclass
class Result:
    rows: int  # N of the base table
    part: str
    case: str
    writer: str  # hoodie-spark, hoodie-engine, delta
    batch: Batch
    seconds: float | None = None  # the best run
    all_seconds: list[float] = field(default_factory=list)
    probe: RunProbe | None = None
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)
    commit: CommitSummary | None = None
    delta_metrics: dict | None = None
    check: str = ""
    ok: bool | None = None
    phases: str = ""
    error: str | None = None
    ref: Result | None = None  # the delta run to compare with
    target: float | None = None
    note: str = ""


class Bench:
    def __init__(self, args: argparse.Namespace, spark, scratch: str):
        self.args = args
        self.spark = spark
        self.scratch = scratch
        self.results: list[Result] = []
        self.failures: list[str] = []
        self.profiles: list[str] = []
        self.last_python_use = time.monotonic()
        self.warm_dir = os.path.join(scratch, "warm_table")
        self.warm_batch = None

    # -- helpers --------------------------------------------------------------------------
    def log(self, msg: str) -> None:
        print(msg, flush=True)

    def _keep_workers_warm(self) -> None:
        """A small untimed upsert brings back Python workers Spark stopped after 60 s idle."""
        if self.warm_batch is None or time.monotonic() - self.last_python_use < PYTHON_WORKER_IDLE_S:
            return
        self.warm_batch.repartition(2).write.format("hoodie").options(**hoodie_options("upsert")).mode(
            "append"
        ).save(self.warm_dir)
        self.last_python_use = time.monotonic()

    def _timed(self, fn: Callable[[], object], spark_run: bool) -> tuple[float, RunProbe, dict, object, int]:
        """(seconds, probe, RSS by worker kind, fn's value, epoch ms at the start of fn)."""
        args = self.args
        note = ""
        if args.wait_idle > 0:
            waited, share = wait_until_quiet(args.wait_idle, args.busy_threshold)
            if waited > 4:
                note = f" (waited {waited:.0f} s for a quiet machine; others then at {share:.0%})"
        if spark_run:
            self._keep_workers_warm()
        settle(self.spark)
        with KindSampler(args.sample_interval) as sampler:
            t_start_ms = int(time.time() * 1000)
            t0 = time.perf_counter()
            out = fn()
            seconds = time.perf_counter() - t0
        if spark_run:
            self.last_python_use = time.monotonic()
        if note:
            self.log("   " + note.strip())
        return seconds, sampler.probe, sampler.by_kind, out, t_start_ms

    def run(
        self, res: Result, pristine: str, fn: Callable[[str], object], expect_rows: int, expect_updated: int,
        repeat: int | None = None,
    ) -> Result:  # fmt: skip
        """`repeat` (default --repeat) times: copy the pristine table, time fn(copy); a run during
        which other processes were busy is discarded and re-run (--contended-retries).  The first
        run's result is checked; the best run's time, CPU and memory are kept."""
        out = os.path.join(self.scratch, "run")
        kind = "delta" if res.writer == "delta" else "hoodie"
        spark_run = res.writer == "hoodie-spark"
        for rep in range(repeat or self.args.repeat):
            for attempt in range(self.args.contended_retries + 1):
                shutil.rmtree(out, ignore_errors=True)
                shutil.copytree(pristine, out)
                os.sync()  # write back the copy (and earlier set-up writes) before the clock starts
                try:
                    seconds, probe, by_kind, value, t_start_ms = self._timed(lambda: fn(out), spark_run)
                except Exception:  # noqa: BLE001  a failing hoodie write is reported, the run goes on
                    res.error = traceback.format_exc()
                    self.failures.append(
                        f"{human_rows(res.rows)} {res.part} {res.case} ({res.writer}):\n{res.error}"
                    )
                    self.log(
                        f"  {res.part} {res.case:<34} {res.writer:<13} FAILED: {res.error.strip().splitlines()[-1]}"
                    )
                    if res not in self.results:
                        self.results.append(res)
                    shutil.rmtree(out, ignore_errors=True)
                    return res
                contended = probe.other_share(CPUS) >= self.args.busy_threshold
                if not contended or attempt == self.args.contended_retries:
                    break
                self.log(
                    f"  {res.part} {res.case:<34} {res.writer:<13} {seconds:7.2f} s, others used "
                    f"{probe.other_share(CPUS):.0%} of the CPUs -> discarded, re-run"
                )
            res.all_seconds.append(seconds)
            if res.seconds is None or seconds < res.seconds:
                res.seconds, res.probe, res.by_kind = seconds, probe, by_kind
            self.log(
                f"  {res.part} {res.case:<34} {res.writer:<13} {seconds:7.2f} s  CPU {probe.cpu_share(CPUS):.0%}, "
                f"others {probe.other_share(CPUS):.0%}; worker RSS max 1 {probe.max_one_rss_kib / 1024:,.0f} MiB, "
                f"sum {probe.max_sum_rss_kib / 1024:,.0f} MiB"
            )
            if kind == "hoodie":
                res.commit = commit_summary(out)
                self.log(f"      {res.commit.describe()}")
                if spark_run:
                    res.phases = spark_phases(self.spark, t_start_ms, t_start_ms + int(seconds * 1000))
                    self.log(f"      {res.phases}")
            elif isinstance(value, dict):
                res.delta_metrics = m = value
                self.log(
                    f"      delta: files scanned {m.get('num_target_files_scanned')}, removed "
                    f"{m.get('num_target_files_removed')}, added {m.get('num_target_files_added')}; rows updated "
                    f"{m.get('num_target_rows_updated'):,}, inserted {m.get('num_target_rows_inserted'):,}, "
                    f"copied {m.get('num_target_rows_copied'):,}"
                )
            if rep == 0 and not self.args.no_verify:
                res.ok, res.check = check_result(kind, out, expect_rows, expect_updated)
                self.log(f"      {res.check}")
                if not res.ok:
                    self.failures.append(
                        f"{human_rows(res.rows)} {res.part} {res.case} ({res.writer}): {res.check}"
                    )
            shutil.rmtree(out, ignore_errors=True)
        self.results.append(res)
        return res

    # -- writers --------------------------------------------------------------------------
    def spark_upsert(self, batch: Batch, partitioning: str, extra: dict[str, str] | None = None):
        def fn(path: str) -> None:
            df = (
                batch.df.repartition(2) if partitioning == "random" else batch.df.repartition(2, partitioning)
            )
            df.write.format("hoodie").options(**hoodie_options("upsert", **(extra or {}))).mode(
                "append"
            ).save(path)

        return fn

    @staticmethod
    def engine_upsert(batch: Batch):
        import hoodie_sink

        def fn(path: str) -> None:
            hoodie_sink.write(batch.arrow, path, hoodie_options("upsert"))

        return fn

    @staticmethod
    def delta_merge(batch: Batch):
        from deltalake import DeltaTable

        def fn(path: str) -> dict:
            return (
                DeltaTable(path)
                .merge(
                    source=batch.arrow,
                    predicate="t.trip_id = s.trip_id AND t.city = s.city",
                    source_alias="s",
                    target_alias="t",
                )
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )

        return fn

    # -- set-up ---------------------------------------------------------------------------
    def warm_up(self) -> None:
        """A tiny hoodie table, bulk_insert + upserts through both Spark partitionings and the
        engine, and a delta write + merge: JIT, worker start and imports are then excluded."""
        from deltalake import write_deltalake

        t0 = time.perf_counter()
        spark = self.spark
        from hoodie_sink.datasource.source import HoodieDataSource

        spark.dataSource.register(HoodieDataSource)  # this checkout; import errors surface here
        base = materialise(trips_df(spark, WARMUP_ROWS), os.path.join(self.scratch, "warm_src"))
        base.write.format("hoodie").options(**hoodie_options("bulk_insert")).mode("append").save(
            self.warm_dir
        )
        df = build_batch(spark, base, WARMUP_ROWS, 1_000, 1_000, os.path.join(self.scratch, "warm_batch"))
        batch = Batch("warm", df, df.toArrow(), 1_000, 1_000, "all")
        self.spark_upsert(batch, "random")(self.warm_dir)
        self.spark_upsert(batch, "city")(self.warm_dir)
        eng = os.path.join(self.scratch, "warm_engine")
        shutil.copytree(self.warm_dir, eng)
        self.engine_upsert(batch)(eng)
        dpath = os.path.join(self.scratch, "warm_delta")
        write_deltalake(dpath, base.toArrow(), partition_by=["city"])
        self.delta_merge(batch)(dpath)
        for d in (eng, dpath):
            shutil.rmtree(d, ignore_errors=True)
        self.warm_batch = df
        self.last_python_use = time.monotonic()
        self.log(
            f"warm-up: {WARMUP_ROWS:,}-row tables, bulk_insert + 3 upserts + delta merge in "
            f"{time.perf_counter() - t0:.1f} s"
        )

    def make_batch(
        self, base_df, n: int, label: str, updates: int, inserts: int,
        update_cities=None, insert_cities=None, arrow: bool = True, seed: int = 7,
    ) -> Batch:  # fmt: skip
        t0 = time.perf_counter()
        staging = os.path.join(self.scratch, f"batch_{label}")
        shutil.rmtree(staging, ignore_errors=True)
        df = build_batch(
            self.spark, base_df, n, updates, inserts, staging, update_cities, insert_cities, seed
        )
        tbl = df.toArrow() if arrow else None
        if update_cities is None and insert_cities is None:
            cities = "all"
        elif update_cities is not None and insert_cities is not None:
            cities = f"{len(update_cities)} cities"
        else:
            cities = f"upd {len(update_cities or CITIES)} / ins {len(insert_cities or CITIES)} cities"
        self.log(
            f"  batch {label}: {updates:,} updates + {inserts:,} new keys ({cities}) built in "
            f"{time.perf_counter() - t0:.1f} s"
            + (f", Arrow {tbl.nbytes / MiB:,.0f} MiB" if tbl is not None else "")
        )
        return Batch(label, df, tbl, updates, inserts, cities)

    # -- one N ----------------------------------------------------------------------------
    def run_size(self, n: int, memory_run: bool) -> None:
        import pyarrow.parquet as pq
        from deltalake import write_deltalake

        args, spark = self.args, self.spark
        self.log(f"\nN={n:,}")
        t0 = time.perf_counter()
        staging = os.path.join(self.scratch, f"base_src_{n}")
        base_df = materialise(trips_df(spark, n), staging)
        self.log(
            f"  base data generated in {time.perf_counter() - t0:.1f} s "
            f"({dir_stats(staging, ()).data_bytes / MiB:,.0f} MiB parquet)"
        )

        hoodie_base = os.path.join(self.scratch, f"hoodie_base_{n}")
        t0 = time.perf_counter()
        base_df.write.format("hoodie").options(**hoodie_options("bulk_insert")).mode("append").save(
            hoodie_base
        )
        self.last_python_use = time.monotonic()
        hs = dir_stats(hoodie_base)
        fgs = file_groups_in(hoodie_base)
        self.log(
            f"  hoodie base (bulk_insert, untimed): {time.perf_counter() - t0:.1f} s, {hs.data_files} files = "
            f"{fgs} file groups, {hs.data_bytes / MiB:,.0f} MiB"
        )
        delta_base = os.path.join(self.scratch, f"delta_base_{n}")
        t0 = time.perf_counter()
        arrow_base = pq.read_table(staging)
        write_deltalake(delta_base, arrow_base, partition_by=["city"])
        del arrow_base
        ds = dir_stats(delta_base, ("_delta_log",))
        self.log(
            f"  delta base (write_deltalake, untimed): {time.perf_counter() - t0:.1f} s, {ds.data_files} files, "
            f"{ds.data_bytes / MiB:,.0f} MiB"
        )
        parts = args.parts

        if 1 in parts or 2 in parts:
            b = max(2, int(n * args.batch_fraction)) // 2
            batch = self.make_batch(base_df, n, f"{n}_main", b, b)
            expect = (n + batch.inserts, batch.updates)
            label = f"{human_rows(batch.rows)} ({args.batch_fraction:.0%})"
            if 1 in parts:
                ref = self.run(Result(n, "1", f"{label} delta merge", "delta", batch), delta_base,
                               self.delta_merge(batch), *expect)  # fmt: skip
                for p in ["random", *args.key_partitioning]:
                    case = f"{label} spark, " + (
                        "repartition(2)" if p == "random" else f'repartition(2,"{p}")'
                    )
                    r = Result(n, "1", case, "hoodie-spark", batch, ref=ref, target=target_ratio(n))
                    self.run(r, hoodie_base, self.spark_upsert(batch, p), *expect)
            if 2 in parts:
                ref = self.run(Result(n, "2", f"{label} delta merge", "delta", batch), delta_base,
                               self.delta_merge(batch), *expect)  # fmt: skip
                r = Result(n, "2", f"{label} hoodie_sink.write", "hoodie-engine", batch, ref=ref, target=1.0)
                self.run(r, hoodie_base, self.engine_upsert(batch), *expect)
                if args.profile:
                    self.profile_engine(n, batch, hoodie_base)
            del batch

        if 3 in parts:
            k = args.scaling_batch // 2
            variants = [
                ("all cities", None, None),
                (f"upd in {len(FEW_CITIES)} cities", FEW_CITIES, None),
                (f"upd+ins in {len(FEW_CITIES)} cities", FEW_CITIES, FEW_CITIES),
            ]
            for i, (name, uc, ic) in enumerate(variants):
                batch = self.make_batch(base_df, n, f"{n}_scale{i}", k, k, uc, ic, seed=11 + i)
                expect = (n + batch.inserts, batch.updates)
                label = f"{human_rows(batch.rows)} {name}"
                ref = self.run(Result(n, "3", f"{label} delta merge", "delta", batch), delta_base,
                               self.delta_merge(batch), *expect)  # fmt: skip
                r = Result(n, "3", f"{label} spark, repartition(2)", "hoodie-spark", batch, ref=ref)
                self.run(r, hoodie_base, self.spark_upsert(batch, "random"), *expect)

        if 4 in parts and memory_run:
            m = args.memory_batch_rows or n
            batch = self.make_batch(base_df, n, f"{n}_mem", m // 2, m - m // 2, arrow=False, seed=23)
            expect = (n + batch.inserts, batch.updates)
            for budget in (None, SMALL_BUDGET):
                extra = {} if budget is None else {TASK_BUDGET_KEY: str(budget)}
                desc = f"task buffer {(budget or DEFAULT_TASK_BUDGET) // MiB} MiB" + (
                    " (default)" if budget is None else ""
                )
                r = Result(
                    n, "4", f"{human_rows(batch.rows)} spark, repartition(2), {desc}", "hoodie-spark", batch
                )
                r.note = desc
                self.run(r, hoodie_base, self.spark_upsert(batch, "random", extra), *expect, repeat=1)
                if r.by_kind:
                    self.log(
                        "      per worker kind, max RSS / HWM MiB: "
                        + ", ".join(
                            f"{k} {v[0] / 1024:,.0f} / {v[1] / 1024:,.0f}"
                            for k, v in sorted(r.by_kind.items())
                        )
                    )
            del batch

        for d in (hoodie_base, delta_base, staging):
            shutil.rmtree(d, ignore_errors=True)
        for name in os.listdir(self.scratch):
            if name.startswith(f"batch_{n}_"):
                shutil.rmtree(os.path.join(self.scratch, name), ignore_errors=True)

    def profile_engine(self, n: int, batch: Batch, pristine: str) -> None:
        """One extra, untimed hoodie_sink.write under cProfile (single process: the engine path)."""
        import hoodie_sink

        out = os.path.join(self.scratch, "profile_run")
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(pristine, out)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        try:
            hoodie_sink.write(batch.arrow, out, hoodie_options("upsert"))
        finally:
            prof.disable()
        seconds = time.perf_counter() - t0
        shutil.rmtree(out, ignore_errors=True)
        self.profiles.append(f"N={human_rows(n)}, {human_rows(batch.rows)} batch: hoodie_sink.write under cProfile "
                             f"{seconds:.2f} s (profiler overhead included)\n" + summarise_profile(prof))  # fmt: skip

    # -- report ---------------------------------------------------------------------------
    def report(self) -> None:
        rows = []
        for r in self.results:
            row = {
                "N": human_rows(r.rows),
                "part": r.part,
                "case": r.case,
                "upd/new": f"{human_rows(r.batch.updates)}/{human_rows(r.batch.inserts)}",
            }
            if r.error or r.seconds is None:
                rows.append({**row, "s": "FAILED"})
                continue
            ratio = target = ""
            if r.ref is not None and r.ref.seconds and r.writer != "delta":
                ratio = f"{r.seconds / r.ref.seconds:.2f}"
                if r.target is not None:
                    target = f"<= {r.target:.1f} " + (
                        "ok" if r.seconds / r.ref.seconds <= r.target else "MISSED"
                    )
            c = r.commit
            m = r.delta_metrics or {}
            row.update(
                {
                    "s": f"{r.seconds:.2f}",
                    "runs s": ", ".join(f"{x:.1f}" for x in r.all_seconds),
                    "x delta": ratio or "-",
                    "target": target or "-",
                    "CPU %": f"{100 * r.probe.cpu_share(CPUS):.0f}",
                    "others %": f"{100 * r.probe.other_share(CPUS):.0f}",
                    "files rewritten/new": f"{c.rewritten}/{c.created}"
                    if c
                    else (
                        f"{m.get('num_target_files_removed')}/{m.get('num_target_files_added')}" if m else "-"
                    ),
                    "contended/staged": f"{c.sink_stats.get('contendedFileGroups', '?')}/"
                    f"{c.sink_stats.get('stagedRecords', 0):,}"
                    if c
                    else "-",
                    "check": "-" if r.ok is None else ("OK" if r.ok else "MISMATCH"),
                }
            )
            rows.append(row)
        print()
        print(format_table(rows))
        print(
            "s = wall seconds of the upsert, best of the runs listed in runs s "
            "(Spark: the save() call incl. the commit; "
            "engine: hoodie_sink.write; delta: merge().execute()), each from a fresh copy of the base table; "
            "x delta = s / the delta merge of the same batch "
            "in the same part; files rewritten/new = hoodie: file groups given a new version / new file groups in the "
            "commit, delta: files removed / added; contended/staged = hoodie.sink.write.stats contendedFileGroups / "
            f"stagedRecords; CPU % = this session's CPU / (wall x {CPUS}), others % = other processes on the machine; "
            "check = row count, distinct keys and updated rows read back with hudi-rs / delta-rs"
        )
        mem = [r for r in self.results if r.part == "4" and r.probe is not None]
        if mem:
            print()
            print(
                "Memory of this session's Spark Python workers during the part-4 upserts (VmRSS sampled every "
                f"{self.args.sample_interval} s, VmHWM = kernel peak; "
                "sums count pages shared with the daemon once per process):"
            )
            mrows = []
            for r in mem:
                p = r.probe
                kinds = ", ".join(f"{k} {v[1] / 1024:,.0f}" for k, v in sorted(r.by_kind.items()))
                mrows.append({
                    "N": human_rows(r.rows),
                    "batch": human_rows(r.batch.rows),
                    "task buffer": r.note,
                    "s": f"{r.seconds:.1f}",
                    "max 1 RSS MiB": f"{p.max_one_rss_kib / 1024:,.0f}",
                    "max 1 HWM MiB": f"{p.max_one_hwm_kib / 1024:,.0f}",
                    "max sum RSS MiB": f"{p.max_sum_rss_kib / 1024:,.0f}",
                    "max task sum MiB": f"{p.max_task_sum_rss_kib / 1024:,.0f}",
                    "HWM by kind MiB": kinds,
                })  # fmt: skip
            print(format_table(mrows))
        for text in self.profiles:
            print()
            print(text)


def summarise_profile(prof: cProfile.Profile, top: int = 22) -> str:
    """Top functions by own time and hoodie_sink functions by cumulative time, as two tables."""
    st = pstats.Stats(prof, stream=io.StringIO())
    entries = st.stats  # (file, line, fn) -> (cc, nc, tt, ct, callers)
    total = max(getattr(st, "total_tt", 0.0), 1e-9)

    def name(key: tuple[str, int, str]) -> str:
        file, line, fn = key
        if f"{os.sep}hoodie_sink{os.sep}" in file:  # the checkout or the snapshot of it
            file = "hoodie_sink" + file.rsplit(f"{os.sep}hoodie_sink", 1)[1]
        elif "site-packages/" in file:
            file = file.split("site-packages/", 1)[1]
        return f"{fn} ({file}:{line})" if file != "~" else fn

    by_own = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    own = [{"function (own time)": name(k), "calls": f"{v[1]:,}", "own s": f"{v[2]:.2f}",
            "own %": f"{100 * v[2] / total:.1f}", "cum s": f"{v[3]:.2f}"} for k, v in by_own]  # fmt: skip
    ours = [(k, v) for k, v in entries.items() if f"{os.sep}hoodie_sink{os.sep}" in k[0]]
    by_cum = sorted(ours, key=lambda kv: kv[1][3], reverse=True)[:top]
    cum = [{"hoodie_sink function (cumulative)": name(k), "calls": f"{v[1]:,}", "cum s": f"{v[3]:.2f}",
            "cum %": f"{100 * v[3] / total:.1f}", "own s": f"{v[2]:.2f}"} for k, v in by_cum]  # fmt: skip
    return f"total {total:.2f} s profiled\n" + format_table(own) + "\n\n" + format_table(cum)


# -- main -------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="COW upsert benchmark: hoodie sink (Spark and engine) vs delta-rs merge",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000], help="base table sizes N")
    ap.add_argument("--quick", action="store_true", help="smoke test: N=200k, scaling batch 20k")
    ap.add_argument("--parts", default="1,2,3,4", help="which parts to run (see the module doc)")
    ap.add_argument("--batch-fraction", type=float, default=0.10, help="parts 1-2: upsert batch size / N")
    ap.add_argument(
        "--key-partitioning",
        default="city",
        help="part 1: columns to run a keyed repartition(2, col) variant for, comma separated (e.g. city,trip_id)",
    )
    ap.add_argument("--scaling-batch", type=int, default=100_000, help="part 3: fixed batch rows")
    ap.add_argument(
        "--memory-batch-rows",
        type=int,
        default=None,
        help="part 4: batch rows (default: N of the largest table)",
    )
    ap.add_argument(
        "--output-dir", default=None, help="parent of the scratch dir (default: a temp dir under /tmp)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the scratch dir")
    ap.add_argument("--driver-memory", default="6g", help="spark.driver.memory")
    ap.add_argument("--sample-interval", type=float, default=0.1, help="seconds between /proc samples")
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=60.0,
        help="before each timed run wait up to this many s for other processes to go quiet (0: don't)",
    )
    ap.add_argument("--busy-threshold", type=float, default=0.15, help="CPU share of other processes = busy")
    ap.add_argument("--contended-retries", type=int, default=1, help="re-runs of a run others made busy")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per case in parts 1-3 (best is shown)")
    ap.add_argument("--no-verify", action="store_true", help="skip the read-back checks")
    ap.add_argument("--profile", action="store_true", help="part 2: one extra engine write under cProfile")
    ap.add_argument(
        "--no-snapshot",
        action="store_true",
        help="import hoodie_sink live from the checkout (default: a copy taken at start, see snapshot_code)",
    )
    ap.add_argument(
        "--table-type",
        default="COPY_ON_WRITE",
        choices=["COPY_ON_WRITE", "MERGE_ON_READ"],
        help="MERGE_ON_READ: updates become log files (no inline compaction, no small-file padding)",
    )
    args = ap.parse_args(argv)
    TABLE_OPTIONS["hoodie.datasource.write.table.type"] = args.table_type
    if args.table_type == "MERGE_ON_READ":
        TABLE_OPTIONS.update({"hoodie.compact.inline": "false", "hoodie.parquet.small.file.limit": "0"})
    if args.quick:
        args.rows = [200_000]
        args.scaling_batch = 20_000
    if args.output_dir:
        args.output_dir = os.path.abspath(args.output_dir)  # the run changes directory
    args.parts = {int(p) for p in args.parts.split(",") if p.strip()}
    args.key_partitioning = [c.strip() for c in args.key_partitioning.split(",") if c.strip()]
    return args


def snapshot_code(scratch: str) -> str:
    """Copy hoodie_sink (and the pyspark_hoodie auto-registration module) into the scratch dir and
    put the copy first on the driver's sys.path and on PYTHONPATH, which Spark passes on to its
    Python workers.  Other people edit the checkout while a run takes half an hour, and Spark
    workers started later would import their edits: with the copy, every run measures one version."""
    dst = os.path.join(scratch, "code")
    shutil.copytree(
        os.path.join(REPO_DIR, "hoodie_sink"),
        os.path.join(dst, "hoodie_sink"),
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    shutil.copy2(os.path.join(REPO_DIR, "pyspark_hoodie.py"), dst)
    sys.path.insert(0, dst)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = dst + (os.pathsep + old if old else "")
    return dst


def worker_hoodie_file(spark) -> str:
    """Where a Spark Python worker imports hoodie_sink from (checks the snapshot is used)."""

    def where(_):
        import hoodie_sink

        yield hoodie_sink.__file__

    return spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()[0]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # `kill <pid>` then still stops Spark and removes the scratch dir (the finally blocks run)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import deltalake
    import pyarrow
    import pyspark

    settings = SparkSettings(driver_memory=args.driver_memory)
    started = time.perf_counter()
    bench: Bench | None = None
    with scratch_dir(args.output_dir, "bench_upsert_", keep=args.keep) as scratch:
        version = source_version(REPO_DIR)
        code = None if args.no_snapshot else snapshot_code(scratch)
        # Spark's Python workers run `python -m pyspark.daemon` in the JVM's working directory,
        # which therefore comes first on their sys.path: start the JVM in the scratch dir, or a
        # run started from the checkout imports the live hoodie_sink/ next to it after all.
        cwd = os.getcwd()
        os.chdir(scratch)
        spark = build_spark(settings, "bench_upsert")  # after the snapshot: the JVM inherits PYTHONPATH
        try:
            import hoodie_sink

            print(
                f"bench_upsert: rows={[human_rows(n) for n in args.rows]} parts={sorted(args.parts)} scratch={scratch}"
            )
            print(
                f"pyspark {pyspark.__version__}, pyarrow {pyarrow.__version__}, deltalake {deltalake.__version__}, "
                f"python {sys.version.split()[0]}, {CPUS} CPUs, load avg {os.getloadavg()[0]:.1f}"
            )
            print(
                f"spark: master={settings.master}, "
                + ", ".join(f"{k}={v}" for k, v in sorted(settings.conf().items()))
            )
            print(jvm_info(spark).describe())
            print(
                f"hoodie_sink: {version}"
                + (f"; snapshot {code} (driver imports {hoodie_sink.__file__}, workers {worker_hoodie_file(spark)})"
                   if code else f"; no snapshot: imported live from {hoodie_sink.__file__}")
            )  # fmt: skip
            print(f"options: {hoodie_options('upsert')}")
            bench = Bench(args, spark, scratch)
            bench.warm_up()
            largest = max(args.rows)
            for n in args.rows:
                bench.run_size(n, memory_run=(n == largest))
        finally:
            try:
                spark.stop()
            finally:
                os.chdir(cwd)
                if bench is not None:
                    bench.report()
                print(f"total wall time {time.perf_counter() - started:.0f} s")
    if bench is not None and bench.failures:
        print("\nFAILURES:\n" + "\n".join(bench.failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
