"""Benchmark: upserts of 1% random keys with RECORD_INDEX, BLOOM and GLOBAL_BLOOM, and Apache Hudi's
RECORD_INDEX on the same workload (issue 29).

For each N in --rows (default 2M and 20M), on one local[2] session:
  * base data: N deterministic trips rows (common.trips_df) with 100 partitions (`region` = city
    and one of 10 districts), staged once as parquet; upsert batches of random keys (see
    --fractions), with `ts` 400 days later and `fare` + 1, staged as parquet;
  * per index type (--indexes): a table bulk_inserted through df.write.format("hoodie") with that
    index (RECORD_INDEX: `hoodie.metadata.record.index.enable=true`), untimed but reported; then
      - tagging alone, in this process through the engine (`index.locator(...).tag(keys,
        partitions)`, every cache cleared first): seconds, bytes read from storage and files
        opened, counted by wrapping the table's Storage reads;                         [timed]
      - the upsert through Spark, df.write.format("hoodie") mode append                 [timed]
      - a check against the model: N rows, N distinct keys, and exactly the batch's keys carry
        the new `ts` (read back with hudi-rs);
  * Apache Hudi (--hudi, default 0.15.0; "none" skips it), in the interop tier's Spark 3.5:
    bulk_insert with `hoodie.index.type=RECORD_INDEX` and the record index on (and the other index
    types of --hudi-indexes), then the same upserts, timed inside its process; Hudi's rows are
    compared with Hudi's GLOBAL_BLOOM when it ran, else with ours.

Each batch size in --fractions (default 1% and 0.01%: a backfill's share and a streaming
micro-batch's) is a batch of its own keys, upserted in turn into the same table.  Prints a
Markdown table per N: seconds, bytes read by tagging and the ratios against GLOBAL_BLOOM on the
same batch (> 1: fewer bytes / faster), measured in this run.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_record_index.py [--rows 2000000,20000000]
        [--fractions 0.01,0.0001] [--indexes record_index,bloom,global_bloom] [--hudi 0.15.0]
        [--hudi-indexes record_index,global_bloom]
        [--table-type COPY_ON_WRITE] [--work-dir DIR] [--driver-memory 8g] [--routed] [--no-compact]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from common import SparkSettings, build_spark, format_table, human_rows, scratch_dir, source_version, trips_df  # noqa: E402

KEYS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "trip_id",
    "hoodie.datasource.write.partitionpath.field": "region",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.parquet.compression.codec": "snappy",
}
INDEX_OPTIONS = {
    "bloom": {"hoodie.index.type": "BLOOM"},
    "global_bloom": {"hoodie.index.type": "GLOBAL_BLOOM"},
    "record_index": {"hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true"},
}
UPDATED_TS_FROM = datetime(2025, 1, 1, tzinfo=timezone.utc)  # the base rows' ts stay within 2024


# -- data ------------------------------------------------------------------------------------------
def stage_inputs(spark, work: Path, n: int, fractions: list[float]) -> tuple[Path, list[tuple[Path, int]]]:
    """The base rows, and one upsert batch per fraction: disjoint random keys (each batch takes
    its own slice of a hash of the key), so the batches can follow one another into one table."""
    from pyspark.sql import functions as F

    base = work / f"base-{n}"
    district = F.pmod(F.xxhash64(F.col("trip_id"), F.lit(11)), F.lit(10)).cast("string")
    trips_df(spark, n, partitions=8).withColumn(
        "region", F.concat_ws("-", F.col("city"), district)
    ).write.mode("overwrite").parquet(str(base))
    bucket = F.pmod(F.xxhash64(F.col("trip_id"), F.lit(23)), F.lit(1_000_000))
    batches, low = [], 0
    for j, fraction in enumerate(fractions):
        high = low + int(round(fraction * 1_000_000))
        path = work / f"upsert-{n}-{j}"
        (
            spark.read.parquet(str(base)).where((bucket >= low) & (bucket < high))
            .withColumn("ts", F.col("ts") + F.expr("INTERVAL 400 DAYS")).withColumn("fare", F.col("fare") + 1)
            .repartition(2).write.mode("overwrite").parquet(str(path))
        )  # fmt: skip
        batches.append((path, spark.read.parquet(str(path)).count()))
        low = high
    return base, batches


# -- tagging through the engine, with its reads counted -------------------------------------------
@dataclass
class ReadCount:
    bytes: int = 0
    files: int = 0


class _CountingRaw:
    """A file object over a pyarrow NativeFile that counts the bytes read through it."""

    def __init__(self, native, count: ReadCount):
        self._f, self._count = native, count

    def read(self, n: int = -1):
        data = self._f.read() if n is None or n < 0 else self._f.read(n)
        self._count.bytes += len(data)
        return data

    def seek(self, pos: int, whence: int = 0):
        return self._f.seek(pos, whence)

    def tell(self):
        return self._f.tell()

    def size(self):
        return self._f.size()

    def close(self):
        return self._f.close()

    @property
    def closed(self):
        return self._f.closed

    def readable(self):
        return True

    def seekable(self):
        return True


def counted_reads(count: ReadCount):
    """Patch Storage's read calls so that every byte read from storage is counted (restore with
    the returned function)."""
    import pyarrow as pa

    from hoodie_sink.table.storage import Storage

    real_open, real_read = Storage.open_input_file, Storage.read_bytes

    def open_input_file(self, rel):
        count.files += 1
        return pa.PythonFile(_CountingRaw(real_open(self, rel), count), mode="r")

    def read_bytes(self, rel):
        data = real_read(self, rel)
        count.files += 1
        count.bytes += len(data)
        return data

    Storage.open_input_file, Storage.read_bytes = open_input_file, read_bytes

    def restore():
        Storage.open_input_file, Storage.read_bytes = real_open, real_read

    return restore


def measure_tagging(path: Path, index_name: str, batch: Path) -> dict:
    import pyarrow.parquet as pq

    from hoodie_sink.table.format.fs_view import FileSystemView
    from hoodie_sink.table.index import key_index, record_index_lookup
    from hoodie_sink.table.index.registry import index_of
    from hoodie_sink.table.storage import Storage

    rows = pq.read_table(str(batch), columns=["trip_id", "region"])
    keys, parts = rows.column("trip_id").combine_chunks(), rows.column("region").combine_chunks()
    key_index.clear_caches()
    record_index_lookup.clear_caches()  # every batch measured from cold caches
    storage = Storage(str(path))
    count = ReadCount()
    restore = counted_reads(count)
    try:
        start = time.perf_counter()
        view = FileSystemView.load(storage)
        locator = index_of(index_name).locator(storage, view.latest_base_files(), None)
        tags = locator.tag(keys, parts)
        seconds = time.perf_counter() - start
    finally:
        restore()
    found = len(tags.file_id) - tags.file_id.null_count
    if found != len(keys):
        raise SystemExit(f"{index_name}: tagging found {found} of {len(keys)} keys, all exist")
    return {"tag_s": seconds, "tag_bytes": count.bytes, "tag_files": count.files}


# -- the writers ---------------------------------------------------------------------------------------
def ours_write(spark, src: Path, path: Path, options: dict, routed: bool = False) -> float:
    """One write through Spark; `routed`: through hoodie_sink.spark.route (the tag shuffle, with
    RECORD_INDEX by record-index file group: docs/design/routing.md#record-index-tag-shuffle)."""
    import hoodie_sink.spark

    df = spark.read.parquet(str(src))
    start = time.perf_counter()
    if routed:
        df = df.transform(hoodie_sink.spark.route(str(path), options))
    df.write.format("hoodie").options(**options).mode("append").save(str(path))
    return time.perf_counter() - start


def compact_metadata(path: Path) -> float:
    """Compact the table's metadata table now (untimed for the upserts): the record index then
    lies in HFile base files, as in a table past its first hoodie.metadata.compact.max.delta.commits
    writes, instead of in the load's log blocks (read whole: no block index)."""
    from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
    from hoodie_sink.table.metadata.compaction import compact_if_due
    from hoodie_sink.table.metadata.writer import metadata_lock
    from hoodie_sink.table.storage import Storage

    storage = Storage(str(path))
    start = time.perf_counter()
    with metadata_lock(storage):
        compact_if_due(storage, ActiveTimeline.load(storage), max_delta_commits=1)
    return time.perf_counter() - start


def check(path: Path, n: int, updated: int, who: str) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    from hudi import HudiTableBuilder

    batches = HudiTableBuilder.from_base_uri(str(path)).build().read()

    t = pa.Table.from_batches(batches).select(["trip_id", "ts"])
    distinct = len(pc.unique(t.column("trip_id")))
    new_ts = pc.sum(
        pc.greater_equal(t.column("ts"), pa.scalar(UPDATED_TS_FROM).cast(t.schema.field("ts").type))
    ).as_py()
    if (t.num_rows, distinct, new_ts) != (n, n, updated):
        raise SystemExit(f"{who}: read back {t.num_rows} rows, {distinct} keys, {new_ts} updated; "
                         f"expected {n}, {n}, {updated}")  # fmt: skip


def table_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def progress(name: str, figures: dict) -> None:
    """One measured row as soon as it is known: a long run cut short keeps what it measured."""
    shown = ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items())
    print(f"measured {name}: {shown}", flush=True)


