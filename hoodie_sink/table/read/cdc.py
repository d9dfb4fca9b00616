"""Change data capture: every insert, update and delete the writes in (begin, end] made, with the
record before and after (Hudi's `hoodie.datasource.query.incremental.format=cdc`,
docs/hudi/services.md#incremental-queries), without Spark.

The output is Hudi's CDC query shape in the `data_before_after` supplemental logging mode: one row
per change, `op` ('i', 'u', 'd'), `ts_ms` (the instant time of the write), `before` and `after`
(the record as JSON; null for an insert's before and a delete's after).

Our writers log no CDC files, so the changes are inferred from file slices, as Hudi's
HoodieCDCExtractor does for writes without CDC logs.  For each completed write t in the range,
with p the completed write just before it on the timeline, the file groups t wrote (its write
stats) and replaced (an insert_overwrite's `partitionToReplaceFileIds`) are read as of p (before)
and as of t (after), keyed by (partition path, record key):
* in after with commit time t, not in before: an insert;
* in both, after's commit time t: an update (before image: the record as of p);
* in before, not in after: a delete.
A record a write only rewrote keeps its commit time (small-file packing copies the rows it does
not change), so it is no change; so are compactions and clusterings, which keep every commit
time: their instants are skipped (their rows are the same as of them as before them, so the next
write's before state, the table as of the write just before it whatever that was, stays right).
Deletes of absent keys change nothing and show nothing.  A key that moves partition under a global
index (`hoodie.bloom.index.update.partition.path=true`) shows as a delete in its old partition and
an insert in the new one, since identity here is (partition path, key).  An insert_overwrite that
writes a key its replaced file groups held shows an update (Hudi's own inference reports a delete
of every replaced record and an insert of every new one).

Cost: per write, one listing of the partitions it touched, and the touched file groups read
twice, their slices as of p and as of t (base file and log files), whatever the table's size; its
commit file is read once at planning, and opening the two states reads the timeline's clean
files (the time-travel bound) and a commit file (the schema).  A key stored several times (the
`insert` and `bulk_insert` operations keep duplicates) shows one change per copy that changed:
the k-th copy before pairs with the k-th copy after, in file group then file order (diff_states;
docs/hudi/cdc-duplicate-keys.md, where Hudi collapses the copies instead).

The JSON images, as Apache Hudi's source (apache/hudi) makes them:
* Columns: the table's data columns in schema order, without the meta fields.  That is what
  Hudi's `data_before_after` mode logs: HoodieCDCLogger
  (hudi-client/hudi-client-common/src/main/java/org/apache/hudi/io/HoodieCDCLogger.java) builds its
  images with `removeCommitMetadata` over `HoodieAvroUtils.removeMetadataFields(schema)`, and the
  reader renders them with `HoodieCDCUtils.recordToJson` (Avro's GenericData.toString;
  hudi-common/src/main/java/org/apache/hudi/common/table/cdc/HoodieCDCUtils.java).  Hudi's reader
  renders the rows it infers without CDC logs (new base files, MOR log files, replaced file
  groups) from the full table schema instead, meta fields included
  (hudi-spark-datasource/hudi-spark-common/src/main/scala/org/apache/hudi/cdc/HoodieCDCRDD.scala,
  later CDCFileGroupIterator.scala: `convertRowToJsonString` over `originTableSchema`, which
  CDCRelation takes from TableSchemaResolver.getTableAvroSchema, "user + metadata"); we render
  every row one way, as the CDC logs would.  The images are in the table's latest schema (as Hudi's
  reader and our incremental reads): a column added later is null in older images.
* Values, as GenericData.toString prints them: `{"id": "k1", "v": 3}`; strings JSON-escaped;
  integers and decimals as numbers (decimals exact); floats as numbers, NaN and infinities as
  the strings "NaN", "Infinity", "-Infinity" (Avro quotes them; JSON has no literal for them);
  booleans; null.  Dates and timestamps are the Avro values, not ISO strings: days since the
  epoch, and the timestamp's count in its Avro unit (micros for timestamp-micros, what our
  writers store; Hudi's Spark path prints Catalyst's values, the same numbers); times of day
  likewise.  Binary values are base64 strings, as Jackson renders bytes in Hudi's Spark path
  (Avro's toString prints `{"bytes": "<raw characters>"}`, not JSON-safe).  Decimals inside
  nested values are JSON numbers through a float.
Scalar columns are rendered with Arrow string kernels, whole columns at a time; nested ones
(struct, list, map) and binary with `json.dumps` per value, the one per-record loop.

Refusals, as incremental reads (incremental.py) make them: bad bounds, an end older than the
cleaner and archival keep, a write pending inside the range (a hole).  Beyond those, the state
before the first write of the range must still be readable: a range whose first write follows an
archived one, or whose before state is older than the cleaner keeps, fails (a full scan, the
incremental fallback, would have neither the deletes nor the before images).
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.clustering_plan import CLUSTER
from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.format.file_group import Listing
from hoodie_sink.table.format.fs_view import FileSystemView, list_table_files
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.format.timeline.instant import COMPACTION, WRITE_ACTIONS, Instant
from hoodie_sink.table.format.timeline.timeline import (
    META_DIR,
    ActiveTimeline,
    Timeline,
    commit_metadata,
)
from hoodie_sink.table.read.incremental import COMMIT_TIME, plan_incremental
from hoodie_sink.table.read.retention import oldest_readable_instant
from hoodie_sink.table.read.snapshot import Snapshot, parse_slice_ref, slice_ref
from hoodie_sink.table.storage import Storage, as_storage

CDC_SCHEMA = pa.schema(
    [("op", pa.string()), ("ts_ms", pa.string()), ("before", pa.string()), ("after", pa.string())]
)
INSERT, UPDATE, DELETE = "i", "u", "d"
RECORD_KEY, PARTITION_PATH = META_COLUMNS[2], META_COLUMNS[3]
KEY = [PARTITION_PATH, RECORD_KEY]  # a record's identity in the change feed
# operations that rewrite records with their commit times: no changes (compaction commits are
# also known by their `compaction` requested file, clusterings by CLUSTER)
REWRITE_OPERATIONS = frozenset({"COMPACT", "LOG_COMPACT", CLUSTER})
# file groups per read task: a task reads them twice (before and after) and holds both in memory
TASK_FILE_GROUPS = 8

FileGroupId = tuple[str, str]  # (partition path, file id)


@dataclass(frozen=True)
class CdcInstant:
    """One write whose changes the feed shows, and what reading them takes."""

    instant: str
    prev: str | None  # the completed write before it (None: the table's first): the before state
    operation: str
    file_groups: tuple[FileGroupId, ...]  # written or replaced by it, sorted
    replaces: bool  # it replaced file groups: a key may move between file groups of a partition


@dataclass(frozen=True)
class CdcTask:
    """A unit of reading (one Spark task): the changes of one write in some of its file groups.
    Plain fields, so it pickles."""

    instant: str
    prev: str | None
    file_groups: tuple[FileGroupId, ...]


@dataclass(frozen=True)
class CdcPlan:
    begin: str
    end: str | None  # None: the table has no completed write yet
    instants: tuple[CdcInstant, ...]  # the writes with changes, in timeline order
    rewrites: tuple[str, ...]  # compactions and clusterings of the range: no changes

    def tasks(self, max_file_groups: int = TASK_FILE_GROUPS) -> list[CdcTask]:
        """The plan's reads, a few file groups each, in timeline order.  A write that replaced file
        groups is split by partition only, never inside one: a key it moved from a replaced file
        group to a new one must meet its before state in the same task (else a delete and an
        insert, not an update)."""
        out = []
        for change in self.instants:
            for chunk in _chunks(change, max_file_groups):
                out.append(CdcTask(change.instant, change.prev, chunk))
        return out


def _chunks(change: CdcInstant, size: int) -> Iterator[tuple[FileGroupId, ...]]:
    groups = change.file_groups
    if not change.replaces:
        for i in range(0, len(groups), size):
            yield groups[i : i + size]
        return
    for part in sorted({p for p, _ in groups}):
        yield tuple(g for g in groups if g[0] == part)


# ------------------------------------------------------------------------------------- planning


def plan_cdc(storage: Storage, timeline: Timeline, begin: str, end: str | None = None) -> CdcPlan:
    """Which writes of (begin, end] changed records, which file groups each touched, and the state
    before each (pass an ActiveTimeline to read each commit file once)."""
    # Bounds, an end cleaned away and holes are refused as an incremental read refuses them.  Its
    # archived-range fallback is asked for only to refuse that case below with CDC's own reason.
    incremental = plan_incremental(storage, timeline, begin, end, fallback_full_scan=True)
    writes = timeline.completed(WRITE_ACTIONS)
    wanted = set(incremental.instants)
    in_range = [i for i in writes if i.timestamp in wanted]
    if not in_range:
        return CdcPlan(incremental.begin, incremental.end, (), ())
    prev_of = {cur.timestamp: prev.timestamp for prev, cur in itertools.pairwise(writes)}
    _check_before_state(storage, timeline, incremental.begin, incremental.end, in_range[0], prev_of)
    changes, rewrites = [], []
    for inst in in_range:
        md = commit_metadata(storage, timeline, inst)
        if _only_rewrites(timeline, inst, md):
            rewrites.append(inst.timestamp)
            continue
        written = {(s.partition_path, s.file_id) for s in md.write_stats if s.file_id}
        replaced = {(p, fid) for p, ids in (md.partition_to_replace_file_ids or {}).items() for fid in ids}
        groups = tuple(sorted(written | replaced))
        changes.append(
            CdcInstant(inst.timestamp, prev_of.get(inst.timestamp), md.operation_type, groups, bool(replaced))
        )
    return CdcPlan(incremental.begin, incremental.end, tuple(changes), tuple(rewrites))


def _only_rewrites(timeline: Timeline, inst: Instant, md: CommitMetadata) -> bool:
    """A compaction (a `commit` completing a `compaction` plan) or a clustering: it rewrites
    records with their commit times and changes none."""
    if any(state.action == COMPACTION for state in timeline.states_of(inst.timestamp)):
        return True
    return md.compacted or md.operation_type.upper() in REWRITE_OPERATIONS


def _check_before_state(
    storage: Storage, timeline: Timeline, begin: str, end: str | None, first: Instant, prev_of: dict[str, str]
) -> None:
    """The table as it was before the range's first write must still be readable: the write before
    it must be known (not archived) and its file versions kept (not cleaned)."""
    prev = prev_of.get(first.timestamp)
    archived = prev is None and storage.list_names(f"{META_DIR}/archived")
    oldest = oldest_readable_instant(storage, timeline)
    needed = prev or first.timestamp  # the table's first write starts from nothing
    if not archived and (oldest is None or needed >= oldest):
        return
    state = "the writes before it are archived" if archived else f"it needs the table as of {needed}"
    raise HoodieTableError(
        f"CDC read of ({begin}, {end}] on {storage.base_uri} is not possible: its first write is "
        f"{first.timestamp} and {state}, while the table keeps file versions and instants from {oldest} on "
        f"(cleaning and archival removed older ones), so the records before it are unknown. Help: begin at "
        f"{oldest} or later, or raise hoodie.cleaner.commits.retained / hoodie.keep.min.commits for the "
        "table's writers."
    )


# -------------------------------------------------------------------------------------- reading


def read_cdc(path: str | Storage, begin: str, end: str | None = None) -> pa.Table:
    """Every change of the writes in (begin, end] (CDC_SCHEMA), ordered by `ts_ms`, then by
    partition path and record key (see the module doc)."""
    storage = as_storage(path)
    timeline = ActiveTimeline.load(storage)
    plan = plan_cdc(storage, timeline, begin, end)
    if not plan.instants:
        return CDC_SCHEMA.empty_table()
    schema = Snapshot.open(storage, timeline=timeline).schema
    plain = Timeline(timeline.instants)  # read-only from here: safe to share between threads

    def read(task: CdcTask) -> pa.Table:
        return _changes(storage, task, schema, plain)

    # a few file groups per task bound the memory (two states of them at a time); the tasks of a
    # thread pool overlap their Parquet reads and joins, which release the GIL
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        parts = list(pool.map(read, plan.tasks()))
    if not parts:  # writes that touched no file group (deletes of absent keys)
        return CDC_SCHEMA.empty_table()
    table = pa.concat_tables(parts).sort_by([("ts_ms", "ascending"), *((c, "ascending") for c in KEY)])
    return table.select(CDC_SCHEMA.names)


def read_cdc_instant(
    path: str | Storage,
    plan: CdcPlan,
    instant: str,
    schema: pa.Schema | None = None,
    timeline: Timeline | None = None,
) -> pa.Table:
    """The changes of one write of `plan` (none for a compaction or clustering)."""
    for change in plan.instants:
        if change.instant == instant:
            return read_cdc_task(path, CdcTask(instant, change.prev, change.file_groups), schema, timeline)
    if instant in plan.rewrites:
        return CDC_SCHEMA.empty_table()
    raise HoodieTableError(
        f"Instant {instant} is not a write of the CDC plan ({plan.begin}, {plan.end}] of "
        f"{as_storage(path).base_uri}. Help: pass one of the plan's instants."
    )


def read_cdc_task(
    path: str | Storage, task: CdcTask, schema: pa.Schema | None = None, timeline: Timeline | None = None
) -> pa.Table:
    """The changes of a task's write in its file groups, ordered by partition path and record key.
    `schema`: of the images (default: the table's latest, which the planner should fix for all
    tasks of a read); `timeline`: the planner's, so that every task sees the same instants (a
    plain Timeline pickles small, for a Spark task)."""
    return _changes(path, task, schema, timeline).select(CDC_SCHEMA.names)


def _changes(
    path: str | Storage, task: CdcTask, schema: pa.Schema | None, timeline: Timeline | None
) -> pa.Table:
    """read_cdc_task's rows with their partition path and record key (to order a whole read)."""
    timeline = timeline if timeline is not None else Timeline.load(as_storage(path))
    if schema is None:
        schema = Snapshot.open(path, timeline=timeline).schema
    after = _state(path, task.instant, timeline, schema)
    groups = set(task.file_groups)
    # one listing of the touched partitions serves both states: the before state's files are kept
    # (planning checked the cleaner's bound), the after state's are newer
    listing = list_table_files(after.storage, sorted({p for p, _ in groups}))
    after_rows = _read_file_groups(after, listing, groups)
    if task.prev is None:
        before_rows = schema.empty_table()
    else:
        before_rows = _read_file_groups(_state(path, task.prev, timeline, schema), listing, groups)
    return diff_states(before_rows, after_rows, task.instant)


