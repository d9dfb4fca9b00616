"""What an index is to the write path: one class per index type (index/bloom_index.py,
index/bucket_index.py), chosen once from `hoodie.index.type` (index/registry.py).  The write path
asks the index, never its name: adding an index is one class and one option value.

An index answers four questions:
- how incoming records are tagged with the file group holding their key: `locator` looks keys up
  in the latest base files (what it needs from the file-system view), or returns None when a key's
  file group is computed from the key alone (`bucketed`: its hash bucket, no look-up);
- a record's identity: its key alone (`is_global`), or the pair (key, partition path);
- whether a record whose partition value changed moves there (`moves_partitions`);
- how a routed write's tag shuffle should group keys (`lookup_groups`);
- what else it constrains: which inputs a delete needs, and when a merge-on-read write must
  rewrite a base file instead of logging a delete.
"""

from __future__ import annotations

from typing import Protocol

from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.keygen import KeyGenerator
from hoodie_sink.table.index.key_index import KeyIndex
from hoodie_sink.table.storage import Storage


class Index(Protocol):
    @property
    def name(self) -> str:
        """The value of option hoodie.index.type (lower case)."""
        ...

    @property
    def is_global(self) -> bool:
        """A record is its key alone (the key is unique in the table), not its (key, partition path)."""
        ...

    @property
    def bucketed(self) -> bool:
        """A key's file group is its hash bucket: nothing is looked up, inserts are hashed into the
        buckets, and the layout (count, hash fields) is recorded in hoodie.properties."""
        ...

    @property
    def deletes_need_partition_path(self) -> bool:
        """A delete must name the partition path of its key (looked up in that partition only)."""
        ...

    @property
    def finds_keys_in_base_files_only(self) -> bool:
        """It finds keys in base files only, across partitions: in a merge-on-read table a delete
        must take the key out of the base file (a rewrite), or a later insert elsewhere would
        make a second copy."""
        ...

    def moves_partitions(self, update_partition_path: bool) -> bool:
        """Whether a stored record whose incoming partition value differs moves to the new
        partition (option hoodie.index.global.update.partition.path)."""
        ...

    def identity(self, key: str, partition: str) -> list[str]:
        """The columns (named `key` and `partition`) that identify a record."""
        ...

    def locator(
        self, storage: Storage, base_files: list[BaseFile], key_generator: KeyGenerator | None
    ) -> KeyIndex | None:
        """The look-up that tags incoming keys with their file group, over the latest base files;
        None when the index computes the file group from the key."""
        ...

    def lookup_groups(self, storage: Storage) -> int | None:
        """How many groups a routed write's tag shuffle partitions keys by, so that each tag task
        reads one part of the index (the record index: its file groups, a key's group hashed as
        Hudi hashes it, format/metadata_keys.file_group_indexes); None: by the key's own hash."""
        ...
