"""Benchmark: a streaming soak with Hudi's metadata table on (issue 28), through Spark.

`--batches` (300) micro-batches of a CDC-like change stream go through
`df.writeStream.format("hoodie")` into a merge-on-read table (`--cow`: copy-on-write) with
`hoodie.metadata.enable=true`, and the same stream into a second table with it false: the
reference, measured in the same run.  Every table service runs at its defaults: the data table's
inline compaction (MOR, every 5 deltacommits), cleaning (10 commits retained) and archival (20-30
commits kept); the metadata table's compaction (every 10 deltacommits), cleaning and archival.
The MOR tables use the bucket index (2 buckets per partition), so changes land in log files and
the data compaction runs (`--index bloom`: with this table's small file groups every upsert
rewrites them as base files, as Java does below hoodie.parquet.small.file.limit); COW: bloom.

Input: a folder of one parquet file per micro-batch (`spark.readStream.parquet`,
maxFilesPerTrigger 1), generated up front from a seeded generator, so the stream and the model
are the same every run: `--rows` (2,000) changes per batch over a fixed space of `--keys`
(20,000) keys in `--partitions` (4) partitions (key % partitions), about 5% of them deletes of live
keys (`_hoodie_is_deleted`), the rest upserts; no key twice in a batch; `ts` grows with arrival.

The stream runs in chunks of `--every` (25) micro-batches: the chunk's files are moved into the
source folder and a query with trigger availableNow and the table's checkpoint drains them.  The
two tables' chunks alternate (with, without, with, ...), so a slow phase of the machine hits both.
Between chunks no write is running, so storage is measured at rest: the metadata table's files and
bytes (everything under .hoodie/metadata/ but its own .hoodie/ folder), its timeline files (the
files directly in .hoodie/metadata/.hoodie/), the data table's active timeline files (directly in
.hoodie/), and the chunk's micro-batch durations (Spark's progress: addBatch, which holds our
write, commit and services, and triggerExecution).

Prints the checkpoints as a table, a verdict on boundedness (the largest metadata-table files and
bytes over the second half of the checkpoints vs the first half: linear growth would double them;
not judged under 100 batches), the p50/p95 per-batch latency with and without and their ratio
(the first micro-batch of each table, which creates it, is left out).  At the end both tables
are read back with our reader (hoodie_sink.read) and compared with the model (keys and their ts),
and hoodie_sink.table.services.validation.validate_table must report no violation.

    PYTHONPATH=. PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/bench_metadata_stream_soak.py
    ... --quick        (20 batches, a checkpoint every 5: a smoke run)
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_DIR)  # hoodie_sink and benchmarks/ of this checkout, when run as a script

from benchmarks.common import (  # noqa: E402
    SparkSettings,
    build_spark,
    format_table,
    percentile,
    scratch_dir,
    source_version,
)

DDL = "id LONG, part STRING, ts LONG, fare DOUBLE, note STRING, _hoodie_is_deleted BOOLEAN"
BOUNDED_RATIO = 1.3  # max over the second half / max over the first half; linear growth gives ~2
# The metadata table grows until its first compaction (10 deltacommits) and cleaning, its
# timeline until archival (past 30 of the data table's commits, and 3 files per instant): a
# shorter run (--quick) is a smoke run, its first half is the warm-up.
MIN_BATCHES_JUDGED = 100
DELETE_SHARE = 0.05  # of the changes to live keys
# The merge-on-read default is the bucket index: every change of a file group goes to a log file,
# so the data table's compaction runs.  With the bloom index Hudi rewrites a file group below
# hoodie.parquet.small.file.limit (100 MB) as a new base file instead of logging to it (as Java's
# MOR upsert partitioner does), and this table's file groups (~0.5 MB) would never get a log.
BUCKETS = 2


def table_options(table_type: str, index: str, metadata: bool) -> dict[str, str]:
    return {
        "hoodie.table.name": "soak",
        "hoodie.index.type": index,
        "hoodie.bucket.index.num.buckets": str(BUCKETS),
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "part",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.metadata.enable": str(metadata).lower(),
    }


# -- the change stream and its model (untimed) -------------------------------------------------


def make_changes(
    staging: Path, batches: int, rows: int, keys: int, partitions: int, seed: int
) -> dict[int, int]:
    """One parquet file per micro-batch in `staging`; returns the model: live key -> its ts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    staging.mkdir(parents=True)
    model: dict[int, int] = {}
    ts = 0
    for b in range(batches):
        ids = rng.sample(range(keys), rows)  # no key twice in a batch
        cols: dict[str, list] = {c: [] for c in ("id", "part", "ts", "fare", "note", "_hoodie_is_deleted")}
        for i in ids:
            ts += 1
            deleted = i in model and rng.random() < DELETE_SHARE
            cols["id"].append(i)
            cols["part"].append(f"p{i % partitions}")
            cols["ts"].append(ts)
            cols["fare"].append(round(rng.uniform(5, 80), 2))
            cols["note"].append("x" * 40)
            cols["_hoodie_is_deleted"].append(deleted)
            if deleted:
                del model[i]
            else:
                model[i] = ts
        pq.write_table(pa.table(cols), staging / f"batch-{b:05d}.parquet")
    return model


