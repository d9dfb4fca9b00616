"""Benchmark: Structured Streaming into the `hoodie` sink vs Spark's own parquet streaming sink.

One local[2] session.  Every stream reads a file source,
    spark.readStream.schema(...).option("maxFilesPerTrigger", 1).parquet(src_dir)
with trigger(availableNow=True), where src_dir holds one pre-generated parquet file per
micro-batch (pyarrow, before any timing; 11 trips-like columns, see make_input).  Each input is
written through every sink of its workload, one query after the other (interleaved when
--repeat > 1), each query with a fresh output dir and checkpoint:

  workload "insert": every batch is new keys.
      parquet          df.writeStream.format("parquet").option("path", out)
      hoodie insert    df.writeStream.format("hoodie") operation insert (a stream's default:
                       append mode, new file groups per batch, as Hudi's Flink writer)
      hoodie insert, packing   append.mode=false: fills small files (throughput part only)
      hoodie bulk_ins  operation bulk_insert (throughput part only)
  workload "upsert": every batch is --update-fraction (10%) updates of existing keys, chosen
      uniformly among all keys written so far (same city, newer ts), and 90% new keys.  The
      hoodie table is seeded (untimed, df.write bulk_insert) with --seed-batches batches of new
      keys first, so the first micro-batch has existing keys to update too.
      parquet          the same input appended (the reference: what landing the rows costs)
      hoodie upsert    operation upsert, precombine ts
  hoodie options: table trips, record key trip_id, partition path city (10 values),
  precombine ts.

Part 1, throughput: total rows / wall seconds from start() to the end of awaitTermination()
  (query start-up, every batch, the last commit), for --throughput RxB; ratio hoodie/parquet
  on the same input (target for the insert operations: >= 0.8).
Part 2, latency: per-batch durations from query.recentProgress (durationMs.triggerExecution),
  the first batch of every query skipped, p50/p95 (linear interpolation) for each --latency
  RxB size.
Both parts report both numbers for every query.  A warm-up query through every sink runs first
(untimed): JVM JIT, Python worker start and imports.  Where a hoodie batch's time goes: the
write stage of the batch (Spark's status store: the Python tasks, incl. the instant's begin in
the first task), the sink's commit (its own log line "hoodie: micro-batch N of ... -> commit ... (commit
X.XXs)", read from this process's stderr, where Spark forwards its Python workers' stderr) and
the rest (planning, offsets/commit log, starting the Python commit runner).

After each hoodie query, hudi-rs reads the table back: rows, distinct keys and the sum of `ts`
(which checks that every update won by precombine) against the generator's model, and the
number of completed commits.  See README.md.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import statistics
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# benchmarks/ is not a package: the scripts run as files and import their sibling directly.
import contextlib

from common import (
    CITIES,
    MiB,
    ProcessSampler,
    RunProbe,
    SparkSettings,
    build_spark,
    dir_stats,
    format_table,
    human_rows,
    jvm_info,
    percentile,
    scratch_dir,
    settle,
    source_version,
    wait_until_quiet,
)

CPUS = os.cpu_count() or 1
REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_RATIO = 0.8  # hoodie insert / bulk_insert throughput vs the parquet sink
PYTHON_WORKER_IDLE_S = 40  # Spark stops Python workers idle for 60 s; keep a margin
DAY_US = 86_400_000_000
TS_BASE_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
SPARK_SCHEMA = (
    "trip_id STRING, rider STRING, driver STRING, city STRING, ts TIMESTAMP, begin_lat DOUBLE, "
    "begin_lon DOUBLE, end_lat DOUBLE, end_lon DOUBLE, fare DOUBLE, passengers INT"
)
HOODIE_BASE = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "trip_id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}
COMMIT_LINE = re.compile(
    r"hoodie: micro-batch (\d+) of \S+ -> (\w+) (\S+) on \S+: (\d+) rows in, (\d+) inserted, (\d+) updated, "
    r"(\d+) deleted, (\d+) files, ([\d.]+) MB, [\d.]+s \(commit ([\d.]+)s\)"
)


# -- input: one parquet file per micro-batch, generated with numpy/pyarrow --------------------


def _splitmix64(x):
    import numpy as np

    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def uuid_keys(ids):
    """UUID-formatted keys, a fixed bijection of the row id: unique, unsorted, and recomputable
    for an update without keeping the keys."""
    import numpy as np
    import pyarrow as pa

    ids = ids.astype(np.uint64)
    h = np.empty((len(ids), 2), dtype=">u8")
    h[:, 0] = _splitmix64(ids)
    h[:, 1] = _splitmix64(ids ^ np.uint64(0x5DEECE66D))
    hexed = np.frombuffer(h.tobytes().hex().encode("ascii"), dtype=np.uint8).reshape(-1, 32)
    out = np.full((len(ids), 36), ord("-"), dtype=np.uint8)
    for dst, src in (((0, 8), (0, 8)), ((9, 13), (8, 12)), ((14, 18), (12, 16)), ((19, 23), (16, 20)),
                     ((24, 36), (20, 32))):  # fmt: skip
        out[:, dst[0] : dst[1]] = hexed[:, src[0] : src[1]]
    offsets = np.arange(0, 36 * len(ids) + 1, 36, dtype=np.int32)
    return pa.StringArray.from_buffers(len(ids), pa.py_buffer(offsets), pa.py_buffer(out.tobytes()))


def city_index(ids):
    import numpy as np

    return (_splitmix64(ids.astype(np.uint64) ^ np.uint64(0xC17C17)) % np.uint64(len(CITIES))).astype(
        np.int32
    )


_POOLS: dict[str, object] = {}


def _pool(name: str, fmt: str, n: int):
    import pyarrow as pa

    if name not in _POOLS:
        _POOLS[name] = pa.array([fmt % i for i in range(n)])
    return _POOLS[name]


def trips_table(ids, day: int, rng):
    """Rows for `ids`, their ts on day `day` after 2024-01-01 (so a later batch always wins)."""
    import numpy as np
    import pyarrow as pa

    n = len(ids)
    ts = TS_BASE_US + day * DAY_US + rng.integers(0, DAY_US, n, dtype=np.int64)
    table = pa.table({
        "trip_id": uuid_keys(ids),
        "rider": _pool("rider", "rider-%06d", 50_000).take(pa.array(rng.integers(0, 50_000, n))),
        "driver": _pool("driver", "driver-%05d", 20_000).take(pa.array(rng.integers(0, 20_000, n))),
        "city": pa.array(CITIES).take(pa.array(city_index(ids))),
        "ts": pa.array(ts, type=pa.timestamp("us", tz="UTC")),
        "begin_lat": rng.uniform(-90, 90, n),
        "begin_lon": rng.uniform(-180, 180, n),
        "end_lat": rng.uniform(-90, 90, n),
        "end_lon": rng.uniform(-180, 180, n),
        "fare": np.round(rng.uniform(2.5, 122.5, n), 2),
        "passengers": rng.integers(1, 7, n, dtype=np.int32),
    })  # fmt: skip
    return table, ts


@dataclass
class StreamInput:
    workload: str  # insert | upsert
    batch_rows: int
    batches: int
    src_dir: str
    seed_dir: str | None  # upsert: the rows the hoodie table holds before the stream
    seed_rows: int
    file_bytes: list[int]
    updates: int  # update rows over all batches
    expect_rows: int  # rows of the hoodie table at the end (seed + new keys)
    expect_ts_sum: int  # sum of ts (us) over the final table: every update applied, newest wins
    gen_s: float

    @property
    def total_rows(self) -> int:
        return self.batch_rows * self.batches

    @property
    def label(self) -> str:
        return f"{self.batches} x {human_rows(self.batch_rows)}"


def row_group_rows(batch_rows: int) -> int:
    # ~8 row groups per file: Spark splits a file only at row-group boundaries, so a 1M-row
    # file with pyarrow's default (one 1Mi-row group) would be read by one task of two.
    return max(10_000, -(-batch_rows // 8))


def make_input(
    root: str,
    workload: str,
    batch_rows: int,
    batches: int,
    update_fraction: float,
    seed_batches: int,
    seed: int,
) -> StreamInput:
    import numpy as np
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    src = os.path.join(root, "src")
    os.makedirs(src)
    n_upd = round(batch_rows * update_fraction) if workload == "upsert" else 0
    n_new = batch_rows - n_upd
    seed_rows = batch_rows * seed_batches if workload == "upsert" else 0
    capacity = seed_rows + batches * n_new
    final_ts = np.zeros(capacity, dtype=np.int64)  # the model: each id's newest ts
    next_id, updates, rg = 0, 0, row_group_rows(batch_rows)
    seed_dir = None
    if seed_rows:
        seed_dir = os.path.join(root, "seed")
        os.makedirs(seed_dir)
        ids = np.arange(0, seed_rows, dtype=np.int64)
        table, ts = trips_table(ids, 0, rng)
        final_ts[ids] = ts
        pq.write_table(table, os.path.join(seed_dir, "seed.parquet"), row_group_size=rg)
        next_id = seed_rows
    sizes: list[int] = []
    now = time.time()
    for b in range(batches):
        new_ids = np.arange(next_id, next_id + n_new, dtype=np.int64)
        if n_upd:
            upd_ids = rng.choice(next_id, size=n_upd, replace=False).astype(np.int64)
            ids = rng.permutation(np.concatenate([upd_ids, new_ids]))
        else:
            ids = new_ids
        table, ts = trips_table(ids, b + 1, rng)
        final_ts[ids] = ts
        next_id += n_new
        updates += n_upd
        path = os.path.join(src, f"batch-{b:05d}.parquet")
        pq.write_table(table, path, row_group_size=rg)
        # The file source orders files by modification time: make it the batch order for sure.
        t = now - (batches - b)
        os.utime(path, (t, t))
        sizes.append(os.path.getsize(path))
    return StreamInput(
        workload, batch_rows, batches, src, seed_dir, seed_rows, sizes, updates, next_id,
        int(final_ts[:next_id].sum()), time.perf_counter() - t0,
    )  # fmt: skip


# -- stderr tee: the hoodie sink's per-batch log lines -------------------------------------------


@dataclass
class CommitLog:
    action: str
    instant: str
    rows_in: int
    inserted: int
    updated: int
    files: int
    mb: float
    commit_s: float


class StderrTee:
    """Routes fd 2 through a pipe: everything is still echoed to the real stderr, and the sink's
    "hoodie: micro-batch N of ... -> ..." lines (logged by the Python commit process, whose stderr Spark
    forwards to the JVM's, which is ours) are parsed and filed under the running query.  Set up
    before the JVM starts, so the JVM inherits the pipe."""

    def __init__(self) -> None:
        self.saved = os.dup(2)
        r, w = os.pipe()
        os.dup2(w, 2)
        os.close(w)
        self._r = r
        self._lock = threading.Lock()
        self.label: str | None = None
        self.records: dict[str, dict[int, CommitLog]] = {}
        self._thread = threading.Thread(target=self._pump, name="stderr-tee", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        with os.fdopen(self._r, "rb", buffering=0) as f:
            buf = b""
            while True:
                chunk = f.read(65536)
                if not chunk:
                    break
                with contextlib.suppress(OSError):
                    os.write(self.saved, chunk)
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    self._parse(line)

    def _parse(self, line: bytes) -> None:
        try:
            m = COMMIT_LINE.search(line.decode("utf-8", "replace"))
            if not m:
                return
            g = m.groups()
            rec = CommitLog(g[1], g[2], int(g[3]), int(g[4]), int(g[5]), int(g[7]), float(g[8]), float(g[9]))
            with self._lock:
                if self.label is not None:
                    self.records.setdefault(self.label, {})[int(g[0])] = rec
        except Exception:  # noqa: BLE001  never let the pump die: a full pipe would block the JVM
            return

    def begin(self, label: str) -> None:
        with self._lock:
            self.label = label
            self.records.pop(label, None)

    def end(self, label: str) -> dict[int, CommitLog]:
        time.sleep(0.3)  # the last line may still be in flight
        with self._lock:
            self.label = None
            return dict(self.records.get(label, {}))

    def close(self) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)  # the pump stays: the JVM still writes to the pipe until it exits


# -- measuring ---------------------------------------------------------------------------------


@dataclass
class BatchTiming:
    batch_id: int
    rows: int
    trigger_ms: int
    add_batch_ms: int
    stage_ms: int | None  # the batch's Spark stages (the write tasks)
    tasks: int | None
    commit_ms: int | None  # hoodie's own commit time, from its log line


@dataclass
class Run:
    sink: str
    inp: StreamInput
    part: str = ""  # throughput | latency ("" = untimed)
    wall_s: float = 0.0
    probe: RunProbe | None = None
    batches: list[BatchTiming] = field(default_factory=list)
    rows_in: int = 0
    data_bytes: int = 0
    data_files: int = 0
    check: str = ""
    ok: bool = True
    error: str | None = None

    @property
    def rows_per_s(self) -> float:
        return self.rows_in / self.wall_s if self.wall_s else 0.0

    def measured(self) -> list[BatchTiming]:
        return self.batches[1:]  # the first batch of a query: query start, first plan


def stage_spans(spark, t0_ms: float, t1_ms: float) -> list[tuple[int, int, int]]:
    """(submitted ms, completed ms, tasks) of the stages run in [t0, t1], from the status store
    (kept with the UI disabled)."""
    out = []
    try:
        store = spark.sparkContext._jsc.sc().statusStore()
        try:  # Spark 4: stageList(statuses, details, withSummaries, quantiles, taskStatus)
            seq = store.stageList(None, *(getattr(store, f"stageList$default${i}")() for i in range(2, 6)))
        except Exception:  # noqa: BLE001  older signature
            seq = store.stageList(None)
        for i in range(seq.size()):
            st = seq.apply(i)
            sub, done = st.submissionTime(), st.completionTime()
            if not sub.isDefined() or not done.isDefined():
                continue
            a, b = sub.get().getTime(), done.get().getTime()
            if a >= t0_ms - 5 and b <= t1_ms + 5:
                out.append((a, b, int(st.numTasks())))
    except Exception:  # noqa: BLE001  the split is a nicety; never fail the run for it
        return []
    return sorted(out)


def batch_timings(
    progress: list, spans: list[tuple[int, int, int]], logs: dict[int, CommitLog]
) -> list[BatchTiming]:
    out = []
    for p in progress:
        rows = int(p["numInputRows"])
        if rows == 0:
            continue
        d = p["durationMs"]
        trig = int(d.get("triggerExecution", p.get("batchDuration", 0)))
        start = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() * 1000
        mine = [s for s in spans if start - 5 <= s[0] <= start + trig + 5]
        bid = int(p["batchId"])
        log = logs.get(bid)
        out.append(BatchTiming(
            bid, rows, trig, int(d.get("addBatch", 0)),
            sum(b - a for a, b, _ in mine) if mine else None, sum(n for _, _, n in mine) if mine else None,
            round(log.commit_s * 1000) if log else None,
        ))  # fmt: skip
    return out


def check_hoodie(path: str, inp: StreamInput) -> tuple[bool, str]:
    """Rows, distinct keys, sum of ts and completed commits, as hudi-rs reads the table."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from hudi import HudiReadOptions, HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(path).build()
    batches = table.read(HudiReadOptions(projection=["trip_id", "ts"]))
    t = pa.Table.from_batches(batches)
    n = t.num_rows
    distinct = pc.count_distinct(t.column("trip_id")).as_py()
    ts_sum = pc.sum(t.column("ts").cast(pa.int64())).as_py() or 0
    commits = len(table.get_timeline().get_completed_commits())
    want_commits = inp.batches + (1 if inp.seed_rows else 0)
    ok = n == inp.expect_rows and distinct == n and ts_sum == inp.expect_ts_sum and commits == want_commits
    return ok, (
        f"hudi-rs: {n:,} rows (want {inp.expect_rows:,}), {distinct:,} distinct keys, sum(ts) "
        f"{'matches' if ts_sum == inp.expect_ts_sum else 'DIFFERS'}, {commits} commits (want {want_commits}): "
        f"{'OK' if ok else 'MISMATCH'}"
    )


def hoodie_opts(operation: str) -> dict[str, str]:
    return {**HOODIE_BASE, "hoodie.datasource.write.operation": operation}


SINK_OPERATION = {"hoodie insert": "insert", "hoodie bulk_insert": "bulk_insert", "hoodie upsert": "upsert"}
# insert with small-file packing (append.mode=false, Hudi Spark's insert): the same stream, but
# every batch fills the small files of the earlier batches, rewriting them, instead of opening new
# file groups as a stream's insert does by default (Flink's append mode).  It shows the packing's
# cost, which grows with the data already written.
SINK_EXTRA = {"hoodie insert, packing": {"hoodie.datasource.write.append.mode": "false"}}
SINK_OPERATION["hoodie insert, packing"] = "insert"


class Bench:
    def __init__(self, args: argparse.Namespace, spark, scratch: str, tee: StderrTee):
        self.args, self.spark, self.scratch, self.tee = args, spark, scratch, tee
        self.runs: list[Run] = []
        self.failures: list[str] = []
        self.last_python_use = 0.0
        self.keepalive: StreamInput | None = None
        self._n = 0

    def log(self, msg: str) -> None:
        print(msg, flush=True)

    # -- one query

    def _query(self, sink: str, inp: StreamInput, out: str, ckpt: str):
        df = self.spark.readStream.schema(SPARK_SCHEMA).option("maxFilesPerTrigger", 1).parquet(inp.src_dir)
        w = df.writeStream.option("checkpointLocation", ckpt).trigger(availableNow=True)
        if sink == "parquet":
            return lambda: w.format("parquet").option("path", out).start()
        opts = {**hoodie_opts(SINK_OPERATION[sink]), **SINK_EXTRA.get(sink, {})}
        return lambda: w.format("hoodie").options(**opts).start(out)

    def _seed(self, inp: StreamInput, out: str) -> None:
        """The upsert stream's table before the stream: untimed, one batch bulk_insert (append:
        mode overwrite would make it a replacecommit)."""
        (self.spark.read.schema(SPARK_SCHEMA).parquet(inp.seed_dir).write.format("hoodie")
         .options(**hoodie_opts("bulk_insert")).mode("append").save(out))  # fmt: skip

    def run(self, sink: str, inp: StreamInput, part: str = "") -> Run:
        timed = bool(part)
        self._n += 1
        tag = f"{self._n:02d}_{sink.replace(' ', '_')}"
        out, ckpt = os.path.join(self.scratch, "out_" + tag), os.path.join(self.scratch, "ckpt_" + tag)
        res = Run(sink, inp, part)
        hoodie = sink.startswith("hoodie")
        try:
            if hoodie and inp.seed_rows:
                self._seed(inp, out)
            if timed:
                settle(self.spark)
                note = ""
                if self.args.wait_idle > 0:
                    waited, share = wait_until_quiet(self.args.wait_idle, self.args.busy_threshold)
                    if waited > 4:
                        note = f" (waited {waited:.0f} s for a quiet machine; others then at {share:.0%})"
                if hoodie:
                    self._keep_workers_warm()
            start = self._query(sink, inp, out, ckpt)
            label = f"{tag}:{inp.workload}:{inp.label}"
            self.tee.begin(label)
            with ProcessSampler(self.args.sample_interval) as sampler:
                t0_ms = time.time() * 1000
                t0 = time.perf_counter()
                q = start()
                q.awaitTermination()
                res.wall_s = time.perf_counter() - t0
                t1_ms = time.time() * 1000
            logs = self.tee.end(label)
            if hoodie:
                self.last_python_use = time.monotonic()
            res.probe = sampler.probe
            exc = q.exception()
            if exc is not None:
                raise RuntimeError(f"streaming query failed: {exc}")
            progress = list(q.recentProgress)
            res.batches = batch_timings(
                progress, stage_spans(self.spark, t0_ms, t1_ms) if timed else [], logs
            )
            res.rows_in = sum(b.rows for b in res.batches)
            st = dir_stats(out, metadata_dirs=(".hoodie", "_spark_metadata"))
            res.data_bytes, res.data_files = st.data_bytes, st.data_files
            if res.rows_in != inp.total_rows or len(res.batches) != inp.batches:
                res.ok = False
                res.check = f"MISMATCH: {len(res.batches)} batches, {res.rows_in:,} rows in"
            if hoodie and timed and not self.args.no_verify:
                ok, text = check_hoodie(out, inp)
                res.ok, res.check = res.ok and ok, (res.check + "; " if res.check else "") + text
            if timed:
                m = res.measured()
                p50 = percentile([b.trigger_ms for b in m], 0.5) if m else float("nan")
                self.log(
                    f"  {inp.workload:<6} {inp.label:>9} {sink:<18} {res.wall_s:7.2f} s, "
                    f"{res.rows_per_s:>10,.0f} rows/s, "
                    f"batch p50 {p50:,.0f} ms, CPU {res.probe.cpu_share(CPUS):.0%}, others "
                    f"{res.probe.other_share(CPUS):.0%}{note}" + (f"\n      {res.check}" if res.check else "")
                )
        except Exception:  # noqa: BLE001  a failing sink is reported with its traceback, the rest goes on
            tb = traceback.format_exc()
            res.error, res.ok = tb.strip().splitlines()[-1][:200], False
            self.failures.append(f"{sink} on {inp.workload} {inp.label}:\n{tb}")
            self.log(f"  {inp.workload:<6} {inp.label:>9} {sink:<18} FAILED: {res.error}")
            for q in self.spark.streams.active:
                q.stop()
        finally:
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(ckpt, ignore_errors=True)
        if timed:
            self.runs.append(res)
        return res

    def _keep_workers_warm(self) -> None:
        """Spark stops Python workers idle for 60 s; before a hoodie query after a long pause a
        tiny hoodie stream brings back the task workers and the streaming commit runner."""
        if self.keepalive is None or time.monotonic() - self.last_python_use < PYTHON_WORKER_IDLE_S:
            return
        self.run("hoodie insert", self.keepalive)
        self.last_python_use = time.monotonic()

    # -- the parts

    def new_input(self, workload: str, batch_rows: int, batches: int) -> StreamInput:
        self._n += 1
        root = os.path.join(self.scratch, f"in_{self._n:02d}_{workload}_{batch_rows}")
        inp = make_input(root, workload, batch_rows, batches, self.args.update_fraction,
                         self.args.seed_batches, seed=self.args.seed + self._n)  # fmt: skip
        self.log(
            f"input {workload} {inp.label}: generated in {inp.gen_s:.1f} s, "
            f"{sum(inp.file_bytes) / MiB:,.1f} MiB parquet ({inp.file_bytes[0] / MiB:,.2f} MiB per file, "
            f"{row_group_rows(batch_rows):,}-row groups, {self.input_tasks(inp)} read task(s) per batch)"
            + (f", seed {inp.seed_rows:,} rows, {inp.updates:,} updates in all" if inp.seed_rows else "")
        )
        return inp

    def input_tasks(self, inp: StreamInput) -> int:
        first = os.path.join(inp.src_dir, min(os.listdir(inp.src_dir)))
        return self.spark.read.schema(SPARK_SCHEMA).parquet(first).rdd.getNumPartitions()

    def warm_up(self) -> None:
        t0 = time.perf_counter()
        rows, batches = (2_000, 2) if self.args.quick else (5_000, 3)
        ins = self.new_input("insert", rows, batches)
        ups = self.new_input("upsert", rows, batches)
        for sink in ("parquet", "hoodie insert", "hoodie bulk_insert"):
            self.run(sink, ins)
        self.run("hoodie upsert", ups)
        shutil.rmtree(os.path.dirname(ups.src_dir), ignore_errors=True)
        self.keepalive = ins
        self.last_python_use = time.monotonic()
        self.log(f"warm-up: {batches} x {rows:,} rows through every sink in {time.perf_counter() - t0:.1f} s")

    def part(self, name: str, batch_rows: int, batches: int) -> None:
        sinks = {
            "insert": ["parquet", "hoodie insert"]
            + (["hoodie insert, packing", "hoodie bulk_insert"] if name == "throughput" else []),
            "upsert": ["parquet", "hoodie upsert"],
        }
        for workload in ("insert", "upsert"):
            inp = self.new_input(workload, batch_rows, batches)
            for _ in range(self.args.repeat if name == "throughput" else 1):
                for sink in sinks[workload]:
                    self.run(sink, inp, name)
            shutil.rmtree(os.path.dirname(inp.src_dir), ignore_errors=True)


# -- report --------------------------------------------------------------------------------------


def _ms(v: float | None) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:,.0f}"


