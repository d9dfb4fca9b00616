"""Engine-API reads (no Spark): null/empty partition values, time travel, pinned snapshots."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.fs_view import list_table_files
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.read.snapshot import Snapshot, load_timeline, pinned_timeline
from hoodie_sink.table.storage import Storage
from tests.support.tables import assert_table_matches

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
}


def _city_rows():
    return [
        {"id": 1, "city": "sf"},
        {"id": 2, "city": None},
        {"id": 3, "city": ""},
        {"id": 4, "city": "_x"},  # a value starting with '_' is a partition too
    ]


@pytest.mark.parametrize("hive", [False, True])
def test_null_and_empty_partition_values_are_read(tmp_path, hive):
    """Null and empty values are written under __HIVE_DEFAULT_PARTITION__ (Hudi's KeyGenUtils);
    the view used to skip folders starting with '_', losing those rows."""
    path = tmp_path / "t"
    rows = _city_rows()
    opts = {**OPTS, "hoodie.datasource.write.hive_style_partitioning": str(hive).lower()}
    hoodie_sink.write(pa.Table.from_pylist(rows), str(path), opts)
    default = "city=__HIVE_DEFAULT_PARTITION__" if hive else "__HIVE_DEFAULT_PARTITION__"
    assert (path / default).is_dir()
    assert default in list_table_files(Storage(str(path))).partitions
    assert_table_matches(path, rows)  # hudi-rs and our reader


def test_underscore_folders_without_partition_metadata_are_not_partitions(tmp_path):
    """Spark's `_temporary` leftovers (no .hoodie_partition_metadata) stay out of the table
    (as in Hudi's partition listing; hudi-rs itself fails on such a file, so only our reader)."""
    path = tmp_path / "t"
    rows = _city_rows()
    hoodie_sink.write(pa.Table.from_pylist(rows), str(path), OPTS)
    junk = path / "_temporary" / "0"
    junk.mkdir(parents=True)
    (junk / "part-00000.parquet").write_bytes(b"not a base file")
    got = hoodie_sink.read(str(path), columns=["id", "city"]).sort_by("id").to_pylist()
    assert got == rows


def _instant_as_date_string(instant: str) -> str:
    i = instant
    return f"{i[0:4]}-{i[4:6]}-{i[6:8]} {i[8:10]}:{i[10:12]}:{i[12:14]}.{i[14:17]}"


def test_as_of_instant_includes_the_instant_it_names(tmp_path):
    """`2026-11-23 18:18:25.862` used to become `20261123181825.862`, which sorts before the
    instant 20261123181825862 and so excluded the very commit it names."""
    path = str(tmp_path / "t")
    hoodie_sink.write(pa.table({"id": [1, 2], "city": ["sf", "la"]}), path, OPTS)
    t1 = Timeline.load(Storage(path)).latest_completed().timestamp
    hoodie_sink.write(pa.table({"id": [3], "city": ["sf"]}), path, OPTS)
    for as_of in (t1, _instant_as_date_string(t1)):
        got = hoodie_sink.read(path, as_of=as_of, columns=["id"]).column("id").to_pylist()
        assert sorted(got) == [1, 2], as_of
    day_before = f"{int(t1[:4]) - 1}-01-01"
    assert hoodie_sink.read(path, as_of=day_before).num_rows == 0
    with pytest.raises(hoodie_sink.HoodieConfigError, match="as.of.instant"):
        hoodie_sink.read(path, as_of="yesterday")


# ---------------------------------------------------------------- item 6: one snapshot per query


def _completed_file(path: str, instant: str) -> str:
    return next(str(p) for p in (Path(path) / ".hoodie").glob(f"{instant}.*commit"))


def _write_two_commits(path: str) -> tuple[int, str]:
    """Commit 1 (ids 1, 2), then commit 2 (id 3, and id 1 updated) whose completed file is stamped 10 s
    after commit 1's.  Returns (commit 1's completion ms, commit 2's instant)."""
    hoodie_sink.write(pa.table({"id": [1, 2], "city": ["sf", "la"], "v": [0, 0]}), path, OPTS)
    return _write_two_commits_after(path)


def test_a_completion_cutoff_pins_the_snapshot(tmp_path):
    path = str(tmp_path / "t")
    done1_ms, t2 = _write_two_commits(path)
    storage = Storage(path)
    before = Snapshot.open(path, timeline=load_timeline(storage, completed_by_ms=done1_ms + 5_000))
    assert t2 not in before.completed_writes
    assert sorted(r["v"] for r in read_snapshot_rows(before)) == [0, 0]
    after = Snapshot.open(path, timeline=load_timeline(storage, completed_by_ms=done1_ms + 10_000))
    assert sorted(r["v"] for r in read_snapshot_rows(after)) == [0, 1, 1]


def read_snapshot_rows(snap: Snapshot) -> list[dict]:
    return [r for bf in snap.base_files() for r in snap.read_file(bf, ["id", "v"]).to_pylist()]


def test_pinned_timeline_waits_out_the_clock_margin_only_while_a_write_is_in_flight(tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(pa.table({"id": [1], "city": ["sf"]}), path, OPTS)
    storage = Storage(path)
    slept: list[float] = []
    cutoff = time.time_ns() // 1_000_000 + 10  # the query was created after the commit
    pinned_timeline(storage, cutoff, margin_ms=1000, clock=lambda: cutoff / 1000 + 0.25, sleep=slept.append)
    assert slept == []  # nothing in flight: a commit completing now cannot fall before the cutoff
    (tmp_path / "t" / ".hoodie" / "29990101000000000.commit.requested").write_bytes(b"")
    pinned_timeline(storage, cutoff, margin_ms=1000, clock=lambda: cutoff / 1000 + 0.25, sleep=slept.append)
    assert slept == [pytest.approx(0.75)]
    pinned_timeline(storage, cutoff, margin_ms=1000, clock=lambda: cutoff / 1000 + 2, sleep=slept.append)
    assert len(slept) == 1  # past the margin: no wait


def _read_all_slots(reader, parts) -> list[dict]:
    rows = []
    for p in parts:
        for batch in reader.read(p):
            rows.extend(batch.to_pylist())
    return sorted(rows, key=lambda r: r["id"])


def test_spark_reader_reads_one_snapshot_per_query_from_a_reused_plan(tmp_path, monkeypatch):
    """Spark 4.3 reuses a view's partitions() for every later query.  Each task resolves the snapshot
    of its own query (pinned to the query's creation time), the same in every task of the query."""
    from hoodie_sink.datasource import reader as spark_reader
    from hoodie_sink.table.client import scans
    from hoodie_sink.table.options.read_config import ReadConfig

    path = str(tmp_path / "t")
    hoodie_sink.write(pa.table({"id": [1, 2], "city": ["sf", "la"], "v": [0, 0]}), path, OPTS)
    reader = spark_reader.HoodieReader(ReadConfig(path=path), ["id", "v"])
    parts = reader.partitions()  # planned at commit 1 (2 base files: 2 slots)
    done1_ms, _ = _write_two_commits_after(path)
    # commit 2 is stamped 10 s ahead, so it looks in flight to the first query: skip the real wait
    monkeypatch.setattr(scans, "pinned_timeline", functools.partial(pinned_timeline, sleep=lambda s: None))
    monkeypatch.setattr(spark_reader, "query_started_ms", lambda: done1_ms + 5_000)  # an older query
    assert _read_all_slots(reader, parts) == [{"id": 1, "v": 0}, {"id": 2, "v": 0}]
    monkeypatch.setattr(spark_reader, "query_started_ms", lambda: done1_ms + 20_000)  # a new query
    assert _read_all_slots(reader, parts) == [{"id": 1, "v": 1}, {"id": 2, "v": 0}, {"id": 3, "v": 1}]
    monkeypatch.setattr(spark_reader, "query_started_ms", lambda: None)  # no query to pin on
    with pytest.raises(
        HoodieTableError, match="changed since this read was planned.*re-create the temporary"
    ):
        _read_all_slots(reader, parts)


def _write_two_commits_after(path: str) -> tuple[int, str]:
    t1 = Timeline.load(Storage(path)).latest_completed().timestamp
    done1_ms = os.stat(_completed_file(path, t1)).st_mtime_ns // 1_000_000
    hoodie_sink.write(pa.table({"id": [1, 3], "city": ["sf", "sf"], "v": [1, 1]}), path, OPTS)
    t2 = Timeline.load(Storage(path)).latest_completed().timestamp
    os.utime(_completed_file(path, t2), ns=((done1_ms + 10_000) * 1_000_000,) * 2)
    return done1_ms, t2
