"""A streaming query's micro-batches append their per-phase metrics to hoodie.sink.metrics.file
(Spark's Python DataSource has no custom-metrics hook in the query progress: see table/metrics.py)."""

from __future__ import annotations

import json

from tests.spark.test_streaming import cdc_files, model_of, run_stream
from tests.support.tables import assert_table_matches, streaming_batch_ids


def test_each_micro_batch_appends_one_metrics_line(spark, tmp_path):
    batches = cdc_files(tmp_path / "src", 4)
    metrics = tmp_path / "metrics.jsonl"
    run_stream(
        spark, tmp_path / "src", tmp_path / "t", tmp_path / "ckpt", {"hoodie.sink.metrics.file": str(metrics)}
    )
    assert_table_matches(tmp_path / "t", model_of(batches))
    lines = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert len(lines) == 4 == len(streaming_batch_ids(tmp_path / "t"))
    assert [ln["rows_in"] for ln in lines] == [len(b) for b in batches]
    assert all(
        ln["tasks"] >= 1 and {"tag", "write", "commit", "clean"} <= set(ln["phases_ms"]) for ln in lines
    )