def _state(path: str | Storage, instant: str, timeline: Timeline, schema: pa.Schema) -> Snapshot:
    """The table as of `instant`, read in `schema` (so that both images have the same columns)."""
    snap = replace(Snapshot.open(path, as_of=instant, timeline=timeline), schema=schema)
    if not snap.table.populate_meta_fields:
        raise HoodieTableError(
            f"CDC reads need the record key and commit time of every record, which {snap.storage.base_uri} "
            "does not store (hoodie.populate.meta.fields=false)."
        )
    return snap


def _read_file_groups(snap: Snapshot, listing: Listing, groups: set[FileGroupId]) -> pa.Table:
    """The records of `groups` in `snap`: their slices merged (merge-on-read) or base files."""
    # a view over the listed partitions only (Snapshot.read_refs lists the whole table)
    view = FileSystemView(snap.storage, snap.timeline, listing)
    if snap.merges_logs:
        refs = [slice_ref(sl) for sl in view.read_slices(snap.instant)]
    else:
        refs = [bf.path for bf in view.latest_base_files(snap.instant)]
    # in file group order: the copies of a key are paired in that order (diff_states)
    parts = [snap.read_ref(ref) for ref in sorted(refs, key=_file_group) if _file_group(ref) in groups]
    return pa.concat_tables(parts, promote_options="permissive") if parts else snap.schema.empty_table()


