"""Benchmark: what catalog sync (docs/hudi/hive-sync.md#what-our-sync-does) adds to a commit.

A copy-on-write table with --partitions partitions (one bulk_insert through the engine API,
untimed) is synced once into a real Hive metastore (tests/support/hive_metastore.py: 3.1.3,
embedded Derby, 127.0.0.1): the full sync, timed.  Then --commits upserts of --rows rows, each
into --touched existing partitions plus one new one, are written twice from the same starting
table: without sync (the reference) and with hoodie.datasource.meta.sync.enable (the sync runs in
the commit call).  Printed: the full sync's seconds, each mode's per-commit p50/p95, the sync's own
p50/p95 (from its result), and the ratio of a synced commit to a plain one, measured in this run.
Both a copy-on-write and a merge-on-read table (three metastore tables per sync) are measured.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_hive_sync.py [--partitions 2000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from hoodie_sink.table.catalog.hive_sync import sync_table
from hoodie_sink.table.client import write
from tests.support import hive_metastore


def _rows(ids: range, cities: list[str], ts: int) -> pa.Table:
    n = len(ids)
    return pa.table({
        "id": pa.array(list(ids), pa.int64()),
        "city": pa.array([cities[i % len(cities)] for i in range(n)]),
        "ts": pa.array([ts] * n, pa.int64()),
        "fare": pa.array([float(i) for i in range(n)], pa.float64()),
    })  # fmt: skip


def _options(table_type: str) -> dict[str, str]:
    return {
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.compact.inline": "false",
    }


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def run(table_type: str, args: argparse.Namespace, uri: str, work: Path) -> None:
    opts = _options(table_type)
    cities = [f"c{i:05d}" for i in range(args.partitions)]
    base = work / f"base_{table_type}"
    write(
        _rows(range(args.partitions * 2), cities, 0),
        str(base),
        {**opts, "hoodie.datasource.write.operation": "bulk_insert"},
    )
    sync = {"hoodie.datasource.hive_sync.mode": "hms", "hoodie.datasource.hive_sync.metastore.uris": uri,
            "hoodie.datasource.hive_sync.database": f"bench_{table_type.lower()}"}  # fmt: skip
    times: dict[str, list[float]] = {"plain": [], "synced": []}
    sync_ms: list[float] = []
    full_s = 0.0
    for mode in ("plain", "synced"):
        path = work / f"{table_type}_{mode}"
        shutil.copytree(base, path)
        extra = {}
        if mode == "synced":
            started = time.perf_counter()
            result = sync_table(str(path), sync)
            full_s = time.perf_counter() - started
            assert sum(t.partitions_added for t in result.tables) == args.partitions * len(result.tables)
            extra = {"hoodie.datasource.meta.sync.enable": "true", **sync}
        for c in range(args.commits):
            touched = [cities[(c * args.touched + j) % args.partitions] for j in range(args.touched)]
            touched.append(f"new{c:04d}")
            start_id = (c % 2) * args.rows  # half updates of the base rows, half new keys
            data = _rows(range(start_id, start_id + args.rows), touched, c + 1)
            started = time.perf_counter()
            write(data, str(path), {**opts, **extra})
            times[mode].append(time.perf_counter() - started)
        if mode == "synced":
            started = time.perf_counter()
            result = sync_table(str(path), sync)  # nothing new: the marker check alone
            sync_ms.append((time.perf_counter() - started) * 1000)
    p = {m: (_pct(v, 0.5), _pct(v, 0.95)) for m, v in times.items()}
    print(
        f"| {table_type} | {args.partitions} | {full_s:.2f} | {p['plain'][0]:.3f} / {p['plain'][1]:.3f} | "
        f"{p['synced'][0]:.3f} / {p['synced'][1]:.3f} | "
        f"{(p['synced'][0] - p['plain'][0]) * 1000:.0f} | {sync_ms[0]:.0f} | "
        f"{statistics.median(times['synced']) / statistics.median(times['plain']):.2f}x |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--touched", type=int, default=4)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_hive_sync_"))
    server = hive_metastore.start(work / "hms")
    try:
        print(f"metastore {server.uri} (Hive {server.version}), {args.commits} commits of {args.rows} rows, "
              f"{args.touched} partitions + 1 new each")  # fmt: skip
        print("| table | partitions | full sync s | commit p50 / p95 s (no sync) | commit p50 / p95 s (sync) "
              "| sync adds ms (p50) | no-op sync ms | ratio |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            run(table_type, args, server.uri, work)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
