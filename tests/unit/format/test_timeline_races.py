"""Races between writers and table services on the timeline (issue 8: no self-inflicted failure).

- Two writers of different actions (a write and a clustering) picking the same millisecond
  would share one instant time in file names, markers and heartbeat: one gives way.
- A writer or runner that saw an instant pending, and then its heartbeat gone, may be looking at
  an instant that completed in between (the completed file lands before the heartbeat goes):
  rolling it back would delete committed data.  A completed instant is never rolled back.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.timeline.instant import COMMIT, REPLACE_COMMIT, REQUESTED, Instant
from hoodie_sink.table.format.timeline.timeline import InstantTimeTaken, Timeline, TimelineStore
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.services import clustering
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.rollback import rollback_failed_clustering, rollback_instant
from tests.support.tables import APPEND_OPTS, assert_table_matches, small_file_clustering

OPTS = APPEND_OPTS
CLUSTER = small_file_clustering(target_mb=10)


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "v": pa.array([1.0] * n)})


def _appended(path: str, commits: int = 3) -> list[dict]:
    expected = []
    for c in range(commits):
        t = _rows(c * 10, 10)
        hoodie_sink.write(t, path, OPTS)
        expected += t.to_pylist()
    return expected


def test_an_instant_time_taken_by_another_action_is_given_up(tmp_path):
    path = str(tmp_path / "t")
    _appended(path, 1)
    store = TimelineStore(Storage(path))
    ts = "20991231235959000"
    store.create_requested(ts, REPLACE_COMMIT)
    with pytest.raises(InstantTimeTaken):
        store.create_requested(ts, COMMIT)
    assert not Storage(path).exists(f".hoodie/{ts}.commit.requested")  # the loser removed its file
    started = store.create_requested_at_new_time(ts, COMMIT)
    assert started.timestamp > ts


def test_a_completed_write_is_never_rolled_back(tmp_path):
    path = str(tmp_path / "t")
    expected = _appended(path, 2)
    storage = Storage(path)
    last = Timeline.load(storage).completed()[-1]
    # a caller that saw `last` pending a moment ago rolls it back now
    assert rollback_instant(storage, Instant(last.timestamp, last.action, REQUESTED)) == 0
    assert_table_matches(path, expected)


def test_a_completed_clustering_is_never_rolled_back_to_its_plan(tmp_path):
    path = str(tmp_path / "t")
    expected = _appended(path, 3)
    opts = {**OPTS, **CLUSTER}
    result = clustering.run(WriteConfig.from_options(opts, path=path))
    assert result is not None
    storage = Storage(path)
    cfg = WriteConfig.from_options(opts, path=path)
    # its heartbeat is gone (the run ended): a writer that saw it pending before it completed
    assert rollback_failed_clustering(
        storage, Instant(result.instant, REPLACE_COMMIT, REQUESTED), cfg, force=True
    )
    assert_table_matches(path, expected)
    assert Timeline.load(storage).completed()[-1].timestamp == result.instant
