"""PartialUpdateAvroPayload (Hudi 0.15; docs/hudi/partial-update.md) against a model of its
semantics, on copy-on-write and merge-on-read tables: random upserts with duplicate keys in a batch,
ties and late records on the ordering field, null and missing columns, the delete operation;
then merge-on-read compaction and the change feed.  Every table is read back with our reader and,
where it reads such tables, hudi-rs.

The model folds a key's records as Java does, one pair at a time in arrival order: the older record
wins only with a strictly greater ordering value, and the winner's null columns take the other's
values.  Merge-on-read is modelled by file slice: the logs fold among themselves, then against the
base row; a file group our writer rewrites (or compaction rewrites) gets the merged state as its
base.  So the model tracks which file groups each commit rewrote, as its files show.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieCommitError, HoodieConfigError, HoodieSchemaError
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.cdc import read_cdc
from hoodie_sink.table.write import coordinator, write_path
from hoodie_sink.table.write.context import TaskIdentity
from tests.support.tables import hudi_rs_read

PARTIAL = "org.apache.hudi.common.model.PartialUpdateAvroPayload"
SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("a", pa.string()),
                    ("b", pa.int64()), ("c", pa.float64())])  # fmt: skip
DATA = SCHEMA.names
OPTIONAL = ("a", "b", "c")  # the columns a batch may leave out (null)
DELETE = "DELETE"


def options(table_type: str) -> dict[str, str]:
    return {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.payload.class": PARTIAL,
        "hoodie.index.type": "BLOOM",
        # inserts open new file groups, so updates of stored keys go to logs in merge-on-read
        "hoodie.parquet.small.file.limit": "0",
        "hoodie.compact.inline": "false",
    }


# -- the model --------------------------------------------------------------------------------


def step(older: dict, newer: dict) -> dict:
    """PartialUpdateAvroPayload on two records of a key (preCombine and combineAndGetUpdateValue
    alike): the older wins only with a strictly greater ordering value; the winner's nulls are filled."""
    older_first = older["ts"] is not None and older["ts"] > newer["ts"]
    win, lose = (older, newer) if older_first else (newer, older)
    return {c: win[c] if win[c] is not None else lose[c] for c in DATA}


def fold(records: list) -> dict | str | None:
    """A key's records (data dicts or DELETE) in arrival order, folded: a delete ends what came
    before it, a record after a delete starts afresh (Java: natural order for delete records)."""
    acc: dict | str | None = None
    for r in records:
        acc = r if (acc is None or acc == DELETE or r == DELETE) else step(acc, r)
    return acc


def reduce_batch(rows: list[dict]) -> dict[str, dict | str]:
    by_key: dict[str, list] = {}
    for r in rows:
        by_key.setdefault(r["id"], []).append(r if r.get("_op") != DELETE else DELETE)
    return fold_each(by_key)


def fold_each(by_key: dict[str, list]) -> dict:
    """Each key's records folded into one (none of them folds to nothing)."""
    out = {}
    for k, recs in by_key.items():
        folded = fold(recs)
        assert folded is not None
        out[k] = folded
    return out


class Model:
    """Per key: its base row (or None), its log records, its file group."""

    def __init__(self):
        self.base: dict[str, dict | None] = {}
        self.logs: dict[str, list] = {}
        self.fid: dict[str, str] = {}
        self.logged = 0  # records that went to a log (merge-on-read)

    def read(self, k: str) -> dict | None:
        logs = fold(self.logs.get(k, []))
        base = self.base.get(k)
        if logs is None:
            return base
        if logs == DELETE:
            return None
        assert isinstance(logs, dict)
        return step(base, logs) if base is not None else logs

    def rows(self) -> dict[str, dict]:
        out = {}
        for k in set(self.base) | set(self.logs):
            r = self.read(k)
            if r is not None:
                out[k] = r
        return out

    def settle(self, fids: set[str]) -> None:
        """File groups rewritten: their keys' merged state becomes their base."""
        for k in [k for k, f in self.fid.items() if f in fids]:
            self.base[k], self.logs[k] = self.read(k), []

    def apply(self, batch: dict[str, dict | str], rewritten: set[str], mor: bool) -> None:
        self.settle(rewritten)
        for k, rec in batch.items():
            current = self.read(k)
            in_log = mor and current is not None and self.fid.get(k) not in rewritten
            if in_log:
                self.logs.setdefault(k, []).append(rec)
                self.logged += 1
            elif rec == DELETE:
                self.base[k], self.logs[k] = None, []
            else:
                assert isinstance(rec, dict)
                self.base[k] = step(current, rec) if current is not None else rec
                self.logs[k] = []


