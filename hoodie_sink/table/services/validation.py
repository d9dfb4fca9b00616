"""The table's invariants, checked against storage (`hoodie-sink validate`).

1. Every file of the latest file slices reads (its Parquet footer parses).
2. Every file a completed commit on the active timeline wrote exists, unless a completed clean
   deleted it (its clean metadata names it).
3. No orphan data file: one whose instant is neither on the active timeline nor archived is
   read as committed by every reader when it is older than the active timeline (a leftover of a
   write whose rollback failed), and left behind otherwise; both are reported.
4. Record keys are unique per partition among the latest slices (table-wide with `global_keys`,
   as a GLOBAL_BLOOM index promises); in a merge-on-read table a slice with logs counts the keys
   its merged rows hold (a key deleted in a log is gone).  bulk_insert and insert keep duplicate
   keys, as Hudi's do, so a duplicate is not always damage; it is still reported (exit 1), since
   every later upsert or delete of the key changes each copy and it never goes away by itself
   (docs/hudi/duplicate-keys.md).
5. Every latest base file's bloom filter and min/max key footer hold every key of the file.
6. With Hudi's metadata table, its `files` partition lists what storage holds: every file it lists
   exists with its size, and every file of a completed instant is listed (log files too when no
   instant is pending, since a pending write's logs cannot be told from committed ones by name);
   its record index holds the live keys, and its column statistics and bloom filters are those the
   listed files give.
Pure reading: nothing is changed.  Vectorised over each file's keys (no per-record loop).
"""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.clean_metadata import decode_clean_metadata
from hoodie_sink.table.format.fs_view import FileSystemView, list_storage_files
from hoodie_sink.table.format.metadata_keys import BLOOM_FILTERS, COLUMN_STATS, RECORD_INDEX, bloom_filter_key
from hoodie_sink.table.format.metadata_listing import metadata_listing, read_partition
from hoodie_sink.table.format.metadata_record_index import read_record_index
from hoodie_sink.table.format.metadata_records import ColumnStatsInfo, StatValue
from hoodie_sink.table.format.metadata_table import (
    has_files_partition,
    listed_partitions,
    lists_through_metadata_table,
)
from hoodie_sink.table.format.properties import (
    MERGE_ON_READ,
    read_table_config,
)
from hoodie_sink.table.format.timeline.instant import CLEAN, COMPLETED, WRITE_ACTIONS
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline, TimelineStore
from hoodie_sink.table.index.key_index import RECORD_KEY_COLUMN, read_footer, read_record_keys
from hoodie_sink.table.metadata.data_properties import read_data_properties
from hoodie_sink.table.read.bloom_filter_files import listing_blooms
from hoodie_sink.table.read.column_stats_files import listing_stats
from hoodie_sink.table.read.record_index_keys import live_entries
from hoodie_sink.table.read.snapshot import Snapshot, slice_ref
from hoodie_sink.table.services.archival import load_archived_timeline
from hoodie_sink.table.storage import Storage


@dataclass(frozen=True)
class Violation:
    check: str  # unreadable-file, missing-file, orphan-file, duplicate-key, bloom-footer, metadata-table
    subject: str  # the file or key concerned
    detail: str


def validate_table(target: str | Storage, global_keys: bool = False) -> list[Violation]:
    storage = target if isinstance(target, Storage) else Storage(target)
    table = read_table_config(storage)
    timeline = ActiveTimeline.load(storage)
    view = FileSystemView.load(storage, timeline)
    out: list[Violation] = []
    latest = view.latest_base_files()
    keys_per_file: list[tuple[str, str, pa.Array]] = []
    for bf in latest:
        try:
            footer = read_footer(storage, bf.path)
            keys = read_record_keys(storage, bf.path) if table.populate_meta_fields else None
        except Exception as e:  # noqa: BLE001 - any failure to read is the finding
            out.append(Violation("unreadable-file", storage.full(bf.path), str(e)))
            continue
        if keys is None or len(keys) == 0:
            continue
        keys_per_file.append((bf.partition_path, bf.path, keys))
        bloom = footer.bloom()
        if bloom is None:
            out.append(Violation("bloom-footer", storage.full(bf.path), "no bloom filter in the footer"))
        else:
            missing = pc.filter(keys, pa.array(~bloom.might_contain(keys)))
            if len(missing):
                detail = f"the bloom filter misses {len(missing)} keys, e.g. {missing[0].as_py()!r}"
                out.append(Violation("bloom-footer", storage.full(bf.path), detail))
        mm = pc.min_max(keys)
        if (footer.min_key, footer.max_key) != (mm["min"].as_py(), mm["max"].as_py()):
            out.append(Violation("bloom-footer", storage.full(bf.path),
                                 f"key range {footer.min_key!r}..{footer.max_key!r} in the footer, "
                                 f"{mm['min'].as_py()!r}..{mm['max'].as_py()!r} in the file"))  # fmt: skip
    if table.table_type == MERGE_ON_READ and table.populate_meta_fields:
        keys_per_file = _merged_keys(storage, keys_per_file)
    out += _duplicate_keys(keys_per_file, global_keys)
    out += _missing_files(storage, timeline, view)
    out += _orphans(storage, timeline, view)
    out += _metadata_table_mismatches(storage, timeline)
    out += record_index_mismatches(storage, timeline)
    out += column_stats_mismatches(storage, timeline)
    out += bloom_filter_mismatches(storage, timeline)
    return out


