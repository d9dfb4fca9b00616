"""Profile: where the engine's time of one small streaming micro-batch goes, without Spark.

Replays, in one process, exactly the engine calls Spark makes for a micro-batch of the `hoodie`
stream sink (datasource/stream_writer.py):
  construct   HoodieStreamWriter(options, schema) - Spark builds it twice per micro-batch
  begin       the first task with rows: streaming.begin_batch (lock, checkpoint check,
              coordinator.begin, the pickled context published through storage)
  load ctx    every other task: streaming.load_context (here: one, as with 2 read tasks)
  task        client.write_task of the batch's rows (one task here)
  commit      HoodieStreamWriter.commit on the driver (context, checkpoint check, merge at
              commit, publish, checkpoint carried forward, inline services, forget the batch)
on tables with a short and a long history (built as bench_microbatch.py builds them), and counts
what each phase asks of storage, through a counting wrapper around every `Storage` method
(monkeypatched here: production code is untouched), with the timeline loads (listings of
`.hoodie/`) and reads of commit files broken out, plus the calls to `Timeline.load` and
`FileSystemView.load`.  --cprofile prints the top functions of begin and commit.

Run: PYTHONPATH=$PWD .venv/bin/python benchmarks/profile_microbatch.py
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_microbatch import STREAM_ID0, build_table, opts  # noqa: E402
from bench_streaming import trips_table  # noqa: E402

_COMMIT_FILE = re.compile(r"^\.hoodie/\d+\.(commit|deltacommit|replacecommit)$")
_TIMELINE_FILE = re.compile(r"^\.hoodie/\d+\.")


def kind_of(method: str, rel: str) -> str:
    """A storage call's category: what a reader of the profile wants counted."""
    rel = rel or ""
    if method in ("list_dir", "list_names") and rel.rstrip("/") == ".hoodie":
        return "timeline listing (.hoodie/)"
    if method == "walk_files" and rel in ("",):
        return "table walk (all files)"
    if _COMMIT_FILE.match(rel):
        return "completed commit file"
    if _TIMELINE_FILE.match(rel):
        return "requested/inflight file"
    if rel.startswith(".hoodie/.temp/streaming"):
        return "streaming ctx/lock"
    if rel.startswith(".hoodie/.heartbeat"):
        return "heartbeat"
    if rel.startswith(".hoodie/.temp"):
        return "markers/claims"
    if rel.startswith(".hoodie"):
        return "other .hoodie"
    return "data/partitions"


class Recorder:
    def __init__(self) -> None:
        self.calls: Counter = Counter()  # (method, kind) -> calls
        self.secs: defaultdict = defaultdict(float)  # (method, kind) -> seconds
        self.loads: Counter = Counter()  # Timeline.load, FileSystemView.load, ...
        self.depth = 0

    def reset(self) -> None:
        self.calls.clear()
        self.secs.clear()
        self.loads.clear()


REC = Recorder()


def instrument() -> None:
    """Count every Storage call (outermost only: exists() inside create_if_absent is not double
    counted) and the loads of timeline and file-system view."""
    from hoodie_sink.table.format.fs_view import FileSystemView
    from hoodie_sink.table.format.timeline.timeline import Timeline
    from hoodie_sink.table.storage import Storage

    def wrap(name):
        orig = getattr(Storage, name)

        def counted(self, *a, **k):
            if REC.depth:
                return orig(self, *a, **k)
            REC.depth += 1
            t0 = time.perf_counter()
            try:
                out = orig(self, *a, **k)
                if name == "walk_files":
                    out = list(out)
                return out
            finally:
                REC.depth -= 1
                key = (name, kind_of(name, a[0] if a else ""))
                REC.calls[key] += 1
                REC.secs[key] += time.perf_counter() - t0

        setattr(Storage, name, counted)

    for name in ("exists", "is_dir", "size", "list_dir", "list_names", "walk_files", "read_bytes",
                 "open_input_file", "mkdirs", "open_output", "write_bytes", "write_atomic",
                 "create_if_absent", "delete", "delete_dir"):  # fmt: skip
        wrap(name)

    def count_static(cls, name, label):
        orig = getattr(cls, name)

        def counted(*a, **k):
            REC.loads[label] += 1
            return orig(*a, **k)

        setattr(cls, name, staticmethod(counted))

    count_static(Timeline, "load", "Timeline.load")
    try:  # the write's one load of the timeline (since issue 9)
        from hoodie_sink.table.format.timeline.timeline import ActiveTimeline

        count_static(ActiveTimeline, "load", "ActiveTimeline.load")
    except ImportError:
        pass
    count_static(FileSystemView, "load", "FileSystemView.load")


