"""Engine-API reads (no Spark): null/empty partition values, time travel, pinned snapshots."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.fs_view import list_table_files
from hoodie_sink.table.storage import Storage
from tests.support.tables import assert_table_matches

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
}


def _city_rows():
    return [
        {"id": 1, "city": "sf"},
        {"id": 2, "city": None},
        {"id": 3, "city": ""},
        {"id": 4, "city": "_x"},  # a value starting with '_' is a partition too
    ]


@pytest.mark.parametrize("hive", [False, True])
def test_null_and_empty_partition_values_are_read(tmp_path, hive):
    """Null and empty values are written under __HIVE_DEFAULT_PARTITION__ (Hudi's KeyGenUtils);
    the view used to skip folders starting with '_', losing those rows."""
    path = tmp_path / "t"
    rows = _city_rows()
    opts = {**OPTS, "hoodie.datasource.write.hive_style_partitioning": str(hive).lower()}
    hoodie_sink.write(pa.Table.from_pylist(rows), str(path), opts)
    default = "city=__HIVE_DEFAULT_PARTITION__" if hive else "__HIVE_DEFAULT_PARTITION__"
    assert (path / default).is_dir()
    assert default in list_table_files(Storage(str(path))).partitions
    assert_table_matches(path, rows)  # hudi-rs and our reader


def test_underscore_folders_without_partition_metadata_are_not_partitions(tmp_path):
    """Spark's `_temporary` leftovers (no .hoodie_partition_metadata) stay out of the table
    (as in Hudi's partition listing; hudi-rs itself fails on such a file, so only our reader)."""
    path = tmp_path / "t"
    rows = _city_rows()
    hoodie_sink.write(pa.Table.from_pylist(rows), str(path), OPTS)
    junk = path / "_temporary" / "0"
    junk.mkdir(parents=True)
    (junk / "part-00000.parquet").write_bytes(b"not a base file")
    got = hoodie_sink.read(str(path), columns=["id", "city"]).sort_by("id").to_pylist()
    assert got == rows
