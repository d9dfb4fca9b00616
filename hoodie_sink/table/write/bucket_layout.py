"""The bucket layout of a table whose hoodie.properties does not record it.

A BUCKET write finds a stored key only in the file group of the key's hash bucket, so it must hash
keys exactly as the table's file groups were hashed: same bucket count, same hash fields.  We record
that layout when we create a BUCKET table (table_setup.py), but Apache Hudi 0.15 records none of it,
and neither did we before (docs/hudi/bucket-layout.md).  For such a table the first BUCKET write
checks its settings against the data itself, once, before its instant exists: every latest file
group must carry a bucket number below the bucket count (one file group per bucket and partition),
and every stored key must hash, with this write's count and hash fields, to the bucket of the file
group that holds it.  That is exactly the condition under which this write (and every later one
with the same settings) routes each stored key to its file group, whatever settings the table was
first written with.  Then the layout is recorded, so later writes take it from hoodie.properties.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.properties import (
    K_BUCKET_HASH_FIELD,
    K_NUM_BUCKETS,
    PROPERTIES_FILE,
    TableConfig,
    read_properties_text,
    read_table_config,
    with_properties_set,
)
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.index.bucket import bucket_of_file_id, record_key_bucket_ids
from hoodie_sink.table.index.registry import index_of
from hoodie_sink.table.metadata.data_properties import PROPERTIES_CRC
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.snapshot import Snapshot, slice_ref
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.table_setup import bucket_layout_of, resolve_with_table, table_exists

log = logging.getLogger(__name__)
RECORD_KEY = META_COLUMNS[2]


# The check reads the record-key column of every latest file slice once.  Up to this many bytes
# of stored files, the write that finds the layout unrecorded does it in its own process; beyond,
# it refuses and names record_bucket_layout, which runs one Spark task per file group (work that
# grows with the data runs in tasks, never in the driver).
DRIVER_CHECK_MAX_BYTES = 2 << 30

# `task_map(items, work)` -> [work(item) for item in items], in item order: here by default, or one
# Spark task per item (datasource/service_jobs.py).
TaskMap = Callable[[list[Any], Callable[[Any], Any]], list[Any]]


@dataclass(frozen=True)
class StoredBucket:
    """One latest file group of a BUCKET table, with the bucket its file ID names."""

    partition: str
    file_id: str
    bucket: int
    ref: str  # what Snapshot.read_ref reads: a base file, or a file slice
    size: int  # bytes of its files


def settle_bucket_layout(
    storage: Storage,
    cfg: WriteConfig,
    table: TableConfig,
    timeline: Timeline,
    task_map: TaskMap | None = None,
) -> TableConfig:
    """For a BUCKET write into a table that records no bucket count: check the write's layout
    against the stored file groups and keys, then record it.  The table config to write with."""
    if not index_of(cfg.index_type).bucketed or table.num_buckets is not None:
        return table
    check_stored_layout(storage, cfg, timeline, task_map)
    recorded = table.with_updates(**bucket_layout_of(cfg))
    text, encoding = read_properties_text(storage)
    # Hadoop's local file system checks a file against its `.<name>.crc` sibling: deleted first,
    # as in metadata_table.py, so that Java never sees the new text with the old checksum
    storage.delete(PROPERTIES_CRC)
    storage.write_atomic(
        PROPERTIES_FILE, with_properties_set(text, recorded.layout_properties()).encode(encoding)
    )
    log.info("hoodie: recorded the bucket layout of %s in %s", cfg.path, PROPERTIES_FILE)
    return recorded


def check_stored_layout(
    storage: Storage, cfg: WriteConfig, timeline: Timeline, task_map: TaskMap | None = None
) -> None:
    """Refuse the write unless every stored key lies in the bucket this write hashes it to.
    `task_map` reads the keys of the file groups (default: here, up to DRIVER_CHECK_MAX_BYTES)."""
    snapshot = Snapshot.open(storage, timeline=Timeline(timeline.instants))
    if snapshot.instant is None:
        return  # no data: nothing can be mis-routed
    groups = stored_buckets(snapshot, cfg)
    if not groups:
        return
    if task_map is None:
        total = sum(g.size for g in groups)
        if total > DRIVER_CHECK_MAX_BYTES:
            raise HoodieTableError(
                f"The table at {cfg.path} records no bucket layout in {PROPERTIES_FILE}, and checking this BUCKET "
                f"write's bucket count and hash fields against its {len(groups)} file groups means reading the "
                f"record keys of {total / 2**20:,.0f} MiB of files, too much for one process. Nothing was "
                "written. Help: run hoodie_sink.record_bucket_layout(path, options, spark=spark) once with "
                "this write's options (a Spark job, one task per file group); later writes read the layout "
                f"from {PROPERTIES_FILE}."
            )
        task_map = _here
    fields, n = list(cfg.bucket_hash_fields or cfg.record_key_fields), cfg.num_buckets

    def check(group: StoredBucket) -> str | None:
        return misplaced_key(snapshot, group, fields, n)

    found = next((f for f in task_map(groups, check) if f is not None), None)
    if found is not None:
        _refuse(cfg, found)


def stored_buckets(snapshot: Snapshot, cfg: WriteConfig) -> list[StoredBucket]:
    """The latest file groups with their buckets; refuses a layout their names already rule out
    (a file group outside any bucket, a bucket beyond the count, two file groups in one bucket)."""
    n = cfg.num_buckets
    if snapshot.merges_logs:
        groups = [
            (sl.partition_path, sl.file_id, slice_ref(sl), _slice_size(sl)) for sl in snapshot.file_slices()
        ]
    else:
        groups = [(bf.partition_path, bf.file_id, bf.path, bf.size) for bf in snapshot.base_files()]
    if groups and RECORD_KEY not in snapshot.schema.names:
        raise HoodieTableError(
            f"The table at {cfg.path} records no bucket layout in {PROPERTIES_FILE} and stores no record keys "
            "(hoodie.populate.meta.fields=false), so this BUCKET write cannot check that its bucket count and "
            f"hash fields are the table's. Nothing was written. Help: add {K_NUM_BUCKETS} and "
            f"{K_BUCKET_HASH_FIELD} with the table's values to {PROPERTIES_FILE}."
        )
    seen: dict[tuple[str, int], str] = {}
    out = []
    for partition, fid, ref, size in sorted(groups):
        try:
            bucket = bucket_of_file_id(fid)
        except ValueError:
            raise HoodieTableError(
                f"File group {fid} in partition '{partition}' of {cfg.path} is not in a hash bucket: the table "
                "was written with another index (or an insert without the bucket index), so a BUCKET write "
                "cannot find its keys and would insert them again. Nothing was written. Help: keep writing "
                "this table with the index it was written with, or write a new table with the BUCKET index."
            ) from None
        if bucket >= n:
            # (a random file ID of another index starts with 8 digits 2.3% of the time: say so too)
            _refuse(
                cfg,
                f"file group {fid} in partition '{partition}' is bucket {bucket}, beyond the count (or the table "
                "was written with another index, whose random file IDs may start with 8 digits)",
            )
        if (partition, bucket) in seen:
            raise HoodieTableError(
                f"Partition '{partition}' of {cfg.path} has two file groups in bucket {bucket} "
                f"({seen[(partition, bucket)]}, {fid}): the BUCKET index keeps one per bucket. Nothing was written."
            )
        seen[(partition, bucket)] = fid
        out.append(StoredBucket(partition, fid, bucket, ref, size))
    return out


def misplaced_key(snapshot: Snapshot, group: StoredBucket, fields: list[str], n: int) -> str | None:
    """The first stored key of `group` that `fields` and `n` hash to another bucket, described;
    None when every key is in place.  One file group's work: a task's, in a Spark job."""
    keys = snapshot.read_ref(group.ref, [RECORD_KEY]).column(RECORD_KEY).combine_chunks()
    if len(keys) == 0:
        return None
    hashed = record_key_bucket_ids(keys, fields, n)
    wrong = np.flatnonzero(hashed != group.bucket)
    if not len(wrong):
        return None
    key, to = keys[int(wrong[0])].as_py(), int(hashed[wrong[0]])
    return (
        f"key '{key}' is stored in bucket {group.bucket} ({group.file_id}, partition '{group.partition}'), "
        f"and these settings hash it to bucket {to}"
    )


def _here(items: list[Any], work: Callable[[Any], Any]) -> list[Any]:
    return [work(item) for item in items]


def _slice_size(sl) -> int:
    return (sl.base_file.size if sl.base_file else 0) + sum(lf.size for lf in sl.log_files)


def _refuse(cfg: WriteConfig, found: str) -> None:
    fields = ",".join(cfg.bucket_hash_fields or cfg.record_key_fields)
    raise HoodieConfigError(
        f"Options '{K_NUM_BUCKETS}'='{cfg.num_buckets}' and '{K_BUCKET_HASH_FIELD}'='{fields}' do not match the "
        f"table at {cfg.path}: {found}. The table records no bucket "
        f"layout in {PROPERTIES_FILE} (Apache Hudi does not; hoodie_sink does since it creates the table), so "
        "this write would insert stored keys again. Nothing was written. Help: give the bucket count and hash "
        "fields the table was written with."
    )


def record_bucket_layout(path: str, options: dict[str, str], task_map: TaskMap | None = None) -> TableConfig:
    """Check the BUCKET layout that `options` give against the table at `path` and record it in
    hoodie.properties (what a BUCKET write does on its own when the table is small enough);
    `task_map` runs the per-file-group checks (default: here, whatever the table's size;
    hoodie_sink.record_bucket_layout(..., spark=spark): a Spark job).  The
    table config, with the layout.  A table that already records one is left as it is."""
    cfg = WriteConfig.from_options(options, path=path)
    if not index_of(cfg.index_type).bucketed:
        raise HoodieConfigError(
            f"record_bucket_layout needs the BUCKET index options of the writes to come "
            f"('hoodie.index.type'='BUCKET', not '{cfg.index_type.upper()}')."
        )
    storage = cfg.storage()
    if not table_exists(storage):
        raise HoodieTableError(
            f"There is no Hudi table at {path}: a new BUCKET table records its layout itself."
        )
    table = read_table_config(storage)
    return settle_bucket_layout(
        storage, resolve_with_table(cfg, table), table, Timeline.load(storage), task_map or _here
    )
