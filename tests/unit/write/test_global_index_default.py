"""GLOBAL_BLOOM moves a key whose partition value changed unless told otherwise, as Hudi 0.14+ does
(its `hoodie.bloom.index.update.partition.path` defaults to true): a Java writer and ours, given
the same options, must leave the same table."""

from __future__ import annotations

import pyarrow as pa

import hoodie_sink
from hoodie_sink.table.options.write_config import WriteConfig
from tests.support.tables import hudi_rs_read

SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64())])
OPTS = {
    "hoodie.table.name": "moves",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.index.type": "GLOBAL_BLOOM",
}


def _cities(table: pa.Table) -> dict[int, str]:
    """id -> the partition the row is stored in (the city column holds the record's own value)."""
    return dict(
        zip(table.column("id").to_pylist(), table.column("_hoodie_partition_path").to_pylist(), strict=True)
    )


def test_the_default_moves_a_key_to_its_new_partition(tmp_path):
    assert WriteConfig.from_options(OPTS, path=str(tmp_path)).update_partition_path is True
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        path = str(tmp_path / table_type)
        opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
        hoodie_sink.write(pa.Table.from_pylist([{"id": 1, "city": "a", "ts": 1}, {"id": 2, "city": "a", "ts": 1}],
                                               schema=SCHEMA), path, opts)  # fmt: skip
        hoodie_sink.write(pa.Table.from_pylist([{"id": 1, "city": "b", "ts": 2}], schema=SCHEMA), path, opts)
        want = {1: "b", 2: "a"}
        assert _cities(hoodie_sink.read(path)) == want, table_type
        assert _cities(hudi_rs_read(path)) == want, table_type


def test_false_keeps_the_key_where_it_is_stored(tmp_path):
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.bloom.index.update.partition.path": "false"}
    hoodie_sink.write(pa.Table.from_pylist([{"id": 1, "city": "a", "ts": 1}], schema=SCHEMA), path, opts)
    hoodie_sink.write(pa.Table.from_pylist([{"id": 1, "city": "b", "ts": 2}], schema=SCHEMA), path, opts)
    assert _cities(hoodie_sink.read(path)) == {1: "a"}