def _merged_keys(
    storage: Storage, keys_per_file: list[tuple[str, str, pa.Array]]
) -> list[tuple[str, str, pa.Array]]:
    """The keys of the latest slices with logs from their merged rows (logs delete and insert keys)."""
    snap = Snapshot.open(storage)
    merged: dict[str, tuple[str, str, pa.Array]] = {}
    for sl in snap.file_slices():
        if sl.log_files:
            rows = snap.read_ref(slice_ref(sl), [RECORD_KEY_COLUMN])
            name = sl.base_file.path if sl.base_file is not None else f"{sl.partition_path}/{sl.file_id}"
            merged[sl.file_id] = (sl.partition_path, name, rows.column(0).combine_chunks())
    kept = [entry for entry in keys_per_file if posixpath.basename(entry[1]).split("_")[0] not in merged]
    return kept + [entry for entry in merged.values() if len(entry[2])]


def _duplicate_keys(keys_per_file: list[tuple[str, str, pa.Array]], global_keys: bool) -> list[Violation]:
    if not keys_per_file:
        return []
    t = pa.table({
        "partition": pa.concat_arrays([pa.array([p] * len(k), pa.string()) for p, _, k in keys_per_file]),
        "file": pa.concat_arrays([pa.array([f] * len(k), pa.string()) for _, f, k in keys_per_file]),
        "key": pa.concat_arrays([k.cast(pa.string()) for _, _, k in keys_per_file]),
    })  # fmt: skip
    by = ["key"] if global_keys else ["partition", "key"]
    counts = t.group_by(by).aggregate([("file", "count"), ("file", "distinct")])
    dup = counts.filter(pc.greater(counts["file_count"], 1))
    scope = "in the table" if global_keys else "in partition"
    return [
        Violation(
            "duplicate-key",
            row["key"],
            f"{row['file_count']} records {scope}{'' if global_keys else ' ' + repr(row['partition'])}: "
            f"{', '.join(sorted(row['file_distinct']))} (bulk_insert and insert keep duplicate keys; "
            "an upsert or delete of the key changes every copy)",
        )  # fmt: skip
        for row in dup.to_pylist()
    ]


def _missing_files(storage: Storage, timeline: ActiveTimeline, view: FileSystemView) -> list[Violation]:
    present = {bf.path for bf in view.listing.base_files} | {lf.path for lf in view.listing.log_files}
    cleaned: set[str] = set()
    store = TimelineStore(storage)
    for clean in timeline.completed((CLEAN,)):
        md = decode_clean_metadata(storage.read_bytes(store.path(clean)))
        for part, pm in (md.get("partitionMetadata") or {}).items():
            cleaned.update(posixpath.join(part, n) if part else n for n in pm.get("successDeleteFiles") or [])
    out = []
    for inst in timeline.completed():
        for s in timeline.commit_metadata(inst).write_stats:
            if s.path and s.path not in present and s.path not in cleaned:
                out.append(Violation("missing-file", storage.full(s.path),
                                     f"written by completed {inst.action} {inst.timestamp}, not on storage and "
                                     "not deleted by a clean"))  # fmt: skip
    return out


def _orphans(storage: Storage, timeline: ActiveTimeline, view: FileSystemView) -> list[Violation]:
    known = {i.timestamp for i in timeline.instants if i.action in WRITE_ACTIONS}
    first = timeline.earliest_write_instant_time()
    archived: set[str] | None = None
    out = []
    for bf in view.listing.base_files:
        if bf.instant in known:
            continue
        if first is not None and bf.instant < first:
            if archived is None:  # loaded only when a file predates the active timeline
                archived = {
                    e.instant.timestamp
                    for e in load_archived_timeline(storage)
                    if e.instant.action in WRITE_ACTIONS and e.instant.state == COMPLETED
                }
            if bf.instant in archived:
                continue
            detail = "its instant is on neither timeline, yet readers see it as committed (older than the active one)"
        else:
            detail = (
                "its instant is not on the timeline (a write that left it behind): invisible, wasted storage"
            )
        out.append(Violation("orphan-file", storage.full(bf.path), detail))
    return out


