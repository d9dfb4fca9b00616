"""Apache Hudi 0.15 (Java) reads the partial-update tables we write (PartialUpdateAvroPayload,
docs/hudi/partial-update.md): copy-on-write, and merge-on-read with log files (its log scanner and
merge with the base row fold as our reader does), then after compaction.  Then Java upserts partial
records into our table and our reader reads what Java reads."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from tests.unit.write.test_partial_update import DATA, SCHEMA, data_of, options, ours, run_sequence

pytestmark = [pytest.mark.compat, pytest.mark.interop]


def java_options(opts: dict) -> dict:
    return {k: v for k, v in opts.items() if k != "hoodie.compact.inline"}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_java_reads_our_partial_updates(java_hudi, tmp_path, table_type):
    path = tmp_path / "t"
    for _ in run_sequence(path, table_type, 21, rounds=6):
        assert data_of(java_hudi.read(path)) == data_of(ours(path))
    if table_type == "MERGE_ON_READ":
        hoodie_sink.compact(str(path), options(table_type))
        assert data_of(java_hudi.read(path)) == data_of(ours(path))

    # Java's own partial upsert on our table: a late record and a newer one with nulls
    stored = data_of(ours(path))
    k_late, k_new = sorted(stored)[:2]
    late = {**stored[k_late], "ts": -1, "a": None, "b": 123456, "c": None}
    newer = {**stored[k_new], "ts": 99, "a": "java", "b": None, "c": None}
    batch = pa.Table.from_pylist([late, newer], schema=SCHEMA)
    java_hudi.write(path, batch, java_options(options(table_type)))
    got = data_of(ours(path))
    assert got == data_of(java_hudi.read(path))
    assert got[k_new] == {**stored[k_new], "ts": 99, "a": "java"}
    want_late = dict(stored[k_late])
    for c in DATA:
        if want_late[c] is None:
            want_late[c] = late[c]
    assert got[k_late] == want_late
