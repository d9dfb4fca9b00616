"""The archived timeline (layout 1): instants moved out of `.hoodie/` into archive log files.

`.hoodie/<hoodie.archivelog.folder>/.commits_.archive.<N>_1-0-1` is a log file (log_format.py)
of AVRO_DATA blocks whose header holds only SCHEMA; each record is a HoodieArchivedMetaEntry,
one per state file of an archived instant, carrying that file's content in the union field its
action names (docs/hudi/services.md#archive-files).  Java decodes a block with the block's own schema and
resolves fields by name, so the entry schema here declares the fields we fill, with Java's
names, order and nested record names.  Pure: entries, blocks and file names; I/O is in
services/archival.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from hoodie_sink.table.format.avro_container import decode_record
from hoodie_sink.table.format.clean_metadata import CLEAN_METADATA_SCHEMA, CLEANER_PLAN_SCHEMA
from hoodie_sink.table.format.compaction_plan import COMPACTION_PLAN_SCHEMA
from hoodie_sink.table.format.log_format import (
    SCHEMA,
    avro_data_block,
    avro_records,
    encode_block,
    read_blocks,
)
from hoodie_sink.table.format.replace_metadata import REQUESTED_REPLACE_SCHEMA
from hoodie_sink.table.format.rollback_metadata import ROLLBACK_METADATA_SCHEMA
from hoodie_sink.table.format.timeline.instant import (
    CLEAN,
    COMMIT,
    COMPACTION,
    COMPLETED,
    DELTA_COMMIT,
    INFLIGHT,
    REPLACE_COMMIT,
    REQUESTED,
    ROLLBACK,
    Instant,
)

_NS = "org.apache.hudi.avro.model"
ARCHIVE_TOKEN = "1-0-1"  # HoodieLogFormat.UNKNOWN_WRITE_TOKEN: no task wrote it
_ARCHIVE_NAME = re.compile(r"^\.commits_\.archive\.(\d+)(_.*)?$")
STATE_NAMES = {REQUESTED: "REQUESTED", INFLIGHT: "INFLIGHT", COMPLETED: "COMPLETED"}
_STATE_OF = {v: k for k, v in STATE_NAMES.items()}


def _opt(t: Any) -> list[Any]:
    return ["null", t]


_LONG, _STR = _opt("long"), _opt("string")
_WRITE_STAT_FIELDS = (
    "fileId", "path", "prevCommit", "numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes",
    "totalWriteErrors", "partitionPath", "totalLogRecords", "totalLogFiles", "totalUpdatedRecordsCompacted",
    "numInserts", "totalLogBlocks", "totalCorruptLogBlock", "totalRollbackBlocks", "fileSizeInBytes",
)  # fmt: skip
_WRITE_STAT = {
    "type": "record", "name": "HoodieWriteStat", "namespace": _NS,
    "fields": [{"name": n, "type": t, "default": None} for n, t in (
        ("fileId", _STR), ("path", _STR), ("prevCommit", _STR), ("numWrites", _LONG), ("numDeletes", _LONG),
        ("numUpdateWrites", _LONG), ("totalWriteBytes", _LONG), ("totalWriteErrors", _LONG),
        ("partitionPath", _STR), ("totalLogRecords", _LONG), ("totalLogFiles", _LONG),
        ("totalUpdatedRecordsCompacted", _LONG), ("numInserts", _LONG), ("totalLogBlocks", _LONG),
        ("totalCorruptLogBlock", _LONG), ("totalRollbackBlocks", _LONG), ("fileSizeInBytes", _LONG),
    )],
}  # fmt: skip
_LISTS = {"type": "map", "values": {"type": "array", "items": "string"}}
_STATS = _opt({"type": "map", "values": {"type": "array", "items": f"{_NS}.HoodieWriteStat"}})
_EXTRA = _opt({"type": "map", "values": "string"})
COMMIT_METADATA_SCHEMA = {
    "type": "record", "name": "HoodieCommitMetadata", "namespace": _NS,
    "fields": [
        {"name": "partitionToWriteStats", "default": None,
         "type": _opt({"type": "map", "values": {"type": "array", "items": _WRITE_STAT}})},
        {"name": "extraMetadata", "type": _EXTRA, "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "operationType", "type": _STR, "default": None},
    ],
}  # fmt: skip
REPLACE_COMMIT_METADATA_SCHEMA = {
    "type": "record", "name": "HoodieReplaceCommitMetadata", "namespace": _NS,
    "fields": [
        {"name": "partitionToWriteStats", "type": _STATS, "default": None},
        {"name": "extraMetadata", "type": _EXTRA, "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "operationType", "type": _STR, "default": None},
        {"name": "partitionToReplaceFileIds", "type": _opt(_LISTS), "default": None},
        {"name": "compacted", "type": _opt("boolean"), "default": None},
    ],
}  # fmt: skip
_ARCHIVED_META_ENTRY = {
    "type": "record", "name": "HoodieArchivedMetaEntry", "namespace": _NS,
    "fields": [
        {"name": "hoodieCommitMetadata", "type": _opt(COMMIT_METADATA_SCHEMA), "default": None},
        {"name": "hoodieCleanMetadata", "type": _opt(CLEAN_METADATA_SCHEMA), "default": None},
        {"name": "hoodieRollbackMetadata", "type": _opt(ROLLBACK_METADATA_SCHEMA), "default": None},
        {"name": "commitTime", "type": _STR, "default": None},
        {"name": "actionType", "type": _STR, "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "hoodieCompactionPlan", "type": _opt(COMPACTION_PLAN_SCHEMA), "default": None},
        {"name": "hoodieCleanerPlan", "type": _opt(CLEANER_PLAN_SCHEMA), "default": None},
        {"name": "actionState", "type": _STR, "default": None},
        {"name": "hoodieReplaceCommitMetadata", "type": _opt(REPLACE_COMMIT_METADATA_SCHEMA), "default": None},
        {"name": "hoodieRequestedReplaceMetadata", "type": _opt(REQUESTED_REPLACE_SCHEMA), "default": None},
        # capitalised as in the schema Java 0.15 writes into its archive blocks
        {"name": "HoodieInflightReplaceMetadata", "type": _opt(f"{_NS}.HoodieCommitMetadata"), "default": None},
        {"name": "stateTransitionTime", "type": _STR, "default": None},
    ],
}  # fmt: skip


def _java_strings(t: Any) -> Any:
    """The schema with every string marked `"avro.java.string": "String"`, as Java's generated
    classes are: Hudi 1.x's archived-timeline reader decodes with the block's schema and casts the
    values to java.lang.String, which fails on Avro's Utf8 without the mark."""
    if t == "string":
        return {"type": "string", "avro.java.string": "String"}
    if isinstance(t, list):
        return [_java_strings(x) for x in t]
    if not isinstance(t, dict):
        return t  # another primitive, or a named type's reference
    if t.get("type") == "string":
        return {**t, "avro.java.string": "String"}
    out = dict(t)
    for key in ("type", "items", "values"):
        if key in out:
            out[key] = _java_strings(out[key])
    if "fields" in out:
        out["fields"] = [{**f, "type": _java_strings(f["type"])} for f in out["fields"]]
    return out


