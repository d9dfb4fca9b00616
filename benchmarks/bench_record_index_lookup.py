"""Benchmark: tagging 1% random keys of an N-key table with the record index against GLOBAL_BLOOM
(docs/design/metadata-table.md#record-index-look-ups).

Built once per size, with the format functions (no Spark, no write path):
  - data base files: --partitions partitions of --files-per-partition Parquet files holding
    `_hoodie_record_key` (random 36-character UUID keys) and a payload column, with the footer
    bloom filter and key range Hudi writes;
  - the record index of the same keys: --groups file groups, one base HFile each (1 MiB GZ blocks,
    as Hudi's compaction writes them), as the metadata table has it after a compaction.

Timed, each from cold per-process caches (the OS page cache is warm for both: a local-disk
comparison of work done, not of storage latency):
  RECORD_INDEX   record_index_lookup.look_up of the batch (block index + candidate blocks)
  GLOBAL_BLOOM   KeyIndex(global).tag of the batch (footers, blooms, key columns, hash join)
Bytes read: the process's read() bytes (/proc/self/io rchar) during the call, for both; for the
record index also its own counter.  Ratios are GLOBAL_BLOOM / RECORD_INDEX of the same run.

  PYTHONPATH=. python benchmarks/bench_record_index_lookup.py --keys 2000000 [--fraction 0.001]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_sink.table.format.bloom import build_footer_metadata
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.hfile.ranged import bytes_reader, read_block_index
from hoodie_sink.table.index import key_index, record_index_lookup
from hoodie_sink.table.index.key_index import KeyIndex
from hoodie_sink.table.index.record_index_files import load_record_index_files
from hoodie_sink.table.storage import Storage
from tests.support.record_index import RecordIndexBuilder

INSTANT = "20260101000000000"
COMPACTION = "20260101000000000001"


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def build(root: Path, n: int, partitions: int, files_per_partition: int, groups: int, seed: int):
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 1 << 63, size=(n, 2), dtype=np.int64)
    keys = [str(uuid.UUID(int=(int(a) << 64) | int(b))) for a, b in raw]
    files = partitions * files_per_partition
    which = rng.integers(0, files, n)
    base_files: list[BaseFile] = []
    entries = {}
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(files + 1))
    key_arr = pa.array(keys, pa.string())
    for f in range(files):
        part = f"p{f // files_per_partition:03d}"
        fid = f"{uuid.UUID(int=int(rng.integers(1 << 62)))}-0"
        bf = BaseFile(part, fid, INSTANT, "0-1-0")
        rows = order[bounds[f] : bounds[f + 1]]
        fkeys = key_arr.take(pa.array(rows))
        table = pa.table({"_hoodie_record_key": fkeys, "fare": pa.array(rng.random(len(rows)))})
        table = table.replace_schema_metadata(build_footer_metadata(fkeys))
        (root / part).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, str(root / bf.path), store_schema=False)  # footer entries once, as Java
        base_files.append(bf)
        for k in fkeys.to_pylist():
            entries[k] = (part, fid, INSTANT)
    b = RecordIndexBuilder(root, groups)
    of = b.group_of(keys)
    for g in range(groups):
        b.base_file(
            g, COMPACTION, {k: entries[k] for k, gg in zip(keys, of.tolist(), strict=True) if gg == g}
        )
    b.data_instant(INSTANT)
    return keys, base_files


def _block_count(path: Path) -> int:
    data = path.read_bytes()
    return len(read_block_index(bytes_reader(data), len(data), str(path)).entries)


def run(n: int, args) -> dict:
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        keys, base_files = build(root, n, args.partitions, args.files_per_partition, args.groups, args.seed)
        build_s = time.perf_counter() - started
        rng = np.random.default_rng(args.seed + 1)
        batch = pa.array(
            [keys[i] for i in rng.choice(n, size=max(1, int(n * args.fraction)), replace=False)], pa.string()
        )
        storage = Storage(str(root))
        rli_bytes = sum(p.stat().st_size for p in (root / ".hoodie/metadata/record_index").glob("*.hfile"))
        data_bytes = sum(p.stat().st_size for p in root.glob("p*/*.parquet"))

        record_index_lookup.clear_caches()
        r0, t0 = rchar(), time.perf_counter()
        files = load_record_index_files(storage)
        found = record_index_lookup.look_up(storage, files, batch)
        rli_s, rli_read = time.perf_counter() - t0, rchar() - r0
        stats = record_index_lookup.cache_stats()
        assert found.file_id.null_count == 0

        key_index.clear_caches()
        r0, t0 = rchar(), time.perf_counter()
        tags = KeyIndex(storage, base_files, global_index=True).tag(batch)
        bloom_s, bloom_read = time.perf_counter() - t0, rchar() - r0
        assert tags.file_id.equals(found.file_id)
        blocks_total = sum(
            _block_count(root / ".hoodie/metadata" / g.base_file) for g in files.file_groups if g.base_file
        )
        return {
            "keys": n, "batch": len(batch), "build_s": build_s, "rli_bytes": rli_bytes, "data_bytes": data_bytes,
            "rli_s": rli_s, "rli_rchar": rli_read, "rli_counted": stats["bytes_read"],
            "blocks_read": stats["data_blocks_read"], "blocks_total": blocks_total,
            "bloom_s": bloom_s, "bloom_rchar": bloom_read, "files": len(base_files),
            "files_probed": key_index.cache_stats()["files_probed"],
        }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, nargs="+", default=[2_000_000])
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--files-per-partition", type=int, default=1)
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fraction", type=float, default=0.01, help="share of the keys looked up (default 1%%)")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args(argv)
    mib = 1024 * 1024
    for n in args.keys:
        r = run(n, args)
        print(
            f"{r['keys']:>11,} keys, batch {r['batch']:,} ({args.fraction:.2%}), built in {r['build_s']:.0f} s; "
            f"record index {r['rli_bytes'] / mib:.1f} MiB in {args.groups} HFiles, "
            f"data {r['files']} parquet files {r['data_bytes'] / mib:.1f} MiB"
        )
        print(
            f"  RECORD_INDEX  {r['rli_s'] * 1000:8.0f} ms  read {r['rli_rchar'] / mib:7.1f} MiB "
            f"(counted {r['rli_counted'] / mib:.1f} MiB)  data blocks {r['blocks_read']} of {r['blocks_total']}"
        )
        print(
            f"  GLOBAL_BLOOM  {r['bloom_s'] * 1000:8.0f} ms  read {r['bloom_rchar'] / mib:7.1f} MiB  "
            f"files probed {r['files_probed']} of {r['files']}"
        )
        print(
            f"  ratio GLOBAL_BLOOM / RECORD_INDEX: time {r['bloom_s'] / r['rli_s']:.2f}x, "
            f"bytes {r['bloom_rchar'] / max(1, r['rli_rchar']):.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
