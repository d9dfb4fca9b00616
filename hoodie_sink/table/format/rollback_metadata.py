"""Rollback instants as stored: Avro HoodieRollbackPlan in `<r>.rollback.requested`, an empty
`<r>.rollback.inflight`, Avro HoodieRollbackMetadata in `<r>.rollback`
(docs/hudi/services.md#rollback).

The writer schemas are the ones Apache Hudi 0.15 embeds in its rollback files (read from a
rollback Java 0.15 wrote), so Java resolves ours field by field.  Pure: building, encoding and
decoding only; `write/rollback.py` does the I/O.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

import fastavro

from hoodie_sink.table.format.avro_container import decode_record, encode_record
from hoodie_sink.table.format.file_group import BaseFile, LogFile, join_partition
from hoodie_sink.table.format.timeline.instant import Instant

_NS = "org.apache.hudi.avro.model"
PLAN_VERSION = 1  # BaseRollbackPlanActionExecutor.LATEST_ROLLBACK_PLAN_VERSION
METADATA_VERSION = 1  # TimelineMetadataUtils.DEFAULT_VERSION


def _opt(t: Any) -> list[Any]:
    return ["null", t]


_SIZES = {"type": "map", "values": "long"}
_INSTANT_INFO = {
    "type": "record", "name": "HoodieInstantInfo", "namespace": _NS,
    "fields": [{"name": "commitTime", "type": "string"}, {"name": "action", "type": "string"}],
}  # fmt: skip
_REQUEST = {
    "type": "record", "name": "HoodieRollbackRequest", "namespace": _NS,
    "fields": [
        {"name": "partitionPath", "type": "string"},
        {"name": "fileId", "type": _opt("string"), "default": None},
        {"name": "latestBaseInstant", "type": _opt("string"), "default": None},
        {"name": "filesToBeDeleted", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "logBlocksToBeDeleted", "type": _opt(_SIZES), "default": None},
    ],
}  # fmt: skip
ROLLBACK_PLAN_SCHEMA = {
    "type": "record", "name": "HoodieRollbackPlan", "namespace": _NS,
    "fields": [
        {"name": "instantToRollback", "type": _opt(_INSTANT_INFO), "default": None},
        {"name": "RollbackRequests", "type": _opt({"type": "array", "items": _REQUEST}), "default": None},
        {"name": "version", "type": ["int", "null"], "default": PLAN_VERSION},
    ],
}  # fmt: skip
_PARTITION = {
    "type": "record", "name": "HoodieRollbackPartitionMetadata", "namespace": _NS,
    "fields": [
        {"name": "partitionPath", "type": "string"},
        {"name": "successDeleteFiles", "type": {"type": "array", "items": "string"}},
        {"name": "failedDeleteFiles", "type": {"type": "array", "items": "string"}},
        {"name": "rollbackLogFiles", "type": _opt(_SIZES), "default": None},
        {"name": "logFilesFromFailedCommit", "type": _opt(_SIZES), "default": None},
    ],
}  # fmt: skip
ROLLBACK_METADATA_SCHEMA = {
    "type": "record", "name": "HoodieRollbackMetadata", "namespace": _NS,
    "fields": [
        {"name": "startRollbackTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": {"type": "array", "items": "string"}},
        {"name": "partitionMetadata", "type": {"type": "map", "values": _PARTITION}},
        {"name": "version", "type": ["int", "null"], "default": METADATA_VERSION},
        {"name": "instantsRollback", "type": {"type": "array", "items": _INSTANT_INFO}, "default": []},
    ],
}  # fmt: skip

_PLAN = fastavro.parse_schema(ROLLBACK_PLAN_SCHEMA)
_METADATA = fastavro.parse_schema(ROLLBACK_METADATA_SCHEMA)


@dataclass(frozen=True)
class RollbackPlan:
    """What a rollback will undo: the instant and the data files to delete (paths relative to
    the base path), log files included: a log file holds the blocks of the one write that
    created it, so rolling that write back deletes it whole (docs/hudi/mor-rollback.md)."""

    instant_to_rollback: Instant
    files: tuple[str, ...]


def plan_rollback(instant: Instant, files: list[str]) -> RollbackPlan:
    return RollbackPlan(instant, tuple(sorted(set(files))))


def encode_rollback_plan(plan: RollbackPlan, base_uri: str) -> bytes:
    """One request per file, as Java 0.15's marker-based COW plan: partition, file id, the
    file's (slice's) instant as `latestBaseInstant`, its full path in `filesToBeDeleted` (a log
    file too: deleted whole, as Java does for a log file its failed write created)."""
    requests = []
    for rel in plan.files:
        partition, name = posixpath.split(rel)
        bf = BaseFile.parse(partition, name)
        lf = LogFile.parse(partition, name) if bf is None else None
        file_id, base_instant = (
            (bf.file_id, bf.instant) if bf else (lf.file_id, lf.base_instant) if lf else ("", "")
        )
        requests.append({
            "partitionPath": partition,
            "fileId": file_id,
            "latestBaseInstant": base_instant,
            "filesToBeDeleted": [_full(base_uri, rel)],
            "logBlocksToBeDeleted": {},
        })  # fmt: skip
    record = {
        "instantToRollback": _instant_info(plan.instant_to_rollback),
        "RollbackRequests": requests,
        "version": PLAN_VERSION,
    }
    return encode_record(_PLAN, record)


def decode_rollback_plan(data: bytes) -> RollbackPlan:
    """A plan ours or Java's wrote.  Files come back relative to the base path from their
    partition and name (Java records `file:/...`, HDFS or object-store URIs for the same file).
    A plan with log blocks to delete (a MOR log rollback) raises ValueError."""
    record = decode_record(data)
    info = record.get("instantToRollback")
    if not info:
        raise ValueError("the rollback plan names no instant to roll back")
    files = []
    for req in record.get("RollbackRequests") or []:
        if req.get("logBlocksToBeDeleted"):
            raise ValueError(
                f"it rolls back log blocks in partition '{req['partitionPath']}' (MOR log rollback)"
            )
        files += [
            join_partition(req["partitionPath"], posixpath.basename(f)) for f in req["filesToBeDeleted"]
        ]
    return RollbackPlan(Instant(info["commitTime"], info["action"]), tuple(files))


def encode_rollback_metadata(
    rollback_time: str,
    taken_ms: int,
    plan: RollbackPlan,
    deleted: list[str],
    failed: list[str],
    base_uri: str,
) -> bytes:
    """`deleted`/`failed`: files of the plan (relative paths) gone / still there after the
    deletes.  Partitions as Java fills them for a COW rollback: one entry per partition the
    plan touches, no log files."""
    partitions: dict[str, dict[str, Any]] = {}
    for rel, outcome in [(p, "successDeleteFiles") for p in deleted] + [
        (p, "failedDeleteFiles") for p in failed
    ]:
        part = posixpath.dirname(rel)
        meta = partitions.setdefault(part, {
            "partitionPath": part, "successDeleteFiles": [], "failedDeleteFiles": [],
            "rollbackLogFiles": {}, "logFilesFromFailedCommit": {},
        })  # fmt: skip
        meta[outcome].append(_full(base_uri, rel))
    record = {
        "startRollbackTime": rollback_time,
        "timeTakenInMillis": taken_ms,
        "totalFilesDeleted": len(deleted),
        "commitsRollback": [plan.instant_to_rollback.timestamp],
        "partitionMetadata": partitions,
        "version": METADATA_VERSION,
        "instantsRollback": [_instant_info(plan.instant_to_rollback)],
    }
    return encode_record(_METADATA, record)


def decode_rollback_metadata(data: bytes) -> dict[str, Any]:
    return decode_record(data)


def _instant_info(instant: Instant) -> dict[str, str]:
    return {"commitTime": instant.timestamp, "action": instant.action}


def _full(base_uri: str, rel: str) -> str:
    return posixpath.join(base_uri.rstrip("/"), rel)  # Java records full paths