ARCHIVED_META_ENTRY_SCHEMA = _java_strings(_ARCHIVED_META_ENTRY)
# the union field that carries a state file's content, by (action, state)
_DETAIL_FIELD = {
    (COMMIT, COMPLETED): "hoodieCommitMetadata", (DELTA_COMMIT, COMPLETED): "hoodieCommitMetadata",
    (COMMIT, INFLIGHT): "hoodieCommitMetadata", (DELTA_COMMIT, INFLIGHT): "hoodieCommitMetadata",
    (REPLACE_COMMIT, COMPLETED): "hoodieReplaceCommitMetadata",
    (REPLACE_COMMIT, INFLIGHT): "HoodieInflightReplaceMetadata",
    (REPLACE_COMMIT, REQUESTED): "hoodieRequestedReplaceMetadata",
    (CLEAN, REQUESTED): "hoodieCleanerPlan", (CLEAN, INFLIGHT): "hoodieCleanerPlan",
    (CLEAN, COMPLETED): "hoodieCleanMetadata",
    (ROLLBACK, COMPLETED): "hoodieRollbackMetadata",
    # Java sets the plan on every state of a compaction (MetadataConversionUtils)
    (COMPACTION, REQUESTED): "hoodieCompactionPlan", (COMPACTION, INFLIGHT): "hoodieCompactionPlan",
}  # fmt: skip
_AVRO_CONTENT = {
    "hoodieCleanerPlan",
    "hoodieCleanMetadata",
    "hoodieRollbackMetadata",
    "hoodieRequestedReplaceMetadata",
    "hoodieCompactionPlan",
}


