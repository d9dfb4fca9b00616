"""CDC reads (the `cdc` format of incremental queries) against a model: random upserts (duplicate
keys in a batch, re-inserts of deleted keys) and deletes (of absent keys too) into COW and MOR
tables, with small-file packing, inline compaction and clustering in between; for random
(begin, end] ranges the change feed is, write by write, the model's inserts, updates and deletes
with their before and after images."""

from __future__ import annotations

import datetime as dt
import json
import math
import pickle
import random
from decimal import Decimal

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.timeline.instant import WRITE_ACTIONS
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline, Timeline
from hoodie_sink.table.read.cdc import (
    CDC_SCHEMA,
    json_images,
    plan_cdc,
    read_cdc,
    read_cdc_instant,
    read_cdc_task,
)
from hoodie_sink.table.read.retention import oldest_readable_instant
from hoodie_sink.table.read.snapshot import Snapshot
from hoodie_sink.table.storage import Storage
from tests.unit.read.test_incremental import OPTS, completed

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
SCHEMA = pa.schema([("id", pa.string()), ("part", pa.string()), ("ts", pa.int64()), ("v", pa.int64()),
                    ("s", pa.string()), ("f", pa.float64()), ("ok", pa.bool_()),
                    ("at", pa.timestamp("us", tz="UTC"))])  # fmt: skip
# strings that need JSON escaping, and floats JSON has no literal for
TEXTS = [
    'say "hi"',
    "back\\slash",
    "line\nbreak\ttab\r",
    "bell\x07 nul\x00 esc\x1b",
    "ünï ✓ 🚀",
    "",
    None,
    "plain",
]
FLOATS = [1.5, 2.0, -0.25, 1e20, float("nan"), float("inf"), float("-inf"), None]


def image(row: dict | None) -> dict | None:
    """A model row as its CDC image reads back: timestamps as epoch micros, non-finite floats as
    strings."""
    if row is None:
        return None
    out = dict(row)
    out["at"] = (row["at"] - EPOCH) // dt.timedelta(microseconds=1)
    f = row["f"]
    if f is not None and not math.isfinite(f):
        out["f"] = "NaN" if math.isnan(f) else ("Infinity" if f > 0 else "-Infinity")
    return out


class Model:
    """The table's records, and the changes each write made: instant -> [(op, before, after)]."""

    def __init__(self):
        self.rows: dict[str, dict] = {}
        self.deleted: set[str] = set()
        self.changes: dict[str, list[tuple[str, dict | None, dict | None]]] = {}

    def upsert(self, batch: list[dict]) -> list[tuple[str, dict | None, dict | None]]:
        winners: dict[str, dict] = {}
        for r in batch:  # ordering values are unique in a batch: the highest wins
            if r["id"] not in winners or r["ts"] > winners[r["id"]]["ts"]:
                winners[r["id"]] = r
        out = []
        for key, row in winners.items():
            old = self.rows.get(key)
            out.append(("u" if old else "i", old, row))
            self.rows[key] = row
            self.deleted.discard(key)
        return out

    def delete(self, keys: list[str]) -> list[tuple[str, dict | None, dict | None]]:
        out = []
        for key in dict.fromkeys(keys):
            old = self.rows.pop(key, None)
            if old is not None:  # an absent key: no change
                out.append(("d", old, None))
                self.deleted.add(key)
        return out


def new_row(rng: random.Random, key: str, ts: int) -> dict:
    return {"id": key, "part": f"p{int(key[1:]) % 3}", "ts": ts, "v": rng.randrange(10**6),
            "s": rng.choice(TEXTS), "f": rng.choice(FLOATS), "ok": rng.random() < 0.5,
            "at": EPOCH + dt.timedelta(microseconds=rng.randrange(2 * 10**15))}  # fmt: skip


def upsert_batch(rng: random.Random, model: Model, step: int, next_id: int) -> tuple[list[dict], int]:
    """New keys, updates of stored ones, re-inserts of deleted ones, and duplicates of a key in the
    batch; ordering values grow from batch to batch and differ inside one."""
    n_new = rng.randrange(3, 25)
    keys = [f"k{i}" for i in range(next_id, next_id + n_new)]
    keys += rng.sample(sorted(model.rows), min(len(model.rows), rng.randrange(0, 20)))
    keys += rng.sample(sorted(model.deleted), min(len(model.deleted), rng.randrange(0, 4)))
    keys += rng.sample(keys, min(len(keys), rng.randrange(0, 6)))  # duplicates: `ts` decides
    stamps = rng.sample(range(1000), len(keys))
    return [new_row(rng, k, step * 1000 + t) for k, t in zip(keys, stamps, strict=True)], next_id + n_new


