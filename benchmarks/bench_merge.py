"""Benchmark: MERGE of a 1% change set into a --rows table, ours (`hoodie_sink.Table.merge`) against
delta-rs's `DeltaTable.merge` on a Delta copy of the same rows, same process, same run (issue 30).

The table: --rows rows of trips (id string key, city partition, fare, ts), written once by each
(our bulk_insert into a copy-on-write or merge-on-read table, delta-rs's write_deltalake, both
partitioned by city).  The change set: --fraction of --rows rows, half updates of stored keys
picked at random across the table, half new keys.  Each MERGE is

    t.id = s.id  WHEN MATCHED THEN UPDATE SET *  WHEN NOT MATCHED THEN INSERT *

run --repeats times on disjoint change sets (median reported), each followed by a check that both
tables hold the same number of rows.  With --spark, the same merges also run with the change set as
a Spark DataFrame (local[2]; each change set written to Parquet once and read back, so that every
timed merge starts from the same file scan), on a third copy of each table: one Spark job per merge
(datasource/dml.py), against the same delta-rs figure.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_merge.py --rows 2000000 [--spark]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import SparkSettings, build_spark, format_table, scratch_dir  # noqa: E402

CITIES = ("sf", "nyc", "la", "chi", "sea", "bos", "atx", "den", "mia", "pdx")


def trips(ids, ts: int, seed: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    n = len(ids)
    return pa.table({
        "id": pa.array([f"k{i:010d}" for i in ids]),
        "city": pa.array(np.array(CITIES)[np.asarray(ids, np.int64) % len(CITIES)]),  # a key keeps its city
        "fare": pa.array(rng.random(n) * 100),
        "rider": pa.array([f"r{i % 9973}" for i in ids]),
        "ts": pa.array(np.full(n, ts, np.int64)),
    })  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--table-types", default="COPY_ON_WRITE,MERGE_ON_READ")
    ap.add_argument("--index", default="BLOOM")
    ap.add_argument("--scratch", default=None)
    ap.add_argument("--spark", action="store_true", help="also merge each change set as a Spark DataFrame")
    args = ap.parse_args()
    with scratch_dir(args.scratch, "bench_merge") as root:
        run(args, root)


def run(args: argparse.Namespace, root: str) -> None:
    import numpy as np
    from deltalake import DeltaTable, write_deltalake

    import hoodie_sink
    from hoodie_sink.table.client.table import Table

    base = trips(range(args.rows), 1, seed=1)
    changes = max(2, int(args.rows * args.fraction))
    rng = np.random.default_rng(7)
    out = []
    delta_path = os.path.join(root, "delta")
    shutil.rmtree(delta_path, ignore_errors=True)
    started = time.perf_counter()
    write_deltalake(delta_path, base, partition_by=["city"])
    out.append(
        {"writer": "delta-rs", "table": "Delta", "step": "load", "s": f"{time.perf_counter() - started:.1f}"}
    )
    next_id = args.rows
    sources = []
    for r in range(args.repeats):
        stored = rng.choice(args.rows, changes // 2, replace=False)
        new = np.arange(next_id, next_id + changes - changes // 2)
        next_id += len(new)
        sources.append(trips(np.concatenate([stored, new]).tolist(), 10 + r, seed=100 + r))
    delta_times = []
    for source in sources:
        started = time.perf_counter()
        DeltaTable(delta_path).merge(
            source, "t.id = s.id", source_alias="s", target_alias="t"
        ).when_matched_update_all().when_not_matched_insert_all().execute()
        delta_times.append(time.perf_counter() - started)
    delta_rows = DeltaTable(delta_path).to_pyarrow_dataset().count_rows()
    delta_median = statistics.median(delta_times)
    out.append({"writer": "delta-rs", "table": "Delta", "step": "merge median", "s": f"{delta_median:.2f}",
                "runs": " ".join(f"{t:.2f}" for t in delta_times), "vs delta-rs": "1.00x"})  # fmt: skip

    spark_sources = []
    if args.spark:
        spark = build_spark(SparkSettings(), "bench_merge")
        for r, source in enumerate(sources):
            staged = os.path.join(root, f"source-{r}.parquet")
            spark.createDataFrame(source).write.mode("overwrite").parquet(staged)
            spark_sources.append(spark.read.parquet(staged))
    runs = [(t, "arrow") for t in args.table_types.split(",")]
    runs += [(t, "spark") for t in args.table_types.split(",") if args.spark]
    for table_type, kind in runs:
        path = os.path.join(root, f"{table_type.lower()}-{kind}")
        shutil.rmtree(path, ignore_errors=True)
        opts = {
            "hoodie.table.name": "trips", "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "city", "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.type": table_type, "hoodie.index.type": args.index,
        }  # fmt: skip
        started = time.perf_counter()
        hoodie_sink.write(base, path, {**opts, "hoodie.datasource.write.operation": "bulk_insert"})
        out.append(
            {
                "writer": "hoodie_sink",
                "table": table_type,
                "step": "load",
                "s": f"{time.perf_counter() - started:.1f}",
            }
        )
        times = []
        for source in spark_sources if kind == "spark" else sources:
            started = time.perf_counter()
            hoodie_sink.Table(path, opts).merge(
                source, "t.id = s.id", source_alias="s", target_alias="t"
            ).when_matched_update_all().when_not_matched_insert_all().execute()
            times.append(time.perf_counter() - started)
        rows = Table(path, opts).read(columns=["id"]).num_rows
        if rows != delta_rows:
            raise SystemExit(f"row counts differ: ours {rows}, delta-rs {delta_rows}")
        med = statistics.median(times)
        writer = "hoodie_sink" if kind == "arrow" else "hoodie_sink, Spark DataFrame"
        out.append({"writer": writer, "table": f"{table_type} {args.index}", "step": "merge median",
                     "s": f"{med:.2f}", "runs": " ".join(f"{t:.2f}" for t in times),
                     "vs delta-rs": f"{med / delta_median:.2f}x"})  # fmt: skip
    print(
        f"MERGE of {changes:,} rows ({args.fraction:.2%}, half updates) into {args.rows:,} rows; "
        f"rows after: {delta_rows:,}"
    )
    print(format_table(out))


if __name__ == "__main__":
    main()
