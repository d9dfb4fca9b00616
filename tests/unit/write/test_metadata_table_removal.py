"""Hudi's metadata table turned off (hoodie.metadata.enable=false): Java 0.14+ builds
`.hoodie/metadata` and lists it in hoodie.properties; its readers then list files from it, where
commits that do not keep it are not.  Such writes (and clustering) remove it first, as Java's
writers do with the metadata table turned off: properties, then folder.  (Unset, a write keeps the
table's metadata table: tests/unit/metadata.)
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.metadata_table import METADATA_TABLE_DIR
from hoodie_sink.table.format.properties import PROPERTIES_FILE, parse_properties
from hoodie_sink.table.metadata.data_properties import PROPERTIES_CRC
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.services import clustering
from hoodie_sink.table.storage import Storage
from tests.support.tables import APPEND_OPTS, small_file_clustering

OPTS = {**APPEND_OPTS, "hoodie.metadata.enable": "false"}
CLUSTER = small_file_clustering()
JAVA_LINES = (
    "hoodie.table.metadata.partitions=column_stats,files",
    "hoodie.table.metadata.partitions.inflight=record_index",
    "hoodie.table.timeline.timezone=LOCAL",
)


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": [f"k{i}" for i in range(start, start + n)], "v": list(range(start, start + n))})


def _as_if_java_built_it(storage: Storage) -> None:
    """What a Java 0.15 writer leaves: the partitions in hoodie.properties, the table's folder."""
    text = storage.read_text(PROPERTIES_FILE)
    storage.write_bytes(PROPERTIES_FILE, (text + "\n".join(JAVA_LINES) + "\n").encode())
    storage.write_bytes(PROPERTIES_CRC, b"crc\x00")  # Hadoop's local file system's checksum of it
    storage.write_bytes(f"{METADATA_TABLE_DIR}/.hoodie/hoodie.properties", b"hoodie.table.name=t_metadata\n")
    storage.write_bytes(f"{METADATA_TABLE_DIR}/files/.files-0000-0_00000000000000010.log.1_0-0-0", b"x")


def _timeline_files(storage: Storage) -> list[str]:
    return sorted(n for n in storage.list_names(".hoodie") if n[:1].isdigit())


def _assert_removed(storage: Storage) -> None:
    props = parse_properties(storage.read_text(PROPERTIES_FILE))
    assert props["hoodie.table.metadata.partitions"] == ""
    assert props["hoodie.table.metadata.partitions.inflight"] == ""
    assert props["hoodie.table.timeline.timezone"] == "LOCAL"  # every other line as Java wrote it
    assert not storage.exists(METADATA_TABLE_DIR)
    assert not storage.exists(PROPERTIES_CRC)  # stale: Java would refuse to load the properties


def test_write_removes_the_metadata_table(tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(_rows(5), path, OPTS)
    storage = Storage(path)
    _as_if_java_built_it(storage)
    hoodie_sink.write(_rows(5, start=5), path, OPTS)
    _assert_removed(storage)


def test_properties_are_cleared_before_the_folder_goes_and_before_the_instant(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    hoodie_sink.write(_rows(5), path, OPTS)
    storage = Storage(path)
    _as_if_java_built_it(storage)
    instants = _timeline_files(storage)

    def crash(self, rel):
        raise OSError(f"crash while deleting {rel}")

    monkeypatch.setattr(Storage, "delete_dir", crash)
    with pytest.raises(OSError, match="crash while deleting"):
        hoodie_sink.write(_rows(5, start=5), path, OPTS)
    # Java readers list the storage from here on: the stale folder misleads nobody
    assert parse_properties(storage.read_text(PROPERTIES_FILE))["hoodie.table.metadata.partitions"] == ""
    assert storage.exists(METADATA_TABLE_DIR)
    assert _timeline_files(storage) == instants  # no instant begun, no file written
    monkeypatch.undo()
    hoodie_sink.write(_rows(5, start=5), path, OPTS)  # the next write finishes the removal
    _assert_removed(storage)


def test_clustering_removes_the_metadata_table(tmp_path):
    path = str(tmp_path / "t")
    for i in range(3):
        hoodie_sink.write(_rows(5, start=10 * i), path, OPTS)
    storage = Storage(path)
    _as_if_java_built_it(storage)
    assert clustering.run(WriteConfig.from_options({**OPTS, **CLUSTER}, path=path)) is not None
    _assert_removed(storage)
