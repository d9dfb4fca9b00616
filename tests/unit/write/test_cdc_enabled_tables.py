"""A table with hoodie.table.cdc.enabled=true (created by Apache Hudi for its CDC queries) expects a
CDC log file from every write; we write none, so a write there is refused instead of leaving Java's
change feed silently short.  Reads, our change feed included, work."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.properties import PROPERTIES_FILE
from hoodie_sink.table.storage import Storage

OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id"}


def test_a_write_into_a_cdc_enabled_table_is_refused_and_leaves_it_readable(tmp_path):
    path = str(tmp_path)
    hoodie_sink.write(pa.table({"id": [1, 2], "v": ["a", "b"]}), path, OPTS)
    storage = Storage(path)
    text = storage.read_text(PROPERTIES_FILE)
    storage.write_atomic(PROPERTIES_FILE, (text.rstrip("\n") + "\nhoodie.table.cdc.enabled=true\n").encode())
    with pytest.raises(HoodieTableError, match="hoodie.table.cdc.enabled=true.*CDC log file"):
        hoodie_sink.write(pa.table({"id": [1], "v": ["c"]}), path, OPTS)
    assert sorted(hoodie_sink.read(path).column("v").to_pylist()) == ["a", "b"]
    feed = hoodie_sink.read(path, {"hoodie.datasource.query.type": "incremental",
                                   "hoodie.datasource.read.begin.instanttime": "earliest",
                                   "hoodie.datasource.query.incremental.format": "cdc"})  # fmt: skip
    assert feed.column("op").to_pylist() == ["i", "i"]
