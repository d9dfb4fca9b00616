"""Issue 25 item 6: the BUCKET layout (index type, bucket count, hash fields) is kept with the table.

A BUCKET write finds a stored key only in the bucket it hashes the key to, so a write that hashes
differently inserts stored keys again without any error.  Each scenario is checked against a model
of the table (the expected rows), read back with hudi-rs and our reader.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.properties import (
    PROPERTIES_FILE,
    line_key,
    parse_properties,
    read_properties_text,
)
from hoodie_sink.table.index.bucket import bucket_of_file_id, record_key_bucket_ids
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write import bucket_layout
from tests.support.tables import assert_table_matches, read_both

BASE = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
}
BUCKET2 = {**BASE, "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}
LAYOUT_KEYS = ("hoodie.index.type", "hoodie.bucket.index.num.buckets", "hoodie.bucket.index.hash.field")
TABLE_TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]


def rows(ids, ts: int) -> list[dict]:
    return [{"id": f"k{i}", "x": f"x{i % 3}", "p": f"p{i % 2}", "ts": ts, "v": i * 10 + ts} for i in ids]


class Table:
    """A table at `path` and its model: (partition, key) -> the row, under upsert semantics."""

    def __init__(self, path, table_type: str = "COPY_ON_WRITE"):
        self.path = str(path)
        self.table_type = table_type
        self.model: dict[tuple[str, str], dict] = {}

    def write(self, batch: list[dict], options: dict, mode: str = "append") -> None:
        opts = {**options, "hoodie.datasource.write.table.type": self.table_type}
        hoodie_sink.write(pa.Table.from_pylist(batch), self.path, opts, mode=mode)
        for r in batch:
            self.model[(r["p"], r["id"])] = r

    def check(self) -> None:
        assert_table_matches(self.path, list(self.model.values()))

    def properties(self) -> dict[str, str]:
        return parse_properties(read_properties_text(Storage(self.path))[0])

    def forget_layout(self) -> None:
        """hoodie.properties as Apache Hudi (or hoodie_sink before the fix) leaves it: no layout."""
        storage = Storage(self.path)
        text, _ = read_properties_text(storage)
        kept = [line for line in text.splitlines() if line_key(line) not in LAYOUT_KEYS]
        storage.write_atomic(PROPERTIES_FILE, ("\n".join(kept) + "\n").encode())


def assert_keys_in_their_buckets(path, num_buckets: int, fields: list[str]) -> None:
    """Every stored key lies in the file group of its hash bucket, one file group per bucket."""
    theirs, _ = read_both(path)
    files = theirs.column("_hoodie_file_name").to_pylist()
    got = [bucket_of_file_id(f.split("_")[0].lstrip(".")) for f in files]
    want = record_key_bucket_ids(theirs.column("_hoodie_record_key"), fields, num_buckets).tolist()
    assert got == want
    parts = theirs.column("_hoodie_partition_path").to_pylist()
    per_bucket: dict[tuple[str, int], set[str]] = {}
    for part, bucket, name in zip(parts, got, files, strict=True):
        per_bucket.setdefault((part, bucket), set()).add(name.split("_")[0])
    assert all(len(fids) == 1 for fids in per_bucket.values()), per_bucket


# -- the layout is recorded ---------------------------------------------------------------------
def test_a_bucket_table_records_its_layout(tmp_path):
    t = Table(tmp_path / "t")
    t.write(rows(range(10), 1), {**BUCKET2, "hoodie.bucket.index.hash.field": "id"})
    props = t.properties()
    assert {k: props.get(k) for k in LAYOUT_KEYS} == {
        "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2", "hoodie.bucket.index.hash.field": "id"
    }  # fmt: skip
    # no hash field named: the record key fields, as Java resolves it
    u = Table(tmp_path / "u")
    u.write(rows(range(10), 1), {**BUCKET2, "hoodie.datasource.write.recordkey.field": "id,x"})
    assert u.properties()["hoodie.bucket.index.hash.field"] == "id,x"
    # the other indexes record nothing: any index may follow them
    b = Table(tmp_path / "b")
    b.write(rows(range(10), 1), BASE)
    assert not set(LAYOUT_KEYS) & set(b.properties())


# -- later writes: unset settings come from the table, contradicting ones are refused ------------
@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_an_upsert_with_another_bucket_count_is_refused(tmp_path, table_type):
    """2 buckets, then num.buckets=7: the 20 keys were inserted again (36 rows)."""
    t = Table(tmp_path / "t", table_type)
    t.write(rows(range(20), 1), BUCKET2)
    with pytest.raises(
        HoodieConfigError, match=r"'hoodie.bucket.index.num.buckets'='7' contradicts .* says '2'"
    ):
        t.write(rows(range(20), 2), {**BUCKET2, "hoodie.bucket.index.num.buckets": "7"})
    t.model = {k: r for k, r in t.model.items() if r["ts"] == 1}
    t.check()


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_an_upsert_without_bucket_options_uses_the_tables_layout(tmp_path, table_type):
    """2 buckets, then upserts naming no num.buckets (29 rows: the default 4 buckets), or no index
    at all (the default BLOOM packed new keys into bucket file groups, which BUCKET writes then
    inserted again)."""
    t = Table(tmp_path / "t", table_type)
    t.write(rows(range(20), 1), BUCKET2)
    no_count = {k: v for k, v in BUCKET2.items() if k != "hoodie.bucket.index.num.buckets"}
    t.write(rows(range(10, 30), 2), no_count)
    t.check()
    t.write(rows(range(25, 35), 3), BASE)  # no index option: the table's BUCKET layout
    t.check()
    t.write(rows(range(0, 40, 3), 4), BUCKET2)
    t.check()
    assert_keys_in_their_buckets(t.path, 2, ["id"])


def test_an_upsert_with_other_hash_fields_is_refused(tmp_path):
    """Hashed on id,x, then hash.field=id: the 20 keys were inserted again (40 rows)."""
    opts = {
        **BUCKET2,
        "hoodie.datasource.write.recordkey.field": "id,x",
        "hoodie.bucket.index.hash.field": "id,x",
    }
    t = Table(tmp_path / "t")
    t.write(rows(range(20), 1), opts)
    with pytest.raises(
        HoodieConfigError, match=r"'hoodie.bucket.index.hash.field'='id' contradicts .* says 'id,x'"
    ):
        t.write(rows(range(20), 2), {**opts, "hoodie.bucket.index.hash.field": "id"})
    t.check()
    # the same fields in another order hash alike (Hudi takes the values in record-key order)
    t.write(rows(range(10, 25), 3), {**opts, "hoodie.bucket.index.hash.field": "x,id"})
    t.check()
    assert_keys_in_their_buckets(t.path, 2, ["id", "x"])


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_another_index_type_is_refused_both_ways(tmp_path, table_type):
    t = Table(tmp_path / "t", table_type)
    t.write(rows(range(25), 1), BUCKET2)
    for index in ("BLOOM", "GLOBAL_BLOOM"):
        with pytest.raises(
            HoodieConfigError, match=rf"'hoodie.index.type'='{index}' contradicts .* says 'BUCKET'"
        ):
            t.write(rows(range(20, 30), 2), {**BASE, "hoodie.index.type": index})
    t.check()
    # a table written with the default index, then BUCKET: its file groups are no hash buckets
    b = Table(tmp_path / "b", table_type)
    b.write(rows(range(25), 1), BASE)
    # a random file ID starts with 8 digits 2.3% of the time (then it reads as a bucket beyond the count)
    with pytest.raises(
        (HoodieTableError, HoodieConfigError), match="is not in a hash bucket|written with another"
    ):
        b.write(rows(range(25), 2), BUCKET2)
    b.check()


@pytest.mark.parametrize("operation", ["insert_overwrite", "insert_overwrite_table", "mode_overwrite"])
def test_overwrites_of_a_bucket_table_are_refused(tmp_path, operation):
    """insert_overwrite(_table) wrote file groups outside the hash buckets: every later BUCKET upsert
    failed.  Refused, whether the write names the BUCKET index or the table records it."""
    t = Table(tmp_path / "t")
    t.write(rows(range(20), 1), BUCKET2)
    mode = "overwrite" if operation == "mode_overwrite" else "append"
    op = {} if operation == "mode_overwrite" else {"hoodie.datasource.write.operation": operation}
    for opts in ({**BUCKET2, **op}, {**BASE, **op}):
        with pytest.raises(HoodieConfigError, match=r"insert_overwrite.* hash buckets"):
            t.write(rows(range(5), 2), opts, mode=mode)
    t.write(rows(range(10, 30), 3), BASE)
    t.write(rows(range(0, 30, 2), 4), BUCKET2)
    t.check()
    assert_keys_in_their_buckets(t.path, 2, ["id"])


def test_inserts_into_a_table_recording_bucket_are_refused(tmp_path):
    t = Table(tmp_path / "t")
    t.write(rows(range(20), 1), BUCKET2)
    for op in ("insert", "bulk_insert", "append"):
        with pytest.raises(HoodieConfigError, match=rf"'{op}' is not supported on the table .* records"):
            t.write(rows(range(20, 25), 2), {**BASE, "hoodie.datasource.write.operation": op})
    t.check()


def test_clustering_a_table_recording_bucket_is_refused(tmp_path):
    t = Table(tmp_path / "t")
    t.write(rows(range(20), 1), BUCKET2)
    with pytest.raises(HoodieConfigError, match="Clustering with 'hoodie.index.type'='BUCKET'"):
        hoodie_sink.cluster(t.path, {**BASE, "hoodie.clustering.plan.strategy.small.file.limit": str(10**9)})
    t.check()


# -- tables that do not record the layout (Java's; ours before the fix) ---------------------------
@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_an_unrecorded_layout_is_checked_against_the_stored_keys(tmp_path, table_type):
    t = Table(tmp_path / "t", table_type)
    t.write(rows(range(20), 1), BUCKET2)
    t.write(rows(range(10, 30), 2), BUCKET2)
    t.forget_layout()
    # no count named: the default 4 does not hash the stored keys to their buckets
    no_count = {k: v for k, v in BUCKET2.items() if k != "hoodie.bucket.index.num.buckets"}
    with pytest.raises(HoodieConfigError, match=r"'hoodie.bucket.index.num.buckets'='4' .* do not match"):
        t.write(rows(range(20), 3), no_count)
    with pytest.raises(HoodieConfigError, match="do not match"):
        t.write(rows(range(20), 3), {**BUCKET2, "hoodie.bucket.index.num.buckets": "7"})
    t.check()
    assert not set(LAYOUT_KEYS) & set(t.properties())
    # the table's own settings fit every stored key: accepted, and recorded for later writes
    t.write(rows(range(25, 35), 4), BUCKET2)
    assert t.properties()["hoodie.bucket.index.num.buckets"] == "2"
    t.write(rows(range(0, 40, 3), 5), BASE)
    t.check()
    assert_keys_in_their_buckets(t.path, 2, ["id"])


def test_unrecorded_hash_fields_are_checked_against_the_stored_keys(tmp_path):
    opts = {
        **BUCKET2,
        "hoodie.datasource.write.recordkey.field": "id,x",
        "hoodie.bucket.index.hash.field": "id,x",
    }
    t = Table(tmp_path / "t")
    t.write(rows(range(20), 1), opts)
    t.forget_layout()
    with pytest.raises(HoodieConfigError, match=r"'hoodie.bucket.index.hash.field'='id' do not match"):
        t.write(rows(range(20), 2), {**opts, "hoodie.bucket.index.hash.field": "id"})
    t.write(rows(range(10, 30), 3), {k: v for k, v in opts.items() if k != "hoodie.bucket.index.hash.field"})
    assert t.properties()["hoodie.bucket.index.hash.field"] == "id,x"
    t.check()


def test_an_unrecorded_table_without_data_takes_the_writes_layout(tmp_path):
    t = Table(tmp_path / "t")
    t.write(rows(range(4), 1), BUCKET2)
    t.write(rows(range(4), 2), {**BUCKET2, "hoodie.datasource.write.operation": "delete"})
    t.model.clear()
    t.forget_layout()
    t.write(rows(range(10), 3), {**BUCKET2, "hoodie.bucket.index.num.buckets": "3"})
    assert t.properties()["hoodie.bucket.index.num.buckets"] == "3"
    t.check()


@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_a_large_unrecorded_table_is_checked_by_record_bucket_layout_not_by_the_write(
    tmp_path, table_type, monkeypatch
):
    """Beyond DRIVER_CHECK_MAX_BYTES of stored files, a BUCKET write does not read every stored key in
    its own process: it is refused before anything is written and names record_bucket_layout, which
    checks per file group (here in-process; tests/spark/test_bucket_layout.py runs it as a Spark job)
    and records the layout; then the write goes through."""
    monkeypatch.setattr(bucket_layout, "DRIVER_CHECK_MAX_BYTES", 1)
    t = Table(tmp_path / "t", table_type)
    t.write(rows(range(20), 1), BUCKET2)
    t.write(rows(range(10, 30), 2), BUCKET2)
    t.forget_layout()
    with pytest.raises(
        HoodieTableError, match=r"hoodie_sink.record_bucket_layout\(path, options, spark=spark\)"
    ):
        t.write(rows(range(20), 3), BUCKET2)
    t.check()
    opts = {**BUCKET2, "hoodie.datasource.write.table.type": table_type}
    with pytest.raises(HoodieConfigError, match=r"'hoodie.bucket.index.num.buckets'='3' .* do not match"):
        hoodie_sink.record_bucket_layout(t.path, {**opts, "hoodie.bucket.index.num.buckets": "3"})
    assert not set(LAYOUT_KEYS) & set(t.properties())
    with pytest.raises(HoodieConfigError, match="'hoodie.index.type'='BUCKET'"):
        hoodie_sink.record_bucket_layout(t.path, BASE)
    hoodie_sink.record_bucket_layout(t.path, opts)
    assert t.properties()["hoodie.bucket.index.num.buckets"] == "2"
    t.write(rows(range(20), 3), BUCKET2)
    t.check()
    assert_keys_in_their_buckets(t.path, 2, ["id"])