def feed(staging: Path, src: Path, first: int, last: int) -> None:
    """Move batches [first, last) into the source folder.  Spark's file source takes the oldest
    file first (modification time): the batch number is the time."""
    src.mkdir(exist_ok=True)
    for b in range(first, last):
        name = f"batch-{b:05d}.parquet"
        shutil.copyfile(staging / name, src / name)
        os.utime(src / name, (1_700_000_000 + b, 1_700_000_000 + b))


# -- measuring ---------------------------------------------------------------------------------


def files_and_bytes(root: Path, skip: Path | None = None) -> tuple[int, int]:
    n = size = 0
    for dirpath, dirs, names in os.walk(root):
        if skip is not None:
            dirs[:] = [d for d in dirs if Path(dirpath, d) != skip]
        for name in names:
            n += 1
            size += os.path.getsize(os.path.join(dirpath, name))
    return n, size


def timeline_files(hoodie_dir: Path) -> int:
    """Files directly in a .hoodie/ folder (instant files; hoodie.properties and folders not)."""
    if not hoodie_dir.is_dir():
        return 0
    return sum(1 for p in hoodie_dir.iterdir() if p.is_file() and p.name[:1].isdigit())


@dataclass(frozen=True)
class Checkpoint:
    batches: int
    mdt_files: int
    mdt_bytes: int
    mdt_timeline: int
    data_timeline: int
    data_files: int
    data_bytes: int


def checkpoint(path: Path, batches: int) -> Checkpoint:
    mdt = path / ".hoodie" / "metadata"
    mdt_files, mdt_bytes = files_and_bytes(mdt, skip=mdt / ".hoodie") if mdt.is_dir() else (0, 0)
    data_files, data_bytes = files_and_bytes(path, skip=path / ".hoodie")
    return Checkpoint(
        batches, mdt_files, mdt_bytes, timeline_files(mdt / ".hoodie"), timeline_files(path / ".hoodie"),
        data_files, data_bytes,
    )  # fmt: skip


@dataclass
class Run:
    name: str
    path: Path
    ckpt: Path
    src: Path
    options: dict[str, str]
    add_batch_ms: list[int] = field(default_factory=list)
    trigger_ms: list[int] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    wall_s: float = 0.0


def drain(spark, run: Run, expect: int) -> None:
    """One availableNow query over what the source folder holds now; `expect` micro-batches."""
    df = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(run.src))
    writer = (
        df.writeStream.format("hoodie").options(**run.options)
        .option("checkpointLocation", str(run.ckpt)).trigger(availableNow=True)
    )  # fmt: skip
    t0 = time.perf_counter()
    q = writer.start(str(run.path))
    q.awaitTermination()
    run.wall_s += time.perf_counter() - t0
    if q.exception() is not None:
        raise RuntimeError(f"{run.name}: the streaming query failed: {q.exception()}")
    progress = [p for p in q.recentProgress if int(p["numInputRows"]) > 0]
    if len(progress) != expect:
        raise RuntimeError(f"{run.name}: {len(progress)} micro-batches with rows, expected {expect}")
    run.add_batch_ms += [int(p["durationMs"].get("addBatch", 0)) for p in progress]
    run.trigger_ms += [int(p["durationMs"].get("triggerExecution", 0)) for p in progress]