def delete_keys(rng: random.Random, model: Model, next_id: int) -> list[str]:
    """Stored keys (one twice), plus keys never written and keys already deleted."""
    keys = rng.sample(sorted(model.rows), min(len(model.rows), rng.randrange(1, 10)))
    keys += [keys[0], f"k{next_id + 1000}"] + sorted(model.deleted)[:2]
    return keys


def write_sequence(
    path: str, table_type: str, seed: int, steps: int = 10
) -> tuple[Model, list[str], list[str]]:
    """Random writes; returns the model, the write instants and the service instants (inline
    compactions of MOR, every 2 delta commits, and clusterings)."""
    rng = random.Random(seed)
    # no cleaning: the whole history stays readable
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type,
            "hoodie.compact.inline.max.delta.commits": "2", "hoodie.clean.automatic": "false"}  # fmt: skip
    if seed % 2:  # small files take new records: untouched rows are rewritten with their commit times
        opts.pop("hoodie.parquet.small.file.limit")
    model, writes, services = Model(), [], []
    next_id = 0
    for step in range(steps):
        before = completed(path)
        if step % 3 == 2:
            keys = delete_keys(rng, model, next_id)
            batch = pa.table({"id": keys, "part": [f"p{int(k[1:]) % 3}" for k in keys]})
            hoodie_sink.write(batch, path, {**opts, "hoodie.datasource.write.operation": "delete"})
            changes = model.delete(keys)
        else:
            rows, next_id = upsert_batch(rng, model, step + 1, next_id)
            hoodie_sink.write(pa.Table.from_pylist(rows, SCHEMA), path, opts)
            changes = model.upsert(rows)
        new = sorted(completed(path) - before)
        writes.append(new[0])
        services += new[1:]  # an inline compaction comes after the write it follows
        model.changes[new[0]] = changes
        if step in (4, 7):  # clustering keeps commit times: nothing it rewrote is a change
            before = completed(path)
            hoodie_sink.cluster(
                path, {**opts, "hoodie.clustering.plan.strategy.small.file.limit": str(1 << 30)}
            )
            services += sorted(completed(path) - before)
    return model, writes, services


def expected_feed(model: Model, begin: str, end: str) -> list[tuple]:
    out = []
    for instant, changes in model.changes.items():
        if begin < instant <= end:
            for op, old, new in changes:
                row = new or old
                out.append((instant, row["part"], row["id"], op, image(old), image(new)))
    return sorted(out, key=lambda c: c[:3])


def feed(table: pa.Table) -> list[tuple]:
    """The read's rows as (ts_ms, partition, key, op, before, after), in the read's order."""
    assert table.schema == CDC_SCHEMA
    out = []
    for r in table.to_pylist():
        before = json.loads(r["before"]) if r["before"] is not None else None
        after = json.loads(r["after"]) if r["after"] is not None else None
        row = after or before
        assert before is None or after is None or before.keys() == after.keys()  # one set of columns
        out.append((r["ts_ms"], row["part"], row["id"], r["op"], before, after))
    return out


def assert_feed(got: list[tuple], want: list[tuple], what: str) -> None:
    assert [g[:4] for g in got] == [w[:4] for w in want], what  # the changes, in order
    assert got == want, what  # and their images


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_change_feed_equals_the_model(tmp_path, table_type, seed):
    path = str(tmp_path / "t")
    model, writes, services = write_sequence(path, table_type, seed)
    storage = Storage(path)
    timeline = ActiveTimeline.load(storage)
    every = [i.timestamp for i in timeline.completed(WRITE_ACTIONS)]
    assert sorted(writes + services) == every
    assert (table_type == "MERGE_ON_READ") == any(i.action == "compaction" for i in timeline.instants)
    if seed % 2 == 0:  # without small-file packing there are file groups to cluster
        assert any(i.action == "replacecommit" for i in timeline.completed())
    # each instant alone: a write shows its changes, a compaction or clustering none
    plan = plan_cdc(storage, timeline, "000")
    assert [c.instant for c in plan.instants] == writes and list(plan.rewrites) == services
    schema = Snapshot.open(path, timeline=timeline).schema
    for prev, instant in zip(["000", *every], every, strict=False):
        got = feed(read_cdc_instant(path, plan, instant, schema, timeline))
        assert_feed(got, expected_feed(model, prev, instant), instant)
    # random ranges, bounds on any instant
    rng = random.Random(seed)
    bounds = ["000", *every]
    pairs = [("000", every[-1])] + [tuple(sorted(rng.sample(bounds, 2))) for _ in range(4)]
    for begin, end in pairs:
        assert_feed(feed(read_cdc(path, begin, end)), expected_feed(model, begin, end), f"({begin}, {end}]")
    # the Spark-sized pieces: one file group per task, each picklable, together the whole feed
    tasks = plan.tasks(max_file_groups=1)
    assert len(tasks) >= sum(len(c.file_groups) for c in plan.instants) // 2
    parts = [read_cdc_task(path, pickle.loads(pickle.dumps(t)), schema, timeline) for t in tasks]
    pieces = sorted(feed(pa.concat_tables(parts)), key=lambda c: c[:3])
    assert_feed(pieces, expected_feed(model, "000", every[-1]), "tasks")