def _file_group(ref: str) -> FileGroupId:
    sl = parse_slice_ref(ref)  # a base file's path is a slice ref without logs
    return sl.partition_path, sl.file_id


# ----------------------------------------------------------------------------------------- diff


def diff_states(before: pa.Table, after: pa.Table, instant: str) -> pa.Table:
    """The changes write `instant` made, from the records of some file groups before it and after
    it (meta + data columns, the same schema; each in file group order, then position in the file):
    CDC_SCHEMA's columns, then the partition path and record key of each change, ordered by them.

    One row per copy that changed (docs/hudi/cdc-duplicate-keys.md): a key may be stored several
    times (bulk_insert and insert keep duplicates).  The copies the write left alone (older commit
    time, the same commit seqno) are set aside; of the rest, the k-th copy of a (partition, key)
    before pairs with its k-th copy written by `instant` (an update), a copy left over after is an
    insert, one left over before a delete."""
    is_new = pc.equal(after.column(COMMIT_TIME), instant)
    written = after.filter(is_new)
    old = _numbered(before, "_old")
    new = _numbered(written, "_new")
    kept = _numbered(after.filter(pc.invert(is_new)), "_kept")
    # Acero builds its hash table on the right input: the write's keys (few), probed by the file
    # groups' records (many).  First only the copies of the keys the write wrote are compared ...
    touched = new.select(KEY)
    gone = _vanished(old.join(touched, keys=KEY, join_type="left semi"),
                     kept.join(touched, keys=KEY, join_type="left semi"))  # fmt: skip
    # ... and when the counts say that no other copy went (every upsert), the comparison of the
    # two whole states is skipped
    if before.num_rows - gone.num_rows + written.num_rows != after.num_rows:
        gone = _vanished(old, kept)
    pairs = _ranked(gone, KEY, "_old").join(
        _ranked(new, KEY, "_new"), keys=[*KEY, COPY], join_type="full outer"
    )
    pairs = pairs.sort_by([*((c, "ascending") for c in KEY), (COPY, "ascending")])
    inserted, deleted = pc.is_null(pairs.column("_old")), pc.is_null(pairs.column("_new"))
    updated = pc.invert(pc.or_(inserted, deleted))
    data = [n for n in before.schema.names if n not in META_COLUMNS]
    rows = [
        _change_rows(INSERT, instant, pairs.filter(inserted), None, (written, "_new"), data),
        _change_rows(UPDATE, instant, pairs.filter(updated), (before, "_old"), (written, "_new"), data),
        _change_rows(DELETE, instant, pairs.filter(deleted), (before, "_old"), None, data),
    ]
    # a stable sort: the copies of a key stay in their order
    return pa.concat_tables(rows).sort_by([(c, "ascending") for c in KEY])