def _best(runs: list[Run]) -> Run | None:
    ok = [r for r in runs if not r.error]
    return max(ok, key=lambda r: r.rows_per_s) if ok else None


def grouped(runs: list[Run], part: str) -> list[tuple[StreamInput, str, list[Run]]]:
    out: dict[tuple[int, str], tuple[StreamInput, str, list[Run]]] = {}
    for r in runs:
        if r.part != part:
            continue
        out.setdefault((id(r.inp), r.sink), (r.inp, r.sink, []))[2].append(r)
    return list(out.values())


def throughput_rows(runs: list[Run]) -> list[dict[str, str]]:
    groups = grouped(runs, "throughput")
    rows = []
    for inp, sink, rs in groups:
        best = _best(rs)
        ref = _best(next((g[2] for g in groups if g[0] is inp and g[1] == "parquet"), []))
        if best is None:
            rows.append(
                {"workload": inp.workload, "batches x rows": inp.label, "sink": sink, "wall s": "FAILED"}
            )
            continue
        m = [b.trigger_ms for r in rs if not r.error for b in r.measured()]
        ratio = best.rows_per_s / ref.rows_per_s if ref and sink != "parquet" else None
        target = "-"
        if ratio is not None and inp.workload == "insert":
            target = "meets" if ratio >= TARGET_RATIO else "BELOW"
        rows.append(
            {
                "workload": inp.workload,
                "batches x rows": inp.label,
                "sink": sink,
                "runs": str(len(rs)),
                "wall s": f"{best.wall_s:.2f}",
                "median s": f"{statistics.median(r.wall_s for r in rs if not r.error):.2f}",
                "rows/s": f"{best.rows_per_s:,.0f}",
                "x parquet": f"{ratio:.2f}" if ratio is not None else "-",
                f"target {TARGET_RATIO}": target,
                "p50 ms": _ms(percentile(m, 0.5) if m else None),
                "p95 ms": _ms(percentile(m, 0.95) if m else None),
                "CPU %": f"{100 * best.probe.cpu_share(CPUS):.0f}" if best.probe else "-",
                "others %": f"{100 * max(r.probe.other_share(CPUS) for r in rs if r.probe):.0f}",
                "data MiB": f"{best.data_bytes / MiB:,.1f}",
                "files": str(best.data_files),
                "check": "OK"
                if all(r.ok for r in rs) and sink != "parquet"
                else ("rows OK" if all(r.ok for r in rs) else "MISMATCH"),
            }
        )
    return rows


