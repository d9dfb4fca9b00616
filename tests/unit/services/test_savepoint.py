"""Savepoint and restore (issue 11): random writes, a savepoint, more writes of every kind
(upserts, deletes, inserts, insert_overwrite, clustering) with cleaning and archival on, then a
restore: the table reads exactly as at the savepoint (our reader and hudi-rs); a restore that
died midway is finished by running it again; refusals."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.savepoint_metadata import RESTORE, SAVEPOINT, decode_restore_metadata
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.services import savepoint as sp
from hoodie_sink.table.storage import Storage
from tests.support.tables import assert_table_matches

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.cleaner.commits.retained": "2",
    "hoodie.keep.min.commits": "3",
    "hoodie.keep.max.commits": "5",
}


def random_rounds(path, rng: random.Random, model: dict, rounds: int, start: int) -> None:
    for r in range(start, start + rounds):
        kind = rng.random()
        if model and kind < 0.2:
            victims = rng.sample(sorted(model), min(3, len(model)))
            hoodie_sink.write(pa.Table.from_pylist([model[v] for v in victims]), str(path),
                              {**OPTS, "hoodie.datasource.write.operation": "delete"})  # fmt: skip
            for v in victims:
                model.pop(v)
        elif kind < 0.3:
            rows = [{"id": 1000 + r * 10 + k, "p": "p0", "ts": r} for k in range(3)]
            hoodie_sink.write(pa.Table.from_pylist(rows), str(path),
                              {**OPTS, "hoodie.datasource.write.operation": "insert_overwrite"})  # fmt: skip
            for key in [k for k, v in model.items() if v["p"] == "p0"]:
                model.pop(key)
            model.update({x["id"]: x for x in rows})
        elif kind < 0.35:
            hoodie_sink.cluster(str(path), {**OPTS, "hoodie.clustering.plan.strategy.sort.columns": "ts"})
        else:
            rows = [{"id": i, "p": f"p{i % 3}", "ts": r} for i in rng.sample(range(30), 6)]
            hoodie_sink.write(pa.Table.from_pylist(rows), str(path), OPTS)
            model.update({x["id"]: x for x in rows})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_restore_to_a_savepoint_reads_as_the_savepoint(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "t"
    model: dict = {}
    random_rounds(path, rng, model, 8, 0)
    saved = dict(model)
    info = sp.create_savepoint(str(path), comments="before the backfill")
    assert [s.instant for s in sp.list_savepoints(str(path))] == [info.instant]
    random_rounds(path, rng, model, 25, 100)  # cleaning and archival run all along
    storage = Storage(str(path))
    assert Timeline.load(storage).completed()[0].timestamp <= info.instant  # archival stopped at it
    undone = sp.restore(str(path), info.instant)
    assert undone and all(t > info.instant for t in undone)
    assert_table_matches(path, list(saved.values()))
    timeline = Timeline.load(storage)
    assert timeline.latest_completed().timestamp == info.instant
    [done] = timeline.completed((RESTORE,))
    md = decode_restore_metadata(storage.read_bytes(TimelineStore(storage).path(done)))
    assert md["instantsToRollback"] == undone
    # the table carries on after the restore
    hoodie_sink.write(pa.Table.from_pylist([{"id": 7, "p": "p1", "ts": 999}]), str(path), OPTS)
    assert_table_matches(path, list({**saved, 7: {"id": 7, "p": "p1", "ts": 999}}.values()))


def test_a_restore_that_died_midway_is_finished_by_running_it_again(tmp_path, monkeypatch):
    path = tmp_path / "t"
    model: dict = {}
    random_rounds(path, random.Random(5), model, 5, 0)
    saved = dict(model)
    info = sp.create_savepoint(str(path))
    random_rounds(path, random.Random(6), model, 6, 100)
    real = sp._roll_back
    calls = {"n": 0}

    def dies_on_the_third(storage, store, target):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("killed midway")
        return real(storage, store, target)

    monkeypatch.setattr(sp, "_roll_back", dies_on_the_third)
    with pytest.raises(OSError, match="killed"):
        sp.restore(str(path), info.instant)
    monkeypatch.setattr(sp, "_roll_back", real)
    assert Timeline.load(Storage(str(path))).pending((RESTORE,))
    sp.restore(str(path), info.instant)
    assert not Timeline.load(Storage(str(path))).pending((RESTORE,))
    assert_table_matches(path, list(saved.values()))


def test_refusals(tmp_path):
    path = tmp_path / "t"
    random_rounds(path, random.Random(1), {}, 3, 0)
    with pytest.raises(HoodieTableError, match="not a completed commit"):
        sp.create_savepoint(str(path), instant="20200101000000000")
    with pytest.raises(HoodieTableError, match="no such savepoint"):
        sp.restore(str(path), "20200101000000000")
    info = sp.create_savepoint(str(path))
    with pytest.raises(HoodieTableError, match="already savepointed"):
        sp.create_savepoint(str(path), instant=info.instant)
    sp.delete_savepoint(str(path), info.instant)
    assert sp.list_savepoints(str(path)) == []
    assert not Timeline.load(Storage(str(path))).completed((SAVEPOINT,))
