"""Apache Hudi 0.15 (Java) reads the tables of the schema evolution sequence of
tests/unit/write/test_schema_evolution.py (a nullable column and a struct field added, int -> long
-> double, a narrower batch cast up, batches lacking columns reconciled), after every write and,
for merge-on-read, after compaction: the rows equal the model's (docs/hudi/schema-evolution.md)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from tests.support.tables import data_rows, sort_rows
from tests.unit.write.test_schema_evolution import OPTS, Model, ids, run_sequence

pytestmark = [pytest.mark.compat, pytest.mark.interop]


class JavaChecked(Model):
    """The unit test's model, with Java's snapshot read compared after every check."""

    def __init__(self, path: Path, table_type: str, java_hudi):
        super().__init__(path, table_type)
        self.java = java_hudi

    def check(self) -> None:
        super().check()
        want = sort_rows([self.expected(r) for r in self.rows.values()])
        assert data_rows(self.java.read(self.path)) == want


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_java_reads_every_schema_of_the_sequence(java_hudi, tmp_path: Path, table_type: str) -> None:
    m = JavaChecked(tmp_path / "t", table_type, java_hudi)
    run_sequence(m)
    if table_type == "MERGE_ON_READ":
        assert hoodie_sink.compact(m.path, m.options)
        m.check()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_java_reads_columns_promoted_to_text(java_hudi, tmp_path: Path, table_type: str) -> None:
    """int and long columns become string columns (older values read as their decimal text), a
    string column takes numbers, a bytes column takes text (docs/hudi/schema-evolution.md#type-promotions)."""
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    keys = list(range(10))
    odd = keys[1::2]
    first = {"i": pa.array(keys, pa.int32()), "l": pa.array([k * 2**33 for k in keys], pa.int64()),
             "t": pa.array([f"t{k}" for k in keys]), "b": pa.array([b"b%d" % k for k in keys])}  # fmt: skip
    later = {"i": pa.array([f"i{k}" for k in odd]), "l": pa.array([f"l{k}" for k in odd]),
             "t": pa.array(odd, pa.int64()), "b": pa.array([f"s{k}" for k in odd])}  # fmt: skip
    hoodie_sink.write(pa.table({**ids(*keys), "ts": pa.array([1] * 10, pa.int64()), **first}), path, opts)
    hoodie_sink.write(pa.table({**ids(*odd), "ts": pa.array([2] * 5, pa.int64()), **later}), path, opts)
    want = [{"id": k, "part": "ab"[k % 2], "ts": 2 if k % 2 else 1,
             **({"i": f"i{k}", "l": f"l{k}", "t": str(k), "b": f"s{k}".encode()} if k % 2
                else {"i": str(k), "l": str(k * 2**33), "t": f"t{k}", "b": b"b%d" % k})} for k in keys]  # fmt: skip
    assert data_rows(java_hudi.read(path)) == sort_rows(want)
    if table_type == "MERGE_ON_READ":
        hoodie_sink.compact(path, opts)
        assert data_rows(java_hudi.read(path)) == sort_rows(want)