def latency_rows(runs: list[Run]) -> list[dict[str, str]]:
    groups = grouped(runs, "latency")
    rows = []
    for inp, sink, rs in sorted(groups, key=lambda g: (g[0].batch_rows, g[0].workload)):
        r = rs[0]
        if r.error:
            rows.append(
                {
                    "rows/batch": human_rows(inp.batch_rows),
                    "workload": inp.workload,
                    "sink": sink,
                    "p50 ms": "FAILED",
                }
            )
            continue
        m = r.measured()
        trig = [b.trigger_ms for b in m]
        ref = next((g[2][0] for g in groups if g[0] is inp and g[1] == "parquet" and not g[2][0].error), None)
        ref_p50 = percentile([b.trigger_ms for b in ref.measured()], 0.5) if ref else None
        p50 = percentile(trig, 0.5)
        stage = [b.stage_ms for b in m if b.stage_ms is not None]
        commit = [b.commit_ms for b in m if b.commit_ms is not None]
        in_add = [b.add_batch_ms - b.stage_ms - (b.commit_ms or 0) for b in m if b.stage_ms is not None]
        outside = [b.trigger_ms - b.add_batch_ms for b in m]
        tasks = sorted({b.tasks for b in m if b.tasks is not None})
        rows.append({
            "rows/batch": human_rows(inp.batch_rows),
            "workload": inp.workload,
            "sink": sink,
            "batches": f"{len(m)}/{len(r.batches)}",
            "p50 ms": _ms(p50),
            "p95 ms": _ms(percentile(trig, 0.95)),
            "max ms": _ms(max(trig) if trig else None),
            "p50 x parquet": f"{p50 / ref_p50:.2f}" if ref_p50 and sink != "parquet" else "-",
            "rows/s at p50": f"{inp.batch_rows / p50 * 1000:,.0f}" if p50 and not math.isnan(p50) else "-",
            "addBatch p50": _ms(percentile([b.add_batch_ms for b in m], 0.5) if m else None),
            "stage p50": _ms(percentile(stage, 0.5) if stage else None),
            "tasks": ",".join(map(str, tasks)) or "-",
            "commit p50": _ms(percentile(commit, 0.5) if commit else None),
            "addBatch rest p50": _ms(percentile(in_add, 0.5) if in_add else None),
            "outside addBatch p50": _ms(percentile(outside, 0.5) if outside else None),
            "wall s": f"{r.wall_s:.1f}",
            "others %": f"{100 * r.probe.other_share(CPUS):.0f}" if r.probe else "-",
        })  # fmt: skip
    return rows


