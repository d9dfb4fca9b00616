"""PostgresDebeziumAvroPayload (Hudi 0.15; docs/hudi/debezium.md) against a model of its semantics,
on copy-on-write and merge-on-read tables: random Debezium changes (op c/u/r/d) with several events
of a key in a batch, ties on `_event_lsn` (the later arrival wins), late events that lose to the
stored record, deletes then re-inserts; merge-on-read compacted at the end.  Every state is read
back with our reader and hudi-rs.

The model: a batch's events of a key reduce to the one with the highest LSN (ties: the later); it
replaces the stored record unless the stored LSN is strictly greater; if it is a 'd' the key is
deleted.  A delete leaves no tombstone in Hudi, so an event older than a delete that arrives after
it is not generated here (its outcome depends on the file layout,
docs/hudi/debezium.md#late-events-after-a-delete));
`test_late_event_after_delete_copy_on_write` shows the copy-on-write case.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieError, HoodieSchemaError
from hoodie_sink.table.read.snapshot import read_snapshot
from tests.support.tables import data_rows, read_both, sort_by_key

PAYLOAD = "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload"
SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("v", pa.int64()), ("name", pa.string()),
                    ("_change_operation_type", pa.string()), ("_event_lsn", pa.int64()),
                    ("_upstream_event_processed_ts_ms", pa.int64())])  # fmt: skip


def options(table_type: str) -> dict[str, str]:
    return {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "_event_lsn",
        "hoodie.datasource.write.payload.class": PAYLOAD,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.parquet.small.file.limit": "0",  # updates of stored keys go to logs in merge-on-read
        "hoodie.compact.inline": "false",
    }


def event(key: int, op: str, lsn: int, rng: random.Random) -> dict:
    return {"id": f"k{key:03d}", "p": f"p{key % 3}", "v": rng.randrange(1000), "name": rng.choice("abcdef"),
            "_change_operation_type": op, "_event_lsn": lsn, "_upstream_event_processed_ts_ms": lsn * 10}  # fmt: skip


def make_batch(rng: random.Random, model: dict[str, dict], floor: dict[str, int], keys: int) -> list[dict]:
    """Events for random keys: for a stored key any LSN (late ones lose), ties included; for a
    deleted or new key only LSNs above every one seen for it (see the module's docstring)."""
    rows = []
    for _ in range(rng.randrange(5, 40)):
        k = rng.randrange(keys)
        key = f"k{k:03d}"
        seen = floor.get(key, 0)
        if key in model and rng.random() < 0.3:
            lsn = rng.randrange(1, seen + 1)  # late or tied
        else:
            lsn = seen + rng.randrange(0 if key in model else 1, 4)  # a tie (with a stored key) or newer
        op = rng.choice("d" if key in model else "cr") if rng.random() < 0.25 else rng.choice("cu")
        rows.append(event(k, op, lsn, rng))
    # the next batch's bounds: for a deleted key, above everything in this batch too
    for r in rows:
        floor[r["id"]] = max(floor.get(r["id"], 0), r["_event_lsn"])
    return rows


def apply_model(model: dict[str, dict], rows: list[dict]) -> None:
    winners: dict[str, dict] = {}
    for r in rows:  # in arrival order: a tie goes to the later event
        w = winners.get(r["id"])
        if w is None or r["_event_lsn"] >= w["_event_lsn"]:
            winners[r["id"]] = r
    for key, w in winners.items():
        stored = model.get(key)
        if stored is not None and stored["_event_lsn"] > w["_event_lsn"]:
            continue
        if w["_change_operation_type"] == "d":
            model.pop(key, None)
        else:
            model[key] = w


def hudi_rs_v1(path) -> pa.Table:
    """hudi-rs 0.5.0's older file-group reader: its default one refuses a merge-on-read slice with
    logs of a payload class it does not know (docs/hudi/debezium.md#readers)."""
    from hudi import HudiTableBuilder

    t = HudiTableBuilder.from_base_uri(str(path)).with_option("hoodie.read.file.group.reader.version", "1")
    batches = t.build().read()
    return pa.Table.from_batches(batches) if batches else SCHEMA.empty_table()


def check(path, model: dict[str, dict], table_type: str) -> None:
    want = data_rows(pa.Table.from_pylist(sorted(model.values(), key=lambda r: r["id"]), schema=SCHEMA))
    if table_type == "COPY_ON_WRITE":
        _theirs, ours = read_both(path)  # hudi-rs and ours agree, meta columns included
    else:
        ours = sort_by_key(read_snapshot(str(path)))
        assert data_rows(sort_by_key(hudi_rs_v1(path))) == want
    assert data_rows(ours) == want


@pytest.mark.compat
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("seed", [1, 7, 31])
def test_debezium_payload_against_model(tmp_path, table_type, seed):
    rng = random.Random(seed)
    path = str(tmp_path / "t")
    model: dict[str, dict] = {}
    floor: dict[str, int] = {}
    for _ in range(6):
        rows = make_batch(rng, model, floor, keys=25)
        hoodie_sink.write(pa.Table.from_pylist(rows, schema=SCHEMA), path, options(table_type))
        apply_model(model, rows)
        check(path, model, table_type)
    if table_type == "MERGE_ON_READ":
        hoodie_sink.compact(path, options(table_type))
        check(path, model, table_type)
        # after compaction the stored LSNs are in base files: late events still lose
        rows = [event(int(k[1:]), "u", 1, rng) for k in list(model)[:5]]
        hoodie_sink.write(pa.Table.from_pylist(rows, schema=SCHEMA), path, options(table_type))
        apply_model(model, rows)
        check(path, model, table_type)


def test_properties_name_the_payload(tmp_path):
    path = tmp_path / "t"
    rng = random.Random(3)
    hoodie_sink.write(pa.Table.from_pylist([event(1, "c", 5, rng)], schema=SCHEMA), str(path),
                      options("MERGE_ON_READ"))  # fmt: skip
    props = (path / ".hoodie" / "hoodie.properties").read_text()
    assert f"hoodie.compaction.payload.class={PAYLOAD}" in props
    assert "hoodie.table.precombine.field=_event_lsn" in props


def test_late_event_after_delete_copy_on_write(tmp_path):
    """Hudi keeps no tombstone: once a key is deleted, an older event arriving later is an insert."""
    path = str(tmp_path / "t")
    rng = random.Random(4)
    for rows in ([event(1, "c", 10, rng)], [event(1, "d", 20, rng)]):
        hoodie_sink.write(pa.Table.from_pylist(rows, schema=SCHEMA), path, options("COPY_ON_WRITE"))
    assert hoodie_sink.read(path).num_rows == 0
    late = event(1, "u", 15, rng)
    hoodie_sink.write(pa.Table.from_pylist([late], schema=SCHEMA), path, options("COPY_ON_WRITE"))
    assert hoodie_sink.read(path).select(["id", "_event_lsn"]).to_pylist() == [
        {"id": "k001", "_event_lsn": 15}
    ]


def _one(**over) -> pa.Table:
    row = {**event(1, "c", 5, random.Random(0)), **over}
    return pa.Table.from_pylist([row], schema=SCHEMA)


def test_misconfigurations_are_refused(tmp_path):
    opts = options("MERGE_ON_READ")
    with pytest.raises(HoodieSchemaError, match="hoodie.datasource.write.precombine.field"):
        hoodie_sink.write(
            _one(), str(tmp_path / "a"), {**opts, "hoodie.datasource.write.precombine.field": "v"}
        )
    no_pre = {k: v for k, v in opts.items() if k != "hoodie.datasource.write.precombine.field"}
    with pytest.raises(HoodieError, match="_event_lsn"):
        hoodie_sink.write(_one(), str(tmp_path / "b"), no_pre)
    with pytest.raises(HoodieSchemaError, match="_change_operation_type"):
        hoodie_sink.write(_one().drop_columns(["_change_operation_type"]), str(tmp_path / "c"), opts)
    with pytest.raises(HoodieError, match="'_event_lsn'.*is null"):
        hoodie_sink.write(_one(_event_lsn=None), str(tmp_path / "d"), opts)
    with pytest.raises(HoodieError, match="TOASTed"):
        hoodie_sink.write(_one(name="__debezium_unavailable_value"), str(tmp_path / "e"), opts)
    bulk = {**opts, "hoodie.datasource.write.operation": "bulk_insert"}
    with pytest.raises(HoodieSchemaError, match="upsert"):
        hoodie_sink.write(_one(), str(tmp_path / "g"), bulk)
    mysql = "org.apache.hudi.common.model.debezium.MySqlDebeziumAvroPayload"
    with pytest.raises(HoodieConfigError, match="hoodie.datasource.write.payload.class"):
        hoodie_sink.write(
            _one(), str(tmp_path / "f"), {**opts, "hoodie.datasource.write.payload.class": mysql}
        )
