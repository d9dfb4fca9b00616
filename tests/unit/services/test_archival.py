"""Archival (issue 11): the planner's guards one by one, a table archived many times that still
reads the same, our archive files read back, and a run that died after writing its archive file."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.metadata_table import is_metadata_storage
from hoodie_sink.table.format.timeline.instant import CLEAN, COMMIT, COMPLETED, INFLIGHT, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.services.archival import (
    ArchivalConfig,
    archive_dir,
    load_archived_timeline,
    plan_archival,
    run_archival,
)
from hoodie_sink.table.storage import Storage
from tests.support.tables import assert_table_matches

CFG = ArchivalConfig(min_commits=3, max_commits=5)
T = [f"202601010000{i:02d}000" for i in range(20)]


def timeline(*instants: Instant) -> Timeline:
    return Timeline(tuple(sorted(instants, key=lambda i: (i.timestamp, i.action, i.state))))


def commits(n: int) -> list[Instant]:
    return [Instant(T[i], COMMIT, COMPLETED) for i in range(n)]


def test_archives_down_to_min_once_past_max():
    assert plan_archival(timeline(*commits(5)), CFG) == []
    assert plan_archival(timeline(*commits(6)), CFG) == T[:3]


@pytest.mark.parametrize(
    ("extra", "clean_ectr", "live", "expected"),
    [
        (
            [Instant(T[1] + "5", COMMIT, INFLIGHT)],
            None,
            frozenset(),
            T[:1],
        ),  # stops before the last commit before it
        ([Instant(T[2], "savepoint", COMPLETED)], None, frozenset(), T[:2]),
        ([], T[1], frozenset(), T[:1]),  # the cleaner retains from T[1]
        ([], None, frozenset({T[2]}), T[:2]),  # T[2] is a replacecommit whose replaced files live
    ],
)
def test_guards(extra, clean_ectr, live, expected):
    got = plan_archival(timeline(*commits(8), *extra), CFG, clean_ectr, live)
    assert got == expected


def test_clean_instants_are_archived_per_action():
    cleans = [Instant(T[i] + "1", CLEAN, COMPLETED) for i in range(7)]
    assert plan_archival(timeline(*commits(2), *cleans), CFG) == [c.timestamp for c in cleans[:4]]


OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.cleaner.commits.retained": "2",
    "hoodie.keep.min.commits": "3",
    "hoodie.keep.max.commits": "5",
}


def test_a_table_archived_many_times_reads_the_same_and_its_archive_reads_back(tmp_path):
    path = tmp_path / "t"
    model = {}
    every = []
    for r in range(40):
        rows = [{"id": (r * 3 + k) % 25, "p": f"p{k % 2}", "v": r} for k in range(4)]
        hoodie_sink.write(pa.Table.from_pylist(rows), str(path), OPTS)
        model.update({(x["id"], x["p"]): x for x in rows})
        every.append(Timeline.load(Storage(str(path))).latest_completed().timestamp)
    storage = Storage(str(path))
    active = Timeline.load(storage)
    assert len(active.completed()) <= 5 and len(active.completed((CLEAN,))) <= 5
    archived = load_archived_timeline(storage)
    archived_commits = sorted({e.instant.timestamp for e in archived if e.instant.action == COMMIT})
    assert archived_commits + [i.timestamp for i in active.completed()] == every  # none lost, none twice
    assert {e.instant.state for e in archived if e.instant.action == COMMIT} == {
        "requested",
        "inflight",
        "completed",
    }
    done = [e for e in archived if e.instant.action == COMMIT and e.instant.state == COMPLETED]
    assert all(e.details and e.details["partitionToWriteStats"] for e in done)
    assert_table_matches(path, list(model.values()))


def test_a_run_that_died_after_its_archive_file_does_not_archive_twice(tmp_path, monkeypatch):
    path = tmp_path / "t"
    quiet = {**OPTS, "hoodie.archive.automatic": "false", "hoodie.clean.automatic": "false",
             # archival stops at the metadata table's latest compaction (Java's rule): compact often
             "hoodie.metadata.compact.max.delta.commits": "2"}  # fmt: skip
    for r in range(8):
        hoodie_sink.write(pa.Table.from_pylist([{"id": r, "p": "p0", "v": r}]), str(path), quiet)
    import hoodie_sink.table.services.archival as archival

    delete_archived = archival._delete_archived

    def die(storage, states):
        if is_metadata_storage(storage):  # the metadata table's own archival
            return delete_archived(storage, states)
        raise OSError("killed after the archive file was written")

    monkeypatch.setattr(archival, "_delete_archived", die)
    with pytest.raises(OSError, match="killed"):
        run_archival(str(path), ArchivalConfig(3, 5))
    monkeypatch.undo()
    storage = Storage(str(path))
    assert len(Timeline.load(storage).completed()) == 8  # nothing left the active timeline yet
    result = run_archival(str(path), ArchivalConfig(3, 5))
    assert result.archive_file is None and result.instants == 5  # already in the archive: only deleted
    assert len(storage.list_names(archive_dir(storage))) == 1
    archived = [e for e in load_archived_timeline(storage) if e.instant.state == COMPLETED]
    assert len(archived) == 5 and len({e.instant.timestamp for e in archived}) == 5
    assert_table_matches(path, [{"id": r, "p": "p0", "v": r} for r in range(8)])


def test_an_instant_archived_after_its_timeline_was_listed_is_read_from_the_archive(tmp_path):
    # A reader (a clustering beside a stream) lists the timeline, another writer archives, then the
    # reader reads a listed commit: it gets the archived copy, not a FileNotFoundError.
    from hoodie_sink.table.format.timeline.timeline import commit_metadata

    path = tmp_path / "t"
    storage = Storage(str(path))
    for r in range(3):
        hoodie_sink.write(pa.Table.from_pylist([{"id": r, "p": "p0", "v": r}]), str(path), OPTS)
    listed = Timeline.load(storage)
    first = listed.completed()[0]
    before = commit_metadata(storage, listed, first)
    for r in range(3, 12):
        hoodie_sink.write(pa.Table.from_pylist([{"id": r, "p": "p0", "v": r}]), str(path), OPTS)
    assert first not in Timeline.load(storage).completed()  # archived meanwhile
    after = commit_metadata(storage, listed, first)
    assert [s.file_id for s in after.write_stats] == [s.file_id for s in before.write_stats]
    assert after.operation_type == before.operation_type
    with pytest.raises(FileNotFoundError):  # an instant that never existed still fails
        commit_metadata(storage, listed, Instant("20200101000000000", COMMIT, COMPLETED))
