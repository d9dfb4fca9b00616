"""Savepoint and restore instants as stored (docs/hudi/services.md#savepoints-and-restore):
`<t>.savepoint.inflight` (empty) then `<t>.savepoint` (Avro HoodieSavepointMetadata: per partition
the file names of the latest slices as of t); `<r>.restore.requested` (Avro HoodieRestorePlan),
`.restore.inflight`, `<r>.restore` (Avro HoodieRestoreMetadata, with the rollback metadata of every
instant undone). Field names, order, unions and nested names as Apache Hudi 0.15's generated
classes.  Pure.
"""

from __future__ import annotations

from typing import Any

import fastavro

from hoodie_sink.table.format.avro_container import decode_record, encode_record
from hoodie_sink.table.format.rollback_metadata import ROLLBACK_METADATA_SCHEMA

_NS = "org.apache.hudi.avro.model"
SAVEPOINT = "savepoint"
RESTORE = "restore"

_SP_PARTITION = {
    "type": "record", "name": "HoodieSavepointPartitionMetadata", "namespace": _NS,
    "fields": [{"name": "partitionPath", "type": "string"},
               {"name": "savepointDataFile", "type": {"type": "array", "items": "string"}}],
}  # fmt: skip
SAVEPOINT_METADATA_SCHEMA = {
    "type": "record", "name": "HoodieSavepointMetadata", "namespace": _NS,
    "fields": [
        {"name": "savepointedBy", "type": "string"},
        {"name": "savepointedAt", "type": "long"},
        {"name": "comments", "type": "string"},
        {"name": "partitionMetadata", "type": {"type": "map", "values": _SP_PARTITION}},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}  # fmt: skip
_INSTANT_INFO = f"{_NS}.HoodieInstantInfo"  # defined by the rollback metadata schema
RESTORE_PLAN_SCHEMA = {
    "type": "record", "name": "HoodieRestorePlan", "namespace": _NS,
    "fields": [
        {"name": "instantsToRollback", "default": [], "type": {"type": "array", "items": {
            "type": "record", "name": "HoodieInstantInfo", "namespace": _NS,
            "fields": [{"name": "commitTime", "type": "string"}, {"name": "action", "type": "string"}]}}},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}  # fmt: skip
RESTORE_METADATA_SCHEMA = {
    "type": "record", "name": "HoodieRestoreMetadata", "namespace": _NS,
    "fields": [
        {"name": "startRestoreTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "instantsToRollback", "type": {"type": "array", "items": "string"}},
        {"name": "hoodieRestoreMetadata",
         "type": {"type": "map", "values": {"type": "array", "items": ROLLBACK_METADATA_SCHEMA}}},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "restoreInstantInfo", "type": {"type": "array", "items": _INSTANT_INFO}, "default": []},
    ],
}  # fmt: skip
_SAVEPOINT = fastavro.parse_schema(SAVEPOINT_METADATA_SCHEMA)
_PLAN = fastavro.parse_schema(RESTORE_PLAN_SCHEMA)
_METADATA = fastavro.parse_schema(RESTORE_METADATA_SCHEMA)


def encode_savepoint(user: str, at_ms: int, comments: str, files: dict[str, list[str]]) -> bytes:
    """`files`: partition path -> file names of the latest slices as of the savepoint."""
    partitions = {
        p: {"partitionPath": p, "savepointDataFile": sorted(names)} for p, names in sorted(files.items())
    }
    return encode_record(_SAVEPOINT, {"savepointedBy": user, "savepointedAt": at_ms, "comments": comments,
                                      "partitionMetadata": partitions, "version": 1})  # fmt: skip


def decode_savepoint(data: bytes) -> dict[str, Any]:
    return decode_record(data)


def encode_restore_plan(instants: list[tuple[str, str]]) -> bytes:
    """`instants`: (time, action) to roll back, newest first."""
    return encode_record(_PLAN, {"instantsToRollback": [{"commitTime": t, "action": a} for t, a in instants],
                                 "version": 1})  # fmt: skip


def decode_restore_plan(data: bytes) -> list[tuple[str, str]]:
    return [(i["commitTime"], i["action"]) for i in decode_record(data).get("instantsToRollback") or []]


def encode_restore_metadata(
    restore_time: str,
    taken_ms: int,
    instants: list[tuple[str, str]],
    rollbacks: dict[str, list[dict[str, Any]]],
) -> bytes:
    return encode_record(_METADATA, {
        "startRestoreTime": restore_time,
        "timeTakenInMillis": taken_ms,
        "instantsToRollback": [t for t, _ in instants],
        "hoodieRestoreMetadata": rollbacks,
        "version": 1,
        "restoreInstantInfo": [{"commitTime": t, "action": a} for t, a in instants],
    })  # fmt: skip


def decode_restore_metadata(data: bytes) -> dict[str, Any]:
    return decode_record(data)
