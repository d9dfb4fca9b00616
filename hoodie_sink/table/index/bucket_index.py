"""The BUCKET index (Hudi's simple bucket index): a key's file group is the hash bucket of its hash
field values (index/bucket.py), in its partition; nothing is looked up, so the pair (key,
partition path) is a record, and the layout (bucket count, hash fields) is recorded in
hoodie.properties (docs/hudi/bucket-layout.md)."""

from __future__ import annotations

from dataclasses import dataclass

from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.keygen import KeyGenerator
from hoodie_sink.table.index.key_index import KeyIndex
from hoodie_sink.table.storage import Storage


@dataclass(frozen=True)
class BucketIndex:
    name: str = "bucket"
    is_global: bool = False
    bucketed: bool = True
    deletes_need_partition_path: bool = False
    finds_keys_in_base_files_only: bool = False

    def lookup_groups(self, storage: Storage) -> int | None:
        return None  # the keys' own hash: every tag task reads the footers of every candidate file

    def moves_partitions(self, update_partition_path: bool) -> bool:
        return False

    def identity(self, key: str, partition: str) -> list[str]:
        return [partition, key]

    def locator(
        self, storage: Storage, base_files: list[BaseFile], key_generator: KeyGenerator | None
    ) -> KeyIndex | None:
        return None  # the bucket assigner hashes keys into buckets
