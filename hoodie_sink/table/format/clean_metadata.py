"""Clean instants as stored: Avro HoodieCleanerPlan in `<t>.clean.requested` and again (the same
bytes, as Java 0.14/0.15 write it) in `<t>.clean.inflight`, Avro HoodieCleanMetadata in `<t>.clean`
(docs/hudi/services.md#cleaning).

Writer schemas follow Apache Hudi 0.15's generated classes (field names, order, unions and
defaults; nested record names in `org.apache.hudi.avro.model`), so Java resolves ours by name.
Plans hold full paths (as Java's), metadata file names.  Pure: building, encoding, decoding.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

import fastavro

from hoodie_sink.table.format.avro_container import decode_record, encode_record
from hoodie_sink.table.format.file_group import join_partition

_NS = "org.apache.hudi.avro.model"
PLAN_VERSION = 2  # CleanPlanner.LATEST_CLEAN_PLAN_VERSION
METADATA_VERSION = 2  # CleanerUtils.CLEAN_METADATA_VERSION_2
KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"
POLICIES = (KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, KEEP_LATEST_BY_HOURS)


def _opt(t: Any) -> list[Any]:
    return ["null", t]


_STRINGS = {"type": "array", "items": "string"}
_ACTION_INSTANT = {
    "type": "record", "name": "HoodieActionInstant", "namespace": _NS,
    "fields": [{"name": "timestamp", "type": "string"}, {"name": "action", "type": "string"},
               {"name": "state", "type": "string"}],
}  # fmt: skip
_FILE_INFO = {
    "type": "record", "name": "HoodieCleanFileInfo", "namespace": _NS,
    "fields": [{"name": "filePath", "type": _opt("string"), "default": None},
               {"name": "isBootstrapBaseFile", "type": _opt("boolean"), "default": None}],
}  # fmt: skip
CLEANER_PLAN_SCHEMA = {
    "type": "record", "name": "HoodieCleanerPlan", "namespace": _NS,
    "fields": [
        {"name": "earliestInstantToRetain", "type": _opt(_ACTION_INSTANT), "default": None},
        {"name": "lastCompletedCommitTimestamp", "type": _opt("string"), "default": None},
        {"name": "policy", "type": "string"},
        {"name": "filesToBeDeletedPerPartition", "type": _opt({"type": "map", "values": _STRINGS}),
         "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "filePathsToBeDeletedPerPartition",
         "type": _opt({"type": "map", "values": {"type": "array", "items": _FILE_INFO}}), "default": None},
        {"name": "partitionsToBeDeleted", "type": _opt(_STRINGS), "default": None},
        {"name": "extraMetadata", "type": _opt({"type": "map", "values": "string"}), "default": None},
    ],
}  # fmt: skip
_PARTITION = {
    "type": "record", "name": "HoodieCleanPartitionMetadata", "namespace": _NS,
    "fields": [
        {"name": "partitionPath", "type": "string"},
        {"name": "policy", "type": "string"},
        {"name": "deletePathPatterns", "type": _STRINGS},
        {"name": "successDeleteFiles", "type": _STRINGS},
        {"name": "failedDeleteFiles", "type": _STRINGS},
        {"name": "isPartitionDeleted", "type": _opt("boolean"), "default": None},
    ],
}  # fmt: skip
CLEAN_METADATA_SCHEMA = {
    "type": "record", "name": "HoodieCleanMetadata", "namespace": _NS,
    "fields": [
        {"name": "startCleanTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "earliestCommitToRetain", "type": "string"},
        {"name": "lastCompletedCommitTimestamp", "type": "string", "default": ""},
        {"name": "partitionMetadata", "type": {"type": "map", "values": _PARTITION}},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "bootstrapPartitionMetadata", "type": _opt({"type": "map", "values": "HoodieCleanPartitionMetadata"}),
         "default": None},
    ],
}  # fmt: skip

_PLAN = fastavro.parse_schema(CLEANER_PLAN_SCHEMA)
_METADATA = fastavro.parse_schema(CLEAN_METADATA_SCHEMA)


@dataclass(frozen=True)
class CleanerPlan:
    """What a clean deletes: files (paths relative to the base path) per partition.
    `earliest_to_retain`: (instant time, action) the policy keeps from, None for FILE_VERSIONS."""

    policy: str
    earliest_to_retain: tuple[str, str] | None
    last_completed_commit: str
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def file_count(self) -> int:
        return sum(len(f) for f in self.files.values())


def encode_cleaner_plan(plan: CleanerPlan, base_uri: str) -> bytes:
    ectr = plan.earliest_to_retain
    record: dict[str, Any] = {
        "earliestInstantToRetain": {"timestamp": ectr[0], "action": ectr[1], "state": "COMPLETED"}
        if ectr
        else None,
        "lastCompletedCommitTimestamp": plan.last_completed_commit,
        "policy": plan.policy,
        "filesToBeDeletedPerPartition": {},  # deprecated; Java writes it empty
        "version": PLAN_VERSION,
        "filePathsToBeDeletedPerPartition": {
            part: [{"filePath": _full(base_uri, rel), "isBootstrapBaseFile": False} for rel in rels]
            for part, rels in sorted(plan.files.items())
        },
        "partitionsToBeDeleted": [],
        "extraMetadata": None,
    }
    return encode_record(_PLAN, record)


def decode_cleaner_plan(data: bytes) -> CleanerPlan:
    """A plan ours or Java's wrote (version 2: paths per partition; version 1: names per partition)."""
    r = decode_record(data)
    files: dict[str, tuple[str, ...]] = {}
    for part, infos in (r.get("filePathsToBeDeletedPerPartition") or {}).items():
        files[part] = tuple(
            join_partition(part, posixpath.basename(i["filePath"])) for i in infos if i.get("filePath")
        )
    for part, names in (r.get("filesToBeDeletedPerPartition") or {}).items():
        files[part] = tuple(sorted(set(files.get(part, ())) | {join_partition(part, n) for n in names}))
    ectr = r.get("earliestInstantToRetain")
    return CleanerPlan(
        policy=r["policy"],
        earliest_to_retain=(ectr["timestamp"], ectr["action"]) if ectr else None,
        last_completed_commit=r.get("lastCompletedCommitTimestamp") or "",
        files=files,
    )