def metadata_table_violations(target: str | Storage) -> list[Violation]:
    """Check 6 alone (cheap: two listings, no data file read): what the tests ask after every
    write they check, and an empty list for a table without a metadata table."""
    storage = target if isinstance(target, Storage) else Storage(target)
    timeline = ActiveTimeline.load(storage)
    return (
        _metadata_table_mismatches(storage, timeline)
        + record_index_mismatches(storage, timeline)
        + column_stats_mismatches(storage, timeline)
        + bloom_filter_mismatches(storage, timeline)
    )


def record_index_mismatches(storage: Storage, timeline: ActiveTimeline, limit: int = 10) -> list[Violation]:
    """The metadata table's record index (when the table keeps one) against the table's live
    records read by our reader: every live key at its partition and file group, no other key.
    A key stored twice (the insert operation allows duplicates) may point at either copy."""
    props = read_data_properties(storage)
    if not has_files_partition(props) or RECORD_INDEX not in listed_partitions(props):
        return []
    expected = live_entries(storage, timeline)
    actual = read_record_index(storage, timeline)
    exp_loc, act_loc = _locations(expected), _locations(actual)
    out = []
    wrong = actual.filter(pc.invert(pc.is_in(act_loc, exp_loc)))
    for row in wrong.slice(0, limit).to_pylist():
        known = pc.is_in(expected.column("key"), pa.array([row["key"]])).to_numpy(zero_copy_only=False).any()
        detail = f"in the record index at {row['partition']}/{row['file_id']}, " + (
            "live elsewhere" if known else "not a live key"
        )
        out.append(Violation("record-index", row["key"], detail))
    # a key live in several places (insert duplicates; a partition-scoped index's key in several
    # partitions): the global record index holds one of them at most (Java's holds the same)
    counts = expected.group_by("key").aggregate([("partition", "count")])
    repeated = counts.filter(pc.greater(counts.column("partition_count"), 1)).column("key")
    single = expected.filter(pc.invert(pc.is_in(expected.column("key"), repeated)))
    missing = single.filter(pc.invert(pc.is_in(single.column("key"), actual.column("key"))))
    for row in missing.slice(0, limit).to_pylist():
        detail = f"live at {row['partition']}/{row['file_id']}, missing from the record index"
        out.append(Violation("record-index", row["key"], detail))
    if actual.num_rows != pc.count_distinct(actual.column("key")).as_py():
        out.append(
            Violation("record-index", storage.base_uri, "a key appears twice in the merged record index")
        )
    return out


def column_stats_mismatches(storage: Storage, timeline: ActiveTimeline, limit: int = 10) -> list[Violation]:
    """The metadata table's column statistics (when the table keeps them) against what the listed
    files give (read/column_stats_files.py: footers, and log files' rows): every record of a listed
    file equals the statistics computed again, every listed base file has records, and a file that
    is not listed (cleaned, tombstoned) has no live record.  Tolerated, as Java 0.15 leaves them: a
    listed log file without records (Java's initialisation reads base files only) and live records
    of unlisted log files (Java's clean tombstones base files only); records of a column we do not
    compute (Java's all-null records of nested columns in log files); live records of a base file
    whose clean tombstoned its cut name (Java 0.15's quirk)."""
    if COLUMN_STATS not in _kept(storage):
        return []
    records = read_partition(storage, timeline, COLUMN_STATS) or {}
    stored: dict[str, dict[str, ColumnStatsInfo]] = {}
    tombstoned: set[str] = set()
    for record in records.values():
        info = record.column_stats if record is not None else None
        if info is None or info.file_name is None or info.column_name is None:
            continue
        if info.is_deleted:
            tombstoned.add(info.file_name)
        else:
            stored.setdefault(info.file_name, {})[info.column_name] = info
    listing = metadata_listing(storage, timeline)
    expected = listing_stats(storage, listing, timeline.is_committed)
    base_names = {bf.name for bf in listing.base_files}
    listed = {posixpath.basename(p): p for p in expected}
    out: list[Violation] = []
    for name, path in sorted(listed.items()):
        have = stored.get(name, {})
        want = {info.column_name: info for info in expected[path]}
        if want and not have and name in base_names:  # a file without rows has none (Java's neither)
            detail = "listed base file without column statistics"
            out.append(Violation("column-stats", storage.full(path), detail))
        for column, info in sorted(have.items()):
            if column in want and not _same_stats(info, want[column]):
                detail = f"column {column}: {info} in the metadata table, {want[column]} in the file"
                out.append(Violation("column-stats", storage.full(path), detail))
    for name in sorted(stored.keys() - listed.keys()):
        # Java 0.15's clean tombstones a name cut by the partition's length (a key of its own), so
        # the whole name's records stay live (docs/hudi/metadata-table.md#column-statistics)
        javas_cut = any(name[k:] in tombstoned for k in range(1, len(name)))
        if not name.startswith(".") and not javas_cut:
            out.append(Violation("column-stats", name, "live column statistics of a file that is not listed"))
    return out[:limit] if len(out) > limit else out


