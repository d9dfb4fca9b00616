"""Soak benchmark: a long streaming upsert with the table services on (cleaning and archival at
their defaults) against the same stream with them off, in one local[2] session.

Input: Spark's rate-micro-batch source, --rows rows per micro-batch over --keys keys in
--partitions partitions (every batch updates every partition: copy-on-write rewrites one file
group per partition per batch).  Per micro-batch it records Spark's addBatch duration (which
includes our commit and the services after it) and, after the batch, the table on storage:
data files and bytes, files in .hoodie/, archive files (tests/support/soak.py).

Prints, per window of 50 batches, the median addBatch and the storage at the window's end for
both runs; the ratio of the last 50 batches' median addBatch to batches 50-100 (target <= 1.3);
the services' cost (on/off median addBatch ratio).  Writes the samples as JSON and a plot
(--plot, default benchmarks/soak_services.png; needs matplotlib: pip install '.[bench]').
Both tables are checked against the model with hudi-rs.

    .venv/bin/python benchmarks/bench_soak.py --batches 400
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import SparkSettings, build_spark, format_table  # noqa: E402
from tests.support.soak import BatchSample, SoakShape, model_rows, run_soak, samples_as_dicts  # noqa: E402
from tests.support.tables import assert_table_matches, streaming_batch_ids  # noqa: E402

OFF = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def windows(samples: list[BatchSample], size: int = 50) -> dict[int, list[BatchSample]]:
    out: dict[int, list[BatchSample]] = {}
    for s in samples:
        out.setdefault(s.batch_id // size, []).append(s)
    return out


def median_ms(samples: list[BatchSample]) -> float:
    return statistics.median(s.add_batch_ms for s in samples) if samples else float("nan")


def plot(on: list[BatchSample], off: list[BatchSample], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(9, 10), sharex=True)
    for samples, label in ((on, "services on (default)"), (off, "services off")):
        x = [s.batch_id for s in samples]
        axes[0].plot(x, [s.add_batch_ms for s in samples], label=label, linewidth=0.8)
        axes[1].plot(x, [s.data_bytes / 2**20 for s in samples], label=label)
        axes[2].plot(x, [s.timeline_files for s in samples], label=label)
    axes[0].set_ylabel("addBatch ms")
    axes[0].set_yscale("log")
    axes[1].set_ylabel("data on storage, MiB")
    axes[2].set_ylabel("files in .hoodie/")
    axes[2].set_xlabel("micro-batch")
    for ax in axes:
        ax.legend()
        ax.grid(alpha=0.3)
    fig.suptitle("Streaming upsert, 1,000 rows per micro-batch, 10,000 keys, 8 partitions (COW)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=400)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--plot", default=str(Path(__file__).with_name("soak_services.png")))
    ap.add_argument("--json", default=str(Path(__file__).with_name("soak_services.json")))
    args = ap.parse_args()
    shape = SoakShape(args.rows, args.keys, args.partitions, args.batches)
    spark = build_spark(SparkSettings(master="local[2]", driver_memory="4g"), "bench_soak")
    import hoodie_sink

    hoodie_sink.register(spark)
    scratch = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    results = {}
    try:
        for name, options in (("on", {}), ("off", OFF)):
            path = scratch / name
            samples, took = run_soak(spark, path, scratch / f"ckpt-{name}", shape, options)
            committed = streaming_batch_ids(path)
            assert committed == list(range(len(committed))), f"{name}: commits out of order or doubled"
            assert_table_matches(path, model_rows(shape, len(committed)))  # hudi-rs and our reader
            results[name] = samples
            print(f"services {name}: {len(committed)} micro-batches in {took:.0f}s, table equals the model")
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    on, off = results["on"], results["off"]
    rows = []
    w_on, w_off = windows(on), windows(off)
    for w in sorted(w_on):
        a, b = w_on[w], w_off.get(w, [])
        rows.append({
            "batches": f"{w * 50}-{w * 50 + 49}",
            "addBatch ms on": f"{median_ms(a):.0f}",
            "addBatch ms off": f"{median_ms(b):.0f}",
            "data files on": str(a[-1].data_files),
            "data MiB on": f"{a[-1].data_bytes / 2**20:.0f}",
            "data MiB off": f"{b[-1].data_bytes / 2**20:.0f}" if b else "-",
            ".hoodie files on": str(a[-1].timeline_files),
            ".hoodie files off": str(b[-1].timeline_files) if b else "-",
            "archive files": str(a[-1].archive_files),
        })  # fmt: skip
    print(format_table(rows))
    early = median_ms([s for s in on if 50 <= s.batch_id < 100])
    late = median_ms(on[-50:])
    print(f"addBatch median, services on: batches 50-100 {early:.0f} ms, last 50 {late:.0f} ms: "
          f"{late / early:.2f}x (target <= 1.3)")  # fmt: skip
    print(
        f"services' cost: median addBatch on/off over all batches {median_ms(on[1:]) / median_ms(off[1:]):.2f}x"
    )
    print(f"storage at the end: on {on[-1].data_bytes / 2**20:.0f} MiB in {on[-1].data_files} files, "
          f"off {off[-1].data_bytes / 2**20:.0f} MiB in {off[-1].data_files} files; .hoodie/ files on "
          f"{on[-1].timeline_files}, off {off[-1].timeline_files}")  # fmt: skip
    Path(args.json).write_text(json.dumps({"on": samples_as_dicts(on), "off": samples_as_dicts(off)}))
    try:
        plot(on, off, Path(args.plot))
        print(f"plot: {args.plot}")
    except ImportError:
        print("matplotlib is not installed: no plot (pip install '.[bench]')")


if __name__ == "__main__":
    main()
