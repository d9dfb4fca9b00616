"""`<t>.replacecommit.requested`: Avro HoodieRequestedReplaceMetadata (docs/hudi/format.md#replace-commits).

The writer schema is the exact one Apache Hudi 0.14/0.15 embed in their files, so Java and
hudi-rs resolve our plans field by field.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro

_NS = "org.apache.hudi.avro.model"


def _opt(t: Any) -> list[Any]:
    return ["null", t]


_SLICE = {
    "type": "record", "name": "HoodieSliceInfo", "namespace": _NS,
    "fields": [
        {"name": "dataFilePath", "type": _opt("string"), "default": None},
        {"name": "deltaFilePaths", "type": _opt({"type": "array", "items": "string"}), "default": None},
        {"name": "fileId", "type": _opt("string")},
        {"name": "partitionPath", "type": _opt("string"), "default": None},
        {"name": "bootstrapFilePath", "type": _opt("string"), "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}  # fmt: skip
_GROUP = {
    "type": "record", "name": "HoodieClusteringGroup", "namespace": _NS,
    "fields": [
        {"name": "slices", "type": _opt({"type": "array", "items": _SLICE}), "default": None},
        {"name": "metrics", "type": _opt({"type": "map", "values": "double"}), "default": None},
        {"name": "numOutputFileGroups", "type": ["int", "null"], "default": 1},
        {"name": "extraMetadata", "type": _opt({"type": "map", "values": "string"}), "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}  # fmt: skip
_STRATEGY = {
    "type": "record", "name": "HoodieClusteringStrategy", "namespace": _NS,
    "fields": [
        {"name": "strategyClassName", "type": _opt("string"), "default": None},
        {"name": "strategyParams", "type": _opt({"type": "map", "values": "string"}), "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}  # fmt: skip
_PLAN = {
    "type": "record", "name": "HoodieClusteringPlan", "namespace": _NS,
    "fields": [
        {"name": "inputGroups", "type": _opt({"type": "array", "items": _GROUP}), "default": None},
        {"name": "strategy", "type": _opt(_STRATEGY), "default": None},
        {"name": "extraMetadata", "type": _opt({"type": "map", "values": "string"}), "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "preserveHoodieMetadata", "type": _opt("boolean"), "default": None},
    ],
}  # fmt: skip
REQUESTED_REPLACE_SCHEMA = {
    "type": "record", "name": "HoodieRequestedReplaceMetadata", "namespace": _NS,
    "fields": [
        {"name": "operationType", "type": _opt("string"), "default": None},
        {"name": "clusteringPlan", "type": _opt(_PLAN), "default": None},
        {"name": "extraMetadata", "type": _opt({"type": "map", "values": "string"}), "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}  # fmt: skip

_PARSED = fastavro.parse_schema(REQUESTED_REPLACE_SCHEMA)


def encode_requested_replace(operation_type: str, clustering_plan: dict[str, Any] | None = None) -> bytes:
    record = {
        "operationType": operation_type,
        "clusteringPlan": clustering_plan,
        "extraMetadata": None,
        "version": 1,
    }
    buf = io.BytesIO()
    fastavro.writer(buf, _PARSED, [record], codec="null")
    return buf.getvalue()


def decode_requested_replace(data: bytes) -> dict[str, Any]:
    if not data:
        return {}
    records = list(fastavro.reader(io.BytesIO(data)))
    return records[0] if records and isinstance(records[0], dict) else {}