# -- checking ------------------------------------------------------------------------------------


def check(run: Run, model: dict[int, int]) -> list[str]:
    """Our reader against the model, and the validator; the problems found."""
    import hoodie_sink
    from hoodie_sink.table.services.validation import validate_table

    problems = []
    t = hoodie_sink.read(str(run.path), columns=["id", "ts"])
    got = dict(zip(t.column("id").to_pylist(), t.column("ts").to_pylist(), strict=True))
    if t.num_rows != len(model):
        problems.append(f"{t.num_rows:,} rows read, the model has {len(model):,} keys")
    if got != model:
        wrong = sorted(k for k in set(got) | set(model) if got.get(k) != model.get(k))
        problems.append(f"{len(wrong):,} keys differ from the model, e.g. {wrong[:5]}")
    problems += [f"validate_table: {v.check} {v.subject}: {v.detail}" for v in validate_table(str(run.path))]
    return problems


# -- report ----------------------------------------------------------------------------------------


def checkpoint_rows(on: Run, off: Run, every: int) -> list[dict[str, str]]:
    rows = []
    for c, r in zip(on.checkpoints, off.checkpoints, strict=True):
        first = c.batches - every
        rows.append({
            "batches": str(c.batches),
            "mdt files": str(c.mdt_files),
            "mdt KB": f"{c.mdt_bytes / 1000:,.0f}",
            "mdt timeline files": str(c.mdt_timeline),
            "data timeline files": str(c.data_timeline),
            "data timeline files (without)": str(r.data_timeline),
            "data files": str(c.data_files),
            "data MB": f"{c.data_bytes / 1e6:,.1f}",
            "addBatch p50 ms": f"{percentile(on.add_batch_ms[first:c.batches], 0.5):,.0f}",
            "addBatch p50 ms (without)": f"{percentile(off.add_batch_ms[first:c.batches], 0.5):,.0f}",
        })  # fmt: skip
    return rows