def test_each_write_is_diffed_against_the_write_before_it_not_the_range_start(tmp_path):
    """A key updated twice inside the range shows two updates, each with its own before image."""
    path = str(tmp_path / "t")
    rng = random.Random(7)
    rows = [new_row(rng, f"k{i}", 1) for i in range(3)]
    hoodie_sink.write(pa.Table.from_pylist(rows, SCHEMA), path, OPTS)
    second = [{**rows[0], "ts": 2, "v": 20}]
    hoodie_sink.write(pa.Table.from_pylist(second, SCHEMA), path, OPTS)
    third = [{**rows[0], "ts": 3, "v": 30}]
    hoodie_sink.write(pa.Table.from_pylist(third, SCHEMA), path, OPTS)
    got = [(r["op"], json.loads(r["before"])["v"], json.loads(r["after"])["v"])
           for r in read_cdc(path, sorted(completed(path))[0]).to_pylist()]  # fmt: skip
    assert got == [("u", rows[0]["v"], 20), ("u", 20, 30)]


def test_deletes_of_absent_keys_alone_show_nothing(tmp_path):
    path = str(tmp_path / "t")
    rows = [new_row(random.Random(1), "k1", 1)]
    hoodie_sink.write(pa.Table.from_pylist(rows, SCHEMA), path, OPTS)
    first = max(completed(path))
    hoodie_sink.write(pa.table({"id": ["k9", "k10"], "part": ["p0", "p1"]}), path,
                      {**OPTS, "hoodie.datasource.write.operation": "delete"})  # fmt: skip
    assert read_cdc(path, first).num_rows == 0


def test_a_key_moving_partition_under_a_global_index_is_a_delete_and_an_insert(tmp_path):
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.index.type": "GLOBAL_BLOOM", "hoodie.bloom.index.update.partition.path": "true"}
    hoodie_sink.write(
        pa.table({"id": ["a", "b"], "part": ["p0", "p0"], "ts": [1, 1], "v": [1, 2]}), path, opts
    )
    first = max(completed(path))
    hoodie_sink.write(pa.table({"id": ["a"], "part": ["p1"], "ts": [2], "v": [3]}), path, opts)
    got = [(r["op"], r["before"] and json.loads(r["before"]), r["after"] and json.loads(r["after"]))
           for r in read_cdc(path, first).to_pylist()]  # fmt: skip
    assert got == [
        ("d", {"id": "a", "part": "p0", "ts": 1, "v": 1}, None),
        ("i", None, {"id": "a", "part": "p1", "ts": 2, "v": 3}),
    ]


def test_insert_overwrite_updates_the_keys_it_rewrites_and_deletes_the_others(tmp_path):
    path = str(tmp_path / "t")
    old = pa.table({"id": ["a", "b", "c"], "part": ["p0", "p0", "p1"], "ts": [1, 1, 1], "v": [1, 2, 3]})
    hoodie_sink.write(old, path, {**OPTS, "hoodie.parquet.max.file.size": "1024"})  # a file group per record
    first = max(completed(path))
    new = pa.table({"id": ["a", "d"], "part": ["p0", "p0"], "ts": [2, 2], "v": [10, 40]})
    hoodie_sink.write(new, path, {**OPTS, "hoodie.datasource.write.operation": "insert_overwrite"})
    want = [("d", "b"), ("i", "d"), ("u", "a")]
    got = read_cdc(path, first)
    assert sorted(zip(got.column("op").to_pylist(), [json.loads(r["before"] or r["after"])["id"]
                      for r in got.to_pylist()], strict=True)) == want  # fmt: skip
    # tasks split such a write by partition only: the moved key meets its before state
    storage = Storage(path)
    plan = plan_cdc(storage, Timeline.load(storage), first)
    (change,) = plan.instants
    assert change.replaces and len(change.file_groups) >= 2
    parts = [read_cdc_task(path, t) for t in plan.tasks(max_file_groups=1)]
    assert sorted(pa.concat_tables(parts).column("op").to_pylist()) == ["d", "i", "u"]