def bloom_filter_mismatches(storage: Storage, timeline: ActiveTimeline, limit: int = 10) -> list[Violation]:
    """The metadata table's bloom filters (when the table keeps them) against the listed base files'
    footers: every listed base file with a filter in its footer has a live record holding that
    filter (its footer text, its type code), and a base file that is not listed has none (cleans
    tombstone what they delete)."""
    if BLOOM_FILTERS not in _kept(storage):
        return []
    records = read_partition(storage, timeline, BLOOM_FILTERS) or {}
    listing = metadata_listing(storage, timeline)
    expected = listing_blooms(storage, listing)
    by_key = {bloom_filter_key(bf.partition_path, bf.name): bf for bf in listing.base_files}
    out: list[Violation] = []
    for key, bf in sorted(by_key.items(), key=lambda kv: kv[1].path):
        record = records.get(key)
        info = record.bloom_filter if record is not None else None
        live = info is not None and not info.is_deleted
        want = expected.get(bf.path)
        if want is None:
            if live:
                out.append(
                    Violation("bloom-filters", storage.full(bf.path), "a record, but no filter in the footer")
                )
            continue
        if not live:
            out.append(
                Violation("bloom-filters", storage.full(bf.path), "listed base file without a bloom filter")
            )
        elif info is not None and (info.bloom_type, info.bloom_filter) != (want[0], want[1].encode("utf-8")):
            detail = (
                f"the record's filter ({info.bloom_type}, {len(info.bloom_filter)} bytes) is not the footer's"
            )
            out.append(Violation("bloom-filters", storage.full(bf.path), detail))
    for key, record in records.items():
        info = record.bloom_filter if record is not None else None
        if info is not None and not info.is_deleted and key not in by_key:
            out.append(Violation("bloom-filters", key, "a live bloom filter of a file that is not listed"))
    return out[:limit]


def _same_stats(a: ColumnStatsInfo, b: ColumnStatsInfo) -> bool:
    """Equal, a NaN bound equal to a NaN bound."""

    def norm(v: StatValue | None) -> StatValue | None:
        return (v[0], "NaN") if v is not None and isinstance(v[1], float) and math.isnan(v[1]) else v

    return replace(a, min_value=norm(a.min_value), max_value=norm(a.max_value)) == replace(
        b, min_value=norm(b.min_value), max_value=norm(b.max_value)
    )


def _kept(storage: Storage) -> list[str]:
    props = read_data_properties(storage)
    return listed_partitions(props) if has_files_partition(props) else []


def _locations(table: pa.Table) -> pa.Array:
    cols = [table.column(c).combine_chunks() for c in ("key", "partition", "file_id")]
    return pc.binary_join_element_wise(*cols, "\x00")


def _metadata_table_mismatches(storage: Storage, timeline: ActiveTimeline) -> list[Violation]:
    """Check 6: the metadata table's listing against a storage listing."""
    if not lists_through_metadata_table(storage):
        return []
    listed = metadata_listing(storage, timeline)
    stored = list_storage_files(storage)
    on_storage = {f.path: f.size for f in stored.base_files} | {f.path: f.size for f in stored.log_files}
    in_table = {f.path: f.size for f in listed.base_files} | {f.path: f.size for f in listed.log_files}
    out = []
    for path, size in sorted(in_table.items()):
        if path not in on_storage:
            out.append(
                Violation(
                    "metadata-table", storage.full(path), "listed by the metadata table, not on storage"
                )
            )
        elif on_storage[path] != size:
            detail = f"size {size} in the metadata table, {on_storage[path]} on storage"
            out.append(Violation("metadata-table", storage.full(path), detail))
    expected = [bf.path for bf in stored.base_files if timeline.is_committed(bf.instant)]
    if not timeline.pending():
        expected += [lf.path for lf in stored.log_files]
    for path in expected:
        if path not in in_table:
            out.append(
                Violation("metadata-table", storage.full(path), "on storage, missing from the metadata table")
            )
    return out
