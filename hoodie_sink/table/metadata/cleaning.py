"""The metadata table's own clean (I/O, driver side): file slices that no reader can need any more
are deleted, so its `files` partition holds a bounded number of files whatever the table's age.

Readers use the latest slice of the file group (format/metadata_slices.py); a reader that loaded
the metadata timeline just before a compaction completed still reads the slice before it.  So the
latest two slices stay, and older ones (a base file and the log files named after its instant) go.
Java keeps more (its KEEP_LATEST_COMMITS with max(20, 1.2 x the data table's retained commits),
HoodieMetadataWriteUtils at release-0.15.0); any retention that keeps the latest slice is correct
for readers, and ours is the one that bounds a stream's files
(docs/hudi/metadata-table-protocol.md#table-services).

As any Hudi clean: `<t>002.clean.requested` (the plan), `.inflight`, the deletions, the completed
clean with what was deleted; `<t>` is the latest metadata deltacommit, as Java names it.
"""

from __future__ import annotations

import logging
import time

from hoodie_sink.table.format.clean_metadata import CleanerPlan, encode_clean_metadata, encode_cleaner_plan
from hoodie_sink.table.format.file_group import LogFile
from hoodie_sink.table.format.metadata_keys import BLOOM_FILTERS, COLUMN_STATS, FILES, RECORD_INDEX
from hoodie_sink.table.format.metadata_layout import CLEAN_SUFFIX
from hoodie_sink.table.format.metadata_slices import MetadataBaseFile
from hoodie_sink.table.format.metadata_table import metadata_storage
from hoodie_sink.table.format.timeline.instant import CLEAN, COMMIT, DELTA_COMMIT
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)
KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"


def clean_if_due(storage: Storage) -> str | None:
    """Delete the metadata table's file slices older than the latest two; the clean's instant, or
    None when there is nothing to delete."""
    mdt = metadata_storage(storage)
    timeline = Timeline.load(mdt)
    compactions = sorted(i.timestamp for i in timeline.completed((COMMIT,)))
    deltacommits = [i.timestamp for i in timeline.completed((DELTA_COMMIT,))]
    if len(compactions) < 2 or not deltacommits:
        return None
    keep_from = compactions[-2]
    partitions = (FILES, RECORD_INDEX, COLUMN_STATS, BLOOM_FILTERS)
    stale = sorted(p for partition in partitions for p in _older_slices(mdt, partition, keep_from))
    if not stale:
        return None
    instant = deltacommits[-1] + CLEAN_SUFFIX
    if timeline.states_of(instant):
        return None  # cleaned at this point already (a redo finds the files gone next time)
    per_partition: dict[str, tuple[str, ...]] = {}
    for rel in stale:
        partition = rel.split("/", 1)[0]
        per_partition[partition] = (*per_partition.get(partition, ()), rel)
    plan = CleanerPlan(KEEP_LATEST_COMMITS, (keep_from, COMMIT), deltacommits[-1], per_partition)
    store = TimelineStore(mdt, zone="UTC")
    started = time.monotonic()
    content = encode_cleaner_plan(plan, mdt.base_uri)
    requested = store.create_requested(instant, CLEAN, content)
    inflight = store.transition_to_inflight(requested, content)
    for rel in stale:
        mdt.delete(rel)
    taken_ms = int((time.monotonic() - started) * 1000)
    store.complete(inflight, encode_clean_metadata(instant, taken_ms, plan, set(stale), set()))
    log.info(
        "hoodie: cleaned %d files of the metadata table of %s at %s", len(stale), storage.base_uri, instant
    )
    return instant


def _older_slices(mdt: Storage, partition: str, keep_from: str) -> list[str]:
    """Paths of the base files and log files of slices whose base instant is older than `keep_from`
    (the placeholder log of the initialisation included, once a compaction has superseded it), in
    `partition` (files, record_index, column_stats, bloom_filters: every file group of each is
    compacted at each compaction)."""
    out: list[str] = []
    if not mdt.is_dir(partition):
        return out
    for info in mdt.list_dir(partition):
        if not info.is_file:
            continue
        name = info.base_name
        base = MetadataBaseFile.parse(name)
        log_file = LogFile.parse(partition, name) if name.startswith(".") else None
        instant = (
            base.instant if base is not None else log_file.base_instant if log_file is not None else None
        )
        if instant is not None and instant < keep_from:
            out.append(f"{partition}/{name}")
    return out