# -- the table ----------------------------------------------------------------------------------


def base_files(path: Path) -> set[tuple[str, str]]:
    """(file id, instant) of every base file."""
    out = set()
    for _, _, files in os.walk(path):
        for f in files:
            if f.endswith(".parquet") and not f.startswith("."):
                stem = f[: -len(".parquet")]
                out.add((stem.split("_")[0], stem.rsplit("_", 1)[1]))
    return out


def latest_instant(path: Path) -> str:
    names = os.listdir(path / ".hoodie")
    done = [n.split(".")[0] for n in names if n.endswith((".commit", ".deltacommit", ".replacecommit"))]
    return max(done)


def has_logs(path: Path) -> bool:
    return any(f.startswith(".") and ".log." in f for _, _, files in os.walk(path) for f in files)


def ours(path: Path) -> pa.Table:
    return hoodie_sink.read(str(path))


def data_of(table: pa.Table) -> dict[str, dict]:
    return {r["id"]: {c: r[c] for c in DATA} for r in table.select(DATA).to_pylist()}


def file_ids(table: pa.Table) -> dict[str, str]:
    names = table.column("_hoodie_file_name").to_pylist()
    return {
        k: n.lstrip(".").split("_")[0] for k, n in zip(table.column("id").to_pylist(), names, strict=True)
    }


def batch_rows(rng: random.Random, keys: list[str], n: int) -> tuple[list[dict], list[str]]:
    """Upserts with duplicate keys, ties and late ordering values, nulls; some columns left out."""
    rows = []
    for _ in range(n):
        k = rng.choice(keys)
        row = {"id": k, "p": f"p{int(k[1:]) % 2}", "ts": rng.randrange(0, 12)}
        row["a"] = None if rng.random() < 0.4 else f"a{rng.randrange(100)}"
        row["b"] = None if rng.random() < 0.4 else rng.randrange(1000)
        row["c"] = None if rng.random() < 0.4 else rng.random()
        rows.append(row)
    missing = [c for c in OPTIONAL if rng.random() < 0.25]
    for r in rows:
        for c in missing:
            r[c] = None
    return rows, missing


def write(path: Path, opts: dict, rows: list[dict], missing: list[str], operation: str = "upsert") -> None:
    schema = pa.schema([f for f in SCHEMA if f.name not in missing])
    table = pa.Table.from_pylist([{c: r[c] for c in schema.names} for r in rows], schema=schema)
    hoodie_sink.write(table, str(path), {**opts, "hoodie.datasource.write.operation": operation})


INDEXES = {
    "BLOOM": {},
    "BUCKET": {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "3"},
    # a global index that keeps keys where they are stored (our keys never change partition)
    "RECORD_INDEX": {"hoodie.index.type": "RECORD_INDEX", "hoodie.metadata.record.index.enable": "true"},
}


def run_sequence(
    path: Path,
    table_type: str,
    seed: int,
    rounds: int = 6,
    compact_every: int = 0,
    index: str = "BLOOM",
    writer=write,
    one_per_key: bool = False,
):
    """Random writes (and compactions), the table checked against the model after each; yields
    (instant, the model's rows before, after, the keys written).  `writer`: how a batch is written
    (`write`'s arguments); `one_per_key`: a key once per batch (a writer whose tasks' order is
    Spark's, not the model's)."""
    rng = random.Random(seed)
    mor = table_type == "MERGE_ON_READ"
    opts = {**options(table_type), **INDEXES[index]}
    model = Model()
    keys = [f"k{i}" for i in range(24)]
    seen = base_files(path) if path.exists() else set()
    for r in range(rounds):
        before = model.rows()
        if r % 4 == 3 and before:
            victims = rng.sample(sorted(before) + ["k99"], min(len(before), 5))
            rows = [{"id": k, "p": f"p{int(k[1:]) % 2}", "_op": DELETE} for k in victims]
            schema_missing = ["ts", *OPTIONAL]
            writer(
                path,
                opts,
                [{**r, **dict.fromkeys(["ts", *OPTIONAL])} for r in rows],
                schema_missing,
                "delete",
            )
        else:
            rows, missing = batch_rows(rng, keys, rng.randrange(10, 40))
            if one_per_key:
                rows = list({row["id"]: row for row in rows}.values())
            writer(path, opts, rows, missing if r else [])  # the first write sets the schema
        instant = latest_instant(path)
        now = base_files(path)
        rewritten = {fid for fid, inst in now - seen if inst == instant}
        seen = now
        model.apply(reduce_batch(rows), rewritten, mor)
        table = ours(path)
        model.fid.update(file_ids(table))
        assert data_of(table) == model.rows(), f"round {r}"
        yield instant, before, model.rows(), {row["id"] for row in rows}
        if mor and compact_every and r % compact_every == compact_every - 1:
            hoodie_sink.compact(str(path), opts)
            now = base_files(path)
            model.settle({fid for fid, _ in now - seen})
            seen = now
            assert data_of(ours(path)) == model.rows(), f"round {r}, after compaction"
    assert model.logged or not mor, "no log record: the merge-on-read folds went untested"
    check_hudi_rs(path, model, mor)