def java_runs(
    java, version: str, name: str, work: Path, n: int, base: Path, batches, table_type: dict
) -> dict:
    """Apache Hudi's load and upserts of the same workload with index `name`, timed inside its JVM."""
    path = work / f"java-{name}-{n}"
    jopts = {**KEYS, **table_type, **INDEX_OPTIONS[name], "hoodie.metadata.enable": "true"}
    load_s = java.call("write", path=str(path), input=str(base),
                       options={**jopts, "hoodie.datasource.write.operation": "bulk_insert"},
                       mode="append")["seconds"]  # fmt: skip
    size, updated, out = table_bytes(path), 0, {}
    for batch, count in batches:
        upsert_s = java.call("write", path=str(path), input=str(batch),
                             options={**jopts, "hoodie.datasource.write.operation": "upsert"},
                             mode="append")["seconds"]  # fmt: skip
        updated += count
        check(path, n, updated, f"Hudi {version} {name}")
        key = f"hudi {version} {name} {count}"
        out[key] = {"load_s": load_s, "upsert_s": upsert_s, "size": size}
        progress(key, out[key])
    shutil.rmtree(path)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="2000000,20000000")
    ap.add_argument("--fractions", default="0.01,0.0001", help="the upsert batches, as shares of the keys")
    ap.add_argument("--indexes", default="record_index,bloom,global_bloom")
    ap.add_argument("--hudi", default="0.15.0")
    ap.add_argument(
        "--hudi-indexes",
        default="record_index",
        help="Apache Hudi's index types to run (e.g. record_index,global_bloom: Hudi's own ratio)",
    )
    ap.add_argument("--table-type", default="COPY_ON_WRITE", choices=["COPY_ON_WRITE", "MERGE_ON_READ"])
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--routed", action="store_true", help="our upserts through hoodie_sink.spark.route")
    ap.add_argument(
        "--no-compact",
        action="store_true",
        help="leave the load's metadata log blocks uncompacted (default: compact after the load)",
    )
    args = ap.parse_args()
    sizes = [int(s) for s in args.rows.split(",")]
    fractions = [float(f) for f in args.fractions.split(",")]
    indexes = [i.strip() for i in args.indexes.split(",") if i.strip()]
    table_type = {"hoodie.datasource.write.table.type": args.table_type}

    spark = build_spark(SparkSettings(driver_memory=args.driver_memory), "bench-record-index")
    java = None
    if args.hudi != "none":
        from tests.interop.java_hudi import JavaHudi, interop_missing

        missing = interop_missing()
        if missing:
            print(f"Apache Hudi {args.hudi} skipped: {missing}")
        else:
            java = JavaHudi(args.hudi, driver_memory=args.driver_memory)
    workload = f"upserts of {', '.join(f'{f:.2%}' for f in fractions)} random keys in turn; 100 partitions"
    how = ("routed" if args.routed else "unrouted") + (
        ", metadata log blocks as loaded" if args.no_compact else ", metadata table compacted after the load"
    )
    print(f"hoodie_sink {source_version(str(ROOT))}; {args.table_type}; {workload}; ours {how}")
    with scratch_dir(args.work_dir, "bench_record_index") as scratch:
        work = Path(scratch)
        for n in sizes:
            base, batches = stage_inputs(spark, work, n, fractions)
            results: dict[str, dict] = {}
            for name in indexes:
                path = work / f"t-{name}-{n}"
                opts = {**KEYS, **table_type, **INDEX_OPTIONS[name]}
                load_s = ours_write(
                    spark, base, path, {**opts, "hoodie.datasource.write.operation": "bulk_insert"}
                )
                compact_s = 0.0 if args.no_compact or name != "record_index" else compact_metadata(path)
                size, updated = table_bytes(path), 0
                for batch, count in batches:
                    tagging = measure_tagging(path, name, batch)
                    upsert_s = ours_write(
                        spark,
                        batch,
                        path,
                        {**opts, "hoodie.datasource.write.operation": "upsert"},
                        args.routed,
                    )
                    updated += count
                    check(path, n, updated, f"hoodie {name}")
                    results[f"{name} {count}"] = {
                        "load_s": load_s,
                        "compact_s": compact_s,
                        "upsert_s": upsert_s,
                        "size": size,
                        **tagging,
                    }
                    progress(f"{name} {count}", results[f"{name} {count}"])
                shutil.rmtree(path)
            if java is not None:
                for name in [i.strip() for i in args.hudi_indexes.split(",") if i.strip()]:
                    results.update(java_runs(java, args.hudi, name, work, n, base, batches, table_type))
            rows = []
            for name, r in results.items():
                # ours against our GLOBAL_BLOOM, Hudi's against Hudi's when it ran one, else ours
                count = name.rsplit(" ", 1)[1]
                reference = results.get(f"global_bloom {count}")
                if name.startswith("hudi ") and f"hudi {args.hudi} global_bloom {count}" in results:
                    reference = results[f"hudi {args.hudi} global_bloom {count}"]
                ratio_bytes = ratio_time = ""
                if reference is not None and "tag_bytes" in r and r["tag_bytes"]:
                    ratio_bytes = f"{reference['tag_bytes'] / r['tag_bytes']:.1f}x"
                if reference is not None:
                    ratio_time = f"{reference['upsert_s'] / r['upsert_s']:.2f}x"
                rows.append({
                    "writer/index": name, "load s": f"{r['load_s']:.1f}",
                    "mdt compact s": f"{r['compact_s']:.1f}" if r.get("compact_s") else "-",
                    "table MiB": f"{r['size'] / 2**20:.0f}",
                    "tag s": f"{r['tag_s']:.2f}" if "tag_s" in r else "-",
                    "tag MiB read": f"{r['tag_bytes'] / 2**20:.1f}" if "tag_bytes" in r else "-",
                    "tag files": str(r.get("tag_files", "-")), "tag bytes vs global_bloom": ratio_bytes,
                    "upsert s": f"{r['upsert_s']:.1f}", "upsert vs global_bloom (same writer's)": ratio_time,
                })  # fmt: skip
            print(f"\n### {human_rows(n)} rows (writer/index, keys upserted)\n")
            print(format_table(rows))
            shutil.rmtree(base)
            for batch, _ in batches:
                shutil.rmtree(batch)
    if java is not None:
        java.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
