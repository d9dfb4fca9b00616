"""We read and write table version 6 with timeline layout 1 only. Hudi 1.x upgrades a v6 table
to v8 on its first write by default (timeline moved to .hoodie/timeline/): before the guard we
kept writing into .hoodie/, where Java 1.x never looks, and read an empty or stale table."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.properties import PROPERTIES_FILE
from hoodie_sink.table.storage import Storage

OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id"}


def _rows(ids):
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([1] * len(ids), pa.int64())})


def _as_version(path, version: str, layout: str) -> list[str]:
    """Rewrite hoodie.properties as Hudi's upgrade leaves it; the files of the table afterwards."""
    storage = Storage(str(path))
    lines = [
        line
        for line in storage.read_text(PROPERTIES_FILE).splitlines()
        if not line.startswith(("hoodie.table.version=", "hoodie.timeline.layout.version="))
    ]
    lines += [f"hoodie.table.version={version}", f"hoodie.timeline.layout.version={layout}"]
    storage.write_atomic(PROPERTIES_FILE, ("\n".join(lines) + "\n").encode())
    return sorted(storage.walk_files(""))


@pytest.mark.parametrize("version,layout", [("8", "2"), ("9", "2"), ("5", "1"), ("6", "2")])
def test_a_write_into_another_table_version_is_refused_before_anything_is_written(tmp_path, version, layout):
    hoodie_sink.write(_rows([1, 2]), str(tmp_path), OPTS)
    before = _as_version(tmp_path, version, layout)
    with pytest.raises(HoodieTableError) as err:
        hoodie_sink.write(_rows([3]), str(tmp_path), OPTS)
    message = str(err.value)
    assert f"hoodie.table.version={version}" in message
    assert "hoodie.write.auto.upgrade=false" in message and "hoodie.write.table.version=6" in message
    assert sorted(Storage(str(tmp_path)).walk_files("")) == before


def test_a_read_of_another_table_version_is_refused(tmp_path):
    hoodie_sink.write(_rows([1, 2]), str(tmp_path), OPTS)
    _as_version(tmp_path, "8", "2")
    with pytest.raises(HoodieTableError, match="hoodie.table.version=8"):
        hoodie_sink.read(str(tmp_path))