def check_hudi_rs(path: Path, model: Model, mor: bool) -> None:
    """hudi-rs 0.5.0 reads base files as they are (copy-on-write, or a merge-on-read table whose slices
    have no logs), and refuses a merge-on-read slice with logs under this payload (docs/hudi/partial-update.md)."""
    if mor and any(model.logs.values()):
        with pytest.raises(Exception, match="merger of its own"):
            hudi_rs_read(path)
        return
    assert data_of(hudi_rs_read(path)) == model.rows()


# -- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_random_sequences_match_the_payload(tmp_path, table_type, seed):
    for _ in run_sequence(tmp_path / "t", table_type, seed):
        pass


@pytest.mark.parametrize("index", ["BUCKET", "RECORD_INDEX"])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_random_sequences_under_other_indexes(tmp_path, table_type, index):
    for _ in run_sequence(tmp_path / "t", table_type, 40, index=index):
        pass


@pytest.mark.parametrize("seed", range(3))
def test_mor_compaction_keeps_the_merged_records(tmp_path, seed):
    path = tmp_path / "t"
    for _ in run_sequence(path, "MERGE_ON_READ", 100 + seed, rounds=7, compact_every=3):
        pass
    hoodie_sink.compact(str(path), options("MERGE_ON_READ"))
    # every slice compacted: hudi-rs reads the base files, and agrees
    assert data_of(hudi_rs_read(path)) == data_of(ours(path))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_change_feed_shows_the_merged_after_image(tmp_path, table_type):
    path = tmp_path / "t"
    previous = None
    for instant, before, after, written in run_sequence(path, table_type, 7, rounds=5):
        if previous is not None:
            changes = read_cdc(str(path), previous, instant).to_pylist()
            want = {}
            for k in written:
                if k in after and k not in before:
                    want[k] = ("i", after[k])
                elif k in after and after[k] != before[k]:
                    want[k] = ("u", after[k])
                elif k in after:
                    want[k] = ("u", after[k])  # rewritten with the same values: still an update
                elif k in before:
                    want[k] = ("d", None)
            got = {}
            for c in changes:
                image = json.loads(c["after"]) if c["after"] else None
                got[(image or json.loads(c["before"]))["id"]] = (
                    c["op"],
                    image and {k: image[k] for k in DATA},
                )
            assert got == want, instant
        previous = instant


def test_missing_columns_keep_the_stored_values(tmp_path):
    path = tmp_path / "t"
    opts = options("COPY_ON_WRITE")
    write(path, opts, [{"id": "k1", "p": "p1", "ts": 1, "a": "x", "b": 1, "c": 1.5}], [])
    write(path, opts, [{"id": "k1", "p": "p1", "ts": 2, "a": None, "b": 7, "c": None}], ["a", "c"])
    assert data_of(ours(path)) == {"k1": {"id": "k1", "p": "p1", "ts": 2, "a": "x", "b": 7, "c": 1.5}}


def test_soft_deletes_are_refused(tmp_path):
    table = pa.table({"id": ["k1"], "p": ["p1"], "ts": [1], "_hoodie_is_deleted": [False]})
    with pytest.raises(HoodieSchemaError, match="_hoodie_is_deleted"):
        hoodie_sink.write(table, str(tmp_path / "t"), options("COPY_ON_WRITE"))


def test_a_global_index_moving_keys_is_refused(tmp_path):
    opts = {**options("COPY_ON_WRITE"), "hoodie.index.type": "GLOBAL_BLOOM"}
    table = pa.table({"id": ["k1"], "p": ["p1"], "ts": [1]})
    with pytest.raises(HoodieConfigError, match="update.partition.path"):
        hoodie_sink.write(table, str(tmp_path / "t"), opts)
    opts["hoodie.bloom.index.update.partition.path"] = "false"
    hoodie_sink.write(table, str(tmp_path / "t"), opts)


def reduce_by_task(shards: list[list[dict]]) -> dict[str, dict | str]:
    """A write's records folded per task, then the tasks' results in task order: Spark's
    reduceByKey in Java's de-duplication folds within each partition, then across them
    (docs/hudi/partial-update.md#what-hoodie_sink-does)."""
    per_task: dict[str, list] = {}
    for rows in shards:
        for k, rec in reduce_batch(rows).items():
            per_task.setdefault(k, []).append(rec)
    return fold_each(per_task)