@dataclass(frozen=True)
class ArchivedInstant:
    instant: Instant
    details: dict[str, Any] | None  # the state file's content as Java's loader sees it


def archive_file_name(n: int) -> str:
    return f".commits_.archive.{n}_{ARCHIVE_TOKEN}"


def archive_file_number(name: str) -> int | None:
    m = _ARCHIVE_NAME.match(name)
    return int(m.group(1)) if m else None


def archived_entry(instant: Instant, content: bytes, transition_time: str | None = None) -> dict[str, Any]:
    """The HoodieArchivedMetaEntry of one state file of `instant` with its bytes `content`."""
    entry: dict[str, Any] = {
        "commitTime": instant.timestamp,
        "actionType": instant.action,
        "version": 1,
        "actionState": STATE_NAMES[instant.state],
        "stateTransitionTime": transition_time,
    }
    name = _DETAIL_FIELD.get((instant.action, instant.state))
    if name and content.strip():
        entry[name] = decode_record(content) if name in _AVRO_CONTENT else _commit_record(json.loads(content))
    return entry


def _commit_record(md: dict[str, Any]) -> dict[str, Any]:
    """A commit's JSON as the Avro HoodieCommitMetadata / HoodieReplaceCommitMetadata record
    (Java converts with Jackson, so the field names are the JSON names)."""
    stats_field = set(_WRITE_STAT_FIELDS)
    stats = {
        part: [{k: v for k, v in s.items() if k in stats_field} for s in stats or []]
        for part, stats in (md.get("partitionToWriteStats") or {}).items()
    }
    return {
        "partitionToWriteStats": stats,
        "extraMetadata": {k: str(v) for k, v in (md.get("extraMetadata") or {}).items()},
        "version": 1,
        "operationType": md.get("operationType"),
        "partitionToReplaceFileIds": md.get("partitionToReplaceFileIds"),
        "compacted": md.get("compacted"),
    }


def encode_archive_blocks(entries: list[dict[str, Any]], batch: int) -> bytes:
    """Archive file bytes: AVRO_DATA blocks of at most `batch` entries, header SCHEMA only."""
    blocks = [
        encode_block(avro_data_block(ARCHIVED_META_ENTRY_SCHEMA, entries[i : i + batch], instant=None))
        for i in range(0, len(entries), max(1, batch))
    ]
    return b"".join(blocks)


def decode_archive_file(data: bytes, name: str = "archive file") -> list[ArchivedInstant]:
    """The entries of an archive file (ours or Java's), in file order."""
    out = []
    for block in read_blocks(data, name):
        if SCHEMA not in block.header:
            continue
        for r in avro_records(block):
            action = str(r.get("actionType") or "")
            state = _STATE_OF.get(r.get("actionState") or "COMPLETED", COMPLETED)
            detail_field = _DETAIL_FIELD.get((action, state))
            details = r.get(detail_field) if detail_field else None
            out.append(ArchivedInstant(Instant(r["commitTime"], action, state), details))
    return out
