"""Insert buckets of a routed write: which file group each new record goes to.

Planned once per write from its insert count per partition (metadata only), then looked up per
record, vectorised, from a hash of its key (docs/design/routing.md#our-plan). The rule is Hudi's
Spark writer's (UpsertPartitioner.assignInserts and getPartition):
- a partition's inserts first fill its small files, each with as many records as it has room for;
- the rest go to new file groups of `FileSizing.records_per_file_group` records, the last one
  taking the remainder;
- each bucket owns a share of the key-hash range in proportion to its records: an insert whose
  spread (Spark's xxhash64 of its record key; of its arrival order for a keyless record) modulo
  the partition's inserts falls in [end of the previous bucket, end of the bucket) goes there.

The route's tasks apply this rule in Spark SQL (routing/inserts.py), this module in Arrow
(`file_ids_of`: the unit tests' route, which checks the two agree).  A key's bucket depends on the key and
the plan alone. A retried task routes its records
the same way, whatever order they come in, and two tasks never disagree on a file group.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.file_group import file_id
from hoodie_sink.table.write.plan import FileSizing

# namespace of the new file ids of routed writes (uuid5 of nonce/partition/number)
_NEW_FILE_GROUP_NS = uuid.UUID("0d6f3c52-41b7-4c1e-9a55-2f0e8b7d93a4")


@dataclass(frozen=True)
class SmallFile:
    file_id: str
    size: int  # bytes of its latest base file


@dataclass(frozen=True)
class PartitionBuckets:
    file_ids: tuple[str, ...]
    records: tuple[int, ...]  # planned records of each bucket, in file_ids' order
    new: tuple[bool, ...]  # a new file group, or an existing small file that takes inserts

    @property
    def inserts(self) -> int:
        return sum(self.records)

    @property
    def ends(self) -> tuple[int, ...]:
        """Where each bucket's share of the range [0, inserts) ends."""
        return tuple(np.cumsum(self.records, dtype=np.int64).tolist())


@dataclass(frozen=True)
class InsertBuckets:
    """The insert buckets of one write, by partition path."""

    by_partition: Mapping[str, PartitionBuckets]

    def file_ids_of(self, partitions: pa.Array, spread: np.ndarray) -> pa.Array:
        """The target file id of each insert, from its partition path and its `spread` (int64): the
        route's hash of its record key (routing/inserts.py: SPREAD_SQL)."""
        if len(partitions) != len(spread):
            raise ValueError(f"{len(partitions)} partition paths for {len(spread)} spreads")
        if not len(spread):
            return pa.array([], pa.string())
        spread = np.asarray(spread, dtype=np.int64)
        target = np.empty(len(spread), dtype=np.int64)  # into file_ids, every partition's buckets in turn
        file_ids: list[str] = []
        codes = pc.dictionary_encode(partitions)
        indices = np.asarray(codes.indices.fill_null(-1))
        if (indices < 0).any():
            raise ValueError("an insert without a partition path cannot be routed")
        # rows grouped by partition in one sort: the loop below runs once per partition, not per row
        by_part = np.argsort(indices, kind="stable")
        bounds_of_part = np.concatenate(
            [[0], np.cumsum(np.bincount(indices, minlength=len(codes.dictionary)))]
        )
        for code, part in enumerate(codes.dictionary.to_pylist()):
            rows = by_part[bounds_of_part[code] : bounds_of_part[code + 1]]
            buckets = self.by_partition.get(part)
            if buckets is None or not buckets.inserts:
                raise KeyError(f"no insert bucket planned for partition {part!r}: its count was missed")
            share = np.mod(spread[rows], buckets.inserts)  # the key's place in the partition's range
            target[rows] = len(file_ids) + np.searchsorted(buckets.ends, share, side="right")
            file_ids.extend(buckets.file_ids)
        return pa.array(file_ids, pa.string()).take(pa.array(target))


def plan_insert_buckets(
    inserts: Mapping[str, int],
    small_files: Mapping[str, Sequence[SmallFile]],
    sizing: FileSizing,
    nonce: str,
) -> InsertBuckets:
    """The buckets for `inserts` (records per partition path).

    `small_files` holds each partition's eligible small files. The caller leaves out file groups
    under pending clustering and, on merge-on-read, those whose latest slice has log files, as the
    bucket assigner does. `nonce` is drawn once per write in the driver: it names the new file
    groups, the same for every task and retry of this write and never for another write.
    """
    per_group = sizing.records_per_file_group()
    planned: dict[str, PartitionBuckets] = {}
    for part, count in sorted(inserts.items()):
        if count <= 0:
            continue
        ids: list[str] = []
        records: list[int] = []
        unassigned = count
        for sf in sorted(small_files.get(part, ()), key=lambda s: (s.size, s.file_id)):
            take = min(sizing.room(sf.size), unassigned)
            if take > 0:
                ids.append(sf.file_id)
                records.append(take)
                unassigned -= take
            if not unassigned:
                break
        small = len(ids)
        groups = -(-unassigned // per_group)
        for b in range(groups):
            ids.append(new_file_id(nonce, part, b))
            records.append(per_group if b < groups - 1 else unassigned - per_group * (groups - 1))
        planned[part] = PartitionBuckets(tuple(ids), tuple(records), (False,) * small + (True,) * groups)
    return InsertBuckets(planned)


def new_file_id(nonce: str, partition: str, number: int) -> str:
    """The id of new file group `number` of `partition` in the write drawn `nonce`: a UUID and
    "-0", the shape of Hudi's file ids (docs/hudi/format.md)."""
    return file_id(str(uuid.uuid5(_NEW_FILE_GROUP_NS, f"{nonce}/{partition}/{number}")), 0)
