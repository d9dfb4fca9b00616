"""Incremental queries: what changed in a table between two instants (Hudi's `incremental` query
type, docs/hudi/services.md#incremental-queries), without Spark.

The answer for (begin, end] is the latest version, as of `end`, of every record whose
`_hoodie_commit_time` lies in (begin, end]: records a write in the range left as they are at `end`,
not the deletes (Hudi's incremental query does not show them) and not records a compaction or a
clustering only rewrote (both keep commit times).  It is read from the file groups that the
completed writes of the range touched (their write stats), as of `end`, then filtered by commit
time, so its cost follows the size of the change, not of the table.

Where Java answers less than that without a word, this module refuses instead:
* the range starts before the active timeline and the table has archived instants: the writes
  of the archived part are unknown, so the read fails unless
  `hoodie.datasource.read.incr.fallback.fulltablescan.enable` asks for a full scan of the snapshot
  as of `end` filtered by commit time (the same rows, read from every file group); Java skips them;
* `end` is older than the cleaner and archival keep (time travel's limit): no fallback, since the
  file versions as of `end` are gone;
* a write still pending inside the range, older than a completed one there (a "hole": its rows
  would get a commit time a reader has already passed): the read fails, as Java's default FAIL
  policy does for batch reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.clustering_plan import is_clustering
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.format.timeline.instant import WRITE_ACTIONS, Instant
from hoodie_sink.table.format.timeline.timeline import META_DIR, Timeline, commit_metadata
from hoodie_sink.table.read.retention import oldest_readable_instant
from hoodie_sink.table.read.snapshot import Snapshot, parse_slice_ref
from hoodie_sink.table.storage import Storage, as_storage

COMMIT_TIME = META_COLUMNS[0]
EARLIEST = "000"


@dataclass(frozen=True)
class IncrementalPlan:
    """What an incremental read of (begin, end] reads: the file groups the range's writes touched
    (None: every file group, the full-scan fallback), as of `end`."""

    begin: str
    end: str | None  # None: the table has no completed write yet
    file_ids: frozenset[str] | None
    instants: tuple[str, ...]  # the completed writes in the range


def plan_incremental(
    storage: Storage, timeline: Timeline, begin: str, end: str | None = None, fallback_full_scan: bool = False
) -> IncrementalPlan:
    begin = EARLIEST if begin.lower() == "earliest" else begin
    for name, value in (("begin", begin), ("end", end)):
        if value is not None and not value.isdigit():
            raise HoodieConfigError(
                f"hoodie.datasource.read.{name}.instanttime must be an instant time (digits, e.g. "
                f"20240101093000123){' or earliest' if name == 'begin' else ''}, got {value!r}."
            )
    latest = timeline.latest_completed()
    if latest is None:
        return IncrementalPlan(begin, None, frozenset(), ())
    end = latest.timestamp if end is None or end > latest.timestamp else end
    if end <= begin:
        return IncrementalPlan(begin, end, frozenset(), ())
    oldest = oldest_readable_instant(storage, timeline)
    if oldest is not None and end < oldest:
        raise HoodieTableError(
            f"Incremental read of ({begin}, {end}] on {storage.base_uri} is not possible: the table keeps file "
            f"versions and instants from {oldest} on (cleaning and archival removed older ones). Help: use an "
            f"end instant of {oldest} or later."
        )
    completed = timeline.completed(WRITE_ACTIONS)
    in_range = [i for i in completed if begin < i.timestamp <= end]
    _check_holes(storage, timeline, begin, end, in_range)
    if begin < completed[0].timestamp and storage.list_names(f"{META_DIR}/archived"):
        if not fallback_full_scan:
            raise HoodieTableError(
                f"Incremental read from {begin} on {storage.base_uri}: the active timeline starts at "
                f"{completed[0].timestamp}, older instants are archived, so the writes between them are not "
                "known. Help: begin at or after the start of the active timeline, or set "
                "hoodie.datasource.read.incr.fallback.fulltablescan.enable=true (a full scan of the table "
                "filtered by commit time)."
            )
        return IncrementalPlan(begin, end, None, tuple(i.timestamp for i in in_range))
    touched: set[str] = set()
    for inst in in_range:
        touched.update(s.file_id for s in commit_metadata(storage, timeline, inst).write_stats)
    return IncrementalPlan(begin, end, frozenset(touched), tuple(i.timestamp for i in in_range))


def _check_holes(storage: Storage, timeline: Timeline, begin: str, end: str, in_range: list[Instant]) -> None:
    """A write pending inside the range, older than the newest completed write there."""
    if not in_range:
        return
    newest = in_range[-1].timestamp
    inst = oldest_pending_write(storage, timeline, begin)
    if inst is not None and inst.timestamp < newest:
        raise HoodieTableError(
            f"Incremental read of ({begin}, {end}]: write {inst.timestamp} ({inst.action}) is still pending "
            f"while {newest} has completed; its records would appear later with a commit time this "
            "read has passed (hoodie.read.timeline.holes.resolution.policy=FAIL). Help: end the range before "
            f"{inst.timestamp}, or wait until it completes or is rolled back."
        )


def oldest_pending_write(storage: Storage, timeline: Timeline, after: str) -> Instant | None:
    """The oldest write pending after `after` that may still add rows: a pending clustering is
    none (its rows keep their commit times)."""
    for inst in timeline.pending(WRITE_ACTIONS):
        if inst.timestamp > after and not is_clustering(storage, inst):
            return inst
    return None


def open_incremental(
    path: str | Storage, plan: IncrementalPlan, timeline: Timeline | None = None
) -> Snapshot:
    """The snapshot an incremental read reads from: as of its end, in the table's latest schema
    (as Java's default, hoodie.datasource.read.schema.use.end.instanttime=false: columns added
    after the end are null, and the read has the schema Spark was told)."""
    latest = Snapshot.open(path, timeline=timeline)
    snap = (
        replace(Snapshot.open(path, as_of=plan.end, timeline=timeline), schema=latest.schema)
        if plan.end
        else latest
    )
    if not snap.table.populate_meta_fields:
        raise HoodieTableError(
            f"Incremental reads need the commit time of every record, which {snap.storage.base_uri} does not "
            "store (hoodie.populate.meta.fields=false)."
        )
    return snap


def touched_refs(
    refs: list[str], plan: IncrementalPlan, storage: Storage | None = None, path_glob: str | None = None
) -> list[str]:
    """The read refs (base file paths or slice refs, see snapshot.py) of the touched file groups,
    those whose file path matches `path_glob` (hoodie.datasource.read.incr.path.glob) if given."""
    if plan.end is None:
        return []
    if plan.file_ids is not None:
        refs = [ref for ref in refs if _file_id(ref) in plan.file_ids]
    if path_glob:
        if storage is None:
            raise ValueError("a path glob is matched against full paths: pass the table's storage")
        matches = glob_matcher(path_glob)
        refs = [ref for ref in refs if matches(storage.full(_first_path(ref)))]
    return refs


def glob_matcher(pattern: str) -> Callable[[str], bool]:
    """Hudi's incr.path.glob test: Hadoop's GlobPattern of `"*" + pattern` against a file's full
    path, so a pattern matches the end of the path (`*` and `?` cross `/` there, `[..]`, `[!..]`
    and `{a,b}` as in Hadoop)."""
    out, i, depth = ["^.*"], 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 1
        elif c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                raise HoodieConfigError(
                    f"hoodie.datasource.read.incr.path.glob '{pattern}': an unclosed '['."
                )
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = end
        elif c == "{":
            out.append("(?:")
            depth += 1
        elif c == "}" and depth:
            out.append(")")
            depth -= 1
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    if depth:
        raise HoodieConfigError(f"hoodie.datasource.read.incr.path.glob '{pattern}': an unclosed '{{'.")
    regex = re.compile("".join(out) + "$")
    return lambda path: regex.match(path) is not None


def _first_path(ref: str) -> str:
    """A ref's base file path, or its first log file's for a slice without a base file."""
    base, _, logs = ref.partition("\n")
    return base or logs.split("\n")[0]


def _file_id(ref: str) -> str:
    if "\n" in ref:
        return parse_slice_ref(ref).file_id
    partition_path, _, name = ref.rpartition("/")
    bf = BaseFile.parse(partition_path, name)
    if bf is None:
        raise HoodieTableError(f"Not a base file: {ref}")
    return bf.file_id


def read_in_range(snap: Snapshot, ref: str, plan: IncrementalPlan, columns: list[str] | None) -> pa.Table:
    """One ref's records with a commit time in the plan's range."""
    want = columns if columns is None or COMMIT_TIME in columns else [*columns, COMMIT_TIME]
    rows = snap.read_ref(ref, want)
    times = rows.column(COMMIT_TIME)
    rows = rows.filter(pc.and_(pc.greater(times, plan.begin), pc.less_equal(times, plan.end)))
    return rows.select(columns) if columns is not None else rows


def read_incremental(
    path: str | Storage,
    begin: str,
    end: str | None = None,
    columns: list[str] | None = None,
    partition_filter: Callable[[str], bool] | None = None,
    fallback_full_scan: bool = False,
    path_glob: str | None = None,
) -> pa.Table:
    """The records that writes in (begin, end] left, as they are at `end` (see the module doc)."""
    storage = as_storage(path)
    timeline = Timeline.load(storage)
    plan = plan_incremental(storage, timeline, begin, end, fallback_full_scan)
    snap = open_incremental(storage, plan, timeline)
    refs = touched_refs(snap.read_refs(partition_filter), plan, storage, path_glob)
    parts = [read_in_range(snap, ref, plan, columns) for ref in refs]
    if not parts:
        empty = snap.schema.empty_table()
        return empty.select(columns) if columns is not None else empty
    return pa.concat_tables(parts, promote_options="permissive")
