"""Benchmark: Hudi's metadata table kept by the sink (issue 28), local disk and S3 (s3proxy).

1. Planning a snapshot read (timeline + file listing + latest file slices) of a table with
   --partitions partitions (one base file each), with and without the metadata table: seconds
   (median of --repeats) and listing calls.  A listing call is one directory listing through the
   sink's Storage (on S3 one ListObjectsV2 request per 1,000 keys it returns; the table gives the
   keys returned too).  The tables are written once on local disk into the folder s3proxy serves,
   so local and S3 read the same objects.
2. The cost per commit of keeping it: --commits 2-row upserts into a 10-partition table with and
   without it, interleaved; the median of the last 20 commits of each (the table is then
   --commits deep, so the figure includes the metadata table's compactions, cleans and
   archival as they fall).  Local disk, and S3 with fewer commits (--s3-commits).
3. Bounded: the metadata table's files and bytes (and its timeline files) every 50 commits of
   run 2's local table with it on.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_metadata_table.py --partitions 100,1000,10000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))  # the S3 server of the tests

from common import format_table, scratch_dir  # noqa: E402

KEYED = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
}
LISTING_METHODS = ("list_dir", "walk_file_sizes", "list_names")


@contextmanager
def counted_listings():
    """Count the Storage listings (and the entries they return) made inside the block."""
    from hoodie_sink.table.storage import Storage

    counts: Counter[str] = Counter()
    originals = {name: getattr(Storage, name) for name in LISTING_METHODS}

    def wrap(name):
        real = originals[name]

        def counted(self, *args, **kwargs):
            counts["calls"] += 1
            out = real(self, *args, **kwargs)
            if name == "walk_file_sizes":  # a generator: count what it yields
                items = list(out)
                counts["entries"] += len(items)
                counts["requests"] += max(1, -(-len(items) // 1000))
                return iter(items)
            counts["entries"] += len(out)
            counts["requests"] += max(1, -(-len(out) // 1000))
            return out

        return counted

    for name in LISTING_METHODS:
        setattr(Storage, name, wrap(name))
    try:
        yield counts
    finally:
        for name, real in originals.items():
            setattr(Storage, name, real)


def plan(path: str, options: dict) -> int:
    """A snapshot read's planning: timeline, listing, latest slices; the number of slices."""
    from hoodie_sink.table.format.fs_view import FileSystemView
    from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
    from hoodie_sink.table.storage import Storage
    from hoodie_sink.table.storage_options import StorageOptions

    storage = Storage(path, StorageOptions.from_options({k.lower(): v for k, v in options.items()}))
    view = FileSystemView.load(storage, ActiveTimeline.load(storage))  # as Snapshot.open
    return sum(1 for _ in view.latest_base_files())


def build_table(path: str, partitions: int, metadata: bool) -> None:
    import pyarrow as pa

    import hoodie_sink

    data = pa.table({"id": list(range(partitions)), "p": [f"p{i:05d}" for i in range(partitions)],
                     "ts": [1] * partitions, "v": [1.0] * partitions})  # fmt: skip
    opts = {
        **KEYED,
        "hoodie.datasource.write.operation": "bulk_insert",
        "hoodie.metadata.enable": str(metadata).lower(),
    }
    hoodie_sink.write(data, path, opts)


def planning(s3, bucket: str, bucket_dir: str, sizes: list[int], repeats: int) -> list[dict]:
    rows = []
    for n in sizes:
        for metadata in (False, True):
            name = f"plan-{n}-{'mdt' if metadata else 'list'}"
            local = os.path.join(bucket_dir, name)
            started = time.perf_counter()
            build_table(local, n, metadata)
            built = time.perf_counter() - started
            for where, path, opts in (("local", local, {}), ("S3", f"s3a://{bucket}/{name}", s3.options())):
                times, counts = [], Counter()
                for _ in range(repeats):
                    with counted_listings() as c:
                        t0 = time.perf_counter()
                        slices = plan(path, opts)
                        times.append(time.perf_counter() - t0)
                    counts = c
                assert slices == n, (slices, n)
                rows.append({"partitions": f"{n:,}", "storage": where, "metadata table": "yes" if metadata else "no",
                             "planning s": f"{statistics.median(times):.3f}", "listing calls": str(counts["calls"]),
                             "LIST requests": str(counts["requests"]), "keys listed": f"{counts['entries']:,}",
                             "table built s": f"{built:.1f}"})  # fmt: skip
                print(rows[-1], flush=True)
    return rows


