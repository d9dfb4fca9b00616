"""HoodieCompactionPlan (docs/hudi/services.md#compaction-plan): the content of `<c>.compaction.requested`.

Version 2, as 0.14/0.15 write it: log and base files are named without their folder, logs oldest
first; one operation per file slice.  Java reads the plan by field name against its own schema, so
only the record names must match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hoodie_sink.table.format.avro_container import decode_record, encode_record
from hoodie_sink.table.format.file_group import FileSlice

_NS = "org.apache.hudi.avro.model"
PLAN_VERSION = 2
_STR = ["null", "string"]

COMPACTION_PLAN_SCHEMA = {
    "type": "record", "name": "HoodieCompactionPlan", "namespace": _NS,
    "fields": [
        {"name": "operations", "default": None, "type": ["null", {"type": "array", "items": {
            "type": "record", "name": "HoodieCompactionOperation", "namespace": _NS, "fields": [
                {"name": "baseInstantTime", "type": _STR},
                {"name": "deltaFilePaths", "type": ["null", {"type": "array", "items": "string"}], "default": None},
                {"name": "dataFilePath", "type": _STR, "default": None},
                {"name": "fileId", "type": _STR},
                {"name": "partitionPath", "type": _STR, "default": None},
                {"name": "metrics", "type": ["null", {"type": "map", "values": "double"}], "default": None},
                {"name": "bootstrapFilePath", "type": _STR, "default": None},
            ]}}]},
        {"name": "extraMetadata", "type": ["null", {"type": "map", "values": "string"}], "default": None},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {"name": "strategy", "default": None, "type": ["null", {
            "type": "record", "name": "HoodieCompactionStrategy", "namespace": _NS, "fields": [
                {"name": "compactorClassName", "type": _STR, "default": None},
                {"name": "strategyParams", "type": ["null", {"type": "map", "values": "string"}], "default": None},
                {"name": "version", "type": ["int", "null"], "default": 1},
            ]}]},
    ],
}  # fmt: skip


@dataclass(frozen=True)
class CompactionOperation:
    """One file slice to compact: its base file (if any) and log files, by name."""

    partition_path: str
    file_id: str
    base_instant: str
    base_file: str | None
    log_files: tuple[str, ...]  # oldest first
    log_bytes: int = 0

    @staticmethod
    def of_slice(sl: FileSlice) -> CompactionOperation:
        logs = sorted(sl.log_files, key=lambda f: (f.base_instant, f.version, f.write_token))
        return CompactionOperation(
            partition_path=sl.partition_path,
            file_id=sl.file_id,
            base_instant=sl.base_instant,
            base_file=sl.base_file.name if sl.base_file is not None else None,
            log_files=tuple(lf.name for lf in logs),
            log_bytes=sum(lf.size for lf in logs),
        )

    def to_avro(self) -> dict[str, Any]:
        mb = 1024.0 * 1024.0
        base_mb = 0.0  # the base file's size is not listed here; Java's metric is informative only
        read_mb = base_mb + self.log_bytes / mb
        return {
            "baseInstantTime": self.base_instant,
            "deltaFilePaths": list(self.log_files),
            "dataFilePath": self.base_file,
            "fileId": self.file_id,
            "partitionPath": self.partition_path,
            "metrics": {
                "TOTAL_LOG_FILES": float(len(self.log_files)),
                "TOTAL_LOG_FILES_SIZE": float(self.log_bytes),
                "TOTAL_IO_READ_MB": read_mb,
                "TOTAL_IO_WRITE_MB": base_mb,
                "TOTAL_IO_MB": read_mb + base_mb,
            },
            "bootstrapFilePath": None,
        }

    @staticmethod
    def from_avro(op: dict[str, Any]) -> CompactionOperation:
        # version 1 plans carried full paths: the names are what counts
        logs = tuple(p.rsplit("/", 1)[-1] for p in op.get("deltaFilePaths") or [])
        base = op.get("dataFilePath")
        metrics = op.get("metrics") or {}
        return CompactionOperation(
            partition_path=op.get("partitionPath") or "",
            file_id=op["fileId"],
            base_instant=op["baseInstantTime"],
            base_file=base.rsplit("/", 1)[-1] if base else None,
            log_files=logs,
            log_bytes=int(metrics.get("TOTAL_LOG_FILES_SIZE") or 0),
        )


def encode_compaction_plan(operations: list[CompactionOperation]) -> bytes:
    record = {
        "operations": [op.to_avro() for op in operations],
        "extraMetadata": None,
        "version": PLAN_VERSION,
        "strategy": None,
    }
    return encode_record(COMPACTION_PLAN_SCHEMA, record)


def decode_compaction_plan(data: bytes) -> list[CompactionOperation]:
    record = decode_record(data)
    return [CompactionOperation.from_avro(op) for op in record.get("operations") or []]
