"""A long streaming upsert into the `hoodie` sink with its table services on, measured per batch.

Shared by the soak test (tests/interop/test_soak_services.py, 300 micro-batches in CI) and the
soak benchmark (benchmarks/bench_soak.py, longer, with a plot).  The input is Spark's
`rate-micro-batch` source: micro-batch b holds the values [b*R, (b+1)*R), so the model of the
table after n committed batches is known without keeping the input: key = value % KEYS, the
key's row is its largest value (the precombine field), partition = key % PARTITIONS.

Per batch it records Spark's addBatch duration (a StreamingQueryListener: Spark's own figure,
which includes our commit and the table services after it) and, after the batch, what the table
holds on storage: data files and bytes, timeline files in .hoodie/, archive files.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener


@dataclass(frozen=True)
class SoakShape:
    rows_per_batch: int = 1000
    keys: int = 10_000
    partitions: int = 8
    batches: int = 300


@dataclass(frozen=True)
class BatchSample:
    batch_id: int
    add_batch_ms: int
    data_files: int
    data_bytes: int
    timeline_files: int
    archive_files: int


def storage_of(path: Path) -> tuple[int, int, int, int]:
    """(data files, data bytes, timeline files in .hoodie/, archive files) of the table at path."""
    files = size = 0
    for root, dirs, names in os.walk(path):
        if ".hoodie" in Path(root).relative_to(path).parts[:1]:
            continue
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for n in names:
            if n.endswith(".parquet") or ".log." in n:
                files += 1
                size += os.path.getsize(os.path.join(root, n))
    meta = path / ".hoodie"
    timeline = sum(1 for p in meta.iterdir() if p.is_file()) if meta.exists() else 0
    archived = meta / "archived"
    archives = sum(1 for p in archived.iterdir() if p.is_file()) if archived.exists() else 0
    return files, size, timeline, archives


class _Recorder(StreamingQueryListener):
    def __init__(self, path: Path):
        self.path = path
        self.samples: list[BatchSample] = []
        self.lock = threading.Lock()

    def onQueryStarted(self, event):  # noqa: N802 (Spark's names)
        pass

    def onQueryProgress(self, event):  # noqa: N802
        p = event.progress
        if not p.numInputRows:
            return  # an idle trigger, not a micro-batch of ours
        files, size, timeline, archives = storage_of(self.path)
        with self.lock:
            self.samples.append(
                BatchSample(p.batchId, int(p.durationMs.get("addBatch", 0)), files, size, timeline, archives)
            )

    def onQueryIdle(self, event):  # noqa: N802
        pass

    def onQueryTerminated(self, event):  # noqa: N802
        pass


def run_soak(
    spark: SparkSession, path: Path, ckpt: Path, shape: SoakShape, options: dict[str, str] | None = None
) -> tuple[list[BatchSample], float]:
    """Stream `shape.batches` micro-batches into the table at `path`; returns the per-batch
    samples (sorted by batch id) and the wall time."""
    k, parts = shape.keys, shape.partitions
    df = (
        spark.readStream.format("rate-micro-batch").option("rowsPerBatch", shape.rows_per_batch)
        .option("numPartitions", 2).load()
        .selectExpr(f"value % {k} as id", f"concat('p', cast(value % {k} % {parts} as string)) as part",
                    "value as ts", "cast(value as double) * 0.5 as fare", "repeat('x', 40) as note")
    )  # fmt: skip
    recorder = _Recorder(path)
    spark.streams.addListener(recorder)
    writer = (
        df.writeStream.format("hoodie").option("hoodie.datasource.write.recordkey.field", "id")
        .option("hoodie.datasource.write.partitionpath.field", "part")
        .option("hoodie.datasource.write.precombine.field", "ts")
        .options(**(options or {}))
        .option("checkpointLocation", str(ckpt))
    )  # fmt: skip
    started = time.monotonic()
    q = writer.start(str(path))
    try:
        while q.isActive and (q.lastProgress is None or q.lastProgress["batchId"] < shape.batches - 1):
            time.sleep(0.2)
    finally:
        q.stop()
        took = time.monotonic() - started
        time.sleep(0.5)  # the listener's last event
        spark.streams.removeListener(recorder)
    if q.exception() is not None:
        raise q.exception()
    with recorder.lock:
        samples = sorted(recorder.samples, key=lambda s: s.batch_id)
    return samples, took


def model_rows(shape: SoakShape, batches_committed: int) -> list[dict]:
    """The table after `batches_committed` micro-batches: each key's largest value."""
    last = batches_committed * shape.rows_per_batch - 1
    rows = []
    for key in range(min(shape.keys, last + 1)):
        v = last - (last - key) % shape.keys
        rows.append(
            {"id": key, "part": f"p{key % shape.partitions}", "ts": v, "fare": v * 0.5, "note": "x" * 40}
        )
    return rows


def samples_as_dicts(samples: list[BatchSample]) -> list[dict]:
    return [asdict(s) for s in samples]
