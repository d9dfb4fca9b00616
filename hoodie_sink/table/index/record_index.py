"""The RECORD_INDEX index (hoodie.index.type=RECORD_INDEX, Hudi 0.14+): keys are looked up in the
`record_index` partition of the metadata table (record_index_lookup.py), point look-ups instead of
reading every base file's keys.  Global: a key is unique in the table, and a record whose
partition value changed moves there with hoodie.record.index.update.partition.path (Java's
default: false).

The look-up runs where the write path tags: in the routing transform's tasks and in unrouted
upsert tasks (the locator is built there from the write context, and reads the record index's
current files itself).  Where the record index places a key, the locator checks the file group
is one of the write's latest base files; a key placed elsewhere means the index is out of date
and the write is refused rather than tagged wrong.  Stored values (the ordering field a global
index compares before moving a record) are read from the data file the index points at, as
GLOBAL_BLOOM reads them (key_index.KeyIndex.stored_values).

Until hoodie_sink's writes keep the record index up to date (issue 29 item 1), a write with it
would leave it stale: `check_usable` refuses such writes with the options that work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.arrow_util import as_strings
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.keygen import KeyGenerator
from hoodie_sink.table.format.metadata_keys import RECORD_INDEX
from hoodie_sink.table.format.metadata_table import listed_partitions
from hoodie_sink.table.index.key_index import KeyIndex, Locations, TagResult
from hoodie_sink.table.index.record_index_files import RecordIndexFiles, load_record_index_files
from hoodie_sink.table.index.record_index_lookup import look_up
from hoodie_sink.table.storage import Storage

# Set by the write side (issue 29 item 1) once every write of ours updates the record index
# (inserts, deletes, moves, compaction, clustering, rollback) and keeps the partition listed.
WRITES_MAINTAIN_RECORD_INDEX = False


def check_usable(table_uri: str, table_properties: dict[str, str] | None, keeps_metadata: bool) -> None:
    """Refuse a RECORD_INDEX write that the table or this build cannot serve (before anything
    is written)."""
    options = "hoodie.index.type=RECORD_INDEX"
    if table_properties is None or RECORD_INDEX not in listed_partitions(table_properties):
        raise HoodieConfigError(
            f"Option {options}: table {table_uri} has no record index (its hoodie.properties does not list "
            f"'{RECORD_INDEX}' in hoodie.table.metadata.partitions), and hoodie_sink does not build one yet. "
            "Help: use hoodie.index.type=GLOBAL_BLOOM, or build the record index with Apache Hudi "
            "(hoodie.metadata.enable=true, hoodie.metadata.record.index.enable=true)."
        )
    if not keeps_metadata:
        raise HoodieConfigError(
            f"Options {options} and hoodie.metadata.enable=false on {table_uri}: the write would remove the "
            "metadata table the record index lives in. Help: set hoodie.metadata.enable=true."
        )
    if not WRITES_MAINTAIN_RECORD_INDEX:
        raise HoodieConfigError(
            f"Option {options} on {table_uri}: hoodie_sink's writes do not keep the record index up to date "
            "yet, so it would go stale for the next writer. Help: use hoodie.index.type=GLOBAL_BLOOM (same "
            "global semantics), or write with Apache Hudi."
        )


@dataclass(frozen=True)
class RecordIndex:
    name: str = "record_index"
    is_global: bool = True
    bucketed: bool = False
    deletes_need_partition_path: bool = False
    # as GLOBAL_BLOOM: a merge-on-read delete rewrites the base file, so no reader meets a key in
    # a base file whose log deleted it (stored_values reads base files)
    finds_keys_in_base_files_only: bool = True

    def moves_partitions(self, update_partition_path: bool) -> bool:
        return update_partition_path

    def identity(self, key: str, partition: str) -> list[str]:
        return [key]

    def locator(
        self, storage: Storage, base_files: list[BaseFile], key_generator: KeyGenerator | None
    ) -> KeyIndex | None:
        return RecordIndexLocator(storage, base_files, key_generator)


class RecordIndexLocator(KeyIndex):
    """Tags keys by the record index; `stored_values` is GLOBAL_BLOOM's (KeyIndex's), over the
    same latest base files.  Pickles as a KeyIndex does; the record index's files are listed
    again where it is used (`files`), once per locator."""

    def __init__(
        self, storage: Storage, base_files: list[BaseFile], key_generator: KeyGenerator | None = None
    ):
        super().__init__(storage, base_files, global_index=True, key_generator=key_generator)

    def _prepare(self) -> None:
        super()._prepare()
        self._files_snapshot: RecordIndexFiles | None = None

    @property
    def files(self) -> RecordIndexFiles:
        if self._files_snapshot is None:
            self._files_snapshot = load_record_index_files(self.storage)
        return self._files_snapshot

    def tag(self, keys: pa.Array, partition_paths: pa.Array | None = None) -> TagResult:
        """Where each key lives (all null for a key the record index does not hold: an insert)."""
        return self._result(self._file_of(keys), len(keys))

    def locate(self, keys: pa.Array, partition_paths: pa.Array | None = None) -> Locations:
        """One row per key: the record index holds each key once."""
        n = len(keys)
        return Locations(
            record=np.arange(n, dtype=np.int64),
            tags=self._result(self._file_of(keys), n),
            repeated=pa.array([], pa.string()),
        )

    def _file_of(self, keys: pa.Array) -> np.ndarray:
        """Per key, its file's place in self._files (-1: not in the record index)."""
        keys = as_strings(keys, "record keys", large_ok=False)
        found = look_up(self.storage, self.files, keys)
        at = pc.index_in(found.file_id, value_set=self._file_ids)
        stray = pc.and_(pc.is_valid(found.file_id), pc.is_null(at))
        if pc.any(stray).as_py():
            self._refuse(
                keys,
                found.partition_path,
                found.file_id,
                stray,
                "is not among the table's latest file groups",
            )
        file_of = np.asarray(at.fill_null(-1), np.int32)
        known = file_of >= 0
        if known.any():
            parts = self._file_parts.take(pa.array(np.where(known, file_of, 0)))
            moved = pc.and_(pa.array(known), pc.not_equal(parts, found.partition_path))
            if pc.any(moved).as_py():
                self._refuse(keys, found.partition_path, found.file_id, moved, "lies in another partition")
        return file_of

    def _refuse(self, keys: pa.Array, parts: pa.Array, file_ids: pa.Array, mask: pa.Array, what: str) -> None:
        i = int(np.flatnonzero(np.asarray(mask.fill_null(False)))[0])
        raise HoodieTableError(
            f"The record index of {self.storage.base_uri} places key '{keys[i].as_py()}' in file group "
            f"{file_ids[i].as_py()} of partition '{parts[i].as_py()}', which {what}: the record index is out "
            "of date. Help: rebuild it (Apache Hudi: drop the record_index partition and write with "
            "hoodie.metadata.record.index.enable=true), or write with hoodie.index.type=GLOBAL_BLOOM."
        )