def commit_cost(paths: dict[str, tuple[str, dict]], commits: int) -> list[float]:
    """Interleaved 2-row upserts into each table; per table, the seconds of each commit."""
    import pyarrow as pa

    import hoodie_sink

    out: dict[str, list[float]] = {k: [] for k in paths}
    for i in range(commits):
        data = pa.table({"id": [i % 50, 100 + i], "p": [f"p{i % 10}", f"p{(i + 3) % 10}"],
                         "ts": [i, i], "v": [float(i), 1.0]})  # fmt: skip
        for label, (path, opts) in paths.items():
            t0 = time.perf_counter()
            hoodie_sink.write(data, path, {**KEYED, **opts, "hoodie.datasource.write.operation": "upsert"})
            out[label].append(time.perf_counter() - t0)
            if label == "local, metadata table" and (i + 1) % 50 == 0:
                print(metadata_size(path, i + 1), flush=True)
                SIZES.append(metadata_size(path, i + 1))
    return out


SIZES: list[dict] = []


def metadata_size(path: str, commits: int) -> dict:
    root = Path(path) / ".hoodie" / "metadata"
    files = [p for p in (root / "files").iterdir() if p.is_file()]
    timeline = [p for p in (root / ".hoodie").iterdir() if p.is_file() and p.name[0].isdigit()]
    data_timeline = sum(1 for p in (Path(path) / ".hoodie").iterdir() if p.name[0].isdigit())
    return {
        "commits": str(commits),
        "metadata files": str(len(files)),
        "metadata bytes": f"{sum(p.stat().st_size for p in files):,}",
        "metadata timeline files": str(len(timeline)),
        "data timeline files": str(data_timeline),
    }


def per_commit(s3, bucket: str, bucket_dir: str, commits: int, s3_commits: int) -> list[dict]:
    rows = []
    local = {
        "local, no metadata table": (os.path.join(bucket_dir, "c-list"), {"hoodie.metadata.enable": "false"}),
        "local, metadata table": (os.path.join(bucket_dir, "c-mdt"), {"hoodie.metadata.enable": "true"}),
    }
    remote = {
        "S3, no metadata table": (
            f"s3a://{bucket}/s-list",
            {**s3.options(), "hoodie.metadata.enable": "false"},
        ),
        "S3, metadata table": (f"s3a://{bucket}/s-mdt", {**s3.options(), "hoodie.metadata.enable": "true"}),
    }
    for group, n in ((local, commits), (remote, s3_commits)):
        times = commit_cost(group, n)
        base = None
        for label, ts in times.items():
            med = statistics.median(ts[-20:])
            base = base or med
            rows.append({"target": label, "commits": str(n), "median of last 20 s": f"{med:.3f}",
                         "vs without": f"{med / base:.2f}x"})  # fmt: skip
            print(rows[-1], flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", default="100,1000,10000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--commits", type=int, default=300)
    ap.add_argument("--s3-commits", type=int, default=60)
    ap.add_argument("--scratch", default=None)
    args = ap.parse_args(argv)
    from tests.support import s3_server

    with scratch_dir(args.scratch, "bench-mdt-") as root:
        basedir = Path(root) / "s3"
        s3 = s3_server.start(basedir, state_dir=Path(root))
        try:
            bucket = "bench"
            bucket_dir = str(s3.bucket(bucket))
            print(
                f"s3proxy at {s3.endpoint}\n\n1. planning a snapshot read, median of {args.repeats}\n",
                flush=True,
            )
            sizes = [int(x) for x in args.partitions.split(",")]
            plan_rows = planning(s3, bucket, bucket_dir, sizes, args.repeats)
            print(f"\n2. cost per commit ({args.commits} local, {args.s3_commits} S3)\n", flush=True)
            commit_rows = per_commit(s3, bucket, bucket_dir, args.commits, args.s3_commits)
            print("\n1. planning\n\n" + format_table(plan_rows))
            print("\n2. per commit\n\n" + format_table(commit_rows))
            print("\n3. the metadata table's size as commits go by (local)\n\n" + format_table(SIZES))
        finally:
            s3.stop()
            shutil.rmtree(basedir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