COPY = "_copy"  # the rank of a copy among the copies of its (partition, key), 0 first
# a copy's identity: a write that leaves a record alone keeps its commit time and seqno
COPY_IDENTITY = [*KEY, COMMIT_TIME, META_COLUMNS[1]]


def _numbered(rows: pa.Table, name: str) -> pa.Table:
    """The identity of each row and its row number (under `name`)."""
    ids = rows.select(COPY_IDENTITY)
    return ids.append_column(name, pa.array(np.arange(rows.num_rows, dtype=np.int64)))


def _vanished(old: pa.Table, kept: pa.Table) -> pa.Table:
    """The copies of `old` (_numbered rows) that are not among the `kept` ones.  Equal identities
    are paired off one to one (the rank among them), so that a copy kept never hides two."""
    left = _ranked(old, COPY_IDENTITY, "_old")
    right = _ranked(kept, COPY_IDENTITY, "_kept").select([*COPY_IDENTITY, COPY])
    return left.join(right, keys=[*COPY_IDENTITY, COPY], join_type="left anti").drop_columns([COPY])


def _ranked(rows: pa.Table, by: list[str], number: str) -> pa.Table:
    """`rows` with COPY: the rank of each row among those with the same `by` values, in the order
    of the row numbers under `number` (a cumulative count over the rows sorted by them)."""
    n = rows.num_rows
    if n == 0:
        return rows.append_column(COPY, pa.array([], pa.int64()))
    rows = rows.take(pc.sort_indices(rows, [(c, "ascending") for c in [*by, number]]))
    starts = np.zeros(n, dtype=bool)
    starts[0] = True
    for name in by:
        col = rows.column(name)
        differs = pc.fill_null(pc.not_equal(col.slice(1), col.slice(0, n - 1)), True)
        starts[1:] |= differs.to_numpy()
    position = np.arange(n, dtype=np.int64)
    return rows.append_column(COPY, pa.array(position - np.maximum.accumulate(np.where(starts, position, 0))))


