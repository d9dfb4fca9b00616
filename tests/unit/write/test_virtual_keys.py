"""Virtual keys (hoodie.populate.meta.fields=false, issue 10): tables whose base files hold null meta
columns, as Apache Hudi 0.15 writes them (hoodie_sink/table/format/virtual_keys.py): written,
read, indexed and upserted with keys computed from the record key fields."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.keygen import KeyGenConfig, KeyGenerator
from hoodie_sink.table.format.properties import read_table_config
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.index.key_index import KeyIndex, clear_caches
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.snapshot import Snapshot
from hoodie_sink.table.services.clustering import run as run_clustering
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write import upsert_task
from tests.support.keyed_model import (
    VARIANTS,
    BatchGenerator,
    KeyedModel,
    next_batch,
    options_for,
)
from tests.support.tables import assert_table_matches, hudi_rs_read
from tests.unit.write.test_keyed_model import arrival_order, shard, write_shards

VIRTUAL = {"hoodie.populate.meta.fields": "false"}
OPTS = {
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    **VIRTUAL,
}


def rows(ids, cities, ts):
    return pa.table({"id": ids, "city": cities, "ts": ts, "v": [float(t) for t in ts]})


def base_files(path) -> list:
    snap = Snapshot.open(str(path))
    return snap.base_files()


def file_ids(path) -> set[str]:
    return {bf.file_id for bf in base_files(path)}


def assert_java_layout(path) -> None:
    """Every latest base file as Java writes a virtual-key table's: the five meta columns, null
    but the file name; a footer with the Avro schema and no bloom filter or key range."""
    storage = Storage(str(path))
    for bf in base_files(path):
        with storage.open_input_file(bf.path) as f:
            pf = pq.ParquetFile(f)
            t = pf.read()
            footer = set(pf.metadata.metadata)
        assert t.column_names[:5] == list(META_COLUMNS)
        for name in META_COLUMNS[:4]:
            assert t.column(name).null_count == t.num_rows, f"{name} of {bf.path} is not null"
        # (<=: a merge that deleted every row leaves an empty file)
        assert set(t.column("_hoodie_file_name").to_pylist()) <= {bf.path.rsplit("/", 1)[-1]}
        assert t.column("_hoodie_file_name").null_count == 0
        assert footer == {b"parquet.avro.schema", b"writer.model.name"}, footer


def locations(path, key="id") -> list[tuple[str, str]]:
    """(record key, partition path of the file holding it), from the files themselves."""
    storage = Storage(str(path))
    out = []
    for bf in base_files(path):
        with storage.open_input_file(bf.path) as f:
            out += [(k, bf.partition_path) for k in pq.read_table(f, columns=[key]).column(0).to_pylist()]
    return sorted(out)


# -- write -------------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", ["bulk_insert", "insert", "upsert", "append"])
def test_every_operation_writes_base_files_as_java_does(tmp_path, operation):
    path = tmp_path / "t"
    write = {**OPTS, "hoodie.datasource.write.operation": operation}
    hoodie_sink.write(rows(["a", "b", "c"], ["sf", "sf", "la"], [1, 2, 3]), str(path), write)
    hoodie_sink.write(rows(["d", "b"], ["la", "sf"], [4, 5]), str(path), write)
    assert read_table_config(Storage(str(path))).populate_meta_fields is False
    assert_java_layout(path)
    theirs = hudi_rs_read(path)
    ours = hoodie_sink.read(str(path))
    # Java's and hudi-rs's readers return no meta columns for such a table; neither do we
    assert ours.column_names == theirs.column_names == ["id", "city", "ts", "v"]
    keyed = operation == "upsert"
    want = {("a", 1), ("b", 5), ("c", 3), ("d", 4)} | (set() if keyed else {("b", 2)})
    got = ours.select(["id", "ts"]).to_pylist()
    assert sorted((r["id"], r["ts"]) for r in got) == sorted(want)


def test_upsert_and_delete_update_file_groups_in_place(tmp_path):
    """The index finds keys in files whose _hoodie_record_key is null: an upsert and a delete
    rewrite the file group holding the key (same file id), no duplicate appears."""
    path = tmp_path / "t"
    hoodie_sink.write(rows(["a", "b", "c"], ["sf", "sf", "la"], [1, 2, 3]), str(path),
                      {**OPTS, "hoodie.datasource.write.operation": "bulk_insert"})  # fmt: skip
    before = file_ids(path)
    # the later write leaves the table-level option unset: it comes from hoodie.properties
    hoodie_sink.write(
        rows(["b", "c"], ["sf", "la"], [20, 30]), str(path), {"hoodie.datasource.write.recordkey.field": "id"}
    )
    hoodie_sink.write(
        rows(["a"], ["sf"], [0]), str(path), {**OPTS, "hoodie.datasource.write.operation": "delete"}
    )
    assert file_ids(path) == before
    assert_table_matches(path, [{"id": "b", "city": "sf", "ts": 20, "v": 2.0 * 10},
                                {"id": "c", "city": "la", "ts": 30, "v": 30.0}])  # fmt: skip
    assert_java_layout(path)


# The record index reads the stored record keys, so virtual-key tables refuse it (see
# test_record_index_is_refused_with_virtual_keys); every other variant runs.
VIRTUAL_VARIANTS = [(i, m) for i, m in VARIANTS if i != "record_index"]


def test_record_index_is_refused_with_virtual_keys(tmp_path):
    options = {**options_for("record_index", True), **VIRTUAL}
    with pytest.raises(HoodieConfigError, match=r"hoodie\.populate\.meta\.fields=false"):
        WriteConfig.from_options(options, str(tmp_path / "t"))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(
    "index,move", VIRTUAL_VARIANTS, ids=[f"{i}{'-move' if m else ''}" for i, m in VIRTUAL_VARIANTS]
)
def test_random_keyed_writes_match_the_model(tmp_path, monkeypatch, index, move, seed):
    """Random upserts (updates, moves, late records, soft deletes, duplicates) and deletes, in
    1-4 simulated tasks, into a virtual-key table: read back (ours and hudi-rs) equals the model,
    and every key is in the file group of the partition the model stores it in."""
    rng = random.Random(2000 + seed)
    gen = BatchGenerator(seed)
    model = KeyedModel(index, move)
    path = tmp_path / "t"
    options = {**options_for(index, move), **VIRTUAL}
    options["hoodie.write.buffer.bucket.max.bytes"] = str(rng.choice([1500, 10**8]))
    monkeypatch.setattr(upsert_task, "TAG_ROWS", rng.choice([20, upsert_task.TAG_ROWS]))
    for step in range(4):
        operation = "delete" if step == 2 else "upsert"
        batch = next_batch(gen, model, rng, operation, 40, (60, 200))
        shards = shard(batch, rng.randrange(1, 5), rng)
        write_shards(path, options, shards, operation)
        model.apply(arrival_order(shards), operation)
        assert_table_matches(path, model.expected())
        assert locations(path) == model.locations()
    assert_java_layout(path)


def test_clustering_keeps_virtual_keys(tmp_path):
    path = tmp_path / "t"
    small = {**OPTS, "hoodie.datasource.write.operation": "insert", "hoodie.parquet.small.file.limit": "0"}
    for i in range(3):
        hoodie_sink.write(rows([f"k{i}"], ["sf"], [i]), str(path), small)
    assert len(base_files(path)) == 3
    result = run_clustering(
        WriteConfig.from_options(
            {**OPTS, "hoodie.clustering.plan.strategy.sort.columns": "id"}, path=str(path)
        )
    )
    assert result is not None
    assert len(base_files(path)) == 1
    assert_java_layout(path)
    assert_table_matches(path, [{"id": f"k{i}", "city": "sf", "ts": i, "v": float(i)} for i in range(3)])


# -- index -------------------------------------------------------------------------------------


def test_key_index_computes_keys_of_files_without_stored_keys(tmp_path):
    path = tmp_path / "t"
    hoodie_sink.write(rows(["a", "b", "c"], ["sf", "sf", "la"], [1, 2, 3]), str(path), OPTS)
    storage = Storage(str(path))
    files = base_files(path)
    gen = KeyGenerator(KeyGenConfig("SIMPLE", ("id",), ("city",)))
    clear_caches()
    tags = KeyIndex(storage, files, key_generator=gen).tag(
        pa.array(["b", "c", "x"]), pa.array(["sf", "la", "sf"])
    )
    by_part = {bf.partition_path: bf.file_id for bf in files}
    assert tags.file_id.to_pylist() == [by_part["sf"], by_part["la"], None]
    clear_caches()
    with pytest.raises(HoodieTableError, match="hoodie.populate.meta.fields=false"):
        KeyIndex(storage, files).tag(pa.array(["b"]), pa.array(["sf"]))


# -- options -----------------------------------------------------------------------------------


def test_a_write_contradicting_the_tables_setting_is_refused(tmp_path):
    virtual, stored = tmp_path / "v", tmp_path / "s"
    hoodie_sink.write(rows(["a"], ["sf"], [1]), str(virtual), OPTS)
    hoodie_sink.write(rows(["a"], ["sf"], [1]), str(stored), {**OPTS, "hoodie.populate.meta.fields": "true"})
    for p, value, table_says in ((virtual, "true", "false"), (stored, "false", "true")):
        with pytest.raises(HoodieConfigError) as e:
            hoodie_sink.write(
                rows(["b"], ["sf"], [2]), str(p), {**OPTS, "hoodie.populate.meta.fields": value}
            )
        assert f"'hoodie.populate.meta.fields'='{value}' contradicts" in str(e.value)
        assert f"says '{table_says}'" in str(e.value)


def test_timestamp_key_generator_is_refused_with_virtual_keys(tmp_path):
    """Java allows virtual keys with the Simple, Complex and Nonpartitioned key generators only."""
    opts = {**OPTS, "hoodie.datasource.write.keygenerator.type": "TIMESTAMP",
            "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
            "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
            "hoodie.datasource.write.partitionpath.field": "ts"}  # fmt: skip
    with pytest.raises(HoodieConfigError, match="hoodie.populate.meta.fields.*TIMESTAMP"):
        hoodie_sink.write(rows(["a"], ["sf"], [1]), str(tmp_path / "t"), opts)
    assert not (tmp_path / "t").exists()


def test_append_without_record_key_is_refused_with_virtual_keys(tmp_path):
    """Generated keys live only in _hoodie_record_key: a virtual-key table cannot hold them."""
    opts = {"hoodie.datasource.write.operation": "append", **VIRTUAL}
    with pytest.raises(HoodieConfigError, match="hoodie.populate.meta.fields.*recordkey.field"):
        hoodie_sink.write(rows(["a"], ["sf"], [1]), str(tmp_path / "t"), opts)
