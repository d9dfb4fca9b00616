"""Benchmark: tables on S3 vs local disk (issue 14), against s3proxy on 127.0.0.1.

The S3 server is the one the tests use (tests/support/s3_server.py: s3proxy 4.1.0, filesystem
backend on the same local disk), so the difference measured is the S3 protocol and the sink's S3
code path (HTTP requests, conditional PUTs, listings), not a network or a remote disk.

1. A 10-file commit: a bulk_insert of --rows rows over 10 partitions (one new base file each)
   through the engine API, timed in its two phases: the write (tasks: parquet files) and the
   commit (`complete`: markers, the commit metadata, the completed instant, then cleaning and
   archival).  Reference in the same run: raw pyarrow writing the same 10 parquet files.
2. The cost of OCC per commit with --history commits on the timeline: 2-row upserts, single writer
   vs OCC with the file-system lock (on S3: a conditional PUT), interleaved.  The history is
   written once through local disk into the folder the S3 server serves (the same objects on
   both paths), archival and cleaning off so every instant stays on the active timeline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

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
OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
}


def timed_write(path: str, opts: dict, rows) -> tuple[float, float]:
    """(write seconds, commit seconds) of one write through the engine's phases."""
    from hoodie_sink.table import client
    from hoodie_sink.table.options.write_config import WriteConfig
    from hoodie_sink.table.write.context import TaskIdentity

    t0 = time.perf_counter()
    ctx = client.begin(WriteConfig.from_options(opts, path=path), rows.schema)
    result = client.write_task(ctx, TaskIdentity(only_task=True), rows.to_batches())
    t1 = time.perf_counter()
    client.complete(ctx, [result])
    return t1 - t0, time.perf_counter() - t1


def ten_files(s3, root: str, bucket: str, n_rows: int, repeats: int) -> list[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hoodie_sink.table.storage_options import StorageOptions, s3_filesystem

    rows = pa.table({"id": list(range(n_rows)), "p": [f"p{i % 10}" for i in range(n_rows)],
                     "ts": [1] * n_rows, "v": [f"value-{i}" for i in range(n_rows)]})  # fmt: skip
    opts = {**KEYED, "hoodie.datasource.write.operation": "bulk_insert"}
    targets = {"local disk": (os.path.join(root, "local10"), {}),
               "S3 (s3proxy)": (f"s3a://{bucket}/s3-10", s3.options())}  # fmt: skip
    fs = s3_filesystem(StorageOptions.from_options(s3.options()))
    parts = [rows.filter(pa.compute.equal(rows["p"], f"p{i}")) for i in range(10)]
    out = []
    for name, (path, extra) in targets.items():
        writes, commits, raw = [], [], []
        for r in range(repeats):
            w, c = timed_write(path, {**opts, **extra}, rows)
            writes.append(w)
            commits.append(c)
            t = time.perf_counter()
            for i, part in enumerate(parts):  # the reference: the same 10 files, raw pyarrow
                if extra:
                    pq.write_table(part, f"{bucket}/raw/{r}/p{i}.parquet", filesystem=fs)
                else:
                    os.makedirs(os.path.join(root, "raw", str(r)), exist_ok=True)
                    pq.write_table(part, os.path.join(root, "raw", str(r), f"p{i}.parquet"))
            raw.append(time.perf_counter() - t)
        w, c, rw = (statistics.median(x[1:]) for x in (writes, commits, raw))  # the first warms up
        out.append({"storage": name, "write p50 ms": f"{w * 1e3:.0f}", "commit p50 ms": f"{c * 1e3:.0f}",
                    "write+commit ms": f"{(w + c) * 1e3:.0f}", "raw pyarrow 10 files ms": f"{rw * 1e3:.0f}",
                    "x raw pyarrow": f"{(w + c) / rw:.1f}"})  # fmt: skip
    return out


def occ_cost(s3, root: str, bucket_dir: str, bucket: str, history: int, commits: int) -> list[dict]:
    import pyarrow as pa

    import hoodie_sink

    base = {**KEYED, "hoodie.parquet.small.file.limit": "0", "hoodie.clean.automatic": "false",
            "hoodie.archive.automatic": "false"}  # fmt: skip
    local = os.path.join(bucket_dir, "occ")
    t = time.perf_counter()
    for i in range(history):
        rows = pa.table({"id": [i % 50, 10_000 + i], "p": ["a", "b"], "ts": [i, i], "v": [i, i]})
        hoodie_sink.write(rows, local, base)
    print(f"OCC table: {history} commits on the active timeline, built in {time.perf_counter() - t:.0f}s",
          flush=True)  # fmt: skip
    targets = {"local disk": (local, {}), "S3 (s3proxy)": (f"s3a://{bucket}/occ", s3.options())}
    out = []
    n = 0
    for name, (path, extra) in targets.items():
        times: dict[str, list[tuple[float, float]]] = {"single writer": [], "OCC": []}
        for _ in range(commits):
            for mode, occ in (("single writer", {}), ("OCC", OCC)):
                n += 1
                rows = pa.table({"id": [0, 1_000_000 + n], "p": ["a", "a"], "ts": [n, n], "v": [n, n]})
                times[mode].append(timed_write(path, {**base, **extra, **occ}, rows))
        single = statistics.median(c for _, c in times["single writer"])
        for mode, ts in times.items():
            w, c = statistics.median(x for x, _ in ts), statistics.median(x for _, x in ts)
            out.append({"storage": name, "mode": mode, "write p50 ms": f"{w * 1e3:.1f}",
                        "commit p50 ms": f"{c * 1e3:.1f}", "OCC adds ms": f"{(c - single) * 1e3:+.1f}"})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="rows of the 10-file commit")
    ap.add_argument("--repeats", type=int, default=8, help="10-file commits per storage (the first warms up)")
    ap.add_argument("--history", type=int, default=1000, help="commits on the timeline of the OCC part")
    ap.add_argument("--commits", type=int, default=20, help="timed commits per mode and storage")
    ap.add_argument("--scratch", default=None)
    args = ap.parse_args(argv)
    from pathlib import Path

    from tests.support import s3_server

    with scratch_dir(args.scratch, "bench-s3-") as root:
        basedir = Path(root) / "s3"
        s3 = s3_server.start(basedir, state_dir=Path(root))
        try:
            bucket = "bench"
            bucket_dir = s3.bucket(bucket)
            print(f"s3proxy at {s3.endpoint}, buckets in {basedir}\n", flush=True)
            print(f"1. a 10-file commit ({args.rows:,} rows, bulk_insert, 10 partitions), median of "
                  f"{args.repeats - 1}\n")  # fmt: skip
            print(format_table(ten_files(s3, root, bucket, args.rows, args.repeats)), flush=True)
            print(f"\n2. OCC per commit at {args.history}+ commits on the timeline, {args.commits} commits "
                  "per mode, interleaved\n")  # fmt: skip
            print(format_table(occ_cost(s3, root, str(bucket_dir), bucket, args.history, args.commits)))
        finally:
            s3.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