def encode_clean_metadata(
    clean_time: str, taken_ms: int, plan: CleanerPlan, deleted: set[str], failed: set[str]
) -> bytes:
    """`deleted`/`failed`: files of the plan (relative paths) gone / still there after the deletes."""
    partitions = {}
    for part, rels in sorted(plan.files.items()):
        names = [posixpath.basename(r) for r in rels]
        partitions[part] = {
            "partitionPath": part,
            "policy": plan.policy,
            "deletePathPatterns": names,
            "successDeleteFiles": [posixpath.basename(r) for r in rels if r in deleted],
            "failedDeleteFiles": [posixpath.basename(r) for r in rels if r in failed],
            "isPartitionDeleted": False,
        }
    record = {
        "startCleanTime": clean_time,
        "timeTakenInMillis": taken_ms,
        "totalFilesDeleted": len(deleted),
        "earliestCommitToRetain": plan.earliest_to_retain[0] if plan.earliest_to_retain else "",
        "lastCompletedCommitTimestamp": plan.last_completed_commit,
        "partitionMetadata": partitions,
        "version": METADATA_VERSION,
        "bootstrapPartitionMetadata": None,
    }
    return encode_record(_METADATA, record)


def decode_clean_metadata(data: bytes) -> dict[str, Any]:
    return decode_record(data)


def _full(base_uri: str, rel: str) -> str:
    return posixpath.join(base_uri.rstrip("/"), rel)  # Java records full paths