def commit_detail(runs: list[Run]) -> list[str]:
    """Per hoodie query: the sink's own per-batch numbers (files written, MB, commit s)."""
    lines = []
    for r in runs:
        if not r.sink.startswith("hoodie") or r.error:
            continue
        parts = []
        for b in r.batches:
            parts.append(
                f"{b.batch_id}:{b.trigger_ms / 1000:.2f}s(addBatch {b.add_batch_ms / 1000:.2f}"
                + (f", stage {b.stage_ms / 1000:.2f}" if b.stage_ms is not None else "")
                + (f", commit {b.commit_ms / 1000:.2f}" if b.commit_ms is not None else "")
                + ")"
            )
        lines.append(f"{r.part} {r.inp.workload} {r.inp.label} {r.sink}: " + " ".join(parts))
    return lines


def print_report(bench: Bench) -> None:
    runs = bench.runs
    tp = throughput_rows(runs)
    if tp:
        print("\n## Throughput (rows / wall s from start() to awaitTermination(); best run)\n")
        print(format_table(tp))
        print(
            f"x parquet = hoodie rows/s / parquet-sink rows/s on the same input; target {TARGET_RATIO} applies "
            "to the insert operations.  p50/p95: triggerExecution of the batches after the first.  CPU % = "
            f"this session's CPU / (wall x {CPUS} cores); others % = other processes on the machine (worst run).  "
            "data MiB/files: parquet data files on disk at the end (hoodie upsert: every file-slice version)."
        )
    lat = latency_rows(runs)
    if lat:
        print("\n## Latency per micro-batch (ms, first batch of each query skipped)\n")
        print(format_table(lat))
        print(
            "batches = measured/all; p50 x parquet = this p50 / parquet-sink p50 on the same input; addBatch = "
            "Spark's durationMs.addBatch (write job + sink commit); stage = the batch's Spark stage(s) from "
            "the status store (the write tasks; tasks = their count); commit = the hoodie sink's own commit "
            "time (its log line); addBatch rest = addBatch - stage - commit (job scheduling, and for hoodie the "
            "Python commit process: start or reuse, unpickling, loading the write context; for parquet its "
            "whole commit: _spark_metadata log); outside addBatch = triggerExecution - addBatch (Spark's own "
            "per-batch work: file listing, offset log, planning, commit log)."
        )
    detail = commit_detail(runs)
    if detail:
        print(
            "\nPer batch (batch id: triggerExecution s (addBatch, write stage, hoodie commit)), hoodie queries:"
        )
        for line in detail:
            print("  " + line)


