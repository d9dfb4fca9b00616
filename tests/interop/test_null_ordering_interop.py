"""Issue 25 item 8, the evidence: what Apache Hudi 0.15 (Java) does with a null ordering
(precombine) value, and that Java, hudi-rs and our reader agree on tables holding stored nulls
(docs/hudi/null-ordering.md).

- Java's upsert refuses a null ordering value ("Ordering value is null for record"), COW and MOR,
  and leaves the table as it was: so do we (tests/unit/write/test_null_ordering.py).
- Java's bulk_insert stores nulls; the next upsert of such a key wins whatever its value, by
  Java's writer as by ours, and every reader returns the same rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieSchemaError
from tests.interop.compare import assert_readers_agree
from tests.interop.java_hudi import JavaHudiError
from tests.interop.test_java_reads_ours import ARROW, BASE, java_options

pytestmark = [pytest.mark.compat, pytest.mark.interop]


def table(*tuples) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(ARROW.names, t, strict=True)) for t in tuples], schema=ARROW)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_java_and_we_refuse_a_null_ordering_value_and_agree_on_stored_nulls(java_hudi, tmp_path, table_type):
    path = str(tmp_path / "t")
    opts = {**BASE, "hoodie.datasource.write.table.type": table_type}
    stored = [(1, "sf", 5, 1.0), (2, "sf", 5, 2.0)]
    hoodie_sink.write(table(*stored), path, opts)
    upsert_with_null = table((1, "sf", None, 9.0), (3, "sf", 7, 3.0))
    with pytest.raises(JavaHudiError) as refused:
        java_hudi.write(path, upsert_with_null, java_options(opts))
    assert "HoodieException: Ordering value is null for record" in refused.value.trace
    with pytest.raises(HoodieSchemaError, match="Column 'ts'"):
        hoodie_sink.write(upsert_with_null, path, opts)
    model = {r[0]: r for r in stored}
    assert_readers_agree(
        java_hudi.read(path), path, [dict(zip(ARROW.names, r, strict=True)) for r in model.values()]
    )

    # Java's bulk_insert stores nulls (we refuse them on merge-on-read tables, and store them on
    # copy-on-write ones); then an upsert of those keys wins whatever its value, Java's or ours
    nulls = [(4, "sf", None, 4.0), (5, "sf", None, 5.0), (6, "nyc", None, 6.0)]
    java_hudi.write(
        path, table(*nulls), java_options(opts, **{"hoodie.datasource.write.operation": "bulk_insert"})
    )
    model.update({r[0]: r for r in nulls})
    assert_readers_agree(
        java_hudi.read(path), path, [dict(zip(ARROW.names, r, strict=True)) for r in model.values()]
    )
    ours, theirs = [(4, "sf", 0, 40.0), (6, "nyc", 3, 60.0)], [(5, "sf", 1, 50.0)]
    hoodie_sink.write(table(*ours), path, opts)
    java_hudi.write(path, table(*theirs), java_options(opts))
    model.update({r[0]: r for r in ours + theirs})
    assert_readers_agree(
        java_hudi.read(path), path, [dict(zip(ARROW.names, r, strict=True)) for r in model.values()]
    )
