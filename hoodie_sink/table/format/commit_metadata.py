"""Commit metadata: write stats and the JSON of commit / deltacommit / replacecommit files.

Pure codecs (docs/hudi/format.md#commit-metadata).  Field names and the string "null" for an absent prevCommit
follow what Apache Hudi 0.14/0.15 write, so Java tools and hudi-rs parse our commits.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from hoodie_sink.table.format.metadata_records import ColumnStatsInfo

NULL_COMMIT = "null"
SCHEMA_KEY = "schema"


@dataclass
class WriteStat:
    """What one write handle did to one file group in one instant."""

    file_id: str
    partition_path: str
    path: str  # relative to the table base path
    prev_commit: str = NULL_COMMIT
    num_writes: int = 0
    num_inserts: int = 0
    num_update_writes: int = 0
    num_deletes: int = 0
    total_write_bytes: int = 0
    file_size_in_bytes: int = 0
    create_time_ms: int = 0
    upsert_time_ms: int = 0
    min_record_key: str | None = None
    max_record_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # MOR: logVersion, baseFile, logFiles, ...
    # the written file's column statistics, for the metadata table's column_stats partition
    # (format/column_stats.py): computed by the task that wrote it, never part of the JSON;
    # None: not computed (the write did not keep column_stats)
    column_stats: tuple[ColumnStatsInfo, ...] | None = field(default=None, compare=False)
    # a written base file's bloom filter (type code, footer text), for the bloom_filters partition:
    # taken by the task from the footer it wrote; None: not taken
    bloom_filter: tuple[str, str] | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        out = {
            "fileId": self.file_id,
            "path": self.path,
            "cdcStats": None,
            "prevCommit": self.prev_commit,
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes,
            "numInserts": self.num_inserts,
            "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": 0,
            "tempPath": None,
            "partitionPath": self.partition_path,
            "totalLogRecords": 0,
            "totalLogFilesCompacted": 0,
            "totalLogSizeCompacted": 0,
            "totalUpdatedRecordsCompacted": 0,
            "totalLogBlocks": 0,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "fileSizeInBytes": self.file_size_in_bytes,
            "minEventTime": None,
            "maxEventTime": None,
            "runtimeStats": {
                "totalScanTime": 0,
                "totalUpsertTime": self.upsert_time_ms,
                "totalCreateTime": self.create_time_ms,
            },
        }
        out.update(self.extra)
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> WriteStat:
        rt = d.get("runtimeStats") or {}
        known = {
            "fileId", "path", "prevCommit", "numWrites", "numInserts", "numUpdateWrites",
            "numDeletes", "totalWriteBytes", "fileSizeInBytes", "partitionPath", "runtimeStats",
        }  # fmt: skip
        return WriteStat(
            file_id=d.get("fileId") or "",
            partition_path=d.get("partitionPath") or "",
            path=d.get("path") or "",
            prev_commit=d.get("prevCommit") or NULL_COMMIT,
            num_writes=int(d.get("numWrites") or 0),
            num_inserts=int(d.get("numInserts") or 0),
            num_update_writes=int(d.get("numUpdateWrites") or 0),
            num_deletes=int(d.get("numDeletes") or 0),
            total_write_bytes=int(d.get("totalWriteBytes") or 0),
            file_size_in_bytes=int(d.get("fileSizeInBytes") or 0),
            create_time_ms=int(rt.get("totalCreateTime") or 0),
            upsert_time_ms=int(rt.get("totalUpsertTime") or 0),
            extra={k: v for k, v in d.items() if k not in known and v is not None},
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CommitMetadata:
    """HoodieCommitMetadata / HoodieReplaceCommitMetadata."""

    operation_type: str
    write_stats: list[WriteStat] = field(default_factory=list)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    partition_to_replace_file_ids: dict[str, list[str]] | None = None
    compacted: bool = False

    @property
    def schema(self) -> str | None:
        return self.extra_metadata.get(SCHEMA_KEY)

    def partition_to_write_stats(self) -> dict[str, list[WriteStat]]:
        out: dict[str, list[WriteStat]] = {}
        for s in self.write_stats:
            out.setdefault(s.partition_path, []).append(s)
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partitionToWriteStats": {
                p: [s.to_json() for s in stats]
                for p, stats in sorted(self.partition_to_write_stats().items())
            },
            "compacted": self.compacted,
            "extraMetadata": dict(self.extra_metadata),
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            out["partitionToReplaceFileIds"] = {
                p: list(ids) for p, ids in sorted(self.partition_to_replace_file_ids.items())
            }
        return out

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), indent=2).encode("utf-8")

    @staticmethod
    def from_json(d: dict[str, Any]) -> CommitMetadata:
        stats = [WriteStat.from_json(s) for ss in (d.get("partitionToWriteStats") or {}).values() for s in ss]
        return CommitMetadata(
            operation_type=d.get("operationType") or "UNKNOWN",
            write_stats=stats,
            extra_metadata=dict(d.get("extraMetadata") or {}),
            partition_to_replace_file_ids=d.get("partitionToReplaceFileIds"),
            compacted=bool(d.get("compacted", False)),
        )

    def totals(self) -> dict[str, int]:
        return {
            "numWrites": sum(s.num_writes for s in self.write_stats),
            "numInserts": sum(s.num_inserts for s in self.write_stats),
            "numUpdateWrites": sum(s.num_update_writes for s in self.write_stats),
            "numDeletes": sum(s.num_deletes for s in self.write_stats),
            "totalWriteBytes": sum(s.total_write_bytes for s in self.write_stats),
            "numFiles": len(self.write_stats),
        }


def inflight_workload_json(operation_type: str) -> bytes:
    """The minimal inflight content Java accepts (docs/hudi/format.md#timeline-file-contents)."""
    return json.dumps(
        {
            "partitionToWriteStats": {},
            "compacted": False,
            "extraMetadata": {},
            "operationType": operation_type,
        },
        indent=2,
    ).encode("utf-8")