def parse_sizes(specs: list[str]) -> list[tuple[int, int]]:
    out = []
    for s in specs:
        rows, _, batches = s.lower().partition("x")
        out.append((int(float(rows)), int(batches)))
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="streaming benchmark: writeStream.format('hoodie') vs the parquet streaming sink",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument(
        "--throughput", default="500000x10", help="ROWSxBATCHES of the throughput part ('' = skip)"
    )
    ap.add_argument(
        "--latency", nargs="*", default=["10000x10", "100000x10", "1000000x5"],
        help="ROWSxBATCHES sizes of the latency part (none = skip)",
    )  # fmt: skip
    ap.add_argument(
        "--repeat", type=int, default=1, help="queries per sink in the throughput part (best shown)"
    )
    ap.add_argument(
        "--quick", action="store_true", help="smoke test: throughput 20000x4, latency 5000x4 20000x4"
    )
    ap.add_argument("--update-fraction", type=float, default=0.1, help="share of updates in an upsert batch")
    ap.add_argument(
        "--seed-batches", type=int, default=1, help="batches of rows in the upsert table before the stream"
    )
    ap.add_argument("--seed", type=int, default=42, help="random seed of the generated input")
    ap.add_argument(
        "--output-dir", default=None, help="parent of the scratch dir (default: a temp dir under /tmp)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the scratch dir afterwards")
    ap.add_argument("--driver-memory", default="6g", help="spark.driver.memory")
    ap.add_argument("--sample-interval", type=float, default=0.5, help="seconds between /proc samples")
    ap.add_argument("--wait-idle", type=float, default=6.0,
                    help="before each timed query wait up to this many s for other processes to calm down")  # fmt: skip
    ap.add_argument("--busy-threshold", type=float, default=0.15, help="share of all CPUs counted as busy")
    ap.add_argument("--no-verify", action="store_true", help="skip the hudi-rs check of hoodie tables")
    args = ap.parse_args(argv)
    if args.quick:
        args.throughput, args.latency = "20000x4", ["5000x4", "20000x4"]
    args.throughput_size = parse_sizes([args.throughput])[0] if args.throughput else None
    args.latency_sizes = parse_sizes(args.latency or [])
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import pyarrow
    import pyspark

    tee = StderrTee()  # before the JVM starts: it inherits the pipe as its stderr
    settings = SparkSettings(driver_memory=args.driver_memory)
    started = time.perf_counter()
    spark = build_spark(settings, "bench_streaming")
    bench: Bench | None = None
    try:
        with scratch_dir(args.output_dir, "bench_streaming_", keep=args.keep) as scratch:
            from hoodie_sink.datasource.source import HoodieDataSource

            spark.dataSource.register(HoodieDataSource)  # this checkout; import errors surface here
            print(f"bench_streaming: throughput={args.throughput or '-'} latency={' '.join(args.latency) or '-'} "
                  f"scratch={scratch}")  # fmt: skip
            print(f"pyspark {pyspark.__version__}, pyarrow {pyarrow.__version__}, python {sys.version.split()[0]}, "
                  f"{CPUS} CPUs, load avg {os.getloadavg()[0]:.1f}")  # fmt: skip
            print(
                f"spark: master={settings.master}, "
                + ", ".join(f"{k}={v}" for k, v in sorted(settings.conf().items()))
            )
            print(jvm_info(spark).describe())
            print(f"hoodie_sink: {source_version(REPO_DIR)}")
            print(f"source: readStream.parquet, maxFilesPerTrigger=1, trigger availableNow; upsert batches "
                  f"{args.update_fraction:.0%} updates, seed {args.seed_batches} batch(es)", flush=True)  # fmt: skip
            bench = Bench(args, spark, scratch, tee)
            bench.warm_up()
            if args.throughput_size:
                print("\npart 1: throughput", flush=True)
                bench.part("throughput", *args.throughput_size)
            if args.latency_sizes:
                print("\npart 2: latency", flush=True)
                for rows, batches in args.latency_sizes:
                    bench.part("latency", rows, batches)
    finally:
        try:
            if bench is not None:
                print_report(bench)
        finally:
            spark.stop()
            print(f"\ntotal wall time {time.perf_counter() - started:.0f} s", flush=True)
            tee.close()
    if bench is not None and bench.failures:
        print("\nhoodie query FAILED:\n" + "\n".join(bench.failures), file=sys.stderr)
        return 1
    return 0 if bench is not None and all(r.ok for r in bench.runs) else 1


if __name__ == "__main__":
    sys.exit(main())
