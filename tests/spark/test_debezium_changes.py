"""`hoodie_sink.spark.debezium_changes` (docs/hudi/debezium.md#the-flattened-record): Debezium's JSON
envelope, with and without its schema part, flattened as Hudi's PostgresDebeziumSource does (the
row from `after`, from `before` for a delete; the event's metadata columns), tombstones dropped;
then routed into a merge-on-read table with the Debezium options."""

from __future__ import annotations

import json

import pytest

import hoodie_sink
import hoodie_sink.spark as hs
from hoodie_sink.errors import HoodieConfigError

ROW = "id BIGINT, name STRING"


def _event(op: str, before, after, lsn: int, envelope: bool) -> bytes:
    source = {"name": "pg", "schema": "public", "ts_ms": lsn - 1, "txId": 7, "lsn": lsn, "xmin": None}
    payload = {"op": op, "before": before, "after": after, "ts_ms": lsn + 1, "source": source}
    return json.dumps({"schema": {"type": "struct"}, "payload": payload} if envelope else payload).encode()


def test_debezium_changes_flattens_and_lands(spark, tmp_path):
    values = [
        _event("r", None, {"id": 1, "name": "a"}, 10, envelope=True),
        _event("c", None, {"id": 2, "name": "b"}, 11, envelope=False),
        _event("u", {"id": 1, "name": "a"}, {"id": 1, "name": "a2"}, 12, envelope=False),
        _event("d", {"id": 2, "name": "b"}, None, 13, envelope=True),
        None,  # the tombstone after the delete
    ]
    df = spark.createDataFrame([(v,) for v in values], "value BINARY")
    flat = df.transform(hs.debezium_changes(ROW))
    assert flat.columns == ["_change_operation_type", "_upstream_event_processed_ts_ms", "db_shard_source_partition",
                            "db_schema_source_partition", "_event_origin_ts_ms", "_event_tx_id", "_event_lsn",
                            "_event_xmin", "id", "name"]  # fmt: skip
    picked = ["_event_lsn", "_change_operation_type", "id", "name", "_upstream_event_processed_ts_ms",
              "_event_origin_ts_ms", "db_shard_source_partition"]  # fmt: skip
    rows = sorted(tuple(r[c] for c in picked) for r in flat.collect())
    assert rows == [(10, "r", 1, "a", 11, 9, "pg"), (11, "c", 2, "b", 12, 10, "pg"),
                    (12, "u", 1, "a2", 13, 11, "pg"), (13, "d", 2, "b", 14, 12, "pg")]  # fmt: skip

    path = str(tmp_path / "t")
    options = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "",
               "hoodie.datasource.write.table.type": "MERGE_ON_READ", **hs.DEBEZIUM_OPTIONS}  # fmt: skip
    flat.transform(hs.route(path, options)).write.format("hoodie").options(**options).mode("append").save(
        path
    )
    got = hoodie_sink.read(path).select(["id", "name", "_event_lsn"]).to_pylist()
    assert got == [{"id": 1, "name": "a2", "_event_lsn": 12}]


def test_debezium_changes_refusals():
    with pytest.raises(HoodieConfigError, match="flavour='mysql'"):
        hs.debezium_changes(ROW, flavour="mysql")
    with pytest.raises(HoodieConfigError, match="_event_lsn"):
        hs.debezium_changes("id BIGINT, _event_lsn BIGINT")