def _change_rows(
    op: str,
    instant: str,
    keys: pa.Table,
    before: tuple[pa.Table, str] | None,
    after: tuple[pa.Table, str] | None,
    data: list[str],
) -> pa.Table:
    """Rows of one kind of change: `keys` holds the identities and, under the named columns, the
    row numbers of their before and after records."""

    def images(side: tuple[pa.Table, str] | None) -> pa.Array | pa.ChunkedArray:
        if side is None:
            return pa.nulls(keys.num_rows, pa.string())
        rows, number = side
        return json_images(rows.take(keys.column(number)).select(data))

    n = keys.num_rows
    return pa.table(
        {
            "op": pa.repeat(pa.scalar(op), n),
            "ts_ms": pa.repeat(pa.scalar(instant), n),
            "before": images(before),
            "after": images(after),
            PARTITION_PATH: keys.column(PARTITION_PATH),
            RECORD_KEY: keys.column(RECORD_KEY),
        }
    )


# ---------------------------------------------------------------------------------- JSON images


def json_images(rows: pa.Table) -> pa.ChunkedArray:
    """Each row as a JSON object, `{"name": value, ...}` in column order (module doc: values)."""
    if rows.num_rows == 0:
        return pa.chunked_array([], pa.string())
    if rows.num_columns == 0:
        return pa.chunked_array([pa.repeat(pa.scalar("{}"), rows.num_rows)])
    parts: list[Any] = []
    for i, name in enumerate(rows.column_names):
        parts.append(pa.scalar(("{" if i == 0 else ", ") + json.dumps(name, ensure_ascii=False) + ": "))
        parts.append(json_values(rows.column(i)))
    parts.append(pa.scalar("}"))
    return pc.binary_join_element_wise(*parts, "")


