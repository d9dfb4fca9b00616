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

import numpy as np

from hoodie_sink.config import WriteConfig
from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.properties import (
    K_BUCKET_HASH_FIELD,
    K_NUM_BUCKETS,
    PROPERTIES_FILE,
    TableConfig,
    read_properties_text,
    with_properties_set,
)
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.index.bucket import bucket_of_file_id, record_key_bucket_ids
from hoodie_sink.table.index.registry import index_of
from hoodie_sink.table.read.snapshot import Snapshot, slice_ref
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.metadata_table import PROPERTIES_CRC
from hoodie_sink.table.write.table_setup import bucket_layout_of

log = logging.getLogger(__name__)
RECORD_KEY = META_COLUMNS[2]


def settle_bucket_layout(
    storage: Storage, cfg: WriteConfig, table: TableConfig, timeline: Timeline
) -> TableConfig:
    """For a BUCKET write into a table that records no bucket count: check the write's layout
    against the stored file groups and keys, then record it.  The table config to write with."""
    if not index_of(cfg.index_type).bucketed or table.num_buckets is not None:
        return table
    check_stored_layout(storage, cfg, timeline)
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


def check_stored_layout(storage: Storage, cfg: WriteConfig, timeline: Timeline) -> None:
    """Refuse the write unless every stored key lies in the bucket this write hashes it to."""
    snapshot = Snapshot.open(storage, timeline=timeline)
    if snapshot.instant is None:
        return  # no data: nothing can be mis-routed
    fields = list(cfg.bucket_hash_fields or cfg.record_key_fields)
    n = cfg.num_buckets
    if snapshot.merges_logs:
        groups = [(sl.partition_path, sl.file_id, slice_ref(sl)) for sl in snapshot.file_slices()]
    else:
        groups = [(bf.partition_path, bf.file_id, bf.path) for bf in snapshot.base_files()]
    if groups and RECORD_KEY not in snapshot.schema.names:
        raise HoodieTableError(
            f"The table at {cfg.path} records no bucket layout in {PROPERTIES_FILE} and stores no record keys "
            "(hoodie.populate.meta.fields=false), so this BUCKET write cannot check that its bucket count and "
            f"hash fields are the table's. Nothing was written. Help: add {K_NUM_BUCKETS} and "
            f"{K_BUCKET_HASH_FIELD} with the table's values to {PROPERTIES_FILE}."
        )
    seen: dict[tuple[str, int], str] = {}
    for partition, fid, ref in sorted(groups):
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
            _refuse(cfg, f"file group {fid} in partition '{partition}' is bucket {bucket}, beyond the count")
        if (partition, bucket) in seen:
            raise HoodieTableError(
                f"Partition '{partition}' of {cfg.path} has two file groups in bucket {bucket} "
                f"({seen[(partition, bucket)]}, {fid}): the BUCKET index keeps one per bucket. Nothing was written."
            )
        seen[(partition, bucket)] = fid
        keys = snapshot.read_ref(ref, [RECORD_KEY]).column(RECORD_KEY).combine_chunks()
        if len(keys) == 0:
            continue
        hashed = record_key_bucket_ids(keys, fields, n)
        wrong = np.flatnonzero(hashed != bucket)
        if len(wrong):
            key, to = keys[int(wrong[0])].as_py(), int(hashed[wrong[0]])
            _refuse(
                cfg,
                f"key '{key}' is stored in bucket {bucket} ({fid}, partition '{partition}'), and these "
                f"settings hash it to bucket {to}",
            )


def _refuse(cfg: WriteConfig, found: str) -> None:
    fields = ",".join(cfg.bucket_hash_fields or cfg.record_key_fields)
    raise HoodieConfigError(
        f"Options '{K_NUM_BUCKETS}'='{cfg.num_buckets}' and '{K_BUCKET_HASH_FIELD}'='{fields}' do not match the "
        f"table at {cfg.path}: {found}. The table records no bucket "
        f"layout in {PROPERTIES_FILE} (Apache Hudi does not; hoodie_sink does since it creates the table), so "
        "this write would insert stored keys again. Nothing was written. Help: give the bucket count and hash "
        "fields the table was written with."
    )
