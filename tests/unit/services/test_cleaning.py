"""Cleaning (issue 11): the planner's rules one by one, a crash midway, and randomized write
sequences checked against a model, the latest snapshot and every retained instant (time travel)
read with our reader and hudi-rs, with the files on storage bounded."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.clean_metadata import (
    KEEP_LATEST_BY_HOURS,
    KEEP_LATEST_COMMITS,
    KEEP_LATEST_FILE_VERSIONS,
    CleanerPlan,
    decode_clean_metadata,
    decode_cleaner_plan,
    encode_clean_metadata,
    encode_cleaner_plan,
)
from hoodie_sink.table.format.file_group import BaseFile, FileGroup, FileSlice
from hoodie_sink.table.format.timeline.instant import CLEAN, COMMIT, COMPLETED, INFLIGHT, REQUESTED, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.read.retention import oldest_readable_instant
from hoodie_sink.table.read.snapshot import read_snapshot
from hoodie_sink.table.services.cleaning import CleanConfig, earliest_commit_to_retain, plan_clean, run_clean
from hoodie_sink.table.storage import Storage
from tests.support.tables import assert_table_matches, data_rows, sort_by_key, sort_rows

T = [f"2026010100000{i}000" for i in range(10)]


def group(times: list[str], part: str = "p", fid: str = "f1") -> FileGroup:
    fg = FileGroup(part, fid)
    for t in times:
        fg.slices.append(FileSlice(part, fid, t, base_file=BaseFile(part, fid, t, "0-1-1")))
    return fg


def names(files: dict[str, tuple[str, ...]]) -> list[str]:
    return sorted(f.rsplit("_", 1)[1].removesuffix(".parquet") for fs in files.values() for f in fs)


def test_keep_latest_commits_keeps_the_newest_slice_before_the_ectr():
    cfg = CleanConfig(KEEP_LATEST_COMMITS)
    assert names(plan_clean([group(T[1:5])], {}, cfg, ectr=T[3])) == [T[1]]
    # the latest slice is itself older than the ECTR: everything older goes
    assert names(plan_clean([group(T[1:3])], {}, cfg, ectr=T[6])) == [T[1]]
    assert plan_clean([group(T[1:5])], {}, cfg, ectr=None) == {}


def test_replaced_groups_go_once_their_replacecommit_is_older_than_the_ectr():
    cfg = CleanConfig(KEEP_LATEST_COMMITS)
    fg = group(T[1:3])
    assert names(plan_clean([fg], {("p", "f1"): T[3]}, cfg, ectr=T[4])) == [T[1], T[2]]
    assert plan_clean([fg], {("p", "f1"): T[4]}, cfg, ectr=T[4]) == {}
    files_cfg = CleanConfig(KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
    assert names(plan_clean([fg], {("p", "f1"): T[9]}, files_cfg, ectr=None)) == [T[1], T[2]]


def test_keep_latest_file_versions_and_what_is_never_cleaned():
    cfg = CleanConfig(KEEP_LATEST_FILE_VERSIONS, file_versions_retained=2)
    fg = group(T[1:5])
    assert names(plan_clean([fg], {}, cfg, ectr=None)) == [T[1], T[2]]
    saved = frozenset({fg.slices[0].base_file.path})
    assert names(plan_clean([fg], {}, cfg, ectr=None, savepointed=saved)) == [T[2]]
    assert plan_clean([fg], {}, cfg, ectr=None, untouchable=frozenset({("p", "f1")})) == {}


def test_the_ectr_never_passes_a_pending_write():
    instants = [Instant(t, COMMIT, COMPLETED) for t in T[:8]] + [Instant(T[2] + "1", COMMIT, INFLIGHT)]
    timeline = Timeline(tuple(sorted(instants, key=lambda i: (i.timestamp, i.action, i.state))))
    cfg = CleanConfig(KEEP_LATEST_COMMITS, commits_retained=2)
    assert earliest_commit_to_retain(Timeline(tuple(instants[:8])), cfg).timestamp == T[6]
    assert earliest_commit_to_retain(timeline, cfg).timestamp == T[2]  # the last completed before it


def test_keep_latest_by_hours_retains_from_the_first_commit_inside_the_window(tmp_path):
    timeline = Timeline(tuple(Instant(t, COMMIT, COMPLETED) for t in T[:8]))
    cfg = CleanConfig(KEEP_LATEST_BY_HOURS, hours_retained=1)
    assert earliest_commit_to_retain(timeline, cfg, now_instant=T[5]).timestamp == T[5]
    assert earliest_commit_to_retain(timeline, cfg, now_instant="20990101000000000") is None
    # through the engine: every commit is within the last hour, so nothing is cleaned
    path = tmp_path / "t"
    opts = {**OPTS, "hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS", "hoodie.cleaner.hours.retained": "1"}
    for r in range(6):
        hoodie_sink.write(pa.Table.from_pylist([{"id": 1, "p": "p0", "ts": r}]), str(path), opts)
    assert data_files(path) == 6 and not Timeline.load(Storage(str(path))).completed((CLEAN,))
    # as Java: when no commit is inside the window there is no ECTR, and nothing is cleaned
    assert run_clean(str(path), CleanConfig(KEEP_LATEST_BY_HOURS, hours_retained=0)).files_deleted == 0


def test_plan_and_metadata_round_trip():
    plan = CleanerPlan(KEEP_LATEST_COMMITS, (T[3], COMMIT), T[5], {"p": ("p/f1_0-1-1_x.parquet",)})
    assert decode_cleaner_plan(encode_cleaner_plan(plan, "file:/t")) == plan
    md = decode_clean_metadata(encode_clean_metadata(T[6], 12, plan, {"p/f1_0-1-1_x.parquet"}, set()))
    assert md["earliestCommitToRetain"] == T[3] and md["partitionMetadata"]["p"]["successDeleteFiles"] == [
        "f1_0-1-1_x.parquet"
    ]


# -- through the engine ----------------------------------------------------------------------------

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.cleaner.commits.retained": "3",
    "hoodie.keep.min.commits": "5",
    "hoodie.keep.max.commits": "8",
}


def data_files(path: Path) -> int:
    return sum(1 for r, _, fs in os.walk(path) if ".hoodie" not in r for f in fs if f.endswith(".parquet"))


def read_as_of(path: Path, instant: str) -> list[dict]:
    from hudi import HudiReadOptions, HudiTableBuilder

    ours = data_rows(sort_by_key(read_snapshot(str(path), as_of=instant)))
    rs = (
        HudiTableBuilder.from_base_uri(str(path))
        .build()
        .read(HudiReadOptions().with_as_of_timestamp(instant))
    )
    theirs = data_rows(sort_by_key(pa.Table.from_batches(rs))) if rs else []
    assert ours == theirs, f"hudi-rs and our reader differ as of {instant}"
    return ours


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_writes_with_cleaning_equal_the_model_at_every_retained_instant(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "t"
    model: dict[int, dict] = {}
    snapshots: dict[str, list[dict]] = {}
    for r in range(30):
        ids = rng.sample(range(40), rng.randint(1, 10))
        if model and rng.random() < 0.2:
            victims = rng.sample(sorted(model), min(3, len(model)))
            batch = pa.Table.from_pylist([{**model[i]} for i in victims])
            hoodie_sink.write(batch, str(path), {**OPTS, "hoodie.datasource.write.operation": "delete"})
            for i in victims:
                model.pop(i)
        else:
            rows = [{"id": i, "p": f"p{i % 4}", "ts": r * 10 + rng.randint(-15, 5)} for i in ids]
            rows += rng.sample(rows, min(2, len(rows)))  # duplicates in one batch
            hoodie_sink.write(pa.Table.from_pylist(rows), str(path), OPTS)
            for row in rows:
                old = model.get(row["id"])
                if old is None or row["ts"] >= old["ts"]:  # late records lose (event time)
                    model[row["id"]] = row
        storage = Storage(str(path))
        timeline = Timeline.load(storage)
        snapshots[timeline.latest_completed().timestamp] = sort_rows(list(model.values()))
        assert_table_matches(path, list(model.values()))
        oldest = oldest_readable_instant(storage, timeline)
        for inst in timeline.completed():
            if oldest is None or inst.timestamp >= oldest:
                assert read_as_of(path, inst.timestamp) == snapshots[inst.timestamp]
        older = [t for t in snapshots if oldest and t < oldest]
        if older:
            with pytest.raises(HoodieTableError, match="Time travel to .* is not possible"):
                read_snapshot(str(path), as_of=older[-1])
        # 4 partitions, one file group each: retained slices + the newest before the ECTR + the latest
        assert data_files(path) <= 4 * (3 + 2)
    assert Timeline.load(Storage(str(path))).completed((CLEAN,))


def test_a_clean_that_died_midway_is_finished_by_the_next(tmp_path, monkeypatch):
    path = tmp_path / "t"
    quiet = {**OPTS, "hoodie.clean.automatic": "false"}
    for r in range(8):
        hoodie_sink.write(
            pa.Table.from_pylist([{"id": i, "p": "p0", "ts": r} for i in range(3)]), str(path), quiet
        )
    before = data_files(path)
    real = TimelineStore.complete

    def crash(self, inflight, content):
        if inflight.action == CLEAN:
            raise OSError("killed before the clean completed")
        return real(self, inflight, content)

    monkeypatch.setattr(TimelineStore, "complete", crash)
    with pytest.raises(OSError, match="killed"):
        run_clean(str(path), CleanConfig(commits_retained=3))
    monkeypatch.setattr(TimelineStore, "complete", real)
    storage = Storage(str(path))
    [pending] = Timeline.load(storage).pending((CLEAN,))
    assert pending.state == INFLIGHT and data_files(path) < before  # files went, the instant did not land
    result = run_clean(str(path), CleanConfig(commits_retained=3))
    assert result.resumed == (pending.timestamp,)
    assert Timeline.load(storage).pending((CLEAN,)) == []
    plan = decode_cleaner_plan(storage.read_bytes(TimelineStore(storage).path(pending.with_state(REQUESTED))))
    assert plan.file_count == before - data_files(path)
    assert_table_matches(path, [{"id": i, "p": "p0", "ts": 7} for i in range(3)])


def test_async_cleaning_and_archival_run_in_the_background(tmp_path):
    from hoodie_sink.table.services.after_commit import wait_for_background_services

    path = tmp_path / "t"
    opts = {**OPTS, "hoodie.clean.async": "true", "hoodie.archive.async": "true"}
    for r in range(12):
        hoodie_sink.write(
            pa.Table.from_pylist([{"id": i, "p": "p0", "ts": r} for i in range(3)]), str(path), opts
        )
        wait_for_background_services()  # a slow background run is skipped, not stacked: wait to count them
    timeline = Timeline.load(Storage(str(path)))
    assert timeline.completed((CLEAN,)) and len(timeline.completed()) <= 8
    assert data_files(path) <= 3 + 2
    assert_table_matches(path, [{"id": i, "p": "p0", "ts": 11} for i in range(3)])
