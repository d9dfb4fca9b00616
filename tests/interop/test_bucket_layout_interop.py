"""Issue 25 item 6 with Apache Hudi 0.15 (Java): the bucket layout we record in hoodie.properties.

Java keeps the lines we add and its Spark writer takes unset bucket settings from them, so its
upserts into our BUCKET tables land in the same buckets; Java's own BUCKET tables record nothing,
and our first write into one is checked against its stored keys, then records the layout
(docs/hudi/bucket-layout.md)."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.index.bucket import bucket_of_file_id, record_key_bucket_ids
from tests.interop.compare import assert_readers_agree
from tests.interop.conftest import ZONES
from tests.support.tables import read_both

pytestmark = [pytest.mark.compat, pytest.mark.interop]

ARROW = pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()), ("fare", pa.float64())])
BASE = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}
BUCKET3 = {**BASE, "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "3"}
LAYOUT = {
    "hoodie.index.type": "BUCKET",
    "hoodie.bucket.index.num.buckets": "3",
    "hoodie.bucket.index.hash.field": "id",
}
CITIES = ("sf", "nyc")


def rows(ids, ts: int) -> list[dict]:
    return [{"id": f"k{i}", "city": CITIES[i % 2], "ts": ts, "fare": float(i + ts)} for i in ids]


class Model:
    def __init__(self) -> None:
        self.by_key: dict[str, dict] = {}

    def upsert(self, batch: list[dict]) -> list[dict]:
        for r in batch:
            self.by_key[r["id"]] = r
        return batch


def ours(path, batch: list[dict], options: dict) -> None:
    hoodie_sink.write(pa.Table.from_pylist(batch, schema=ARROW), str(path), options)


def theirs(java, path, batch: list[dict], options: dict) -> None:
    java.write(path, pa.Table.from_pylist(batch, schema=ARROW), options)


def assert_in_buckets(path, num_buckets: int) -> None:
    """Every key in the file group of its hash bucket, one file group per bucket and partition."""
    t, _ = read_both(path)
    names = [f.split("_")[0].lstrip(".") for f in t.column("_hoodie_file_name").to_pylist()]
    got = [bucket_of_file_id(n) for n in names]
    assert got == record_key_bucket_ids(t.column("_hoodie_record_key"), ["id"], num_buckets).tolist()
    groups: dict[tuple[str, int], set[str]] = {}
    for part, bucket, name in zip(t.column("_hoodie_partition_path").to_pylist(), got, names, strict=True):
        groups.setdefault((part, bucket), set()).add(name)
    assert all(len(g) == 1 for g in groups.values()), groups


def test_java_keeps_and_follows_the_layout_we_record(java_hudi, tmp_path):
    path, model = tmp_path / "t", Model()
    ours(path, model.upsert(rows(range(30), 1)), BUCKET3)
    ours(path, model.upsert(rows(range(20, 40), 2)), BASE)  # the table's layout: no index option
    props = java_hudi.call("properties", path=str(path))
    assert {k: props.get(k) for k in LAYOUT} == LAYOUT
    assert_readers_agree(java_hudi.read(path), path, list(model.by_key.values()))

    java = {"hoodie.metadata.enable": "false"}
    # Java's BUCKET upsert naming no bucket count takes the table's 3 from hoodie.properties
    theirs(
        java_hudi, path, model.upsert(rows(range(30, 50), 3)), {**BASE, **java, "hoodie.index.type": "BUCKET"}
    )
    theirs(java_hudi, path, model.upsert(rows(range(0, 60, 4), 4)), {**BUCKET3, **java})
    assert_readers_agree(java_hudi.read(path), path, list(model.by_key.values()))
    assert_in_buckets(path, 3)
    props = java_hudi.call("properties", path=str(path))
    assert {k: props.get(k) for k in LAYOUT} == LAYOUT  # Java's writes keep the lines

    ours(path, model.upsert(rows(range(45, 70), 5)), BASE)
    assert_readers_agree(java_hudi.read(path), path, list(model.by_key.values()))
    assert_in_buckets(path, 3)


def test_we_check_then_record_the_layout_of_a_java_bucket_table(java_local, tmp_path, monkeypatch):
    """Java creates the table with its defaults (metadata table, LOCAL timeline zone: our writer
    runs in Java's zone, as writers of such a table must) and records no layout."""
    monkeypatch.setenv("TZ", ZONES["0.15.0"])
    time.tzset()
    try:
        path, model = tmp_path / "t", Model()
        theirs(java_local, path, model.upsert(rows(range(40), 1)), BUCKET3)
        theirs(java_local, path, model.upsert(rows(range(30, 50), 2)), BUCKET3)
        assert not set(LAYOUT) & set(java_local.call("properties", path=str(path)))

        for wrong in (
            {**BUCKET3, "hoodie.bucket.index.num.buckets": "5"},
            {**BASE, "hoodie.index.type": "BUCKET"},
        ):
            with pytest.raises(HoodieConfigError, match="do not match"):
                ours(path, rows(range(10), 3), wrong)
        assert_readers_agree(java_local.read(path), path, list(model.by_key.values()))

        ours(path, model.upsert(rows(range(45, 60), 4)), BUCKET3)
        props = java_local.call("properties", path=str(path))
        assert {k: props.get(k) for k in LAYOUT} == LAYOUT
        theirs(java_local, path, model.upsert(rows(range(0, 70, 3), 5)), BUCKET3)
        ours(path, model.upsert(rows(range(55, 80), 6)), BASE)
        assert_readers_agree(java_local.read(path), path, list(model.by_key.values()))
        assert_in_buckets(path, 3)
    finally:
        monkeypatch.undo()
        time.tzset()