def bounded(checkpoints: list[Checkpoint], what: str) -> tuple[float, float, float]:
    half = max(1, len(checkpoints) // 2)
    if len(checkpoints) == 1:  # a smoke run: nothing to compare
        return getattr(checkpoints[0], what), getattr(checkpoints[0], what), 1.0
    first = max(getattr(c, what) for c in checkpoints[:half])
    second = max(getattr(c, what) for c in checkpoints[half:])
    return first, second, second / first if first else float("inf")


def latency_rows(on: Run, off: Run) -> list[dict[str, str]]:
    rows = []
    for what, label in (("add_batch_ms", "addBatch"), ("trigger_ms", "triggerExecution")):
        a, b = getattr(on, what)[1:], getattr(off, what)[1:]  # the first batch creates the table
        row = {"per micro-batch": label}
        for q in (0.5, 0.95):
            pa_, pb = percentile(a, q), percentile(b, q)
            tag = f"p{int(q * 100)}"
            row |= {f"{tag} ms with": f"{pa_:,.0f}", f"{tag} ms without": f"{pb:,.0f}",
                    f"{tag} with/without": f"{pa_ / pb:.2f}x"}  # fmt: skip
        rows.append(row)
    return rows


# -- main ------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("--batches", type=int, default=300, help="micro-batches per stream")
    ap.add_argument("--every", type=int, default=25, help="micro-batches between checkpoints")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 20 batches, a checkpoint every 5")
    ap.add_argument("--rows", type=int, default=2_000, help="changes per micro-batch")
    ap.add_argument("--keys", type=int, default=20_000, help="the key space")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--cow", action="store_true", help="copy-on-write tables (default merge-on-read)")
    ap.add_argument("--index", choices=("bucket", "bloom"), default=None,
                    help=f"hoodie.index.type (default: bucket, {BUCKETS} buckets, for MOR; bloom for COW)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--scratch", default=None, help="parent of the scratch dir (default: under /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch dir afterwards")
    args = ap.parse_args(argv)
    if args.quick:
        args.batches, args.every = 20, 5
    args.index = args.index or ("bloom" if args.cow else "bucket")
    if args.batches % args.every:
        ap.error("--batches must be a multiple of --every")
    return args


def soak(spark, args: argparse.Namespace, root: Path) -> bool:
    """The two streams, the report and the checks; True when bounded (if judged) and correct."""
    table_type = "COPY_ON_WRITE" if args.cow else "MERGE_ON_READ"
    started = time.perf_counter()
    print(f"bench_metadata_stream_soak: {args.batches} micro-batches x {args.rows:,} changes over "
          f"{args.keys:,} keys in {args.partitions} partitions, {table_type}, {args.index} index, checkpoint every "
          f"{args.every}; scratch {root}")  # fmt: skip
    print(f"hoodie_sink: {source_version(REPO_DIR)}", flush=True)
    model = make_changes(root / "staging", args.batches, args.rows, args.keys, args.partitions, args.seed)
    print(f"change stream generated: {len(model):,} live keys at the end", flush=True)
    runs = {
        name: Run(name, root / name, root / f"{name}-ckpt", root / f"{name}-src",
                  table_options(table_type, args.index, metadata))
        for name, metadata in (("with", True), ("without", False))
    }  # fmt: skip
    for first in range(0, args.batches, args.every):
        last = first + args.every
        for run in runs.values():  # alternating: a slow phase of the machine hits both tables
            feed(root / "staging", run.src, first, last)
            drain(spark, run, args.every)
            run.checkpoints.append(checkpoint(run.path, last))
        c, w = runs["with"].checkpoints[-1], runs["without"]
        print(f"  {last:>4} batches: mdt {c.mdt_files} files {c.mdt_bytes / 1000:,.0f} KB, "
              f"mdt timeline {c.mdt_timeline}, data timeline {c.data_timeline}; addBatch p50 "
              f"{percentile(runs['with'].add_batch_ms[first:], 0.5):,.0f} ms with, "
              f"{percentile(w.add_batch_ms[first:], 0.5):,.0f} ms without "
              f"({time.perf_counter() - started:,.0f} s)", flush=True)  # fmt: skip
    on, off = runs["with"], runs["without"]
    print("\n" + format_table(checkpoint_rows(on, off, args.every)))
    print("\n" + format_table(latency_rows(on, off)))
    print(f"\nwall: {on.wall_s:,.0f} s with, {off.wall_s:,.0f} s without")
    verdicts = []
    judged = args.batches >= MIN_BATCHES_JUDGED
    for what, unit in (("mdt_files", "files"), ("mdt_bytes", "bytes"), ("mdt_timeline", "timeline files")):
        a, b, ratio = bounded(on.checkpoints, what)
        verdict = "bounded" if ratio <= BOUNDED_RATIO else "GROWING"
        if judged:
            verdicts.append(ratio <= BOUNDED_RATIO)
        else:
            verdict = f"not judged (under {MIN_BATCHES_JUDGED} batches the services have not all run)"
        print(f"metadata table {unit}: max {a:,.0f} over the first half, {b:,.0f} over the second "
              f"({ratio:.2f}x): {verdict}")  # fmt: skip
    problems = {run.name: check(run, model) for run in runs.values()}
    for name, found in problems.items():
        state = "equals the model, validate_table reports nothing" if not found else "; ".join(found)
        print(f"table {name} the metadata table: {state}")
    ok = all(verdicts) and not any(problems.values())
    print(f"\nverdict: {'bounded and correct' if ok else 'FAILED'} "
          f"(total {time.perf_counter() - started:,.0f} s)")  # fmt: skip
    return ok


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = build_spark(SparkSettings(master="local[2]", driver_memory="2g"), "bench_metadata_stream_soak")
    import hoodie_sink

    hoodie_sink.register(spark)
    try:
        with scratch_dir(args.scratch, "bench-mdt-soak-", keep=args.keep) as scratch:
            ok = soak(spark, args, Path(scratch))
    finally:
        spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
