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

Every write of ours keeps the record index (metadata/record_index_init.py builds it, the write
tasks gather each commit's change: read/record_index_change.py); `check_usable` refuses a
RECORD_INDEX write that would not keep it.
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
from hoodie_sink.table.metadata.data_properties import read_data_properties
from hoodie_sink.table.storage import Storage


def check_usable(table_uri: str, record_index_enabled: bool, keeps_metadata: bool) -> None:
    """Refuse a RECORD_INDEX write whose record index would not be kept (before anything is
    written).  With hoodie.metadata.record.index.enable=true the write builds the partition if the
    table has none yet (metadata/record_index_init.py) and every write keeps it."""
    options = "hoodie.index.type=RECORD_INDEX"
    if not keeps_metadata:
        raise HoodieConfigError(
            f"Options {options} and hoodie.metadata.enable=false on {table_uri}: the write would remove the "
            "metadata table the record index lives in. Help: set hoodie.metadata.enable=true."
        )
    if not record_index_enabled:
        raise HoodieConfigError(
            f"Option {options} on {table_uri} needs hoodie.metadata.record.index.enable=true: without it the "
            "record index is not kept (Hudi 0.15 would fall back to a GLOBAL_SIMPLE look-up instead). "
            "Help: set hoodie.metadata.record.index.enable=true, or use hoodie.index.type=GLOBAL_BLOOM."
        )


def record_index_built(storage: Storage) -> bool:
    """Whether the table's properties list the metadata table's `record_index` partition (no
    table yet: False, every key is an insert)."""
    try:
        return RECORD_INDEX in listed_partitions(read_data_properties(storage))
    except FileNotFoundError:
        return False


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

    def lookup_groups(self, storage: Storage) -> int | None:
        """The record index's file-group count once it is built (before, keys are found as
        GLOBAL_BLOOM finds them, and the key's own hash is as good as any)."""
        if not record_index_built(storage):
            return None
        return load_record_index_files(storage).file_group_count

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
        self._built: bool | None = None

    @property
    def files(self) -> RecordIndexFiles:
        if self._files_snapshot is None:
            self._files_snapshot = load_record_index_files(self.storage)
        return self._files_snapshot

    @property
    def built(self) -> bool:
        """Whether the table has its record index yet.  A routed write tags before its write
        begins, and the write's begin builds the partition on the first RECORD_INDEX write (or
        creates the table): until then the keys are found as GLOBAL_BLOOM finds them, which is the
        same answer (a key is unique in the table)."""
        if self._built is None:
            self._built = record_index_built(self.storage)
        return self._built

    def tag(self, keys: pa.Array, partition_paths: pa.Array | None = None) -> TagResult:
        """Where each key lives (all null for a key the record index does not hold: an insert)."""
        if not self.built:
            return super().tag(keys, partition_paths)
        return self._result(self._file_of(keys), len(keys))

    def locate(self, keys: pa.Array, partition_paths: pa.Array | None = None) -> Locations:
        """One row per key: the record index holds each key once."""
        if not self.built:
            return super().locate(keys, partition_paths)
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