def json_values(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """The JSON text of each value of a column (null -> `null`)."""
    t = column.type
    if pa.types.is_dictionary(t):
        return json_values(column.cast(t.value_type))
    if pa.types.is_null(t):
        text = pa.repeat(pa.scalar(None, pa.string()), len(column))
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        text = _json_strings(column.cast(pa.string()))
    elif pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_decimal(t):
        text = column.cast(pa.string())
    elif pa.types.is_floating(t):
        text = _json_floats(column)
    elif pa.types.is_date64(t):  # Avro's date: days since the epoch
        text = pc.divide(column.cast(pa.int64()), 86_400_000).cast(pa.string())
    elif pa.types.is_temporal(t):  # date32 (days), timestamps, times of day, durations: their count
        text = column.cast(pa.int32() if pa.types.is_date32(t) or pa.types.is_time32(t) else pa.int64())
        text = text.cast(pa.string())
    else:
        return _json_dumps(column)
    return pc.fill_null(text, "null")


# JSON escapes of the characters a JSON string may not hold as they are; the backslash first
_STRING_ESCAPES = [
    ("\\", "\\\\"),
    ('"', '\\"'),
    ("\n", "\\n"),
    ("\r", "\\r"),
    ("\t", "\\t"),
    ("\b", "\\b"),
    ("\f", "\\f"),
]
_OTHER_CONTROLS = [chr(c) for c in range(0x20) if chr(c) not in "\n\r\t\b\f"]


def _json_strings(text: Any) -> Any:
    for raw, escaped in _STRING_ESCAPES:
        text = pc.replace_substring(text, raw, escaped)
    if pc.any(pc.match_substring_regex(text, r"[\x00-\x1f]")).as_py():  # rare: only then per char
        for c in _OTHER_CONTROLS:
            text = pc.replace_substring(text, c, f"\\u{ord(c):04x}")
    return pc.binary_join_element_wise(pa.scalar('"'), text, pa.scalar('"'), "")


def _json_floats(column: Any) -> Any:
    # float32 printed as float32 (shortest digits, as Java's Float.toString)
    text = column.cast(pa.float32() if pa.types.is_float16(column.type) else column.type).cast(pa.string())
    # a whole number keeps its decimal point (Java prints 1.0), so that it reads back as a float
    whole = pc.match_substring_regex(text, r"^-?[0-9]+$")
    text = pc.if_else(whole, pc.binary_join_element_wise(text, pa.scalar(".0"), ""), text)
    for arrow, quoted in (("nan", '"NaN"'), ("inf", '"Infinity"'), ("-inf", '"-Infinity"')):
        text = pc.if_else(pc.equal(text, arrow), quoted, text)
    return text


def _json_dumps(column: Any) -> pa.Array:
    """Nested and binary values, one `json.dumps` each (dates and timestamps inside them as
    above: the column is first cast to their counts)."""
    plain = column.cast(_counted(column.type))
    return pa.array(
        [
            json.dumps(_jsonable(v, plain.type), ensure_ascii=False, allow_nan=False)
            for v in plain.to_pylist()
        ],
        pa.string(),
    )


def _counted(t: pa.DataType) -> pa.DataType:
    """`t` with dates, timestamps and times of day as integer counts, at every depth."""
    if pa.types.is_date64(t) or pa.types.is_timestamp(t) or pa.types.is_time64(t) or pa.types.is_duration(t):
        return pa.int64()
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_dictionary(t):
        return _counted(t.value_type)
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_counted(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_counted(t.key_type), _counted(t.item_type))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_counted(t.value_type)))
    if pa.types.is_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t):
        return pa.list_(t.value_field.with_type(_counted(t.value_type)))
    return t


def _jsonable(value: Any, t: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: _jsonable(value[f.name], f.type) for f in t}
    if pa.types.is_map(t):  # Avro maps have string keys
        return {str(k): _jsonable(v, t.item_type) for k, v in value}
    if isinstance(value, list):
        return [_jsonable(v, t.value_type) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value
