"""The metadata table's column_stats and bloom_filters partitions (issue 29, item 3), measured in one
run with their ratios (docs/design/metadata-table.md#bloom-filters):

1. bloom-index tagging (KeyIndex.tag, cold caches) with key ranges and bloom filters from the
   metadata table (hoodie.bloom.index.use.metadata) against the footers: time, bytes read, files
   opened, for a small and a large batch of existing keys;
2. a point look-up by key and a selective range filter through hoodie_sink.read, on a table that
   keeps column_stats against the same table without it (statistics from the footers): files
   opened, time;
3. the write overhead of keeping both partitions: upsert time without them, with them (tagging by
   footers), and with them and tagging through them.

Two tables of the same rows (default 500,000 in 100 partitions, 5 insert batches: each base file
holds one contiguous block of 1,000 keys, so ranges prune), Hudi's default bloom filters (60,000
entries, fpp 1e-9: about 430 KB of footer text per file).  Bytes read are the process's `rchar`
(/proc/self/io: every read system call, local disk), files opened the calls of Storage's
open_input_file and read_bytes.

  PYTHONPATH=. .venv/bin/python benchmarks/bench_metadata_indexes.py [--rows 500000] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

import hoodie_sink
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.index import key_index, record_index_lookup
from hoodie_sink.table.index.key_index import KeyIndex
from hoodie_sink.table.read import data_skipping
from hoodie_sink.table.storage import Storage

PARTITIONS = 100
BATCHES = 5
BASE = {
    "hoodie.table.name": "bench",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.metadata.enable": "true",
    "hoodie.parquet.small.file.limit": "0",  # one file per partition and batch
    "hoodie.clean.automatic": "false",
}
WITH = {
    **BASE,
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.metadata.index.bloom.filter.enable": "true",
}
TAG_THROUGH = {**WITH, "hoodie.bloom.index.use.metadata": "true"}


def rows(ids: list[int], ts: int) -> pa.Table:
    per_batch = len_batch[0]
    return pa.table({
        "id": pa.array([f"k{i:07d}" for i in ids]),
        "p": pa.array([f"p{(i * PARTITIONS // per_batch) % PARTITIONS:03d}" for i in ids]),
        "ts": pa.array([ts] * len(ids), pa.int64()),
        "v": pa.array([i * 0.5 for i in ids]),
        "name": pa.array([f"n{i % 997}" for i in ids]),
    })  # fmt: skip


len_batch = [100_000]


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


@contextmanager
def counting():
    """Counts Storage's file opens (open_input_file, read_bytes) and the process's bytes read."""
    opened = [0]
    real_open, real_read = Storage.open_input_file, Storage.read_bytes

    def open_input_file(self, rel):
        opened[0] += 1
        return real_open(self, rel)

    def read_bytes(self, rel):
        opened[0] += 1
        return real_read(self, rel)

    Storage.open_input_file, Storage.read_bytes = open_input_file, read_bytes  # type: ignore[method-assign]
    start, before = time.perf_counter(), rchar()
    out: dict = {}
    try:
        yield out
    finally:
        out.update(seconds=time.perf_counter() - start, bytes=rchar() - before, opened=opened[0])
        Storage.open_input_file, Storage.read_bytes = real_open, real_read  # type: ignore[method-assign]


def cold() -> None:
    key_index.clear_caches()
    record_index_lookup.clear_caches()
    data_skipping.clear_stats_cache()


def build(path: Path, opts: dict, n: int) -> float:
    start = time.perf_counter()
    per = n // BATCHES
    len_batch[0] = per
    for b in range(BATCHES):
        hoodie_sink.write(
            rows(list(range(b * per, (b + 1) * per)), 1),
            str(path),
            {**opts, "hoodie.datasource.write.operation": "insert"},
        )
    return time.perf_counter() - start


def tagging(path: Path, n: int, batch: int, seed: int) -> dict[str, dict]:
    storage = Storage(str(path))
    files = FileSystemView.load(storage).latest_base_files()
    ids = random.Random(seed).sample(range(n), batch)
    t = rows(ids, 2)
    keys, parts = t.column("id").combine_chunks(), t.column("p").combine_chunks()
    out = {}
    results = {}
    for name, meta in (("footers", False), ("metadata", True)):
        samples = []
        for _ in range(3):
            cold()
            with counting() as c:
                results[name] = KeyIndex(storage, files, use_metadata=meta).tag(keys, parts)
            samples.append(c)
        best = min(samples, key=lambda c: c["seconds"])
        out[name] = {
            **best,
            "stats": {
                k: v for k, v in key_index.cache_stats().items() if k.startswith(("files_", "blooms_"))
            },
        }
    assert results["footers"] == results["metadata"], "the two taggings differ"
    assert results["footers"].file_id.null_count == 0
    out["files"] = len(files)
    return out


def reads(with_path: Path, without_path: Path, n: int) -> dict[str, dict]:
    key = f"k{n // 2 + 123:07d}"
    lo, hi = f"k{n // 4:07d}", f"k{n // 4 + 2000:07d}"
    cases = {"point": [("id", "=", key)], "range": [("id", ">=", lo), ("id", "<", hi)]}
    out = {}
    for case, filters in cases.items():
        for name, path in (("with", with_path), ("without", without_path)):
            samples = []
            for _ in range(3):
                cold()
                with counting() as c:
                    got = hoodie_sink.read(str(path), filters=filters)
                c["rows"] = got.num_rows
                samples.append(c)
            out[f"{case}/{name}"] = min(samples, key=lambda c: c["seconds"])
        assert out[f"{case}/with"]["rows"] == out[f"{case}/without"]["rows"] > 0
    return out


def upserts(with_path: Path, without_path: Path, n: int, batch: int, rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"without": [], "with": [], "with+tag": []}
    rng = random.Random(11)
    for r in range(rounds):
        ids = rng.sample(range(n), batch)
        for name, path, opts in (
            ("without", without_path, BASE),
            ("with", with_path, WITH),
            ("with+tag", with_path, TAG_THROUGH),
        ):
            start = time.perf_counter()
            hoodie_sink.write(
                rows(ids, 10 + r), str(path), {**opts, "hoodie.datasource.write.operation": "upsert"}
            )
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench-mdt-idx-"))
    with_path, without_path = root / "with", root / "without"
    for p in (with_path, without_path):
        shutil.rmtree(p, ignore_errors=True)
    n = args.rows
    t_with = build(with_path, WITH, n)
    t_without = build(without_path, BASE, n)
    print(f"built {n} rows in {PARTITIONS} partitions, {BATCHES} batches: with the partitions {t_with:.1f} s, "
          f"without {t_without:.1f} s (x{t_with / t_without:.2f})")  # fmt: skip

    print("\n1. bloom-index tagging, cold caches (best of 3)")
    report_tagging(with_path, n, "the metadata table as the writes left it (deltacommits in log files)")
    compact_metadata(with_path)
    report_tagging(with_path, n, "right after a compaction of the metadata table (HFile base files)")

    print("\n2. hoodie_sink.read with filters, cold caches (best of 3)")
    res = reads(with_path, without_path, n)
    for case in ("point", "range"):
        w, wo = res[f"{case}/with"], res[f"{case}/without"]
        print(f"  {case} ({w['rows']} rows):")
        for name, c in (("with column_stats", w), ("footers", wo)):
            ms, mb = c["seconds"] * 1000, c["bytes"] / 1e6
            print(f"    {name:17s} {ms:8.1f} ms  {c['opened']:5d} files opened  {mb:7.1f} MB")
        ratio_t, ratio_f = wo["seconds"] / w["seconds"], wo["opened"] / max(w["opened"], 1)
        print(f"    ratio footers/column_stats: time x{ratio_t:.2f}, files x{ratio_f:.2f}")

    print(f"\n3. upserts of 5000 existing keys (median of {args.rounds})")
    up = upserts(with_path, without_path, n, 5000, args.rounds)
    base = up["without"]
    print(f"  without the partitions          {base:.2f} s")
    print(f"  with them (tagging by footers)  {up['with']:.2f} s  x{up['with'] / base:.2f}")
    print(f"  with them, tagging through them {up['with+tag']:.2f} s  x{up['with+tag'] / base:.2f}")
    print(f"\ntables in {root}")


def report_tagging(path: Path, n: int, what: str) -> None:
    print(f"  {what}:")
    for batch in (50, 5000):
        res = tagging(path, n, batch, seed=batch)
        f, m = res["footers"], res["metadata"]
        print(f"    {batch} keys, {res['files']} base files:")
        for name, c in (("footers", f), ("metadata", m)):
            mb = c["bytes"] / 1e6
            print(
                f"      {name:9s} {c['seconds'] * 1000:8.1f} ms  {mb:8.1f} MB read  {c['opened']:5d} files opened"
            )
            print(f"                {c['stats']}")
        ratios = (
            f["seconds"] / m["seconds"],
            f["bytes"] / max(m["bytes"], 1),
            f["opened"] / max(m["opened"], 1),
        )
        print("      ratio footers/metadata: time x{:.2f}, bytes x{:.2f}, files x{:.2f}".format(*ratios))


def compact_metadata(path: Path) -> None:
    """The metadata table compacted now (as its next due compaction would): its partitions' latest
    slices become HFile base files, what a table sees after every 10th deltacommit."""
    from hoodie_sink.table.format.timeline.timeline import Timeline
    from hoodie_sink.table.metadata.compaction import compact_if_due
    from hoodie_sink.table.metadata.writer import metadata_lock

    storage = Storage(str(path))
    with metadata_lock(storage):
        compact_if_due(storage, Timeline.load(storage), 1)


if __name__ == "__main__":
    main()
