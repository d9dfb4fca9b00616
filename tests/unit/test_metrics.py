"""Per-phase write metrics (issue 11 item 5): one JSON line per commit in hoodie.sink.metrics.file,
phases present and non-negative, counts equal to the commit's write stats, and the log line."""

from __future__ import annotations

import json
import logging

import pyarrow as pa

import hoodie_sink
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.storage import Storage

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
}


def test_each_commit_appends_one_metrics_line_that_matches_its_write_stats(tmp_path, caplog):
    path, metrics = tmp_path / "t", tmp_path / "m" / "metrics.jsonl"
    opts = {**OPTS, "hoodie.sink.metrics.file": str(metrics)}
    caplog.set_level(logging.INFO)
    hoodie_sink.write(
        pa.Table.from_pylist([{"id": i, "p": f"p{i % 2}", "ts": 1} for i in range(10)]), str(path), opts
    )
    hoodie_sink.write(
        pa.Table.from_pylist([{"id": i, "p": f"p{i % 2}", "ts": 2} for i in range(5, 15)]), str(path), opts
    )
    lines = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert len(lines) == 2
    timeline = ActiveTimeline.load(Storage(str(path)))
    for line, inst in zip(lines, timeline.completed(), strict=True):
        md = timeline.commit_metadata(inst)
        t = md.totals()
        assert line["instant"] == inst.timestamp and line["operation"] == md.operation_type
        assert (line["inserts"], line["updates"], line["deletes"], line["bytes_written"]) == (
            t["numInserts"], t["numUpdateWrites"], t["numDeletes"], t["totalWriteBytes"])  # fmt: skip
        assert line["rows_in"] == 10 and line["tasks"] == 1
        assert set(line["phases_ms"]) >= {"tag", "write", "merge", "commit", "clustering", "clean", "archive"}
        assert all(v >= 0 for v in line["phases_ms"].values()) and line["total_ms"] >= 0
    assert lines[1]["updates"] == 5 and lines[1]["inserts"] == 5
    assert sum("hoodie: metrics commit" in r.getMessage() for r in caplog.records) == 2


def test_without_the_option_nothing_is_written(tmp_path):
    hoodie_sink.write(pa.Table.from_pylist([{"id": 1, "p": "p0", "ts": 1}]), str(tmp_path / "t"), OPTS)
    assert not list(tmp_path.rglob("*.jsonl"))