def test_refusals(tmp_path):
    path = str(tmp_path / "t")
    _, writes, _ = write_sequence(path, "MERGE_ON_READ", 4, steps=4)
    with pytest.raises(HoodieConfigError, match="begin.instanttime"):
        read_cdc(path, "yesterday")
    assert read_cdc(path, writes[-1]).num_rows == 0  # nothing after the last write
    # a write pending inside the range, older than a completed one: a hole
    hole = str(int(writes[-1]) - 1)
    Storage(path).write_bytes(f".hoodie/{hole}.deltacommit.requested", b"")
    with pytest.raises(HoodieTableError, match="still pending"):
        read_cdc(path, writes[-2], writes[-1])


def test_a_range_before_the_cleaned_and_archived_history_is_refused(tmp_path):
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.cleaner.commits.retained": "2", "hoodie.keep.min.commits": "3",
            "hoodie.keep.max.commits": "5"}  # fmt: skip
    model = Model()
    rng = random.Random(5)
    for step in range(1, 13):
        rows = [new_row(rng, f"k{(step * 2 + i) % 7}", step) for i in range(3)]
        hoodie_sink.write(pa.Table.from_pylist(rows, SCHEMA), path, opts)
        model.changes[max(completed(path))] = model.upsert(rows)
    storage = Storage(path)
    timeline = Timeline.load(storage)
    assert storage.list_names(".hoodie/archived"), "the test needs archived instants"
    oldest = oldest_readable_instant(storage, timeline)
    writes = [i.timestamp for i in timeline.completed(WRITE_ACTIONS)]
    assert oldest is not None and writes[0] <= oldest < writes[-1]
    with pytest.raises(HoodieTableError, match="CDC read of .* is not possible.*archived"):
        read_cdc(path, "000")
    older = [t for t in model.changes if t < oldest]
    with pytest.raises(HoodieTableError, match="CDC read of .* is not possible"):
        read_cdc(path, older[-1])
    # from the oldest kept state on, the feed is whole
    assert_feed(feed(read_cdc(path, oldest)), expected_feed(model, oldest, writes[-1]), "kept history")


def test_json_images_render_every_column_type():
    ts = dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.timezone.utc)
    micros = (ts - EPOCH) // dt.timedelta(microseconds=1)
    rows = pa.table(
        {
            "s": pa.array(['q"\\/\n\t\x01', None]),
            "d": pa.array(["x", "y"]).dictionary_encode(),
            "i": pa.array([-3, None], pa.int32()),
            "f": pa.array([2.0, float("nan")]),
            "g": pa.array([float("-inf"), 0.1], pa.float64()),
            "b": pa.array([True, None]),
            "dec": pa.array([Decimal("12.30"), Decimal("-0.05")], pa.decimal128(6, 2)),
            "day": pa.array([dt.date(1970, 1, 11), None]),
            "at": pa.array([ts, None], pa.timestamp("us", tz="UTC")),
            "ms": pa.array([ts, None], pa.timestamp("ms", tz="UTC")),
            "bin": pa.array([b"\x00\xff", None]),
            "tags": pa.array([["a", None], []], pa.list_(pa.string())),
            "rec": pa.array(
                [{"when": ts, "n": 1}, None],
                pa.struct([("when", pa.timestamp("us", tz="UTC")), ("n", pa.int64())]),
            ),
            "m": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
        }
    )
    text = json_images(rows).to_pylist()
    assert text[0].startswith('{"s": "q\\"\\\\/\\n\\t\\u0001", "d": "x", "i": -3, "f": 2.0, ')
    got = [json.loads(t) for t in text]
    assert got[0] == {
        "s": 'q"\\/\n\t\x01', "d": "x", "i": -3, "f": 2.0, "g": "-Infinity", "b": True, "dec": 12.30,
        "day": 10, "at": micros, "ms": micros // 1000, "bin": "AP8=", "tags": ["a", None],
        "rec": {"when": micros, "n": 1}, "m": {"k": 1},
    }  # fmt: skip
    assert got[1] == {
        "s": None, "d": "y", "i": None, "f": "NaN", "g": 0.1, "b": None, "dec": -0.05, "day": None,
        "at": None, "ms": None, "bin": None, "tags": [], "rec": None, "m": None,
    }  # fmt: skip
    assert json_images(rows.slice(0, 0)).to_pylist() == []
    assert json_images(pa.table({"a": [1]}).select([])).to_pylist() == ["{}"]
