"""A copy-on-write table whose hoodie.properties names no payload class, as Apache Hudi 0.14/0.15's
Spark writers create them: those writers merge with their default OverwriteWithLatestAvroPayload
(the incoming record replaces the stored one, late or not). We merge alike, or the same late
record would win in a Java write and lose in ours. Tables that name their payload keep it."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.properties import PROPERTIES_FILE
from hoodie_sink.table.storage import Storage

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
}
PAYLOAD_KEY = "hoodie.compaction.payload.class"


def _rows(ts: int, v: str) -> pa.Table:
    return pa.table({"id": pa.array([1, 2], pa.int64()), "ts": pa.array([ts, ts], pa.int64()), "v": [v, v]})


def _drop_payload_property(path) -> None:
    storage = Storage(str(path))
    text = storage.read_text(PROPERTIES_FILE)
    lines = [line for line in text.splitlines() if not line.startswith(PAYLOAD_KEY + "=")]
    storage.write_atomic(PROPERTIES_FILE, ("\n".join(lines) + "\n").encode())


def _values(path) -> list[str]:
    return sorted(hoodie_sink.read(str(path)).column("v").to_pylist())


def test_a_late_record_replaces_the_stored_one_on_a_table_without_payload_class(tmp_path):
    hoodie_sink.write(
        _rows(ts=10, v="stored"), str(tmp_path), {**OPTS, "hoodie.datasource.write.operation": "insert"}
    )
    _drop_payload_property(tmp_path)  # what Java 0.15 leaves
    hoodie_sink.write(_rows(ts=5, v="late"), str(tmp_path), OPTS)
    assert _values(tmp_path) == ["late", "late"]


@pytest.mark.parametrize(
    "payload,expected",
    [
        ("org.apache.hudi.common.model.DefaultHoodieRecordPayload", ["stored", "stored"]),
        ("org.apache.hudi.common.model.OverwriteWithLatestAvroPayload", ["late", "late"]),
    ],
)
def test_a_table_that_names_its_payload_keeps_it(tmp_path, payload, expected):
    write = {**OPTS, "hoodie.datasource.write.payload.class": payload}
    hoodie_sink.write(
        _rows(ts=10, v="stored"), str(tmp_path), {**write, "hoodie.datasource.write.operation": "insert"}
    )
    hoodie_sink.write(_rows(ts=5, v="late"), str(tmp_path), OPTS)
    assert _values(tmp_path) == expected
