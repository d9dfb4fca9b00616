"""Catalog sync: register a Hudi table in a Hive metastore (Thrift) the way Apache Hudi 0.15's
HiveSyncTool does in mode hms, so that Trino, Hive and Spark find it by name and read it as a Hudi
table (docs/hudi/hive-sync.md).

It runs in the committing process after every commit when `hoodie.datasource.meta.sync.enable`
(client.complete), and as `hoodie-sink sync`.  It is metadata work only: the new commits' metadata
(which partitions they wrote or dropped) and a few metastore calls per table; the whole table's
partitions are listed only on a first sync, when the marker has been archived away, or with
`hoodie.meta.sync.incremental=false`.

A failed sync never touches the data commit.  The marker (`last_commit_time_sync`) is moved only
after the table and its partitions are in place, so the next sync starts again from the last one
that finished: the catch-up is part of the next commit's sync
(docs/hudi/hive-sync.md#what-our-sync-does).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from hoodie_sink.errors import HoodieCatalogError
from hoodie_sink.table.catalog.hms_client import HiveDatabase, HiveMetastoreClient, HiveTable, partition_name
from hoodie_sink.table.catalog.sync_plan import (
    AUTO_CREATED_DATABASE,
    LAST_COMMIT_COMPLETION_TIME_SYNC,
    LAST_COMMIT_TIME_SYNC,
    PartitionChanges,
    ResolvedSync,
    SyncedTable,
    columns_differ,
    definition_differs,
    partition_changes,
    partition_values,
    resolve,
    same_location,
    synced_tables,
    table_definition,
)
from hoodie_sink.table.format.timeline.instant import (
    REPLACE_COMMIT,
    WRITE_ACTIONS,
    Instant,
    format_instant,
)
from hoodie_sink.table.format.timeline.timeline import META_DIR, ActiveTimeline
from hoodie_sink.table.options.sync_config import MetaSyncConfig
from hoodie_sink.table.read.snapshot import Snapshot
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.storage_options import StorageOptions

log = logging.getLogger(__name__)

# operations whose replace commits can leave a partition with no file group
# (Hudi's TimelineUtils.getDroppedPartitions; docs/hudi/hive-sync.md#partitions)
_DROPPING_OPERATIONS = ("delete_partition", "insert_overwrite_table", "insert_overwrite")


@dataclass(frozen=True)
class TableSyncResult:
    name: str
    created: bool
    altered: bool
    full: bool  # every partition compared (first sync, marker gone, or incremental off)
    partitions_added: int
    partitions_altered: int
    partitions_dropped: int


@dataclass(frozen=True)
class HiveSyncResult:
    database: str
    tables: tuple[TableSyncResult, ...]
    last_commit: str | None
    elapsed_ms: int

    def summary(self) -> str:
        parts = []
        for t in self.tables:
            what = "created" if t.created else ("altered" if t.altered else "checked")
            parts.append(
                f"{self.database}.{t.name} {what}, partitions +{t.partitions_added} ~{t.partitions_altered} "
                f"-{t.partitions_dropped}{' (full)' if t.full else ''}"
            )
        return f"synced up to {self.last_commit} in {self.elapsed_ms} ms: " + "; ".join(parts)


class HoodieMetaSyncError(HoodieCatalogError):
    """The catalog sync failed after the data commit landed (the commit stands)."""


ClientFactory = Callable[[str], HiveMetastoreClient]


def sync_table(
    base_path: str,
    options: Mapping[str, str] | None = None,
    client_factory: ClientFactory = HiveMetastoreClient,
) -> HiveSyncResult:
    """Sync the table at `base_path` now, with Hudi's sync options (`hoodie.datasource.hive_sync.*`;
    the switch and mode hms are implied)."""
    given = {str(k).lower(): str(v) for k, v in (options or {}).items()}
    raw = {"hoodie.datasource.meta.sync.enable": "true", "hoodie.datasource.hive_sync.mode": "hms", **given}
    config = MetaSyncConfig.from_options(raw)
    assert config is not None
    storage = Storage(base_path, StorageOptions.from_options(raw))
    return run_sync(config.with_base_path(base_path), storage, client_factory)


def run_sync(
    config: MetaSyncConfig, storage: Storage, client_factory: ClientFactory = HiveMetastoreClient
) -> HiveSyncResult:
    """Sync every metastore table of the table in `storage` (its `base_path`: config's, else the storage root)."""
    started = time.monotonic()
    state = _TableState.read(storage)
    r = resolve(config, state.snapshot.table, config.base_path or storage.root)
    with client_factory(config.metastore_uris) as client:
        _ensure_database(client, r)
        results = tuple(_sync_one(client, r, synced, state) for synced in synced_tables(r))
    return HiveSyncResult(
        r.database,
        results,
        state.marker[LAST_COMMIT_TIME_SYNC] or None,
        int((time.monotonic() - started) * 1000),
    )


@dataclass
class _TableState:
    """What one sync reads of the table, once for all its metastore tables (a merge-on-read
    table's three): the snapshot, the timeline, completion times, the marker to set, and the
    partitions touched since a marker (by (marker, marker's completion))."""

    snapshot: Snapshot
    timeline: ActiveTimeline
    completion: dict[str, str]
    marker: dict[str, str]
    _touched: dict[tuple[str, str], tuple[set[str], set[str]]] = field(default_factory=dict)

    @staticmethod
    def read(storage: Storage) -> _TableState:
        timeline = ActiveTimeline.load(storage)
        snapshot = Snapshot.open(storage, timeline=timeline)
        latest = timeline.latest_completed()
        completion = _completion_times(storage, timeline, snapshot.table.timeline_zone)
        marker = {
            LAST_COMMIT_TIME_SYNC: latest.timestamp if latest else "",
            LAST_COMMIT_COMPLETION_TIME_SYNC: max(completion.values(), default=""),
        }
        return _TableState(snapshot, timeline, completion, marker)

    def touched(self, since: str, since_completed: str) -> tuple[set[str], set[str]]:
        """(partitions written and still live, partitions gone) by the write instants completed
        since the marker: those after it, and those before it that completed after the last sync
        (a long write that started before a shorter one committed)."""
        key = (since, since_completed)
        if key not in self._touched:
            self._touched[key] = self._changed_since(since, since_completed)
        return self._touched[key]

    def _changed_since(self, since: str, since_completed: str) -> tuple[set[str], set[str]]:
        written: set[str] = set()
        replaced: set[str] = set()
        for instant in self.timeline.completed(WRITE_ACTIONS):
            # completed at or after the last sync's latest completion: maybe unseen then (equal
            # modification times are ambiguous), except the marker's own instant, which it names
            late = (
                bool(since_completed)
                and self.completion.get(instant.timestamp, "") >= since_completed
                and instant.timestamp != since
            )
            if instant.timestamp <= since and not late:
                continue
            md = self.timeline.commit_metadata(instant)
            written |= {p for p, stats in md.partition_to_write_stats().items() if stats}
            if instant.action == REPLACE_COMMIT and md.operation_type.lower() in _DROPPING_OPERATIONS:
                replaced |= set(md.partition_to_replace_file_ids or {})
        if not replaced:
            return written, set()
        # an overwrite may have emptied partitions, also ones an earlier instant of this range
        # wrote: which of them still have a file group decides (listing only these partitions)
        candidates = replaced | written
        live = {sl.partition_path for sl in self.snapshot.file_slices(lambda p: p in candidates)}
        return written & live, candidates - live


def _ensure_database(client: HiveMetastoreClient, r: ResolvedSync) -> None:
    if client.get_database(r.database) is not None:
        return
    if not r.config.auto_create_database:
        raise HoodieCatalogError(
            f"catalog sync: database '{r.database}' does not exist in {client.uris} and "
            "hoodie.datasource.hive_sync.auto_create_database is false"
        )
    try:
        client.create_database(HiveDatabase(r.database, description=AUTO_CREATED_DATABASE))
    except HoodieCatalogError:
        if client.get_database(r.database) is None:  # another writer may have created it meanwhile
            raise


def _sync_one(
    client: HiveMetastoreClient, r: ResolvedSync, synced: SyncedTable, state: _TableState
) -> TableSyncResult:
    wanted = table_definition(r, synced, state.snapshot.schema)
    registered = client.get_table(r.database, synced.name)
    created = altered = False
    if registered is None:
        try:
            client.create_table(wanted)
            registered, created = wanted, True
        except HoodieCatalogError:
            # another writer of the table may have created it since we looked: take theirs
            registered = client.get_table(r.database, synced.name)
            if registered is None:
                raise
    if not created:
        _check_same_table(registered, wanted)
        if definition_differs(registered, wanted):
            # a schema change reaches the partitions too (their own column lists): CASCADE
            cascade = bool(wanted.partition_columns) and columns_differ(registered, wanted)
            client.alter_table(_with_marker(wanted, registered.parameters), cascade=cascade)
            altered = True
    since = registered.parameters.get(LAST_COMMIT_TIME_SYNC) if not created else None
    since_completed = registered.parameters.get(LAST_COMMIT_COMPLETION_TIME_SYNC, "") if not created else ""
    full = created or not r.config.incremental or not since or _archived_past(state.timeline, since)
    if full:
        changes = _full_changes(client, r, synced, state.snapshot, registered_none=created)
    else:
        assert since is not None
        touched = state.touched(since, since_completed) if r.partition_fields else (set(), set())
        changes = _incremental_changes(client, r, synced, *touched)
    batch = r.config.batch_num  # hoodie.datasource.hive_sync.batch_num partitions per call, as Hudi
    added = sum(
        client.add_partitions(wanted, changes.add[i : i + batch]) for i in range(0, len(changes.add), batch)
    )
    for start in range(0, len(changes.alter), batch):
        client.alter_partitions(wanted, changes.alter[start : start + batch])
    for values in changes.drop:
        client.drop_partition(r.database, synced.name, values, delete_data=False)
    unchanged = not created and not altered and changes.empty
    current = {k: registered.parameters.get(k, "") for k in state.marker}
    if current != state.marker and not (r.config.condition_sync and unchanged):
        client.alter_table(_with_marker(wanted, state.marker))
    return TableSyncResult(synced.name, created, altered, full, added, len(changes.alter), len(changes.drop))


def _with_marker(table: HiveTable, parameters: Mapping[str, str]) -> HiveTable:
    kept = {
        k: parameters[k]
        for k in (LAST_COMMIT_TIME_SYNC, LAST_COMMIT_COMPLETION_TIME_SYNC)
        if parameters.get(k)
    }
    return replace(table, parameters={**table.parameters, **kept})


def _check_same_table(registered: HiveTable, wanted: HiveTable) -> None:
    """Refuse to take over a metastore table that is another table, or whose partition keys differ
    (Hive cannot change a table's partition keys: the table must be dropped and synced again)."""
    name = f"{registered.database}.{registered.name}"
    if not same_location(registered.location, wanted.location):
        raise HoodieCatalogError(
            f"catalog sync: {name} is registered at {registered.location}, not at this table's path "
            f"{wanted.location}; Help: sync under another name (hoodie.datasource.hive_sync.table) or drop it"
        )
    have = [c.name.lower() for c in registered.partition_columns]
    want = [c.name.lower() for c in wanted.partition_columns]
    if have != want:
        raise HoodieCatalogError(
            f"catalog sync: {name} is partitioned by {have} in the metastore, the table by {want}; a metastore "
            "table's partition keys cannot change. Help: drop the metastore table (its files stay) and sync again"
        )


def _archived_past(timeline: ActiveTimeline, since: str) -> bool:
    """Whether instants after the marker may have left the active timeline (then only a full
    comparison knows what they wrote)."""
    first = timeline.earliest_write_instant_time()
    return first is not None and since < first


def _full_changes(
    client: HiveMetastoreClient,
    r: ResolvedSync,
    synced: SyncedTable,
    snapshot: Snapshot,
    registered_none: bool,
) -> PartitionChanges:
    live = {sl.partition_path for sl in snapshot.file_slices()} if r.partition_fields else set()
    # a table just created has no partitions to list
    registered = (
        client.list_partitions(r.database, synced.name) if r.partition_fields and not registered_none else []
    )
    return partition_changes(r, registered, live, (), full=True)


def _incremental_changes(
    client: HiveMetastoreClient, r: ResolvedSync, synced: SyncedTable, written: set[str], gone: set[str]
) -> PartitionChanges:
    """What to change for the partitions the new commits wrote or emptied (_TableState.touched)."""
    if not r.partition_fields or not (written or gone):
        return PartitionChanges()
    # only the partitions in question, by name: a table's thousands of others stay in the metastore
    keys = list(r.partition_fields)
    names = sorted({partition_name(keys, partition_values(r, rel)) for rel in written | gone})
    registered = []
    for start in range(0, len(names), r.config.batch_num):
        registered += client.partitions_by_names(
            r.database, synced.name, names[start : start + r.config.batch_num]
        )
    return partition_changes(r, registered, written, gone, full=False)


def _completion_times(storage: Storage, timeline: ActiveTimeline, zone: str) -> dict[str, str]:
    """Completed write instant -> when it completed (its completed file's modification time, as an
    instant time in the timeline's zone): table version 6 records no completion time, and this is
    what Hudi 0.15 reads as an instant's state transition time."""
    completed = {i.file_name: i for i in timeline.completed(WRITE_ACTIONS)}
    out: dict[str, str] = {}
    for info in storage.list_dir(META_DIR):
        name = info.base_name
        instant: Instant | None = completed.get(name)
        if instant is not None and info.mtime is not None:
            out[instant.timestamp] = format_instant(info.mtime, zone)
    return out


def sync_after_commit(config: MetaSyncConfig, storage: Storage, instant: str) -> HiveSyncResult | None:
    """The sync a commit runs when `hoodie.datasource.meta.sync.enable`; a failure is raised as
    HoodieMetaSyncError naming the instant that stands, or logged with `ignore_exceptions`."""
    try:
        result = run_sync(config, storage)
    except Exception as e:  # noqa: BLE001 - any failure: the commit stands, say so
        message = (
            f"catalog sync after commit {instant} failed: {e}. The commit stands and its data is readable by "
            "path; the next commit syncs again (or run `hoodie-sink sync <path> -o ...`)"
        )
        if config.ignore_exceptions:
            log.error("hoodie: %s (hoodie.datasource.hive_sync.ignore_exceptions=true)", message)
            return None
        raise HoodieMetaSyncError(message) from e
    log.info("hoodie: catalog %s", result.summary())
    return result