def write_tasks(path: Path, opts: dict, shards: list[list[dict]], missing: list[str]):
    """One upsert written by len(shards) simulated tasks, task i receiving shards[i] in batches of 5."""
    schema = pa.schema([f for f in SCHEMA if f.name not in missing])
    cfg = WriteConfig.from_options({**opts, "hoodie.datasource.write.operation": "upsert"}, path=str(path))
    ctx = coordinator.begin(cfg, schema)
    results = []
    for pid, rows in enumerate(shards):
        batches = [pa.RecordBatch.from_pylist([{c: r[c] for c in schema.names} for r in rows[i : i + 5]],
                                              schema=schema) for i in range(0, len(rows), 5)]  # fmt: skip
        results.append(write_path.write_task(ctx, TaskIdentity(pid, 5, 100 + pid, only_task=len(shards) == 1),
                                             batches))  # fmt: skip
    return write_path.complete(ctx, results)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_key_updated_by_several_tasks_folds_in_arrival_order(tmp_path, table_type, seed):
    """The records of one key in several tasks of a write: each task folds its own, and file
    groups two tasks changed are merged again at commit from the tasks' results, in task order."""
    rng = random.Random(500 + seed)
    path, opts, model = tmp_path / "t", options(table_type), Model()
    keys = [f"k{i}" for i in range(16)]
    first = [{"id": k, "p": f"p{int(k[1:]) % 2}", "ts": 5, "a": "a", "b": 1, "c": None} for k in keys]
    write(path, opts, first, [])
    model.apply(reduce_batch(first), set(), False)
    seen = base_files(path)
    model.fid.update(file_ids(ours(path)))
    for r in range(4):
        rows, missing = batch_rows(rng, keys, 30)
        n = rng.randrange(2, 4)
        shards: list[list[dict]] = [[] for _ in range(n)]
        for row in rows:
            shards[rng.randrange(n)].append(row)
        write_tasks(path, opts, shards, missing)
        instant, now = latest_instant(path), base_files(path)
        rewritten = {fid for fid, inst in now - seen if inst == instant}
        seen = now
        model.apply(reduce_by_task(shards), rewritten, table_type == "MERGE_ON_READ")
        table = ours(path)
        model.fid.update(file_ids(table))
        assert data_of(table) == model.rows(), f"round {r}"
    check_hudi_rs(path, model, table_type == "MERGE_ON_READ")


def test_a_new_key_inserted_by_two_tasks_is_refused(tmp_path):
    path, opts = tmp_path / "t", options("COPY_ON_WRITE")
    write(path, opts, [{"id": "k1", "p": "p1", "ts": 1, "a": "x", "b": 1, "c": 1.0}], [])
    row = {"id": "k3", "p": "p1", "ts": 1, "a": None, "b": 2, "c": None}
    with pytest.raises(HoodieCommitError, match="more than one task"):
        write_tasks(path, opts, [[row], [{**row, "a": "y", "b": None}]], [])
    assert set(data_of(ours(path))) == {"k1"}


def test_hudi_rs_reads_merge_on_read_logs_whole(tmp_path):
    """The limit docs/hudi/partial-update.md states: hudi-rs 0.5.0's default reader refuses a slice
    with logs of this payload, and its older reader (hoodie.read.file.group.reader.version=1) reads
    the log record whole, a null column as null, where Java and we keep the stored value."""
    from hudi import HudiTableBuilder

    path, opts = tmp_path / "t", options("MERGE_ON_READ")
    write(path, opts, [{"id": "k1", "p": "p1", "ts": 1, "a": "x", "b": 1, "c": 1.5}], [])
    write(path, opts, [{"id": "k1", "p": "p1", "ts": 2, "a": None, "b": 7, "c": None}], [])
    assert has_logs(path)
    merged = {"k1": {"id": "k1", "p": "p1", "ts": 2, "a": "x", "b": 7, "c": 1.5}}
    assert data_of(ours(path)) == merged
    with pytest.raises(Exception, match="merger of its own"):
        hudi_rs_read(path)
    v1 = HudiTableBuilder.from_base_uri(str(path)).with_option("hoodie.read.file.group.reader.version", "1")
    whole = data_of(pa.Table.from_batches(v1.build().read()))
    assert whole == {"k1": {"id": "k1", "p": "p1", "ts": 2, "a": None, "b": 7, "c": None}}
    hoodie_sink.compact(str(path), opts)
    assert data_of(hudi_rs_read(path)) == merged