@contextmanager
def phase(results: dict, name: str, prof: cProfile.Profile | None = None):
    REC.reset()
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    try:
        yield
    finally:
        if prof:
            prof.disable()
        entry = results.setdefault(
            name, {"secs": [], "calls": Counter(), "loads": Counter(), "io": defaultdict(float)}
        )
        entry["secs"].append(time.perf_counter() - t0)
        entry["calls"] = REC.calls.copy()  # the last batch's counts (they do not vary batch to batch)
        entry["loads"] = REC.loads.copy()
        entry["io"] = dict(REC.secs)


def micro_batches(path: str, operation: str, batches: int, rows: int, seed_rows: int, rng, profs) -> dict:
    import numpy as np
    from pyspark.sql.pandas.types import from_arrow_schema

    from hoodie_sink.datasource.stream_writer import HoodieStreamWriter, StreamCommitMessage
    from hoodie_sink.table import client
    from hoodie_sink.table.write import streaming
    from hoodie_sink.table.write.context import TaskIdentity

    schema = from_arrow_schema(trips_table(np.arange(1, dtype=np.int64), 0, rng)[0].schema)
    options = {**{k.lower(): v for k, v in opts(operation).items()}, "path": path,
               "checkpointlocation": os.path.join(path + "_ckpt")}  # fmt: skip
    results: dict = {}
    next_id = STREAM_ID0
    for b in range(batches):
        n_upd = rows // 10 if operation == "upsert" else 0
        ids = np.arange(next_id, next_id + rows - n_upd, dtype=np.int64)
        next_id += len(ids)
        if n_upd:
            ids = np.concatenate([rng.choice(seed_rows, n_upd, replace=False), ids])
        data, _ = trips_table(ids, b + 2, rng)
        with phase(results, "construct x2"):
            writer = HoodieStreamWriter(options, schema, False)
            HoodieStreamWriter(options, schema, False)
        ref = streaming.BatchRef(writer.identifier, b, "run")
        with phase(results, "begin (first task)", profs.get("begin")):
            ctx = streaming.begin_batch(writer.cfg, writer.arrow_schema, ref)
        with phase(results, "load ctx (other task)"):
            streaming.load_context(ctx.storage, ref)
        with phase(results, "task write"):
            result = client.write_task(ctx, TaskIdentity(), data.to_batches())
        with phase(results, "commit (driver)", profs.get("commit")):
            writer.commit([StreamCommitMessage(ref, result, rows=result.num_records)], b)
    return results


def print_results(label: str, results: dict, skip: int) -> None:
    print(f"\n== {label}")
    total = 0.0
    for name, e in results.items():
        secs = e["secs"][skip:] or e["secs"]
        med = statistics.median(secs) * 1000
        total += med
        loads = ", ".join(f"{k} x{v}" for k, v in sorted(e["loads"].items())) or "-"
        print(f"  {name:<24} p50 {med:8.1f} ms   loads: {loads}")
        by_kind: Counter = Counter()
        secs_kind: defaultdict = defaultdict(float)
        for (method, kind), n in e["calls"].items():
            by_kind[f"{kind}: {method}"] += n
            secs_kind[f"{kind}: {method}"] += e["io"].get((method, kind), 0.0)
        for k, n in sorted(by_kind.items()):
            print(f"      {n:5d} x {k:<50} {secs_kind[k] * 1000:8.1f} ms")
    print(f"  {'sum of p50s':<24}     {total:8.1f} ms")


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--histories", default="10,1000")
    ap.add_argument("--operations", default="insert,upsert")
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--skip", type=int, default=1, help="first batches not counted in the p50")
    ap.add_argument("--batch-rows", type=int, default=5_000)
    ap.add_argument("--seed-rows", type=int, default=50_000)
    ap.add_argument("--cprofile", action="store_true", help="top functions of begin and commit")
    ap.add_argument("--output-dir", default=None)
    args = ap.parse_args(argv)
    instrument()
    with tempfile.TemporaryDirectory(prefix="profile_microbatch_", dir=args.output_dir) as scratch:
        for h in sorted(int(x) for x in args.histories.split(",")):
            template = os.path.join(scratch, f"table_{h}")
            secs = build_table(template, args.seed_rows, h, np.random.default_rng(42))
            print(f"table with {h} commits built in {secs:.1f} s", flush=True)
            for op in args.operations.split(","):
                import shutil

                path = os.path.join(scratch, f"run_{op}_{h}")
                shutil.copytree(template, path)
                profs = {"begin": cProfile.Profile(), "commit": cProfile.Profile()} if args.cprofile else {}
                res = micro_batches(path, op, args.batches, args.batch_rows, args.seed_rows,
                                    np.random.default_rng(7), profs)  # fmt: skip
                print_results(
                    f"{op}, table with {h} commits ({args.batch_rows:,}-row micro-batches)", res, args.skip
                )
                for name, prof in profs.items():
                    s = io.StringIO()
                    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(25)
                    print(f"\n-- cProfile {name} ({op}, {h} commits), cumulative:\n" + s.getvalue()[:6000])
                shutil.rmtree(path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
