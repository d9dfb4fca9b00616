"""The BLOOM and GLOBAL_BLOOM indexes: keys are looked up in the latest base files (key ranges and
bloom filters in their footers, then the key column; index/key_index.py).  BLOOM looks a key up in
its partition only, so the pair (key, partition path) is a record; GLOBAL_BLOOM looks it up in every
partition, so the key alone is, and a record whose partition value changed may move
(hoodie.index.global.update.partition.path, Hudi 0.14+)."""

from __future__ import annotations

from dataclasses import dataclass

from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.keygen import KeyGenerator
from hoodie_sink.table.index.key_index import KeyIndex
from hoodie_sink.table.storage import Storage


@dataclass(frozen=True)
class BloomIndex:
    name: str = "bloom"
    is_global: bool = False
    bucketed: bool = False
    deletes_need_partition_path: bool = True
    finds_keys_in_base_files_only: bool = False
    # hoodie.bloom.index.use.metadata: ranges and filters from the metadata table (key_index.py)
    use_metadata: bool = False

    def lookup_groups(self, storage: Storage) -> int | None:
        return None  # the keys' own hash: every tag task reads the footers of every candidate file

    def moves_partitions(self, update_partition_path: bool) -> bool:
        return self.is_global and update_partition_path

    def identity(self, key: str, partition: str) -> list[str]:
        return [key] if self.is_global else [partition, key]

    def locator(
        self, storage: Storage, base_files: list[BaseFile], key_generator: KeyGenerator | None
    ) -> KeyIndex | None:
        return KeyIndex(
            storage, base_files, global_index=self.is_global, key_generator=key_generator,
            use_metadata=self.use_metadata,
        )  # fmt: skip


@dataclass(frozen=True)
class GlobalBloomIndex(BloomIndex):
    name: str = "global_bloom"
    is_global: bool = True
    deletes_need_partition_path: bool = False
    finds_keys_in_base_files_only: bool = True
