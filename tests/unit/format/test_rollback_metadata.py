"""Rollback plan and metadata Avro (docs/hudi/services.md#rollback): Java 0.15's writer schemas,
round trips."""

from __future__ import annotations

import io

import fastavro
import pytest

from hoodie_sink.table.format.rollback_metadata import (
    decode_rollback_metadata,
    decode_rollback_plan,
    encode_rollback_metadata,
    encode_rollback_plan,
    plan_rollback,
)
from hoodie_sink.table.format.timeline.instant import COMMIT, Instant

BASE = "file:/data/t"
FAILED = Instant("20240101000000000", COMMIT)
FILES = ["p0/f1-0_1-0-1_20240101000000000.parquet", "p1/f2-0_2-0-1_20240101000000000.parquet"]


def embedded(data: bytes) -> tuple[dict, dict]:
    reader = fastavro.reader(io.BytesIO(data))
    return reader.writer_schema, next(iter(reader))


def test_plan_is_a_hoodie_rollback_plan_with_one_request_per_file_as_java_writes():
    schema, record = embedded(encode_rollback_plan(plan_rollback(FAILED, FILES), BASE))
    assert schema["name"] == "org.apache.hudi.avro.model.HoodieRollbackPlan"
    assert [f["name"] for f in schema["fields"]] == ["instantToRollback", "RollbackRequests", "version"]
    assert record["instantToRollback"] == {"commitTime": FAILED.timestamp, "action": "commit"}
    assert record["version"] == 1
    assert record["RollbackRequests"][0] == {
        "partitionPath": "p0", "fileId": "f1-0", "latestBaseInstant": FAILED.timestamp,
        "filesToBeDeleted": [f"{BASE}/{FILES[0]}"], "logBlocksToBeDeleted": {},
    }  # fmt: skip


def test_plan_round_trips_to_relative_paths_whatever_the_uri_form():
    plan = plan_rollback(FAILED, FILES)
    assert decode_rollback_plan(encode_rollback_plan(plan, BASE)) == plan
    assert decode_rollback_plan(encode_rollback_plan(plan, "/data/t")) == plan


def test_a_plan_with_log_blocks_is_refused():
    data = bytearray(encode_rollback_plan(plan_rollback(FAILED, FILES[:1]), BASE))
    schema, record = embedded(bytes(data))
    record["RollbackRequests"][0]["logBlocksToBeDeleted"] = {f"{BASE}/p0/.f1-0_x.log.1_0-1-1": 10}
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), [record])
    with pytest.raises(ValueError, match="MOR log rollback"):
        decode_rollback_plan(buf.getvalue())


def test_metadata_fills_what_java_fills():
    plan = plan_rollback(FAILED, FILES)
    schema, record = embedded(encode_rollback_metadata("20240102000000000", 12, plan, FILES, [], BASE))
    assert schema["name"] == "org.apache.hudi.avro.model.HoodieRollbackMetadata"
    assert [f["name"] for f in schema["fields"]] == [
        "startRollbackTime", "timeTakenInMillis", "totalFilesDeleted", "commitsRollback",
        "partitionMetadata", "version", "instantsRollback",
    ]  # fmt: skip
    partition = schema["fields"][4]["type"]["values"]
    assert partition["name"] == "org.apache.hudi.avro.model.HoodieRollbackPartitionMetadata"
    assert [f["name"] for f in partition["fields"]] == [
        "partitionPath", "successDeleteFiles", "failedDeleteFiles", "rollbackLogFiles", "logFilesFromFailedCommit",
    ]  # fmt: skip
    assert record == decode_rollback_metadata(
        encode_rollback_metadata("20240102000000000", 12, plan, FILES, [], BASE)
    )
    assert record["startRollbackTime"] == "20240102000000000"
    assert record["timeTakenInMillis"] == 12 and record["totalFilesDeleted"] == 2 and record["version"] == 1
    assert record["commitsRollback"] == [FAILED.timestamp]
    assert record["instantsRollback"] == [{"commitTime": FAILED.timestamp, "action": "commit"}]
    assert record["partitionMetadata"]["p1"] == {
        "partitionPath": "p1", "successDeleteFiles": [f"{BASE}/{FILES[1]}"], "failedDeleteFiles": [],
        "rollbackLogFiles": {}, "logFilesFromFailedCommit": {},
    }  # fmt: skip


def test_a_rollback_of_nothing_has_no_partitions():
    plan = plan_rollback(FAILED, [])
    _, record = embedded(encode_rollback_metadata("20240102000000000", 0, plan, [], [], BASE))
    assert record["partitionMetadata"] == {} and record["totalFilesDeleted"] == 0
