"""The bucket assigner: tagged changes -> buckets (file groups) of one task.

Updates and deletes go to the file group that holds their key.  Inserts first fill small
file groups of their partition (below hoodie.parquet.small.file.limit, up to the maximum file
size at the table's average record size), but only those this task manages to claim, so two
tasks never pack the same small file; the rest go to the partition's bucket of new file groups.
With the BUCKET index, a key's file group is its hash bucket, existing or (deterministically
named, so every task agrees) new.  Pure apart from the claim callback.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.merge_rule import MergeRule
from hoodie_sink.table.index.bucket import bucket_file_id_prefix, bucket_of_file_id, record_key_bucket_ids
from hoodie_sink.table.write.merge import KEY, KIND, MOVED_OUT, PART, UPSERT, first_of_groups

# (records, file ids where their keys are stored) -> the stored ordering values
StoredOrdering = Callable[[pa.Table, pa.Array], pa.Array]
_BUCKET_NS = uuid.UUID("5f0c6f1e-8b1a-4c5e-9d8e-6b7a1c2d3e4f")


@dataclass
class Assignment:
    NEW = "new:"  # bucket id prefix of a partition's new file groups

    buckets: dict[tuple[str, str], pa.Table] = field(default_factory=dict)
    missing_deletes: int = 0
    # inserts packed into existing small file groups, for the commit's duplicate-key check
    small_file_inserts: list[tuple[str, str, pa.Table]] = field(default_factory=list)
    # deletes of keys not in the table: another task may be inserting the same new key
    unmatched_deletes: pa.Table | None = None
    # file groups that keys were moved out of (global index with update.partition.path)
    moved_from: set[str] = field(default_factory=set)
    moved_keys: pa.Array | None = None


class BucketAssigner:
    def __init__(self, ctx, try_claim: Callable[[str], bool]):
        cfg = ctx.config
        self.ctx = ctx
        self.try_claim = try_claim
        self.index = ctx.plan.index
        self.moves_partitions = ctx.plan.index.moves_partitions(cfg.index_update_partition_path)
        self.small: dict[str, list[tuple[str, int]]] = {
            part: [(bf.file_id, int(ctx.plan.sizing.room(bf.size))) for bf in files]
            for part, files in small_files_of(ctx).items()
        }  # partition -> [(file id, capacity)]
        self.buckets_by_partition: dict[str, dict[int, str]] = {}
        if self.index.bucketed:
            for bf in ctx.base_files:
                try:
                    bucket = bucket_of_file_id(bf.file_id)
                except ValueError as e:
                    raise HoodieTableError(
                        f"{bf.path} in {ctx.config.path} is not in a hash bucket ({e}): the BUCKET index cannot "
                        "find its keys. It was written by another index or a bulk_insert/insert/append without "
                        "the bucket index. Help: keep writing this table with its original index type."
                    ) from e
                known = self.buckets_by_partition.setdefault(bf.partition_path, {})
                if known.get(bucket, bf.file_id) != bf.file_id:
                    # two file groups in one bucket (Java's bulk_insert of the same bucket twice):
                    # a key may be in either, so writing to one would leave the other's copy stale.
                    # Java refuses too (HoodieSimpleBucketIndex; docs/hudi/duplicate-keys.md).
                    raise HoodieTableError(
                        f"Partition '{bf.partition_path}' of {ctx.config.path} has two file groups in hash "
                        f"bucket {bucket} ({known[bucket]} and {bf.file_id}): the BUCKET index cannot tell "
                        "which holds a key. Help: roll back the write that added the second one (Apache "
                        "Hudi's rollback_to_instant procedure)."
                    )
                known[bucket] = bf.file_id

    # -- keyed writes (upsert, delete) ---------------------------------------------------
    def assign(
        self,
        changes: pa.Table,
        tags,
        stored_ordering: StoredOrdering | None = None,
        stored_in_place: pa.Array | None = None,
    ) -> Assignment:
        """`changes` hold one change per record (reduce_changes); `tags` say where each key lives.
        `stored_ordering(changes, file_ids)` gives the stored ordering value of found keys (a
        global index moving records between partitions needs it; None without a precombine field).
        `stored_in_place`: the keys stored (also) in their record's partition, when changes of
        theirs were dropped before (merge-on-read: those a stored copy beats); None: every such
        key still has its change here."""
        out = Assignment()
        fids = tags.file_id
        found = pc.is_valid(fids)
        existing = changes.filter(found)
        if existing.num_rows:
            locs = tags.partition_path.filter(found)
            fid_col = fids.filter(found)
            moved = pc.not_equal(locs, existing.column(PART))
            if self.moves_partitions and pc.any(moved).as_py():
                existing, fid_col, locs = self._move_partitions(
                    out, existing, fid_col, locs, moved, stored_ordering, stored_in_place
                )
            # the record stays in the file group (and partition) that holds its key: a global
            # index without update.partition.path keeps the stored partition path, as Hudi does
            existing = existing.set_column(existing.schema.get_field_index(PART), PART, locs)
            self._group(out, existing, fid_col)
        new = changes.filter(pc.invert(found))
        is_upsert = pc.equal(new.column(KIND), UPSERT)
        out.missing_deletes += new.num_rows - (pc.sum(pc.cast(is_upsert, pa.int64())).as_py() or 0)
        out.unmatched_deletes = new.filter(pc.invert(is_upsert))
        self.assign_inserts(out, new.filter(is_upsert))
        return out

    def _move_partitions(self, out, existing, fid_col, locs, moved, stored_ordering, stored_in_place):
        """GLOBAL index with update.partition.path=true, a record whose partition value changed
        (Hudi 0.14+): it is first combined with the stored record by the ordering rule.  If it
        wins, the stored copy is deleted (MOVED_OUT) and the record inserted in its new partition;
        if the stored record wins, nothing changes.  A key stored twice in one file group: each
        copy is compared on its own (Java's mergeForPartitionUpdatesIfNeeded), so the record moves
        if it beats the least of them, and the merge deletes only the copies it beats (MOVED_OUT
        carries its ordering value); the others stay.  The record is inserted once, and not at all
        where a copy of its key is stored in its partition already: that copy is merged with it by
        the ordering rule, in place (docs/hudi/duplicate-keys.md).  Soft deletes and the delete
        operation do not move: they go to the file group holding the key, which deletes it wherever
        it is.  Records of the same key in other tasks of this write are settled at commit
        (commit_merge.py)."""
        movers = pc.and_(moved, pc.equal(existing.column(KIND), UPSERT))
        if not pc.any(movers).as_py():
            return existing, fid_col, locs
        stays = pc.invert(movers)
        rows, row_fids, row_locs = existing.filter(movers), fid_col.filter(movers), locs.filter(movers)
        if stored_ordering is not None:
            precombine = self.ctx.plan.merge_rule.ordering_field
            stored = stored_ordering(rows, row_fids)  # the least of a key's copies in the file group
            # ties go to the incoming record, as in merge_file_group
            beats = pa.array(~MergeRule.strictly_greater(stored, rows.column(precombine)))
            rows, row_fids, row_locs = rows.filter(beats), row_fids.filter(beats), row_locs.filter(beats)
        if rows.num_rows:
            tombstones = rows.set_column(rows.schema.get_field_index(PART), PART, row_locs)
            kinds = pa.array(np.full(rows.num_rows, MOVED_OUT, np.int8))
            tombstones = tombstones.set_column(tombstones.schema.get_field_index(KIND), KIND, kinds)
            self._group(out, tombstones, row_fids)
            out.moved_from.update(pc.unique(row_fids).to_pylist())
            out.moved_keys = pc.unique(rows.column(KEY).combine_chunks())
            if stored_in_place is None:
                stored_in_place = existing.filter(pc.invert(moved)).column(KEY).combine_chunks()
            self.assign_inserts(out, _one_insert_per_key(rows, stored_in_place))
        return existing.filter(stays), fid_col.filter(stays), locs.filter(stays)

    def _group(self, out: Assignment, rows: pa.Table, fid_col: pa.Array) -> None:
        """Split rows by file group: one sort, then contiguous slices."""
        if rows.num_rows == 0:
            return
        fid_col = fid_col.combine_chunks() if isinstance(fid_col, pa.ChunkedArray) else fid_col
        order = pc.sort_indices(fid_col)
        rows, fids = rows.take(order), pc.take(fid_col, order)
        runs = pc.run_end_encode(fids)
        start = 0
        for end, fid in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
            grp = rows.slice(start, end - start)
            add_to_bucket(out, (grp.column(PART)[0].as_py(), fid), grp)
            start = end

    # -- inserts -------------------------------------------------------------------------
    def assign_inserts(self, out: Assignment, inserts: pa.Table) -> None:
        if inserts.num_rows == 0:
            return
        if self.index.bucketed:
            self._assign_hash_buckets(out, inserts)
            return
        self._pack_inserts(out, inserts)

    def _pack_inserts(self, out: Assignment, inserts: pa.Table) -> None:
        """Inserts without a hash bucket: this task's claimed small files first, then new file groups."""
        parts = inserts.column(PART)
        for part in pc.unique(parts).to_pylist():
            rows = inserts.filter(pc.equal(parts, part))
            start = 0
            candidates = self.small.get(part, [])
            while start < rows.num_rows and candidates:
                fid, room = candidates[0]
                if not self.try_claim(fid):
                    candidates.pop(0)
                    continue
                take = min(room, rows.num_rows - start)
                add_to_bucket(out, (part, fid), rows.slice(start, take))
                out.small_file_inserts.append((part, fid, rows.slice(start, take)))
                start += take
                if take >= room:
                    candidates.pop(0)
                else:
                    candidates[0] = (fid, room - take)
            if start < rows.num_rows:
                add_to_bucket(out, (part, Assignment.NEW + part), rows.slice(start))

    def _assign_hash_buckets(self, out: Assignment, rows: pa.Table) -> None:
        cfg = self.ctx.config
        fields = cfg.bucket_hash_fields or cfg.record_key_fields
        nb = cfg.num_buckets
        # Hudi hashes the hash-field values parsed out of the record key string (BucketIdentifier)
        ids = record_key_bucket_ids(rows.column(KEY).combine_chunks(), list(fields), nb).astype(np.int64)
        enc = pc.dictionary_encode(rows.column(PART).combine_chunks())
        combo = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64) * nb + ids
        for c in np.unique(combo):
            part, b = enc.dictionary[int(c) // nb].as_py(), int(c) % nb
            fid = self.buckets_by_partition.get(part, {}).get(b)
            if fid is None:
                # every task names a new bucket's file group alike: claims then settle who writes it
                tail = uuid.uuid5(_BUCKET_NS, f"{self.ctx.instant}/{part}/{b}")
                fid = f"{bucket_file_id_prefix(b)}{str(tail)[8:]}-0"
            add_to_bucket(out, (part, fid), rows.filter(pa.array(combo == c)))

    def assign_for_bucket_index(self, changes: pa.Table) -> Assignment:
        """BUCKET index: no lookup; every change goes to its key's bucket (merge sorts out
        updates from inserts, and counts deletes of missing keys)."""
        out = Assignment()
        self._assign_hash_buckets(out, changes)
        return out


def small_files_of(ctx) -> dict[str, list[BaseFile]]:
    """The base files of each partition that take inserts, smallest first: below the small-file
    limit, not under a pending clustering (its rewrite would lose them) and, on merge-on-read,
    only the latest slice of a file group without log files (Java's rule: its base file is
    rewritten with the inserts, which must not orphan logs), and only the smallest N
    (hoodie.merge.small.file.group.candidates.limit, Java's default 1), so that the other file
    groups take their updates as logs."""
    clustering = ctx.clustering_file_groups
    sizing = ctx.plan.sizing
    slices = ctx.slices_by_id if ctx.plan.merge_on_read else None
    out: dict[str, list[BaseFile]] = {}
    for bf in sorted(ctx.base_files, key=lambda b: b.size):
        if (bf.partition_path, bf.file_id) in clustering:
            continue
        if slices is not None and ((sl := slices.get(bf.file_id)) is None or sl.has_logs
                                   or sl.base_name != bf.name):  # fmt: skip
            continue
        taken = len(out.get(bf.partition_path, []))
        if sizing.room(bf.size) > 0 and (slices is None or taken < sizing.small_file_candidates_limit):
            out.setdefault(bf.partition_path, []).append(bf)
    return out


def _one_insert_per_key(movers: pa.Table, stored_in_place: pa.Array) -> pa.Table:
    """The records a global index inserts in their new partition: a key stored in several file
    groups (docs/hudi/duplicate-keys.md) has one mover per copy elsewhere, but is inserted once, and
    not at all where a copy already sits in the record's partition (that copy is merged with the
    record in place, by the ordering rule: updated, or kept if it beats the record)."""
    rows = movers.filter(pc.invert(pc.is_in(movers.column(KEY), value_set=stored_in_place)))
    if rows.num_rows <= 1 or pc.count_distinct(rows.column(KEY)).as_py() == rows.num_rows:
        return rows
    ranked = rows.take(pc.sort_indices(rows, sort_keys=[(KEY, "ascending")]))
    return ranked.filter(pa.array(first_of_groups(ranked, [KEY])))


def add_to_bucket(out: Assignment, key: tuple[str, str], rows: pa.Table) -> None:
    prev = out.buckets.get(key)
    out.buckets[key] = rows if prev is None else pa.concat_tables([prev, rows])
