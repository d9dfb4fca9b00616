"""What one data-table action changes in the metadata table's `bloom_filters` partition: its records
(driver side; docs/design/metadata-table.md#bloom-filters).

Hudi's rules (HoodieTableMetadataUtil.convertMetadataToBloomFilterRecords for commits and cleans,
release-0.15.0; docs/hudi/metadata-table-protocol.md#bloom-filters):
- a commit, deltacommit, replacecommit or compaction commit adds the footer bloom filter of every
  base file its write stats name (log files have none), stamped with the commit's instant; the write
  tasks took it from the footer they wrote (`WriteStat.bloom_filter`), so here it is only encoded;
- a clean tombstones every base file it deleted (type "", the clean's instant, no bytes);
- rollbacks write nothing here (the rolled-back instant's metadata deltacommit is removed whole), and
  a restore rebuilds the metadata table.
The filter is stored as the UTF-8 bytes of its footer text, with its own type code (Java writes its
writer's configured type, which is the footer's for the files it writes).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq

from hoodie_sink.table.format.bloom import BLOOM_FOOTER_KEY, BLOOM_TYPE_CODE_KEY, TYPE_SIMPLE
from hoodie_sink.table.format.commit_metadata import CommitMetadata, WriteStat
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.metadata_records import (
    MetadataRecord,
    bloom_filter_record,
    bloom_filter_tombstone,
)
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
FOOTER_THREADS = 8

Bloom = tuple[str, str]  # (type code, footer text)


def is_base_file(stat_path: str) -> bool:
    partition, name = posixpath.split(stat_path)
    return BaseFile.parse(partition, name) is not None


def of_commit(storage: Storage, instant: str, md: CommitMetadata) -> list[MetadataRecord]:
    """The `bloom_filters` records of a commit: one per base file written.  A base file whose stat
    carries no filter (a table service run without hoodie.metadata.index.bloom.filter.enable on a
    table that keeps the partition) has its footer read here; one without a filter in its footer
    (virtual keys) gets no record, as in Java."""
    stats = list({s.path: s for s in md.write_stats if s.path and is_base_file(s.path)}.values())
    missing = [s for s in stats if s.bloom_filter is None]
    read: dict[str, Bloom | None] = {}
    if missing:
        log.info("hoodie: reading %d footers for bloom filters the tasks did not take", len(missing))
        with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, len(missing))) as pool:
            blooms = list(pool.map(lambda s: footer_bloom(storage, s.path), missing))
        read = {s.path: b for s, b in zip(missing, blooms, strict=True)}
    out = []
    for s in stats:
        bloom = s.bloom_filter if s.bloom_filter is not None else read[s.path]
        if bloom is not None:
            out.append(_record(s, instant, bloom))
    return out


def _record(stat: WriteStat, instant: str, bloom: Bloom) -> MetadataRecord:
    type_code, text = bloom
    return bloom_filter_record(
        stat.partition_path, posixpath.basename(stat.path), instant, text.encode("utf-8"), type_code
    )


def footer_bloom(storage: Storage, path: str) -> Bloom | None:
    """A base file's bloom filter as its footer holds it (type code, text), or None."""
    with storage.open_input_file(path) as f:
        meta = pq.read_metadata(f).metadata or {}
    text = meta.get(BLOOM_FOOTER_KEY.encode())
    if not text:
        return None
    type_code = meta.get(BLOOM_TYPE_CODE_KEY.encode())
    return (type_code.decode("utf-8") if type_code else TYPE_SIMPLE), text.decode("utf-8")


def of_clean(instant: str, deleted: Iterable[str]) -> list[MetadataRecord]:
    """Tombstones for the base files a clean deleted (relative paths); log files have no filter."""
    out = []
    for path in sorted(deleted):
        if is_base_file(path):
            partition, name = posixpath.split(path)
            out.append(bloom_filter_tombstone(partition, name, instant))
    return out
