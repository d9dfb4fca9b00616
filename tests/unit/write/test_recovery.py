"""Issue 10: crashed writes of Java Hudi and of ours are recoverable by the other side.

A crashed Java write is simulated on storage as Java 0.15 leaves it (format doc §8): pending
timeline files, a data file named with the instant, and its markers, direct or (Java Spark's
default) timeline-server based.
"""

from __future__ import annotations

import posixpath

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.markers import list_marked_files, marker_dir
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.rollback import files_of_instant, rollback_failed_writes
from tests.support.tables import assert_table_matches

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.operation": "upsert",
}
CRASHED = "20300101000000000"  # newer than anything the test writes


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "p": [f"p{i % 2}" for i in ids],
                     "v": [float(i) for i in ids]})  # fmt: skip


def table_with_one_commit(tmp_path) -> tuple[str, Storage, BaseFile]:
    path = str(tmp_path / "t")
    hoodie_sink.write(rows(0, 4), path, OPTS)
    storage = Storage(path)
    rel = next(p for p in storage.walk_files("p0") if p.endswith(".parquet"))
    bf = BaseFile.parse(*posixpath.split(rel))
    assert bf is not None
    return path, storage, bf


def crash_java_write(storage: Storage, bf: BaseFile, markers: str, io_type: str = "CREATE") -> str:
    """A Java commit that died after writing one new base file (a copy of `bf`, so it reads)."""
    storage.write_bytes(f".hoodie/{CRASHED}.commit.requested", b"")
    storage.write_bytes(f".hoodie/{CRASHED}.inflight", b"")
    name = f"{bf.file_id[:-2]}-9_1-0-1_{CRASHED}.parquet"
    data = f"{bf.partition_path}/{name}"
    storage.write_bytes(data, storage.read_bytes(bf.path))
    marker = f"{data}.marker.{io_type}"
    if markers == "direct":
        storage.write_bytes(f"{marker_dir(CRASHED)}/{marker}", b"")
    elif markers == "timeline_server":
        storage.write_bytes(f"{marker_dir(CRASHED)}/MARKERS.type", b"TIMELINE_SERVER_BASED")
        storage.write_bytes(f"{marker_dir(CRASHED)}/MARKERS0", b"")
        storage.write_bytes(f"{marker_dir(CRASHED)}/MARKERS1", f"{marker}\n".encode())
    return data


def test_timeline_server_markers_name_the_files_of_a_crashed_java_write(tmp_path):
    _, storage, bf = table_with_one_commit(tmp_path)
    data = crash_java_write(storage, bf, "timeline_server")
    assert list_marked_files(storage, CRASHED) == [(data, "CREATE")]
    assert files_of_instant(storage, CRASHED) == [data]


@pytest.mark.parametrize("markers", ["direct", "timeline_server", "none"])
def test_rollback_of_a_crashed_java_write_deletes_its_files(tmp_path, markers):
    path, storage, bf = table_with_one_commit(tmp_path)
    data = crash_java_write(storage, bf, markers)
    rolled = rollback_failed_writes(storage, ActiveTimeline.load(storage))
    assert [i.timestamp for i in rolled] == [CRASHED]
    assert not storage.exists(data)
    assert not storage.exists(marker_dir(CRASHED))
    assert_table_matches(path, rows(0, 4).to_pylist())


def test_rollback_refuses_log_appends_rather_than_delete_the_base_file_an_append_marker_names(tmp_path):
    _, storage, bf = table_with_one_commit(tmp_path)
    storage.write_bytes(f".hoodie/{CRASHED}.deltacommit.requested", b"")
    storage.write_bytes(f"{marker_dir(CRASHED)}/{bf.path}.marker.APPEND", b"")
    with pytest.raises(HoodieTableError, match="APPEND markers"):
        files_of_instant(storage, CRASHED)
    assert storage.exists(bf.path)
