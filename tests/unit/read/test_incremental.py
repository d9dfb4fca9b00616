"""Incremental reads (issue 13, item 1) against a model: random upserts and deletes into COW and
MOR tables, with compaction and clustering in between; for every (begin, end) pair of instants the
read equals what the model says the writes in (begin, end] left, as of end."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.timeline.instant import WRITE_ACTIONS
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.read.incremental import plan_incremental, read_incremental
from hoodie_sink.table.storage import Storage

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.parquet.small.file.limit": "0",
}


def completed(path: str) -> set[str]:
    return {i.timestamp for i in Timeline.load(Storage(path)).completed(WRITE_ACTIONS)}


def run_sequence(path: str, table_type: str, seed: int):
    """Random writes; returns the write instants in order and per key its events (instant, row or None)."""
    rng = np.random.default_rng(seed)
    opts = {
        **OPTS,
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.compact.inline.max.delta.commits": "2",
    }
    events: dict[str, list[tuple[str, dict | None]]] = {}
    instants: list[str] = []
    next_id, ts = 0, 0
    for step in range(8):
        before = completed(path)
        live = [k for k, ev in events.items() if ev[-1][1] is not None]
        if step % 4 == 3 and live:  # the delete operation
            keys = list(rng.choice(live, size=min(len(live), int(rng.integers(1, 15))), replace=False))
            batch = pa.table({"id": keys, "part": [f"p{int(k[1:]) % 3}" for k in keys],
                              "ts": [0] * len(keys), "v": [0] * len(keys)})  # fmt: skip
            hoodie_sink.write(batch, path, {**opts, "hoodie.datasource.write.operation": "delete"})
            rows: list[tuple[str, dict | None]] = [(k, None) for k in keys]
        else:
            n_new, n_upd = int(rng.integers(5, 40)), min(len(live), int(rng.integers(0, 30)))
            keys = [f"k{i}" for i in range(next_id, next_id + n_new)]
            keys += list(rng.choice(live, size=n_upd, replace=False)) if n_upd else []
            next_id += n_new
            ts += 1
            batch = pa.table({"id": keys, "part": [f"p{int(k[1:]) % 3}" for k in keys],
                              "ts": [ts] * len(keys), "v": rng.integers(0, 10**6, len(keys))})  # fmt: skip
            hoodie_sink.write(batch, path, {**opts, "hoodie.datasource.write.operation": "upsert"})
            rows = [(r["id"], r) for r in batch.to_pylist()]
        instant = min(completed(path) - before)
        instants.append(instant)
        for key, row in rows:
            events.setdefault(key, []).append((instant, row))
        if step == 5:  # clustering keeps commit times: nothing it rewrote is a change
            hoodie_sink.cluster(
                path, {**opts, "hoodie.clustering.plan.strategy.small.file.limit": str(1 << 30)}
            )
    return instants, events


def expected(events, begin: str, end: str) -> dict[str, tuple]:
    out = {}
    for key, evs in events.items():
        upto = [(t, row) for t, row in evs if t <= end]
        if upto and upto[-1][1] is not None and begin < upto[-1][0]:
            row = upto[-1][1]
            out[key] = (upto[-1][0], row["ts"], row["v"])
    return out


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("seed", [1, 2])
def test_incremental_reads_equal_the_model(tmp_path, table_type, seed):
    path = str(tmp_path / "t")
    instants, events = run_sequence(path, table_type, seed)
    bounds = ["000", *instants]
    for i, begin in enumerate(bounds):
        for end in bounds[i + 1 :]:
            if (i + len(end)) % 2:  # the engine function, or the package's read with Hudi's options
                got = read_incremental(path, begin, end)
            else:
                got = hoodie_sink.read(path, {"hoodie.datasource.query.type": "incremental",
                                              "hoodie.datasource.read.begin.instanttime": begin,
                                              "hoodie.datasource.read.end.instanttime": end})  # fmt: skip
            rows = {r["id"]: (r["_hoodie_commit_time"], r["ts"], r["v"]) for r in got.to_pylist()}
            assert got.num_rows == len(rows), f"({begin}, {end}]: a key twice"
            assert rows == expected(events, begin, end), f"({begin}, {end}]"
    # end defaults to the latest write; begin 'earliest' is the start
    assert read_incremental(path, "earliest").num_rows == len(expected(events, "000", instants[-1]))


def test_the_read_touches_only_the_file_groups_of_the_range(tmp_path):
    path = str(tmp_path / "t")
    instants, _ = run_sequence(path, "COPY_ON_WRITE", 3)
    storage = Storage(path)
    timeline = Timeline.load(storage)
    one = plan_incremental(storage, timeline, instants[-2], instants[-1])
    everything = plan_incremental(storage, timeline, "000")
    assert one.instants == (instants[-1],)
    assert one.file_ids is not None and everything.file_ids is not None
    assert 0 < len(one.file_ids) <= len(everything.file_ids)


def test_refusals(tmp_path):
    path = str(tmp_path / "t")
    instants, _ = run_sequence(path, "MERGE_ON_READ", 4)
    with pytest.raises(HoodieConfigError, match="begin.instanttime"):
        read_incremental(path, "yesterday")
    # a pending write older than a completed one inside the range: a hole
    storage = Storage(path)
    hole = str(int(instants[-1]) - 1)
    storage.write_bytes(f".hoodie/{hole}.deltacommit.requested", b"")
    with pytest.raises(HoodieTableError, match="still pending"):
        read_incremental(path, instants[-2], instants[-1])
    assert read_incremental(path, instants[-1]).num_rows == 0  # nothing after the last write


def test_a_range_before_a_new_column_reads_in_the_latest_schema(tmp_path):
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.operation": "upsert"}
    hoodie_sink.write(
        pa.table({"id": ["a", "b"], "part": ["p0", "p1"], "ts": [1, 1], "v": [1, 2]}), path, opts
    )
    first = max(completed(path))
    wider = pa.table({"id": ["c"], "part": ["p0"], "ts": [2], "v": [3], "note": ["new"]})
    hoodie_sink.write(wider, path, opts)
    old = read_incremental(path, "000", first)
    assert sorted(old.column("id").to_pylist()) == ["a", "b"] and old.column("note").null_count == 2
    assert read_incremental(path, first).column("note").to_pylist() == ["new"]


def test_a_range_reaching_into_the_archived_timeline_is_refused_or_falls_back_to_a_full_scan(tmp_path):
    path = str(tmp_path / "t")
    archiving = {**OPTS, "hoodie.cleaner.commits.retained": "2", "hoodie.keep.min.commits": "3",
                 "hoodie.keep.max.commits": "5"}  # fmt: skip
    written: dict[str, tuple[str, int]] = {}
    for r in range(10):
        hoodie_sink.write(pa.table({"id": [f"k{r}", "hot"], "part": ["p0", "p1"], "ts": [r, r], "v": [r, r]}),
                          path, archiving)  # fmt: skip
        latest = max(completed(path))
        written.update({f"k{r}": (latest, r), "hot": (latest, r)})
    active = sorted(completed(path))
    assert len(active) < 10  # archival ran
    with pytest.raises(HoodieTableError, match="archived.*fallback.fulltablescan"):
        read_incremental(path, "000")
    got = read_incremental(path, "000", fallback_full_scan=True)
    assert {r["id"]: (r["_hoodie_commit_time"], r["v"]) for r in got.to_pylist()} == written
    # from the start of the active timeline on, no fallback is needed
    inside = read_incremental(path, active[0])
    assert {r["id"] for r in inside.to_pylist()} == {k for k, (t, _) in written.items() if t > active[0]}


def test_a_path_glob_reads_the_matching_files_only(tmp_path):
    path = str(tmp_path / "t")
    instants, events = run_sequence(path, "MERGE_ON_READ", 5)
    opts = {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": "000"}
    everything = hoodie_sink.read(path, opts)
    # Hudi matches "*" + glob against each file's full path
    got = hoodie_sink.read(path, {**opts, "hoodie.datasource.read.incr.path.glob": "/p1/*"})
    assert 0 < got.num_rows < everything.num_rows
    assert sorted(got.column("id").to_pylist()) == sorted(
        r["id"] for r in everything.to_pylist() if r["_hoodie_partition_path"] == "p1"
    )
    two = hoodie_sink.read(path, {**opts, "hoodie.datasource.read.incr.path.glob": "/{p0,p2}/*"})
    assert two.num_rows + got.num_rows == everything.num_rows
    assert hoodie_sink.read(path, {**opts, "hoodie.datasource.read.incr.path.glob": "/p9/*"}).num_rows == 0
